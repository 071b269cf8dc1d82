"""The loop every rank other than 0 runs: receive a message, handle it, reply once."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..contract import JobRequest
from .control import Worker
from .engine import JobCancelled, Runtime, StepClock, release_freed_memory

log = logging.getLogger(__name__)


def _run(runtime: Runtime, message: dict[str, Any]) -> dict[str, Any]:
    request = JobRequest.from_dict(message["request"])
    tensors = runtime.share(None, message["tensors"])
    runtime.denoise(request, tensors, on_step=lambda _step, _total: False, clock=StepClock())
    return {}


HANDLERS: dict[str, Callable[[Runtime, dict[str, Any]], dict[str, Any]]] = {"run": _run}


def handle(runtime: Runtime, message: dict[str, Any]) -> dict[str, Any]:
    """Run one message's handler; the outcome as a reply value (errors too)."""
    handler = HANDLERS.get(message.get("type", ""))
    if handler is None:
        return {"ok": False, "error": f"unknown message type {message.get('type')!r}"}
    try:
        return {"ok": True, **handler(runtime, message)}
    except JobCancelled as exc:
        return {"ok": False, "cancelled": True, "error": str(exc)}
    except Exception as exc:  # reported to rank 0 as a value; the loop goes on
        log.exception("rank %d: %s failed", runtime.group.rank, message.get("type"))
        return {"ok": False, "error": f"rank {runtime.group.rank}: {type(exc).__name__}: {exc}"}


def serve_worker(runtime: Runtime, worker: Worker) -> None:
    """Until rank 0 says shutdown (or disappears, which raises out of `next_message`)."""
    worker.ready(runtime.rank_info())
    while True:
        seq, message = worker.next_message()
        if message.get("type") == "shutdown":
            worker.reply(seq, {"ok": True})
            return
        worker.reply(seq, handle(runtime, message))
        release_freed_memory()  # a job's activations and gathered weights, back to the OS
