"""Writing a finished job: the video (or image), job.json, and the frames as lossless PNGs.

The result (`write_result`: the mp4 or the image, the audio) is written before the job is
reported as succeeded; the PNG frames (`write_frames`) after it (`writer.py`)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from ..audio import AUDIO_FILE, Audio, mux_audio, write_wav

FRAMES_DIR = "frames"
LATENTS_FILE = "latents.npy"
AUDIO_LATENTS_FILE = "audio_latents.npy"
"""`--save-latents` on a model with an audio track: its final audio latents (LTX-2, H3)."""


def to_uint8(frames: np.ndarray) -> np.ndarray:
    """Float frames in 0..1 to 8-bit RGB, rounding as diffusers' `numpy_to_pil` does."""
    return (np.clip(frames, 0.0, 1.0) * 255).round().astype(np.uint8)


def frame_name(index: int) -> str:
    return f"{index:06d}.png"


def frame_names(num_frames: int) -> list[str]:
    """The PNG frames' paths inside a job's folder."""
    return [f"{FRAMES_DIR}/{frame_name(index)}" for index in range(num_frames)]


def png_bytes(frame: np.ndarray) -> bytes:
    """One uint8 (H, W, 3) frame as a lossless PNG."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(frame, mode="RGB").save(buffer, format="PNG")
    return buffer.getvalue()


def write_frames(out_dir: Path, frames: np.ndarray) -> list[str]:
    """Every frame as `frames/NNNNNN.png`; each appears whole (written, then renamed)."""
    frame_dir = out_dir / FRAMES_DIR
    frame_dir.mkdir(parents=True, exist_ok=True)
    names = frame_names(len(frames))
    for name, frame in zip(names, frames, strict=True):
        _write_whole(out_dir / name, png_bytes(frame))
    return names


def _write_whole(path: Path, data: bytes) -> None:
    partial = path.with_name(f".{path.name}.partial")
    partial.write_bytes(data)
    partial.replace(path)


def write_video(path: Path, frames: np.ndarray, fps: float) -> None:
    """H.264 (yuv420p) through the ffmpeg binary that imageio-ffmpeg ships."""
    import imageio_ffmpeg

    height, width = frames.shape[1:3]
    writer = imageio_ffmpeg.write_frames(
        str(path),
        (width, height),
        fps=fps,
        codec="libx264",
        pix_fmt_in="rgb24",
        pix_fmt_out="yuv420p",
        quality=None,
        output_params=["-crf", "17", "-preset", "veryfast"],
        macro_block_size=2,
        ffmpeg_log_level="error",
    )
    writer.send(None)
    try:
        for frame in frames:
            writer.send(np.ascontiguousarray(frame).tobytes())
    finally:
        writer.close()


def write_result(
    out_dir: Path, frames: np.ndarray, fps: float, audio: Audio | None = None
) -> list[str]:
    """The job's result for uint8 frames (F, H, W, 3): `video.mp4` (with `audio`, LTX-2's
    track: `audio.wav` and the mp4's AAC track) or `image.png`; returns the files written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if audio is not None and len(frames) < 2:
        raise ValueError("an audio track needs a video (more than one frame)")
    if len(frames) > 1:
        write_video(out_dir / "video.mp4", frames, fps)
        files = ["video.mp4"]
    else:
        _write_whole(out_dir / "image.png", png_bytes(frames[0]))
        files = ["image.png"]
    if audio is not None:
        write_wav(out_dir / AUDIO_FILE, audio)
        mux_audio(out_dir / "video.mp4", out_dir / AUDIO_FILE)
        files.append(AUDIO_FILE)
    return files


def write_outputs(
    out_dir: Path, frames: np.ndarray, fps: float, audio: Audio | None = None
) -> list[str]:
    """The whole output layout at once: the result, then the PNG frames; the files written."""
    return write_result(out_dir, frames, fps, audio) + write_frames(out_dir, frames)


def write_latents(out_dir: Path, latents: np.ndarray, name: str = LATENTS_FILE) -> str:
    """The final latents as float32 .npy (numpy's own format: no pickle) named `name`
    (`AUDIO_LATENTS_FILE` for the audio's); returns its name."""
    out_dir.mkdir(parents=True, exist_ok=True)
    np.save(out_dir / name, np.ascontiguousarray(latents, dtype=np.float32))
    return name


def write_record(out_dir: Path, record: dict[str, Any]) -> None:
    """job.json, replaced whole (it is written again once the PNG frames are on disk)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    text = json.dumps(record, indent=2, sort_keys=True) + "\n"
    _write_whole(out_dir / "job.json", text.encode())
