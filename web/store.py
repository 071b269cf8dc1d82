"""Where the UI keeps things: one output folder per job, and the jobs each browser waits on.

A job's folder `<output dir>/<job id>/` holds what the backend wrote (video.mp4 or image.png,
frames/, audio.wav for LTX-2, job.json) plus frames.zip. Files are downloaded into a hidden
temporary folder and moved into place one by one (atomic renames), frames.zip last: a folder
with frames.zip is complete, and two browsers opening the same job at once cannot leave it
half written. The
folder may also be the backend's own output folder (same --output-dir on one machine).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..backend.client.http import Client

log = logging.getLogger(__name__)

JOB_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
ZIP_NAME = "frames.zip"


@dataclass(frozen=True)
class JobOutputs:
    """A finished job's files on this machine."""

    folder: Path
    video: Path | None
    frames: list[Path]
    record: dict[str, Any]
    """job.json: request, plan, seed, timings, versions."""

    @property
    def downloads(self) -> list[Path]:
        names = ("video.mp4", "audio.wav", "image.png", "frames.zip", "job.json")
        return [self.folder / name for name in names if (self.folder / name).is_file()]


class OutputStore:
    """Finished jobs' outputs under `root`, fetched from the backend once."""

    def __init__(self, client: Client, root: str | Path):
        self.client = client
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)

    def folder(self, job_id: str) -> Path:
        if not isinstance(job_id, str) or not JOB_ID.fullmatch(job_id):
            raise ValueError(f"a job id is 1-64 letters, digits, '-' or '_', got {job_id!r}")
        return self.root / job_id

    def fetch(self, job: dict[str, Any]) -> JobOutputs:
        """The outputs of a succeeded job document, downloading them if not here yet."""
        folder = self.folder(job["id"])
        if not (folder / ZIP_NAME).is_file():
            self._download(job, folder)
        return self.load(folder)

    def _download(self, job: dict[str, Any], folder: Path) -> None:
        partial = Path(tempfile.mkdtemp(prefix=f".{job['id']}-", dir=self.root))
        try:
            self.client.download(job, partial)
            zip_frames(partial)
            (folder / "frames").mkdir(parents=True, exist_ok=True)
            names = [p.relative_to(partial) for p in sorted(partial.rglob("*")) if p.is_file()]
            for name in sorted(names, key=lambda n: str(n) == ZIP_NAME):  # frames.zip last
                os.replace(partial / name, folder / name)
        finally:
            shutil.rmtree(partial, ignore_errors=True)
        log.info("job %s outputs in %s", job["id"], folder)

    @staticmethod
    def load(folder: Path) -> JobOutputs:
        video = folder / "video.mp4"
        return JobOutputs(
            folder=folder,
            video=video if video.is_file() else None,
            frames=sorted((folder / "frames").glob("*.png")),
            record=json.loads((folder / "job.json").read_text()),
        )


def zip_frames(folder: Path) -> Path:
    """frames.zip next to frames/ (stored, not deflated: PNGs are compressed already)."""
    target = folder / ZIP_NAME
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_STORED) as archive:
        for frame in sorted((folder / "frames").glob("*.png")):
            archive.write(frame, f"frames/{frame.name}")
    return target


class Sessions:
    """The backend jobs each browser session (Gradio session hash) is waiting on."""

    def __init__(self) -> None:
        self._jobs: dict[str, list[str]] = {}
        self._lock = threading.Lock()

    def add(self, session: str, job_id: str) -> None:
        with self._lock:
            self._jobs.setdefault(session, []).append(job_id)

    def remove(self, session: str, job_id: str) -> None:
        with self._lock:
            jobs = self._jobs.get(session, [])
            if job_id in jobs:
                jobs.remove(job_id)
            if not jobs:
                self._jobs.pop(session, None)

    def jobs(self, session: str) -> list[str]:
        with self._lock:
            return list(self._jobs.get(session, []))
