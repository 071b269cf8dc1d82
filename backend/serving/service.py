"""Rank 0's service: takes requests, queues them, and has each replica run them.

The HTTP layer calls `submit`, `cancel`, `info` and `health` from its own thread;
`run_forever` has each replica take the next queued job when it is free: replica 0 (rank 0's
own) on the main thread, each other data-parallel replica on a thread of its own. The parts:

- `health.py`: whether the group can run jobs (lost, frozen and hung ranks; the watchdog);
- `executor.py`: running one job on one replica (rank 0's own, or another one's);
- `writer.py`: a finished job's outputs, job.json and status;
- `jobs.py`: the queue and the record of jobs.

The group itself can be replaced: the supervisor (`launch.py`) calls `detach`, builds a new
group and calls `attach` again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ... import __version__
from ..config import ServeConfig
from ..contract import Limits, model_tasks, reference_sizes
from ..decode_tiles import DecodeTiles
from ..memory.settings import JobShape
from ..request import JobRequest
from ..runtime.control import Sender
from ..runtime.engine import Runtime, release_freed_memory
from ..runtime.job import JobCancelled
from ..runtime.messages import Shutdown
from .executor import Executor, JobFailedError, executors_of
from .health import GroupHealth
from .jobs import Job, JobBook
from .store import JobStore
from .writer import OutputWriter, versions

log = logging.getLogger(__name__)

HEALTH_CHECK_S = 0.5
"""How often an idle replica 0 loop looks at the group's health."""


def job_shape(request: JobRequest, limits: Limits) -> JobShape:
    """The job's size as the memory plan counts it: with an edit's input images, whose tokens
    the DiT sees after the output's, and the frame rate and audio length the job asks for
    (what a model with an audio track counts its audio's rows from), and ComfyUI's decode
    tiles it asks for (`decode_tiles`)."""
    images = [] if request.image is None else [request.image, *(request.images or ())]
    return JobShape(
        request.width,
        request.height,
        request.num_frames,
        references=reference_sizes(images, limits),
        fps=request.fps or 0.0,
        audio_latent_frames=request.audio_latent_frames or 0,
        decode_tiles=None
        if request.decode_tiles is None
        else DecodeTiles.from_json(request.decode_tiles),
    )


class Service:
    """Rank 0's jobs and their runs on the group (see the module doc for its parts)."""

    def __init__(
        self,
        runtime: Runtime,
        config: ServeConfig,
        lost_children: Callable[[], str | None] = lambda: None,
        *,
        recoverable: bool = False,
        on_hang: Callable[[str], None] = lambda _reason: None,
    ):
        self.config = config
        self.book = JobBook(config.max_queue, config.keep_jobs, JobStore(config.output_dir))
        self.group_health = GroupHealth(
            self.book, config.hang_timeout_s, recoverable=recoverable, on_hang=on_hang
        )
        self.writer = OutputWriter(self.book, config, self.group_health)
        self._encode_lock = threading.Lock()
        self.output_dir = Path(config.output_dir).resolve()
        self.attach(runtime, lost_children)
        if config.default_cache() is not None and not self.limits.step_cache:
            raise ValueError(f"--cache: {config.model} has no step cache; leave --cache out")

    def attach(self, runtime: Runtime, lost_children: Callable[[], str | None]) -> None:
        """Serve with `runtime` (a new group after a rebuild); ready after `wait_ready`."""
        group = runtime.group
        self.runtime = runtime
        self.sender = Sender(group.store, group.world_size)
        self.replicas: list[Executor] = executors_of(
            runtime, self.sender, self.config, self.group_health, self._encode_lock
        )
        others = [replica.sender for replica in self.replicas[1:]]
        self.group_health.attach(runtime, self.replicas[0].sender, lost_children, others)
        self.ranks: list[dict[str, Any]] = []
        self.limits = runtime.limits
        self.meta = {
            "family": runtime.family.name,
            "task": runtime.family.task,
            # its own task, and the image task of a text model that takes an image (Flux.2 edits)
            "tasks": list(model_tasks(runtime.family.task, runtime.limits.accepts_image)),
            "world_size": group.world_size,
            "device": group.device.type,
            "plan": {**runtime.plan.to_dict(), "dp_degree": group.dp_degree},
            "attention": runtime.attention.to_dict(),
            "compile": {
                **runtime.compile.to_dict(),
                "blocks": len(runtime.compiled_blocks),
                "warm_up_s": round(runtime.warm_up_seconds, 3),
                "warm_up_compilations": runtime.warm_up_compilations,
            },
            "limits": runtime.limits.to_dict(),
        }
        if runtime.model_files is not None:  # a single-file model: what each file was read as
            self.meta["model_files"] = runtime.model_files
        self.writer.attach(self.meta, [r.ranks for r in self.replicas], runtime.limits.fps)
        self.load_seconds = runtime.load_seconds

    def detach(self) -> None:
        """Let go of the group (its model is freed once the caller drops it too)."""
        self.group_health.detach()
        self.runtime = None

    def wait_ready(self, abort: Callable[[], str | None] = lambda: None) -> None:
        def why() -> str | None:
            return abort() or self.group_health.lost()

        self.ranks = [self.runtime.rank_info(), *self.sender.wait_ready(why, 3600.0)]
        self.group_health.ready = True

    # -- requests from HTTP ---------------------------------------------------------------

    def health(self) -> tuple[bool, dict[str, Any]]:
        return self.group_health.check()

    def info(self) -> dict[str, Any]:
        planner = self.runtime.planner if self.runtime is not None else None
        return {
            "model": self.config.model,
            **self.meta,
            "version": __version__,
            "versions": versions(),
            "ranks": self.ranks,
            "replicas": [replica.to_dict() for replica in self.replicas],
            "load_seconds": round(self.load_seconds, 3),
            "memory": None if planner is None else planner.to_dict(),
            "queue": sum(1 for j in self.book.recent() if j.status == "queued"),
            "loras": None if self.runtime is None else self.runtime.loras.to_dict(),
        }

    def lora_names(self) -> list[str]:
        """The LoRAs jobs may name (`GET /v1/loras`)."""
        return [] if self.runtime is None else self.runtime.loras.library.names()

    def submit(self, body: Any) -> Job:
        """Validate and queue; ValueError for a bad body, QueueFull, RuntimeError if broken."""
        request = JobRequest.from_body(body, self.limits)
        default_cache = "cache" not in body and request.upscale is None
        if default_cache and self.config.default_cache() is not None:
            request = request.replace(cache=self.config.default_cache())  # serve's --cache
        planner = self.runtime.planner if self.runtime is not None else None
        if planner is not None:  # TooLarge (a ValueError: 422) names the largest size that fits
            planner.check(job_shape(request, self.limits))
        if request.loras and self.runtime is not None:  # LoraError (422) names LoRA and reason
            self.runtime.loras.resolve(request.loras)
        if request.upscale is not None and self.runtime is not None:  # stage 2's, likewise
            self.runtime.loras.resolve(request.upscale["loras"])
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
        """Run queued jobs until `stop` is set or the group breaks (checked while idle too).

        Each replica takes the next queued job when it is free: replica 0 on this thread,
        the others on threads of their own, all of which end before this returns."""
        if len(self.replicas) > 1:
            self.writer.start()
        threads = [
            threading.Thread(target=self._serve, args=(replica, stop), name=f"replica-{i}")
            for i, replica in enumerate(self.replicas[1:], start=1)
        ]
        for thread in threads:
            thread.start()
        try:
            self._serve(self.replicas[0], stop, check_health=True)
        finally:
            for thread in threads:
                thread.join()
            self.writer.stop()

    def _serve(self, replica: Executor, stop: threading.Event, check_health: bool = False):
        checked = time.monotonic()
        try:
            while not stop.is_set() and not self.group_health.broken:
                job = self.book.next(timeout_s=0.1)
                if job is not None:
                    self.run_job(job, replica)
                    release_freed_memory()  # after the job is reported, not inside its timings
                if check_health and time.monotonic() - checked > HEALTH_CHECK_S:
                    self.health()
                    checked = time.monotonic()
        except Exception as exc:  # a replica's thread must not vanish silently
            log.exception("replica %d stopped", replica.index)
            self.group_health.mark_broken(f"replica {replica.index}: {type(exc).__name__}: {exc}")

    def run_job(self, job: Job, replica: Executor | None = None) -> None:
        """Run `job` on `replica` (default: rank 0's) and write its outputs (another replica's
        on the writer thread, so that the replica is free at once)."""
        replica = replica or self.replicas[0]
        health = self.group_health
        if health.broken:
            if health.recoverable:
                self.book.requeue(job)
            else:
                self.book.finish(job, "failed", f"backend is not healthy: {health.broken}")
            return
        job.timings = {"queued_s": round(job.started - job.created, 4)}
        job.replica = replica.index
        planner = self.runtime.planner
        job.memory = (
            None if planner is None else planner.plan_job(job_shape(job.request, self.limits))
        )
        replica.busy_job = job.id
        started = time.perf_counter()
        try:
            output = replica.run(job)
        except JobCancelled:
            self.writer.finish(job, "cancelled")
            return
        except Exception as exc:
            log.exception("job %s failed", job.id)
            error = str(exc) if isinstance(exc, JobFailedError) else health.explain(exc)
            self.writer.finish(job, "failed", error)
            return
        finally:
            replica.busy_job = None
        if replica.index == 0:
            self.writer.write(job, output, started)
        else:
            self.writer.submit(job, output, started)

    def shutdown(self) -> None:
        """Tell the workers to leave their loops (best effort, bounded)."""
        self.group_health.close()
        self.book.close()
        if self.runtime is None or self.runtime.group.world_size == 1 or self.group_health.broken:
            return
        for replica in self.replicas:
            if not replica.sender.ranks:
                continue
            try:
                seq = replica.sender.send(Shutdown())
                replica.sender.replies(seq, self.group_health.lost, 10.0)
            except Exception as exc:  # workers may already be gone; the launcher reaps them
                log.warning("shutdown: %s", exc)
