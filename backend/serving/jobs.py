"""Jobs on rank 0: their state, the FIFO queue and the record of recent ones."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..audio import Audio
from ..contract import FINAL_STATES
from ..request import JobRequest, request_fields
from .store import JobStore

log = logging.getLogger(__name__)


@dataclass
class JobOutput:
    """What a job made, as its replica's executor hands it to the writer (`writer.py`)."""

    frames: Any
    """Float frames (F, H, W, 3) in 0..1 (numpy)."""
    latents: Any = None
    """The final latents (numpy), with `--save-latents`."""
    audio: Audio | None = None
    """The audio track generated with the frames (LTX-2): `audio.wav`, the mp4's AAC track."""
    measured: dict[int, Any] = field(default_factory=dict)
    """Each rank's measured peak (`memory.measure.PeakMeter.read`)."""
    lora_memory: dict[str, int] | None = None
    """Rank 0's host bytes for the LoRAs (job.json's `memory.loras`)."""
    audio_latents: Any = None
    """The final audio latents (numpy), with `--save-latents` on a model with audio."""


class QueueFull(RuntimeError):
    """The queue holds as many jobs as it may."""


@dataclass(eq=False)  # compared by identity: requests can hold megabytes of image
class Job:
    request: JobRequest
    out_dir: Path
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    status: str = "queued"
    created: float = field(default_factory=time.time)
    started: float | None = None
    finished: float | None = None
    step: int = 0
    total: int = 0
    error: str | None = None
    cancel_requested: bool = False
    num_frames: int = 0
    timings: dict[str, Any] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    preview_step: int = 0
    preview_png: bytes | None = field(default=None, repr=False)
    replica: int | None = None
    """The data-parallel replica that ran the job."""
    memory: Any = field(default=None, repr=False)
    """The job's memory plan (`memory.planner.JobMemory`), when it runs."""
    loras: list[dict[str, Any]] = field(default_factory=list)
    """The LoRAs applied: name, strengths and sha256 (job.json's `loras`)."""
    frames: Any = field(default=None, repr=False)
    """The finished job's uint8 frames (F, H, W, 3) while its PNG frames are being written
    (`/frames/{i}` serves them from here meanwhile); None once they are on disk."""
    frames_written: bool = False
    """Every PNG frame is on disk (`frames/`); they are written after the job succeeded."""
    request_view: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        self.request_view = self.request.to_dict(with_image=False)

    def to_record(self) -> dict[str, Any]:
        """What the job store keeps: the snapshot, plus the request itself while it may run."""
        record = self.to_dict()
        if self.status == "queued":
            record["request_full"] = self.request.to_dict()
        return record

    @classmethod
    def from_record(cls, record: dict[str, Any], output_dir: Path) -> Job:
        """A job read back from the store (its outputs are in `output_dir/<id>`)."""
        images = {f.name: None for f in request_fields() if f.kind == "image"}
        request = record.get("request_full") or {**record["request"], **images}
        job = cls(request=JobRequest.from_dict(request), out_dir=output_dir / record["id"])
        job.id = record["id"]
        for name in ("status", "created", "started", "finished", "error", "num_frames", "replica"):
            setattr(job, name, record.get(name))
        job.step, job.total = record["progress"]["step"], record["progress"]["total"]
        job.timings, job.files = record.get("timings", {}), record.get("files", [])
        job.frames_written = record.get("frames_written", job.status == "succeeded")
        job.request_view = record["request"]
        return job

    def to_dict(self) -> dict[str, Any]:
        """A snapshot for JSON (the job thread keeps writing to the live fields)."""
        return {
            "id": self.id,
            "status": self.status,
            "progress": {"step": self.step, "total": self.total},
            "preview_step": self.preview_step,
            "error": self.error,
            "created": self.created,
            "started": self.started,
            "finished": self.finished,
            "request": self.request_view,
            "num_frames": self.num_frames,
            "replica": self.replica,
            "files": list(self.files),
            "frames_written": self.frames_written,
            "timings": dict(self.timings),
        }


class JobBook:
    """Thread-safe queue and record of jobs; one job runs at a time on each replica."""

    def __init__(self, max_queue: int, keep: int, store: JobStore | None = None):
        self.max_queue, self.keep = max_queue, keep
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._queue: deque[Job] = deque()
        self._cond = threading.Condition()
        self._closed = False
        self._store = store
        if store is not None:
            self._restore(store)

    def _restore(self, store: JobStore) -> None:
        """Jobs of an earlier run on this output folder: finished ones are listed again,
        queued ones queued again; one that was running failed with the backend."""
        output_dir = store.path.parent
        for record in store.load():
            job = Job.from_record(record, output_dir)
            if job.status == "running":
                job.status, job.finished = "failed", job.finished or time.time()
                job.error = "the backend stopped while this job ran; submit it again"
                self._save(job)
            self._jobs[job.id] = job
            if job.status == "queued":
                self._queue.append(job)
        self._forget_old()
        if self._jobs:
            log.info(
                "restored %d job(s) from %s, %d queued",
                len(self._jobs),
                store.path,
                len(self._queue),
            )

    def _save(self, job: Job) -> None:
        if self._store is not None:
            self._store.save(job.id, job.created, job.status, job.to_record())

    def submit(self, job: Job) -> Job:
        with self._cond:
            if self._closed:
                raise RuntimeError("the backend is shutting down")
            if len(self._queue) >= self.max_queue:
                raise QueueFull(f"the queue is full ({self.max_queue} jobs); try again later")
            job.total = job.request.total_steps
            self._jobs[job.id] = job
            self._queue.append(job)
            self._save(job)
            self._forget_old()
            self._cond.notify_all()
        return job

    def next(self, timeout_s: float) -> Job | None:
        """The next queued job, marked running; None on timeout or when closed."""
        with self._cond:
            while not self._queue and not self._closed:
                if not self._cond.wait(timeout_s):
                    return None
            if self._closed:
                return None
            job = self._queue.popleft()
            job.status, job.started = "running", time.time()
            self._save(job)
            return job

    def finish(self, job: Job, status: str, error: str | None = None) -> None:
        with self._cond:
            job.status, job.error, job.finished = status, error, time.time()
            # free the input images (`image`, and `last_image` where a model takes one)
            images = {f.name: None for f in request_fields() if f.kind == "image"}
            job.request = job.request.replace(**images)
            self._save(job)
            self._cond.notify_all()

    def update(self, job: Job) -> None:
        """Keep a finished job's changed fields (its PNG frames written) in the store."""
        with self._cond:
            self._save(job)

    def cancel(self, job_id: str) -> Job | None:
        with self._cond:
            job = self._jobs.get(job_id)
            if job is None:
                return None
            if job.status == "queued":
                self._queue.remove(job)
                job.status, job.finished, job.error = "cancelled", time.time(), None
                self._save(job)
            elif job.status == "running":
                job.cancel_requested = True
            self._cond.notify_all()
            return job

    def get(self, job_id: str) -> Job | None:
        with self._cond:
            return self._jobs.get(job_id)

    def recent(self) -> list[Job]:
        with self._cond:
            return list(reversed(self._jobs.values()))

    def position(self, job: Job) -> int | None:
        """0-based place in the queue, None when not queued."""
        with self._cond:
            return self._queue.index(job) if job in self._queue else None

    def requeue(self, job: Job) -> None:
        """Put a job taken by `next` back at the head of the queue (the group broke first)."""
        with self._cond:
            job.status, job.started = "queued", None
            self._queue.appendleft(job)
            self._save(job)
            self._cond.notify_all()

    def fail_queued(self, reason: str) -> None:
        with self._cond:
            while self._queue:
                job = self._queue.popleft()
                job.status, job.error, job.finished = "failed", reason, time.time()
                self._save(job)

    def close(self) -> None:
        """Stop taking jobs and ask the running one to stop. Queued jobs stay queued in the
        store (a restarted backend runs them); without a store they are cancelled."""
        with self._cond:
            self._closed = True
            while self._queue and self._store is None:
                job = self._queue.popleft()
                job.status, job.finished = "cancelled", time.time()
            for job in self._jobs.values():
                if job.status == "running":
                    job.cancel_requested = True
            self._cond.notify_all()

    def _forget_old(self) -> None:
        finished = [j for j in self._jobs.values() if j.status in FINAL_STATES]
        forgotten = finished[: max(0, len(self._jobs) - self.keep)]
        for job in forgotten:
            del self._jobs[job.id]
        if self._store is not None:
            self._store.delete([job.id for job in forgotten])
