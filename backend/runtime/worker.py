"""The loop every rank other than 0 runs: receive a message, handle it, reply once."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from ..request import JobRequest
from .control import Worker
from .engine import Runtime, release_freed_memory
from .job import JobCancelled, LeaderHooks, RankResult, run_on_rank
from .messages import Message, Reply, RunJob, Shutdown, from_json
from .replica import (
    StoreReporter,
    put_audio,
    put_frames,
    put_latents,
    put_timings,
    take_tensors,
)

log = logging.getLogger(__name__)


def _run(runtime: Runtime, message: RunJob) -> RankResult:
    if not runtime.group.is_leader:
        return run_on_rank(runtime.rank_model, message)
    # The leader of a replica other than rank 0's: rank 0 encoded, this rank hands on.
    received = time.perf_counter()
    store, previewer = runtime.group.store, runtime.previewer
    request = JobRequest.from_dict(message.request)
    render = None if previewer is None else (lambda latents: previewer.png(latents, request))
    reporter = StoreReporter(store, message.job_id)
    leader = LeaderHooks(reporter, request.total_steps, render, keep_latents=message.save_latents)
    hooks = leader.job_hooks(take_tensors(store, message.job_id, message.tensors))
    result = run_on_rank(runtime.rank_model, message, hooks)
    put_timings(store, message.job_id, result.clock.timings(received, time.perf_counter()))
    put_frames(store, message.job_id, result.frames)
    if result.audio is not None:
        put_audio(store, message.job_id, result.audio)
    if leader.latents is not None:
        put_latents(store, message.job_id, leader.latents)
        audio_latents = runtime.rank_model.audio_latents(result.outputs)
        if audio_latents is not None:
            put_latents(store, message.job_id, audio_latents, "audio_latents")
    return result


HANDLERS: dict[type, Callable[[Runtime, Message], RankResult]] = {RunJob: _run}


def handle(runtime: Runtime, message: Message) -> Reply:
    """Run one message's handler; the outcome as a reply value (errors too)."""
    rank = runtime.group.rank
    try:
        result = HANDLERS[type(message)](runtime, message)
        return Reply(rank, memory=result.peak)
    except JobCancelled as exc:
        return Reply.failure(rank, exc, cancelled=True)
    except Exception as exc:  # reported to rank 0 as a value; the loop goes on
        log.exception("rank %d: %s failed", rank, type(message).__name__)
        return Reply.failure(rank, exc)


def serve_worker(runtime: Runtime, worker: Worker) -> None:
    """Until rank 0 says shutdown (or disappears, which raises out of `next_message`)."""
    worker.ready(runtime.rank_info())
    while True:
        seq, data = worker.next_message()
        try:
            message = from_json(data)
        except (TypeError, ValueError) as exc:  # a newer rank 0? say so, keep serving
            worker.reply(seq, Reply.failure(runtime.group.rank, exc))
            continue
        if isinstance(message, Shutdown):
            worker.reply(seq, Reply(runtime.group.rank))
            return
        worker.reply(seq, handle(runtime, message))
        release_freed_memory()  # a job's activations and gathered weights, back to the OS
