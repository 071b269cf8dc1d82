"""Rank 0's service: validates requests, queues them, drives each job through the group.

The HTTP layer calls `submit`, `cancel`, `job`, `jobs`, `info` and `health` from its own
thread; `run_forever` runs the jobs one at a time per replica: replica 0's (rank 0's own) on
the main thread, each other data-parallel replica's on a driver thread of its own, which
sends the job to that replica's ranks and waits for their replies (see `runtime/replica.py`);
once its frames are in, a writer thread writes that job's outputs and the replica takes its
next job.
"""

from __future__ import annotations

import json
import logging
import platform
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ... import __version__
from ..config import ServeConfig
from ..contract import JobRequest
from ..memory.settings import JobShape
from ..runtime.control import Driver, HeartbeatMonitor, RankLost, channel
from ..runtime.engine import JobCancelled, Runtime, release_freed_memory, tensor_meta
from ..runtime.job import JobHooks, run_job
from ..runtime.messages import Reply, RunJob, Shutdown, combine
from ..runtime.replica import RemoteJob, put_tensors, take_frames, take_latents, take_timings
from .jobs import Job, JobBook
from .outputs import to_uint8, write_latents, write_outputs, write_record
from .store import JobStore

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
REMOTE_POLL_S = 0.05
"""How often rank 0 looks at another replica's job (replies, step, preview, cancel)."""
OWN_FAILURE_GRACE_S = 10.0
"""How long rank 0, having failed alone, waits for the others' replies before stopping them."""


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


@dataclass
class Replica:
    """One data-parallel replica as rank 0 drives it: its ranks and its message channel."""

    index: int
    ranks: list[int]
    driver: Driver
    """Sends to the replica's ranks other than rank 0 (replica 0: none when it is rank 0 alone)."""
    busy_job: str | None = field(default=None)

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "ranks": self.ranks, "busy_job": self.busy_job}


def job_shape(request: JobRequest) -> JobShape:
    return JobShape(request.width, request.height, request.num_frames)


def _tiles(job: Job) -> bool:
    return job.memory is not None and job.memory.vae_tiling


def memory_record(job: Job) -> dict[str, Any] | None:
    """job.json's "memory": the job's plan (prediction and reasons) and each rank's
    measured peak."""
    if job.memory is None:
        return None
    measured = {str(rank): reading for rank, reading in sorted(job.measured.items()) if reading}
    return {**job.memory.to_dict(), "measured": measured}


def replicas_of(runtime: Runtime, world_driver: Driver) -> list[Replica]:
    """The group's replicas; with one replica its driver is the world's (as without any)."""
    group = runtime.group
    if group.dp_degree == 1:
        return [Replica(0, list(range(group.world_size)), world_driver)]
    out = []
    for index in range(group.dp_degree):
        ranks = list(range(index * group.replica_size, (index + 1) * group.replica_size))
        store = group.store if index == 0 else group.store_client()  # one per thread
        driver = Driver(
            store,
            group.world_size,
            ranks=[r for r in ranks if r != 0],
            prefix=channel(index, group.dp_degree),
        )
        out.append(Replica(index, ranks, driver))
    return out


class Service:
    """Rank 0's jobs and their runs on the group; the group itself can be replaced.

    `recoverable`: a lost rank marks the service broken but keeps queued jobs queued, because
    the supervisor (`serving/launch.py`) rebuilds the group and calls `attach` again. Without
    it (an external launcher restarts everything), queued jobs fail with the reason.
    """

    def __init__(
        self,
        runtime: Runtime,
        config: ServeConfig,
        lost_children: Callable[[], str | None] = lambda: None,
        *,
        recoverable: bool = False,
        on_hang: Callable[[list[int]], None] = lambda _ranks: None,
    ):
        self.config = config
        self.book = JobBook(config.max_queue, config.keep_jobs, JobStore(config.output_dir))
        self.recoverable = recoverable
        self._on_hang = on_hang
        self._monitor_lock = threading.Lock()
        self.broken: str | None = None
        self.note: str | None = None
        """What the supervisor is doing about `broken` (rebuilding, or staying down)."""
        self.rebuilds_in_a_row = 0
        """Rebuilds since the last job that succeeded (a group that keeps breaking stays down)."""
        self._current_seq: int | None = None
        self._encode_lock = threading.Lock()
        """Replica threads share rank 0's encoders: one job encodes at a time."""
        self.started = time.time()
        self.output_dir = Path(config.output_dir).resolve()
        self.attach(runtime, lost_children)
        self._closed = threading.Event()
        threading.Thread(target=self._watch_for_hangs, name="hang-watchdog", daemon=True).start()

    def attach(self, runtime: Runtime, lost_children: Callable[[], str | None]) -> None:
        """Serve with `runtime` (a new group after a rebuild); ready after `wait_ready`."""
        group = runtime.group
        with self._monitor_lock:
            self.runtime = runtime
            self.driver = Driver(group.store, group.world_size)
            self.replicas = replicas_of(runtime, self.driver)
            self._monitor = HeartbeatMonitor(group.store_client(), group.world_size, stale_s=15.0)
            self._lost_children = lost_children
            self.ready = False
            self.ranks: list[dict[str, Any]] = []
        self.limits = runtime.limits
        self.meta = {
            "family": runtime.family.name,
            "task": runtime.family.task,
            "world_size": group.world_size,
            "device": group.device.type,
            "plan": {**runtime.plan.to_dict(), "dp_degree": group.dp_degree},
            "limits": runtime.limits.to_dict(),
        }
        if runtime.model_files is not None:  # a single-file model: what each file was read as
            self.meta["model_files"] = runtime.model_files
        self.load_seconds = runtime.load_seconds

    def detach(self) -> None:
        """Let go of the group (its model is freed once the caller drops it too)."""
        with self._monitor_lock:
            self.ready = False
            self.runtime = None
            self._monitor = None

    def mark_broken(self, reason: str) -> None:
        """The group cannot run jobs; queued jobs wait for a rebuild or fail with `reason`."""
        if self.broken is None:
            log.error("backend unhealthy: %s", reason)
        self.broken = self.broken or reason
        if not self.recoverable:
            self.book.fail_queued(f"backend is not healthy: {self.broken}")

    def give_up(self, reason: str) -> None:
        """No more rebuilds: stay down and say why."""
        self.recoverable = False
        self.note = reason
        self.mark_broken(reason)
        self.book.fail_queued(f"backend is down: {reason}")

    # -- health ---------------------------------------------------------------------------

    def lost(self) -> str | None:
        """Why the group is not whole, or None."""
        reason = self._lost_children()
        if reason or not self.ready:  # heartbeats start once a rank has loaded the model
            return reason
        with self._monitor_lock:
            if self._monitor is None:
                return None
            stale = self._monitor.stale()
        if stale:
            return f"ranks {stale} stopped answering (no heartbeat for 15s)"
        return None

    def health(self) -> tuple[bool, dict[str, Any]]:
        reason = self.broken or self.lost()
        if reason and not self.broken:
            self.mark_broken(reason)
        ok = self.ready and not reason
        detail = {
            "status": "ok" if ok else "unavailable",
            "ready": self.ready,
            "world_size": self.meta["world_size"],
        }
        if reason:
            detail["error"] = f"{reason} ({self.note})" if self.note else reason
        if self.note and not ok:
            detail["recovery"] = self.note
        return ok, detail

    def wait_ready(self, abort: Callable[[], str | None] = lambda: None) -> None:
        def why() -> str | None:
            return abort() or self.lost()

        self.ranks = [self.runtime.rank_info(), *self.driver.wait_ready(why, 3600.0)]
        self.ready = True

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
        }

    # -- requests from HTTP ---------------------------------------------------------------

    def submit(self, body: Any) -> Job:
        """Validate and queue; ValueError for a bad body, QueueFull, RuntimeError if broken."""
        request = JobRequest.from_body(body, self.limits)
        planner = self.runtime.planner if self.runtime is not None else None
        if planner is not None:  # TooLarge (a ValueError: 422) names the largest size that fits
            planner.check(job_shape(request))
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
        # Another replica's outputs are written on a writer thread, so that replica takes its
        # next job as soon as its frames are in (rank 0 also computes replica 0's jobs).
        writer = ThreadPoolExecutor(1, "output-writer") if len(self.replicas) > 1 else None
        threads = [
            threading.Thread(
                target=self._serve_replica,
                args=(replica, stop),
                kwargs={"writer": writer},
                name=f"replica-{replica.index}",
            )
            for replica in self.replicas[1:]
        ]
        for thread in threads:
            thread.start()
        try:
            self._serve_replica(self.replicas[0], stop, check_health=True)
        finally:
            for thread in threads:
                thread.join()
            if writer is not None:
                writer.shutdown(wait=True)  # every job taken gets its outputs and its status

    def _serve_replica(
        self,
        replica: Replica,
        stop: threading.Event,
        *,
        check_health: bool = False,
        writer: ThreadPoolExecutor | None = None,
    ) -> None:
        checked = time.monotonic()
        try:
            while not stop.is_set() and not self.broken:
                job = self.book.next(timeout_s=0.1)
                if job is not None:
                    self.run_job(job, replica, writer)
                    release_freed_memory()  # after the job is reported, not inside its timings
                if check_health and time.monotonic() - checked > 0.5:
                    self.health()
                    checked = time.monotonic()
        except Exception as exc:  # a driver thread must not vanish silently
            log.exception("replica %d stopped", replica.index)
            self.mark_broken(f"replica {replica.index}: {type(exc).__name__}: {exc}")

    def run_job(
        self, job: Job, replica: Replica | None = None, writer: ThreadPoolExecutor | None = None
    ) -> None:
        """Run `job` on `replica` (default: rank 0's) and write its outputs; with a `writer`,
        another replica's outputs are written there and the replica is free at once."""
        replica = replica or self.replicas[0]
        if self.broken:
            if self.recoverable:
                self.book.requeue(job)
            else:
                self.book.finish(job, "failed", f"backend is not healthy: {self.broken}")
            return
        timings: dict[str, Any] = {"queued_s": round(job.started - job.created, 4)}
        job.timings = timings
        job.replica = replica.index
        planner = self.runtime.planner
        job.memory = None if planner is None else planner.plan_job(job_shape(job.request))
        replica.busy_job = job.id
        started = time.perf_counter()
        try:
            latents = LatestLatents() if self.config.save_latents else None
            if replica.index == 0:
                frames, _clock = self._denoise(job, timings, latents, replica)
                final = None if latents is None or latents.value is None else latents.numpy()
            else:
                frames, final = self._denoise_remote(job, timings, replica)
        except JobCancelled:
            self._finish(job, "cancelled")
            return
        except Exception as exc:
            log.exception("job %s failed", job.id)
            self._finish(job, "failed", self._failure(exc))
            return
        finally:
            replica.busy_job = None
        if writer is None or replica.index == 0:
            self._write(job, frames, final, started)
        else:
            writer.submit(self._write, job, frames, final, started)

    def _write(self, job: Job, frames: Any, final: Any, started: float) -> None:
        """The outputs and job.json of a job whose frames are in; then it has succeeded."""
        timings = job.timings
        try:
            begin_write = time.perf_counter()
            job.files = write_outputs(job.out_dir, to_uint8(frames), self.runtime.limits.fps)
            if final is not None:
                job.files.append(write_latents(job.out_dir, final))
            job.num_frames = len(frames)
            timings["write_s"] = round(time.perf_counter() - begin_write, 4)
            timings["total_s"] = round(time.perf_counter() - started, 4)
            self._finish(job, "succeeded")
            self.rebuilds_in_a_row = 0
        except Exception as exc:
            log.exception("job %s failed", job.id)
            self._finish(job, "failed", self._failure(exc))

    def _encode(self, job: Job, timings: dict[str, Any]) -> dict[str, Any]:
        begin = time.perf_counter()
        with self._encode_lock:
            tensors = self.runtime.encode(job.request)
        timings["encode_s"] = round(time.perf_counter() - begin, 4)
        return tensors

    def _denoise(
        self, job: Job, timings: dict[str, Any], latents: LatestLatents | None, replica: Replica
    ):
        """A job on rank 0's own replica: rank 0 computes its share and decodes."""
        runtime, request = self.runtime, job.request
        begin = time.perf_counter()
        tensors = self._encode(job, timings)
        message = RunJob(job.id, request.to_dict(), tensor_meta(tensors), vae_tiling=_tiles(job))
        seq = replica.driver.send(message) if replica.driver.ranks else None
        self._current_seq = seq

        def on_step(step: int, total: int) -> bool:
            job.step = step
            return job.cancel_requested

        hooks = JobHooks(tensors, on_step, _call_each(self._previews(job), latents))
        clock = hooks.clock
        frames, own_error = None, None
        try:
            frames = run_job(runtime, message, hooks)
        except Exception as exc:  # JobCancelled too: settled with the workers' replies below
            own_error = exc
        replies = self._settle(seq, own_error, replica.driver)
        job.measured = {0: runtime.last_peak, **{r: reply.memory for r, reply in replies.items()}}
        timings.update(clock.timings(begin, time.perf_counter()))
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

    def _denoise_remote(self, job: Job, timings: dict[str, Any], replica: Replica):
        """A job on another replica: rank 0 encodes, hands the tensors to the replica's leader
        through the store, relays progress, previews and cancel while it waits, and takes the
        frames (and final latents) the leader put back. Returns (frames, latents or None)."""
        began = time.perf_counter()
        tensors = self._encode(job, timings)
        driver = replica.driver
        message = RunJob(
            job.id,
            job.request.to_dict(),
            tensor_meta(tensors),
            self.config.save_latents,
            vae_tiling=_tiles(job),
        )
        put_tensors(driver.store, job.id, tensors)
        remote = RemoteJob(driver.store, job.id, list(tensors))

        def poll() -> bool:
            moved = remote.poll(job.cancel_requested)
            job.step = remote.step
            if remote.preview is not None:
                job.preview_png, job.preview_step = remote.preview
            return moved

        begin = time.perf_counter()
        handed_over_s = begin - began  # encode and tensors into the store
        try:
            seq = driver.send(message)
            # Bounded by the collective timeout since the replica's last step, not overall.
            # A whole job's wait: poll the store gently (it shares the CPU with the ranks).
            replies = driver.replies(
                seq, self.lost, self.config.timeout_s + 30.0, poll, REMOTE_POLL_S
            )
            job.measured = {rank: reply.memory for rank, reply in replies.items()}
            leader = replies.pop(replica.ranks[0])
            outcome = combine(leader, replies)
            if outcome.status == "succeeded":
                frames = take_frames(driver.store, job.id)
                final = take_latents(driver.store, job.id) if self.config.save_latents else None
                timings["replica_s"] = round(time.perf_counter() - begin, 4)
                timings.update(take_timings(driver.store, job.id, handed_over_s))
                return frames, final
        finally:
            remote.clear()
        if outcome.status == "cancelled":
            raise JobCancelled(outcome.message)
        if replies and not outcome.in_step:
            self.mark_broken(f"replica {replica.index}: ranks disagreed ({outcome.message})")
        raise JobFailedError(outcome.message)

    def _settle(
        self, seq: int | None, own_error: Exception | None, driver: Driver
    ) -> dict[int, Reply]:
        """Combine rank 0's outcome with every worker's reply; raise if the job did not succeed.
        Returns the workers' replies.

        A job that failed the same way on every rank (a deterministic error) leaves the group
        in step. Anything else — one rank failing alone, a rank timing out in a collective,
        cancel on some ranks only — may have left collectives unmatched, so the backend is
        marked unhealthy rather than trusted with the next job.
        """
        own = Reply(0)
        if own_error is not None:
            own = Reply.failure(0, own_error, cancelled=isinstance(own_error, JobCancelled))
        # Ranks that fail the same way reply at once; if rank 0 failed alone, the others may
        # wait in a collective for it until the collective timeout: give them a short grace.
        alone = not own.ok and not own.cancelled
        grace_s = OWN_FAILURE_GRACE_S if alone else self.config.timeout_s + 30.0
        try:
            replies = driver.replies(seq, self.lost, grace_s) if seq else {}
        except RankLost:
            if not alone or self.broken or self.lost():
                raise  # a rank died: rank 0's own error was only the broken collective
            self.mark_broken(f"rank 0 failed alone: {own.error}")
            self._on_hang([])  # the others wait in a collective: stop them
            raise JobFailedError(own.error) from None
        finally:
            self._current_seq = None
        outcome = combine(own, replies)
        # The watchdog found out first (a rank failed alone, or hung) — unless the break is
        # another replica's and every rank of this one succeeded.
        if self.broken and not (len(self.replicas) > 1 and outcome.status == "succeeded"):
            raise JobFailedError(self.broken)
        if outcome.status == "succeeded":
            return replies
        if outcome.status == "cancelled":
            raise own_error
        if replies and not outcome.in_step:
            self.mark_broken(f"ranks disagreed about the last job ({outcome.message})")
        raise JobFailedError(outcome.message)

    def _failure(self, exc: Exception) -> str:
        if isinstance(exc, JobFailedError):
            return str(exc)
        if isinstance(exc, RankLost):
            self.mark_broken(str(exc))
            return f"a rank was lost during the job: {self.broken}"
        lost = self.broken or self.lost()
        if lost:
            self.mark_broken(lost)
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
            "plan": self.meta["plan"],
            "replica": job.replica,
            "replica_ranks": self.replicas[job.replica or 0].ranks,
            "world_size": runtime.group.world_size,
            "device": runtime.group.device.type,
            "num_frames": job.num_frames,
            "files": job.files,
            "timings": job.timings,
            "memory": memory_record(job),
            "versions": versions(),
        }

    def shutdown(self) -> None:
        """Tell the workers to leave their loops (best effort, bounded)."""
        self._closed.set()
        self.book.close()
        if self.runtime is None or self.runtime.group.world_size == 1 or self.broken:
            return
        for replica in self.replicas:
            if not replica.driver.ranks:
                continue
            try:
                seq = replica.driver.send(Shutdown())
                replica.driver.replies(seq, self.lost, 10.0)
            except Exception as exc:  # workers may already be gone; the launcher reaps them
                log.warning("shutdown: %s", exc)

    # -- hangs ----------------------------------------------------------------------------

    def _watch_for_hangs(self) -> None:
        """A rank that stays alive but stops progressing keeps rank 0 waiting in a collective
        until the collective timeout. When rank 0 has waited `hang_timeout_s` at a step
        boundary, the ranks that have not reached that boundary are treated as lost."""
        while not self._closed.wait(0.5):
            runtime = self.runtime
            point = runtime.wait_point if runtime is not None and self.ready else None
            if point is None or self.broken:
                continue
            failed = self._failed_replies(self._current_seq)
            if failed and runtime.wait_point is point:  # it left the job: rank 0 would wait
                first = failed[0]
                self.mark_broken(f"rank {first.rank} failed alone: {first.error}")
                self._on_hang([r.rank for r in failed])
                continue
            waited = time.monotonic() - point.since
            if waited < self.config.hang_timeout_s:
                continue
            behind = [rank for rank, key in self._progress().items() if key != point.key]
            if behind and runtime.wait_point is point:
                self.mark_broken(
                    f"ranks {behind} stopped progressing: rank 0 waited {waited:.0f}s for "
                    f"them at {point.key.partition(':')[2]} (--hang-timeout)"
                )
                self._on_hang(behind)

    def _failed_replies(self, seq: int | None) -> list[Reply]:
        """Workers that already replied with a failure to job message `seq`."""
        if seq is None:
            return []
        with self._monitor_lock:
            if self._monitor is None:
                return []
            store = self._monitor.store
            driver = self.replicas[0].driver
            keys = [driver.reply_key(seq, rank) for rank in driver.ranks]
            replies = [
                Reply.from_json(json.loads(store.get(key))) for key in keys if store.check([key])
            ]
        return [r for r in replies if not r.ok and not r.cancelled]

    def _progress(self) -> dict[int, str]:
        with self._monitor_lock:
            if self._monitor is None:
                return {}
            store = self._monitor.store
            return {
                rank: store.get(key).decode() if store.check([key]) else ""
                for rank in self.replicas[0].driver.ranks  # rank 0's replica: its watchdog
                for key in [f"progress/{rank}"]
            }
