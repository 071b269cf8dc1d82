"""Jobs on rank 0: their state, the FIFO queue and the record of recent ones."""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..contract import FINAL_STATES, JobRequest


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
    request_view: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        self.request_view = self.request.to_dict(with_image=False)

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
            "files": list(self.files),
            "timings": dict(self.timings),
        }


class JobBook:
    """Thread-safe queue and record of jobs; one job runs at a time on the whole group."""

    def __init__(self, max_queue: int, keep: int):
        self.max_queue, self.keep = max_queue, keep
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._queue: deque[Job] = deque()
        self._cond = threading.Condition()
        self._closed = False

    def submit(self, job: Job) -> Job:
        with self._cond:
            if self._closed:
                raise RuntimeError("the backend is shutting down")
            if len(self._queue) >= self.max_queue:
                raise QueueFull(f"the queue is full ({self.max_queue} jobs); try again later")
            job.total = job.request.num_inference_steps
            self._jobs[job.id] = job
            self._queue.append(job)
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
            return job

    def finish(self, job: Job, status: str, error: str | None = None) -> None:
        with self._cond:
            job.status, job.error, job.finished = status, error, time.time()
            job.request = dataclasses.replace(job.request, image=None)  # free the image
            self._cond.notify_all()

    def cancel(self, job_id: str) -> Job | None:
        with self._cond:
            job = self._jobs.get(job_id)
            if job is None:
                return None
            if job.status == "queued":
                self._queue.remove(job)
                job.status, job.finished, job.error = "cancelled", time.time(), None
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
            self._cond.notify_all()

    def fail_queued(self, reason: str) -> None:
        with self._cond:
            while self._queue:
                job = self._queue.popleft()
                job.status, job.error, job.finished = "failed", reason, time.time()

    def close(self) -> None:
        """Stop taking jobs: cancel the queued ones and ask the running one to stop."""
        with self._cond:
            self._closed = True
            while self._queue:
                job = self._queue.popleft()
                job.status, job.finished = "cancelled", time.time()
            for job in self._jobs.values():
                if job.status == "running":
                    job.cancel_requested = True
            self._cond.notify_all()

    def _forget_old(self) -> None:
        finished = [j for j in self._jobs.values() if j.status in FINAL_STATES]
        for job in finished[: max(0, len(self._jobs) - self.keep)]:
            del self._jobs[job.id]
