"""Writing a finished job: frames as lossless PNGs, the video, and job.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ..audio import AUDIO_FILE, Audio, mux_audio, write_wav

FRAMES_DIR = "frames"
LATENTS_FILE = "latents.npy"


def to_uint8(frames: np.ndarray) -> np.ndarray:
    """Float frames in 0..1 to 8-bit RGB, rounding as diffusers' `numpy_to_pil` does."""
    return (np.clip(frames, 0.0, 1.0) * 255).round().astype(np.uint8)


def frame_name(index: int) -> str:
    return f"{index:06d}.png"


def write_frames(out_dir: Path, frames: np.ndarray) -> list[str]:
    from PIL import Image

    frame_dir = out_dir / FRAMES_DIR
    frame_dir.mkdir(parents=True, exist_ok=True)
    names = []
    for index, frame in enumerate(frames):
        name = f"{FRAMES_DIR}/{frame_name(index)}"
        Image.fromarray(frame, mode="RGB").save(out_dir / name, format="PNG")
        names.append(name)
    return names


def write_video(path: Path, frames: np.ndarray, fps: int) -> None:
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


def write_outputs(
    out_dir: Path, frames: np.ndarray, fps: int, audio: Audio | None = None
) -> list[str]:
    """Write the output layout for uint8 frames (F, H, W, 3); returns the files written.

    `audio` (LTX-2's track): `audio.wav`, and the mp4's AAC track.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    files = write_frames(out_dir, frames)
    if audio is not None and len(frames) < 2:
        raise ValueError("an audio track needs a video (more than one frame)")
    if len(frames) > 1:
        write_video(out_dir / "video.mp4", frames, fps)
        files.insert(0, "video.mp4")
    else:
        (out_dir / "image.png").write_bytes((out_dir / files[0]).read_bytes())
        files.insert(0, "image.png")
    if audio is not None:
        write_wav(out_dir / AUDIO_FILE, audio)
        mux_audio(out_dir / "video.mp4", out_dir / AUDIO_FILE)
        files.insert(1, AUDIO_FILE)
    return files


def write_latents(out_dir: Path, latents: np.ndarray) -> str:
    """The final latents as float32 .npy (numpy's own format: no pickle); returns its name."""
    out_dir.mkdir(parents=True, exist_ok=True)
    np.save(out_dir / LATENTS_FILE, np.ascontiguousarray(latents, dtype=np.float32))
    return LATENTS_FILE


def write_record(out_dir: Path, record: dict[str, Any]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "job.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
