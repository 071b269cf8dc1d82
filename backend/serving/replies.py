"""Queueing a job over HTTP, and the error reply when it cannot be queued: one mapping of
refusals to status codes for paradit's own endpoints and the OpenAI-style ones."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi.responses import JSONResponse

from .jobs import Job, QueueFull

RETRY_AFTER_S = 5


def error(status: int, message: str) -> JSONResponse:
    """paradit's error body: `{"error": "<what is wrong and what is allowed>"}`."""
    return JSONResponse({"error": message}, status_code=status)


def submit_or_reply(
    service: Any,
    body: dict[str, Any],
    reply: Callable[[int, str], JSONResponse] = error,
) -> Job | JSONResponse:
    """Queue the job, or the refusal in `reply`'s shape: 422 for an invalid request (or one
    that does not fit), 429 with Retry-After when the queue is full, 503 when the backend is
    not healthy."""
    try:
        return service.submit(body)
    except ValueError as exc:
        return reply(422, str(exc))
    except QueueFull as exc:
        response = reply(429, str(exc))
        response.headers["Retry-After"] = str(RETRY_AFTER_S)
        return response
    except RuntimeError as exc:
        return reply(503, str(exc))
