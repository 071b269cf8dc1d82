"""Live progress of one backend job: elapsed time, an estimate of time left, and its HTML.

The estimate uses only steps seen while polling: the time per step since the first step was
seen (so prompt encoding and the first step's warm-up do not skew it).
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

_COLORS = {"succeeded": "#16a34a", "failed": "#dc2626", "cancelled": "#9ca3af"}


def format_seconds(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


@dataclass
class ProgressClock:
    """Times one job as the UI polls it; all times are `time.monotonic()` readings."""

    started: float
    _first: tuple[float, int] | None = field(default=None, repr=False)
    """(time, step) when a finished step was first seen."""

    def elapsed(self, now: float) -> float:
        return max(0.0, now - self.started)

    def seconds_left(self, step: int, total: int, now: float) -> float | None:
        """Time left at `step` of `total`, or None until two different steps were seen."""
        if step < 1:
            return None
        if self._first is None:
            self._first = (now, step)
            return None
        first_time, first_step = self._first
        if step <= first_step:
            return None
        per_step = (now - first_time) / (step - first_step)
        return per_step * max(0, total - step)


def progress_text(job: dict[str, Any], clock: ProgressClock, now: float) -> str:
    """One line for a polled job document (`GET /v1/jobs/{id}`)."""
    status = job["status"]
    progress = job.get("progress") or {}
    step, total = progress.get("step", 0), progress.get("total", 0)
    elapsed = format_seconds(clock.elapsed(now))
    if status == "queued":
        position = job.get("queue_position")
        place = "" if position is None else f" at position {position + 1}"
        return f"Waiting in the backend queue{place} · waiting {elapsed}"
    if status == "running":
        if step < 1:
            return f"Running: encoding the prompt, then step 1 of {total} · elapsed {elapsed}"
        left = clock.seconds_left(step, total, now)
        estimate = "estimating time left" if left is None else f"about {format_seconds(left)} left"
        return f"Step {step} of {total} · elapsed {elapsed} · {estimate}"
    if status == "succeeded":
        seed = (job.get("request") or {}).get("seed")
        took = (job.get("timings") or {}).get("total_s")
        took_text = format_seconds(took) if took is not None else elapsed
        return f"Done: {total} steps in {took_text} (seed {seed})"
    if status == "cancelled":
        return f"Cancelled at step {step} of {total}"
    return f"Failed: {job.get('error') or 'no reason given'}"


def progress_html(job: dict[str, Any], clock: ProgressClock, now: float) -> str:
    """The status panel: a bar and the line from `progress_text`, tagged with the job's status."""
    status = job["status"]
    progress = job.get("progress") or {}
    step, total = progress.get("step", 0), progress.get("total", 0) or 1
    percent = 100 if status == "succeeded" else round(100 * min(step, total) / total)
    color = _COLORS.get(status, "#2563eb")
    text = html.escape(progress_text(job, clock, now))
    job_id = html.escape(str(job.get("id", "")))
    return (
        f'<div class="paradit-status" data-status="{html.escape(status)}" data-job="{job_id}">'
        f'<div style="height:8px;border-radius:4px;background:#e5e7eb;overflow:hidden">'
        f'<div style="width:{percent}%;height:100%;background:{color}"></div></div>'
        f'<p style="margin:6px 0 0 0">{text}</p>'
        f'<p style="margin:0;font-size:0.8em;opacity:0.7">job {job_id}</p></div>'
    )


def idle_html(message: str) -> str:
    return f'<div class="paradit-status" data-status="idle"><p>{html.escape(message)}</p></div>'
