"""Rank 0's service: validates requests, queues them, drives each job through the group.

The HTTP layer calls `submit`, `cancel`, `job`, `jobs`, `info` and `health` from its own
thread; `run_forever` runs the jobs one at a time on the main thread.
"""

from __future__ import annotations

import logging
import platform
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import __version__
from .config import JobRequest, ServeConfig
from .control import Driver, HeartbeatMonitor, RankLost
from .jobs import Job, JobBook
from .outputs import to_uint8, write_latents, write_outputs, write_record
from .runtime import JobCancelled, Runtime, StepClock, release_freed_memory, tensor_meta

log = logging.getLogger(__name__)


def versions() -> dict[str, str]:
    import diffusers
    import torch

    return {
        "paradit": __version__,
        "torch": torch.__version__,
        "diffusers": diffusers.__version__,
        "python": platform.python_version(),
    }


PREVIEW_PERIOD_S = 0.25


class LatestLatents:
    """Keeps the latents of the latest step: after the last one, the final latents."""

    def __init__(self) -> None:
        self.value: Any = None

    def __call__(self, _step: int, latents: Any) -> None:
        self.value = latents.detach().clone()  # the pipeline owns the tensor it passes

    def numpy(self):
        import torch

        return self.value.to("cpu", torch.float32).numpy()


def _call_each(*callbacks: Callable[[int, Any], None] | None) -> Callable[[int, Any], None] | None:
    """One `on_latents` callback that calls each of those given (None if none is)."""
    given = [c for c in callbacks if c is not None]
    if not given:
        return None

    def call(step: int, latents: Any) -> None:
        for callback in given:
            callback(step, latents)

    return call


class JobFailedError(RuntimeError):
    """A job failed; the message says why (a rank's own error when it was one rank's)."""


def _without_rank(error: str) -> str:
    """`rank 3: ValueError: x` -> `ValueError: x` (workers prefix their errors)."""
    head, _, rest = error.partition(": ")
    return rest if head.startswith("rank ") else error


class Service:
    def __init__(
        self,
        runtime: Runtime,
        config: ServeConfig,
        lost_children: Callable[[], str | None] = lambda: None,
    ):
        self.runtime = runtime
        self.config = config
        group = runtime.group
        self.book = JobBook(config.max_queue, config.keep_jobs)
        self.driver = Driver(group.store, group.world_size)
        self._monitor = HeartbeatMonitor(group.store_client(), group.world_size, stale_s=15.0)
        self._monitor_lock = threading.Lock()
        self._lost_children = lost_children
        self.broken: str | None = None
        self.ready = False
        self.ranks: list[dict[str, Any]] = []
        self.started = time.time()
        self.output_dir = Path(config.output_dir).resolve()

    # -- health ---------------------------------------------------------------------------

    def lost(self) -> str | None:
        """Why the group is not whole, or None."""
        reason = self._lost_children()
        if reason or not self.ready:  # heartbeats start once a rank has loaded the model
            return reason
        with self._monitor_lock:
            stale = self._monitor.stale()
        if stale:
            return f"ranks {stale} stopped answering (no heartbeat for 15s)"
        return None

    def health(self) -> tuple[bool, dict[str, Any]]:
        reason = self.broken or self.lost()
        if reason and not self.broken:
            self.broken = reason
            self.book.fail_queued(f"backend lost a rank: {reason}")
        ok = self.ready and not reason
        detail = {
            "status": "ok" if ok else "unavailable",
            "ready": self.ready,
            "world_size": self.runtime.group.world_size,
        }
        if reason:
            detail["error"] = reason
        return ok, detail

    def wait_ready(self, abort: Callable[[], str | None] = lambda: None) -> None:
        def why() -> str | None:
            return abort() or self.lost()

        self.ranks = [self.runtime.rank_info(), *self.driver.wait_ready(why, 3600.0)]
        self.ready = True

    def info(self) -> dict[str, Any]:
        runtime = self.runtime
        return {
            "model": self.config.model,
            "family": runtime.family.name,
            "task": runtime.family.task,
            "world_size": runtime.group.world_size,
            "device": runtime.group.device.type,
            "plan": runtime.plan.to_dict(),
            "limits": runtime.limits.to_dict(),
            "version": __version__,
            "versions": versions(),
            "ranks": self.ranks,
            "load_seconds": round(runtime.load_seconds, 3),
            "queue": sum(1 for j in self.book.recent() if j.status == "queued"),
        }

    # -- requests from HTTP ---------------------------------------------------------------

    def submit(self, body: Any) -> Job:
        """Validate and queue; ValueError for a bad body, QueueFull, RuntimeError if broken."""
        request = JobRequest.from_body(body, self.runtime.limits)
        ok, detail = self.health()
        if not ok:
            raise RuntimeError(f"backend is not healthy: {detail.get('error', 'not ready')}")
        job = Job(request=request, out_dir=self.output_dir)
        job.out_dir = self.output_dir / job.id
        return self.book.submit(job)

    def cancel(self, job_id: str) -> Job | None:
        return self.book.cancel(job_id)

    # -- running jobs ---------------------------------------------------------------------

    def run_forever(self, stop: threading.Event) -> None:
        while not stop.is_set():
            job = self.book.next(timeout_s=0.1)
            if job is not None:
                self.run_job(job)
                release_freed_memory()  # after the job is reported, not inside its timings

    def run_job(self, job: Job) -> None:
        if self.broken:
            self.book.finish(job, "failed", f"backend is not healthy: {self.broken}")
            return
        timings: dict[str, Any] = {"queued_s": round(job.started - job.created, 4)}
        job.timings = timings
        started = time.perf_counter()
        try:
            latents = LatestLatents() if self.config.save_latents else None
            frames, clock = self._denoise(job, timings, latents)
            begin_write = time.perf_counter()
            job.files = write_outputs(job.out_dir, to_uint8(frames), self.runtime.limits.fps)
            if latents is not None and latents.value is not None:
                job.files.append(write_latents(job.out_dir, latents.numpy()))
            job.num_frames = len(frames)
            timings["write_s"] = round(time.perf_counter() - begin_write, 4)
            timings["total_s"] = round(time.perf_counter() - started, 4)
            self._finish(job, "succeeded")
        except JobCancelled:
            self._finish(job, "cancelled")
        except Exception as exc:
            log.exception("job %s failed", job.id)
            self._finish(job, "failed", self._failure(exc))

    def _denoise(self, job: Job, timings: dict[str, Any], latents: LatestLatents | None):
        runtime, request = self.runtime, job.request
        begin = time.perf_counter()
        tensors = runtime.encode(request)
        meta = tensor_meta(tensors)
        timings["encode_s"] = round(time.perf_counter() - begin, 4)
        seq = None
        if runtime.group.world_size > 1:
            seq = self.driver.send(
                {"type": "run", "job_id": job.id, "request": request.to_dict(), "tensors": meta}
            )
        clock = StepClock()
        frames, own_error = None, None
        try:
            shared = runtime.share(tensors, meta)

            def on_step(step: int, total: int) -> bool:
                job.step = step
                return job.cancel_requested

            on_latents = _call_each(self._previews(job), latents)
            frames = runtime.denoise(request, shared, on_step, clock, on_latents)
        except Exception as exc:  # JobCancelled too: settled with the workers' replies below
            own_error = exc
        self._settle(seq, own_error)
        end = time.perf_counter()
        steps = clock.step_seconds()
        timings["first_step_start_s"] = round(clock.start - begin, 4)
        timings["step_s"] = [round(s, 4) for s in steps]
        if steps:
            timings["mean_step_s"] = round(sum(steps) / len(steps), 4)
            timings["decode_s"] = round(end - clock.marks[-1], 4)
        return frames, clock

    def _previews(self, job: Job) -> Callable[[int, Any], None] | None:
        """Render the latents every PREVIEW_PERIOD_S at most (and at the last step)."""
        previewer = self.runtime.previewer
        if previewer is None:
            return None
        last = [0.0]

        def on_latents(step: int, latents: Any) -> None:
            now = time.monotonic()
            if now - last[0] < PREVIEW_PERIOD_S and step < job.total:
                return
            last[0] = now
            job.preview_png, job.preview_step = previewer.png(latents, job.request), step

        return on_latents

    def _settle(self, seq: int | None, own_error: Exception | None) -> None:
        """Combine rank 0's outcome with every worker's reply; raise if the job did not succeed.

        A job that failed the same way on every rank (a deterministic error) leaves the group
        in step. Anything else — one rank failing alone, a rank timing out in a collective,
        cancel on some ranks only — may have left collectives unmatched, so the backend is
        marked unhealthy rather than trusted with the next job.
        """
        replies = self.driver.replies(seq, self.lost, self.config.timeout_s + 30.0) if seq else {}
        worker_errors = [r["error"] for r in replies.values() if not r.get("ok")]
        if own_error is None and not worker_errors:
            return
        cancelled = isinstance(own_error, JobCancelled)
        if cancelled and all(r.get("cancelled") for r in replies.values()):
            raise own_error
        own_text = None if own_error is None else f"{type(own_error).__name__}: {own_error}"
        texts = {_without_rank(e) for e in worker_errors}
        in_step = (
            own_text is not None and len(worker_errors) == len(replies) and texts <= {own_text}
        )
        message = own_text if own_text and not cancelled else worker_errors[0]
        if replies and not in_step:
            self.broken = f"ranks disagreed about the last job ({message}); restart the backend"
            self.book.fail_queued(f"backend is not healthy: {self.broken}")
        raise JobFailedError(message)

    def _failure(self, exc: Exception) -> str:
        if isinstance(exc, JobFailedError):
            return str(exc)
        if isinstance(exc, RankLost):
            self.broken = str(exc)
            self.book.fail_queued(f"backend lost a rank: {exc}")
            return f"a rank was lost during the job: {exc}"
        lost = self.lost()
        if lost:
            self.broken = lost
            self.book.fail_queued(f"backend lost a rank: {lost}")
            return f"a rank was lost during the job: {lost}"
        return f"{type(exc).__name__}: {exc}"

    def _finish(self, job: Job, status: str, error: str | None = None) -> None:
        if status == "succeeded":  # job.json exists before anyone sees "succeeded"
            write_record(job.out_dir, self.record(job, status))
        else:
            shutil.rmtree(job.out_dir, ignore_errors=True)  # no half-written outputs
        self.book.finish(job, status, error)
        log.info("job %s %s%s", job.id, status, f": {error}" if error else "")

    def record(self, job: Job, status: str) -> dict[str, Any]:
        """job.json: the request, the resolved plan, seed, timings and versions."""
        runtime = self.runtime
        return {
            "id": job.id,
            "status": status,
            "model": self.config.model,
            "request": job.request.to_dict(with_image=False),
            "seed": job.request.seed,
            "plan": runtime.plan.to_dict(),
            "world_size": runtime.group.world_size,
            "device": runtime.group.device.type,
            "num_frames": job.num_frames,
            "files": job.files,
            "timings": job.timings,
            "versions": versions(),
        }

    def shutdown(self) -> None:
        """Tell the workers to leave their loops (best effort, bounded)."""
        self.book.close()
        if self.runtime.group.world_size == 1 or self.broken:
            return
        try:
            seq = self.driver.send({"type": "shutdown"})
            self.driver.replies(seq, self.lost, 10.0)
        except Exception as exc:  # workers may already be gone; the launcher reaps them
            log.warning("shutdown: %s", exc)
