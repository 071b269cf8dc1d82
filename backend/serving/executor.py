"""Running one job on one data-parallel replica, as rank 0 drives it.

One interface (`Executor.run`), two implementations: `LocalExecutor` for replica 0, which rank
0 is part of (rank 0 computes its share of the job and decodes), and `RemoteExecutor` for any
other replica, whose leader (its first rank) runs the job with the replica's other ranks while
rank 0 relays progress, previews and cancel through the store (see `runtime/replica.py`).
Both return the job's `JobOutput` on rank 0 (for the writer) and raise `JobCancelled` or
`JobFailedError` otherwise.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any

from ..config import ServeConfig
from ..runtime.control import RankLost, Sender, channel
from ..runtime.engine import Runtime
from ..runtime.job import (
    JobCancelled,
    LeaderHooks,
    RankResult,
    encode,
    job_message,
    latents_array,
    run_on_rank,
)
from ..runtime.messages import Reply, RunJob, combine
from ..runtime.replica import (
    RemoteJob,
    put_tensors,
    take_audio,
    take_frames,
    take_latents,
    take_timings,
)
from .health import GroupHealth
from .jobs import Job, JobOutput

log = logging.getLogger(__name__)

REMOTE_POLL_S = 0.05
"""How often rank 0 looks at another replica's job (replies, step, preview, cancel)."""
OWN_FAILURE_GRACE_S = 10.0
"""How long rank 0, having failed alone, waits for the others' replies before stopping them."""


class JobFailedError(RuntimeError):
    """A job failed; the message says why (a rank's own error when it was one rank's)."""


class JobReporter:
    """Rank 0 reports its own replica's job (`runtime.job.LeaderHooks`) to the job itself."""

    def __init__(self, job: Job):
        self.job = job

    def step(self, step: int) -> None:
        self.job.step = step

    def preview(self, png: bytes, step: int) -> None:
        self.job.preview_png, self.job.preview_step = png, step

    def cancel_requested(self) -> bool:
        return self.job.cancel_requested


class Executor:
    """One replica: its ranks, the sender that reaches those other than rank 0, its job."""

    def __init__(
        self,
        index: int,
        ranks: list[int],
        sender: Sender,
        runtime: Runtime,
        config: ServeConfig,
        health: GroupHealth,
        encode_lock: threading.Lock,
    ):
        self.index, self.ranks, self.sender = index, ranks, sender
        self.runtime, self.config, self.health = runtime, config, health
        self._encode_lock = encode_lock  # replicas share rank 0's encoders: one job at a time
        self.busy_job: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "ranks": self.ranks, "busy_job": self.busy_job}

    def run(self, job: Job) -> JobOutput:
        raise NotImplementedError

    def _encode(self, job: Job) -> dict[str, Any]:
        begin = time.perf_counter()
        with self._encode_lock:
            tensors = encode(self.runtime.rank_model, job.request)
        job.timings["encode_s"] = round(time.perf_counter() - begin, 4)
        return tensors

    def _message(self, job: Job, tensors: dict[str, Any]) -> RunJob:
        tiled = job.memory is not None and job.memory.vae_tiling
        bands = job.memory is not None and job.memory.decode == "bands"
        loras = self.runtime.loras.resolve(job.request.loras)  # again: the files may change
        job.loras = [
            lora.record(item) for lora, item in zip(loras, job.request.loras or [], strict=True)
        ]
        upscale = job.request.upscale
        stage_2 = self.runtime.loras.resolve(upscale["loras"]) if upscale is not None else []
        job.loras += [  # a two-stage job's stage-2 LoRAs, marked so
            {**lora.record(item), "stage": 2}
            for lora, item in zip(stage_2, upscale["loras"] if upscale else [], strict=True)
        ]
        return job_message(
            job.id,
            job.request,
            tensors,
            save_latents=self.config.save_latents,
            vae_tiling=tiled,
            loras=loras,
            split_bands=bands,
            upscale_loras=stage_2,
        )


class LocalExecutor(Executor):
    """Replica 0: rank 0 runs its share of each job alongside the replica's other ranks."""

    def run(self, job: Job) -> JobOutput:
        runtime, request = self.runtime, job.request
        begin = time.perf_counter()
        tensors = self._encode(job)
        message = self._message(job, tensors)
        seq = self.sender.send(message) if self.sender.ranks else None
        render = None
        if runtime.previewer is not None:
            render = lambda latents: runtime.previewer.png(latents, request)  # noqa: E731
        leader = LeaderHooks(
            JobReporter(job),
            request.total_steps,
            render,
            keep_latents=self.config.save_latents,
        )
        hooks = leader.job_hooks(tensors)
        result: RankResult | None = None
        own_error = None
        try:
            result = run_on_rank(runtime.rank_model, message, hooks)
        except Exception as exc:  # JobCancelled too: settled with the workers' replies below
            own_error = exc
        replies = self._settle(seq, own_error, job.id)
        if result is None:  # not reached: `_settle` raises when rank 0 failed
            raise JobFailedError(f"rank 0: {own_error}")
        job.timings.update(result.clock.timings(begin, time.perf_counter()))
        output = JobOutput(
            result.frames,
            None if leader.latents is None else latents_array(leader.latents),
            result.audio,
            {0: result.peak, **{r: reply.memory for r, reply in replies.items()}},
        )
        audio_latents = None
        if self.config.save_latents:
            audio_latents = runtime.rank_model.audio_latents(result.outputs)
        if audio_latents is not None:
            output.audio_latents = latents_array(audio_latents)
        applied = result.loras
        if applied is not None:  # rank 0's share of the switch (every rank does its own)
            job.timings["lora_apply_s"] = round(applied.apply_s, 4)
            job.timings["lora_remove_s"] = round(applied.remove_s, 4)
            job.timings["lora_apply_cpu_s"] = round(applied.apply_cpu_s, 4)
            output.lora_memory = {
                "saved_rows_bytes": applied.saved_bytes,
                "buffer_bytes": runtime.loras.buffers.nbytes,
                "cache_bytes": runtime.loras.library.cached_bytes(),
            }
        return output

    def _settle(
        self, seq: int | None, own_error: Exception | None, job_id: str
    ) -> dict[int, Reply]:
        """Combine rank 0's outcome with every worker's reply; raise if the job did not succeed.
        Returns the workers' replies.

        Rank 0, done with its share, waits for the others' replies at a wait point
        (`Runtime.waiting`): a rank hung after rank 0's last collective (in its decode, which
        rank 0 may run alone) is found by the watchdog within `--hang-timeout`, as at a step.

        A job that failed the same way on every rank (a deterministic error) leaves the group
        in step. Anything else — one rank failing alone, a rank timing out in a collective,
        cancel on some ranks only — may have left collectives unmatched, so the backend is
        marked unhealthy rather than trusted with the next job.
        """
        health = self.health
        own = Reply(0)
        if own_error is not None:
            own = Reply.failure(0, own_error, cancelled=isinstance(own_error, JobCancelled))
        # Ranks that fail the same way reply at once; if rank 0 failed alone, the others may
        # wait in a collective for it until the collective timeout: give them a short grace.
        alone = not own.ok and not own.cancelled
        grace_s = OWN_FAILURE_GRACE_S if alone else self.config.timeout_s + 30.0
        done = self.runtime.waiting(f"{job_id}:the end") if own.ok else contextlib.nullcontext()
        try:
            with done:
                replies = self.sender.replies(seq, health.lost, grace_s) if seq else {}
        except RankLost:
            if not alone or health.broken or health.lost():
                raise  # a rank died: rank 0's own error was only the broken collective
            health.stop_group(f"rank 0 failed alone: {own.error}")  # the others wait for it
            raise JobFailedError(own.error) from None
        outcome = combine(own, replies)
        # The watchdog found out first (a rank failed alone, or hung) — unless the break is
        # another replica's and every rank of this one succeeded.
        others = self.runtime.group.dp_degree > 1 and outcome.status == "succeeded"
        if health.broken and not others:
            raise JobFailedError(health.broken)
        if outcome.status == "succeeded":
            return replies
        if outcome.status == "cancelled":
            raise own_error
        if not outcome.at_rest:
            health.mark_broken(f"a rank's model left its between-jobs state ({outcome.message})")
        if replies and not outcome.in_step:
            health.mark_broken(f"ranks disagreed about the last job ({outcome.message})")
        raise JobFailedError(outcome.message)


class RemoteExecutor(Executor):
    """Replica k > 0: rank 0 encodes, hands the tensors to the replica's leader through the
    store, relays progress, previews and cancel while it waits, and takes the frames (and
    final latents) the leader put back."""

    def run(self, job: Job) -> JobOutput:
        began = time.perf_counter()
        tensors = self._encode(job)
        sender, timings = self.sender, job.timings
        message = self._message(job, tensors)
        put_tensors(sender.store, job.id, tensors)
        remote = RemoteJob(sender.store, job.id, list(tensors))

        def poll() -> bool:
            moved = remote.poll(job.cancel_requested)
            job.step = remote.step
            if remote.preview is not None:
                job.preview_png, job.preview_step = remote.preview
            return moved

        begin = time.perf_counter()
        handed_over_s = begin - began  # encode and tensors into the store
        try:
            seq = sender.send(message)
            # Bounded by the collective timeout since the replica's last step, not overall.
            # A whole job's wait: poll the store gently (it shares the CPU with the ranks).
            timeout_s = self.config.timeout_s + 30.0
            replies = sender.replies(seq, self.health.lost, timeout_s, poll, REMOTE_POLL_S)
            measured = {rank: reply.memory for rank, reply in replies.items()}
            leader = replies.pop(self.ranks[0])
            outcome = combine(leader, replies)
            if outcome.status == "succeeded":
                frames = take_frames(sender.store, job.id)
                audio = take_audio(sender.store, job.id)
                final = take_latents(sender.store, job.id) if self.config.save_latents else None
                timings["replica_s"] = round(time.perf_counter() - begin, 4)
                timings.update(take_timings(sender.store, job.id, handed_over_s))
                output = JobOutput(frames, final, audio, measured)
                if self.config.save_latents:
                    output.audio_latents = take_latents(sender.store, job.id, "audio_latents")
                return output
        finally:
            remote.clear()
        if outcome.status == "cancelled":
            raise JobCancelled(outcome.message)
        if not outcome.at_rest:
            self.health.mark_broken(
                f"replica {self.index}: a rank's model left its between-jobs state "
                f"({outcome.message})"
            )
        if replies and not outcome.in_step:
            self.health.mark_broken(f"replica {self.index}: ranks disagreed ({outcome.message})")
        raise JobFailedError(outcome.message)


def executors_of(
    runtime: Runtime,
    world_sender: Sender,
    config: ServeConfig,
    health: GroupHealth,
    encode_lock: threading.Lock,
) -> list[Executor]:
    """The group's replicas; with one replica its sender is the world's (as without any)."""
    group = runtime.group
    common = (runtime, config, health, encode_lock)
    if group.dp_degree == 1:
        return [LocalExecutor(0, list(range(group.world_size)), world_sender, *common)]
    out: list[Executor] = []
    for index in range(group.dp_degree):
        ranks = list(range(index * group.replica_size, (index + 1) * group.replica_size))
        store = group.store if index == 0 else group.store_client()  # one per thread
        sender = Sender(
            store,
            group.world_size,
            ranks=[r for r in ranks if r != 0],
            prefix=channel(index, group.dp_degree),
        )
        kind = LocalExecutor if index == 0 else RemoteExecutor
        out.append(kind(index, ranks, sender, *common))
    return out
