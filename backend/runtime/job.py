"""One job on one rank: the same sequence of collectives on every rank, rank 0 included.

Rank 0's service and every worker call `run_job` with the same `RunJob` message, so the
collectives of a job (the encoder outputs' broadcast, the denoising loop's parallel attention
and sharded weights, the per-step cancel decision, a split VAE decode) are spelled out once:
adding one here adds it on every rank. What only rank 0 does comes in as `JobHooks`: its
encoder outputs, the cancel decision, previews. Encoding happens before the message is sent
(the message carries the outputs' shapes); writing the frames happens after `run_job` returns them.

A replica's leader (its first rank: rank 0 for replica 0) reports its job's progress, previews
and final latents and takes the cancel decision through `LeaderHooks`, written once: rank 0
reports to the job itself, another replica's leader through the store (`replica.py`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import torch

from ..lora import JobLora
from ..request import JobRequest
from .engine import Runtime, StepClock
from .messages import RunJob

PREVIEW_PERIOD_S = 0.25
"""Previews are rendered this often at most (and at the last step)."""


def _never_cancel(_step: int, _total: int) -> bool:
    return False


@dataclass
class JobHooks:
    """What one rank adds to the common sequence (the defaults are a worker's)."""

    tensors: dict[str, torch.Tensor] | None = None
    """Rank 0's encoder outputs, broadcast to the others; None on the others."""
    on_step: Callable[[int, int], bool] = _never_cancel
    """Called after each step with (step, total); rank 0 returns True to cancel."""
    on_latents: Callable[[int, torch.Tensor], None] | None = None
    """Sees the latents after each step (rank 0's previews)."""
    clock: StepClock = field(default_factory=StepClock)


def run_job(runtime: Runtime, message: RunJob, hooks: JobHooks) -> np.ndarray | None:
    """Run `message` on this rank; float frames (F, H, W, 3) on rank 0, None elsewhere.

    Raises JobCancelled on every rank at the same step when rank 0 cancels.
    """
    request = JobRequest.from_dict(message.request)
    runtime.job_id = message.job_id
    runtime.last_peak = None
    runtime.last_audio = None
    runtime.meter.reset()
    runtime.set_vae_tiling(message.vae_tiling)
    runtime.in_job = True
    try:
        tensors = runtime.share(hooks.tensors, message.tensors)
        loras = [JobLora(**lora) for lora in message.loras]
        with runtime.loras.applied(loras):  # on this rank's rows; restored however it ends
            if runtime.fault is not None:  # tests only
                runtime.fault.begin_job(request.prompt or "")
            result = runtime.denoise(request, tensors, hooks.on_step, hooks.clock, hooks.on_latents)
        if runtime.family.decodes_in_job:  # the latents, on every rank: decode them together
            result = runtime.decode(request, result)
    finally:
        runtime.in_job = False
        if runtime.fault is not None:
            runtime.fault.end_job()
    runtime.last_peak = runtime.meter.read()
    return result


class Reporter(Protocol):
    """Where a leader's job progress goes and where its cancel decision comes from."""

    def step(self, step: int) -> None: ...

    def preview(self, png: bytes, step: int) -> None: ...

    def cancel_requested(self) -> bool: ...


class LeaderHooks:
    """A replica leader's hooks: report each step, render previews every `PREVIEW_PERIOD_S`
    (and at the last step), keep the final latents, pass on the cancel decision."""

    def __init__(
        self,
        reporter: Reporter,
        total: int,
        render: Callable[[torch.Tensor], bytes] | None,
        *,
        keep_latents: bool = False,
    ):
        self.reporter, self.total, self.render = reporter, total, render
        self.keep_latents = keep_latents
        self.latents: torch.Tensor | None = None
        """The final latents, when `keep_latents` (what `--save-latents` writes)."""
        self._last_preview = 0.0

    def on_step(self, step: int, _total: int) -> bool:
        self.reporter.step(step)
        return self.reporter.cancel_requested()

    def on_latents(self, step: int, latents: torch.Tensor) -> None:
        if self.keep_latents and step == self.total:
            self.latents = latents.detach().clone()  # the pipeline owns the tensor it passes
        if self.render is None:
            return
        now = time.monotonic()
        if now - self._last_preview < PREVIEW_PERIOD_S and step < self.total:
            return
        self._last_preview = now
        self.reporter.preview(self.render(latents), step)

    def job_hooks(self, tensors: dict[str, torch.Tensor] | None) -> JobHooks:
        needs_latents = self.keep_latents or self.render is not None
        return JobHooks(tensors, self.on_step, self.on_latents if needs_latents else None)


def latents_array(latents: torch.Tensor) -> np.ndarray:
    """Final latents as float32 on the host (what `--save-latents` writes)."""
    return latents.detach().to("cpu", torch.float32).contiguous().numpy()
