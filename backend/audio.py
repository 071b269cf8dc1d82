"""A job's audio track (LTX-2 generates one with its video): the waveform, its WAV file and its
AAC track in the mp4, through the ffmpeg binary that imageio-ffmpeg ships."""

from __future__ import annotations

import subprocess
import wave
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

AUDIO_FILE = "audio.wav"
AAC_BITRATE = "192k"


@dataclass(frozen=True)
class Audio:
    """A float waveform (channels, samples) in -1..1 at `sample_rate` Hz."""

    waveform: np.ndarray
    sample_rate: int

    def __post_init__(self) -> None:
        if self.waveform.ndim != 2 or not self.waveform.shape[0] or not self.waveform.shape[1]:
            raise ValueError(
                f"an audio waveform is (channels, samples) with both > 0, got {self.waveform.shape}"
            )
        if self.sample_rate <= 0:
            raise ValueError(f"the sample rate must be > 0 Hz, got {self.sample_rate}")

    @property
    def channels(self) -> int:
        return int(self.waveform.shape[0])

    @property
    def seconds(self) -> float:
        return self.waveform.shape[1] / self.sample_rate

    def pcm16(self) -> np.ndarray:
        """Interleaved 16-bit samples (samples, channels), clipped to -1..1 first."""
        scaled = np.clip(self.waveform.T, -1.0, 1.0) * 32767.0
        return np.ascontiguousarray(scaled.round().astype("<i2"))

    def record(self) -> dict[str, Any]:
        """job.json's "audio": what the mp4's AAC track and `audio.wav` hold."""
        return {
            "sample_rate": self.sample_rate,
            "channels": self.channels,
            "codec": "aac",
            "seconds": round(self.seconds, 4),
            "file": AUDIO_FILE,
        }


def write_wav(path: Path, audio: Audio) -> None:
    """16-bit PCM WAV."""
    with wave.open(str(path), "wb") as out:
        out.setnchannels(audio.channels)
        out.setsampwidth(2)
        out.setframerate(audio.sample_rate)
        out.writeframes(audio.pcm16().tobytes())


def mux_audio(video: Path, wav: Path) -> None:
    """Give `video` (an mp4) the WAV file as its AAC track; the video stream is copied."""
    import imageio_ffmpeg

    muxed = video.with_name(video.stem + ".muxing.mp4")
    command = [
        imageio_ffmpeg.get_ffmpeg_exe(),
        *("-y", "-loglevel", "error", "-i", str(video), "-i", str(wav)),
        *("-map", "0:v:0", "-map", "1:a:0", "-c:v", "copy"),
        *("-c:a", "aac", "-b:a", AAC_BITRATE, "-movflags", "+faststart", str(muxed)),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        muxed.unlink(missing_ok=True)
        raise RuntimeError(f"ffmpeg could not add the audio track: {done.stderr.strip()}")
    muxed.replace(video)
