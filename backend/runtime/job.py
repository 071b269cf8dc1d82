"""One job on one rank: the same sequence of collectives on every rank, rank 0 included.

Rank 0's service and every worker call `run_job` with the same `RunJob` message, so the
collectives of a job (the encoder outputs' broadcast, the denoising loop's parallel attention
and sharded weights, the per-step cancel decision, a split VAE decode) are spelled out once:
adding one here adds it on every rank. What only rank 0 does comes in as `JobHooks`: its
encoder outputs, the cancel decision, previews. Encoding happens before the message is sent
(the message carries the outputs' shapes); writing the frames happens after `run_job` returns them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from ..request import JobRequest
from .engine import Runtime, StepClock
from .messages import RunJob


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
    runtime.meter.reset()
    runtime.set_vae_tiling(message.vae_tiling)
    tensors = runtime.share(hooks.tensors, message.tensors)
    result = runtime.denoise(request, tensors, hooks.on_step, hooks.clock, hooks.on_latents)
    if runtime.family.decodes_in_job:  # the latents, on every rank: decode them together
        result = runtime.decode(request, result)
    runtime.last_peak = runtime.meter.read()
    return result
