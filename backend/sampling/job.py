"""Sampling on a rank: what a loaded model offers (`sampling_limits`) and one job's hook
(`job_sampling`): the job's sampler in place of the pipeline's scheduler, Wan 2.2 A14B's
switch step as the pipeline's boundary, the low-noise expert's guidance, and the record of
what ran (job.json's `sampling`); everything restored after the job.

Every rank builds the same sampler from the same request (the levels are computed, the
`lcm` noise drawn from the job's seed), so the choice and the switch step are the same on
every rank and replica.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from ..contract import Limits
from .names import DEFAULT, SCHEDULERS
from .rules import SamplingChoice, resolve
from .samplers import NUM_TRAIN_TIMESTEPS, FlowSampler

log = logging.getLogger(__name__)


def two_experts(pipe: Any) -> bool:
    """A high- and a low-noise expert split by the pipeline's `boundary_ratio` (Wan 2.2 A14B)."""
    config = getattr(pipe, "config", {})
    return getattr(pipe, "transformer_2", None) is not None and bool(config.get("boundary_ratio"))


def model_shift(scheduler_config: Any) -> float:
    """The static flow shift of a model's own scheduler (Wan's UniPC `flow_shift`, a
    FlowMatch scheduler's `shift`); 0 when its shift follows the image size."""
    if scheduler_config.get("use_dynamic_shifting"):
        return 0.0
    if scheduler_config.get("use_flow_sigmas") or "flow_shift" in scheduler_config:
        return float(scheduler_config.get("flow_shift") or 0.0)
    return float(scheduler_config.get("shift") or 0.0)


def sampling_limits(samplers: tuple[str, ...], pipe: Any) -> dict[str, Any]:
    """The `Limits` fields of a loaded model: the samplers its family runs (`samplers`, ()
    for only its own scheduler), the schedulers, its shift and whether it has two experts."""
    if not samplers:
        return {"two_experts": two_experts(pipe)}
    return {
        "samplers": tuple(samplers),
        "schedulers": SCHEDULERS,
        "default_shift": model_shift(pipe.scheduler.config),
        "two_experts": two_experts(pipe),
    }


def boundary_ratio(sigmas: tuple[float, ...], switch_step: int) -> float:
    """The pipeline's `boundary_ratio` that hands over to the low-noise expert at
    `switch_step`: the pipeline runs the high-noise one while timestep >= ratio * 1000, so the
    boundary lies between the timesteps of steps switch_step - 1 and switch_step."""
    times = [s * NUM_TRAIN_TIMESTEPS for s in sigmas[:-1]]
    if switch_step <= 0:
        return (times[0] + 1) / NUM_TRAIN_TIMESTEPS
    if switch_step >= len(times):
        return 0.0
    return (times[switch_step - 1] + times[switch_step]) / 2 / NUM_TRAIN_TIMESTEPS


@dataclass
class JobSampling:
    kwargs: dict[str, Any] = field(default_factory=dict)
    """More arguments for the pipeline call (the low-noise expert's guidance)."""
    record: dict[str, Any] = field(default_factory=dict)
    """What ran (job.json's `sampling`), filled once the pipeline has returned."""


@contextlib.contextmanager
def job_sampling(runner: Any, request: Any, limits: Limits) -> Iterator[JobSampling]:
    """Run `request`'s sampling on `runner` (the pipeline that runs the job, or a wrapper
    that calls it and names it as `__wrapped__`, as `functools.wraps` does: HunyuanVideo
    1.5's step callbacks) for the time of the `with` block."""
    choice = resolve(request, limits)
    state = JobSampling()
    if request.guidance_scale_low is not None:
        state.kwargs["guidance_scale_2"] = request.guidance_scale_low
    # The scheduler is the called pipeline's: one set on a wrapper would not be the one the
    # pipeline steps with. A job on the model's own scheduler leaves it as it is.
    pipeline = inspect.unwrap(runner)
    own = pipeline.scheduler if choice is not None else None
    boundary = pipeline.config.get("boundary_ratio") if choice is not None else None
    try:
        if choice is not None:
            # Not `pipeline.scheduler = ...`: the pipeline would record the class in its config.
            pipeline.__dict__["scheduler"] = FlowSampler(
                choice.sampler, list(choice.sigmas), request.seed, dict(own.config)
            )
            if choice.switch_step is not None:
                ratio = boundary_ratio(choice.sigmas, choice.switch_step)
                pipeline.register_to_config(boundary_ratio=ratio)
        yield state
        try:
            state.record.update(_record(pipeline, choice))
        except (AttributeError, TypeError, ValueError, KeyError) as exc:  # a scheduler unlike
            # the flow and DDIM ones: the job's output stands, its record says less
            log.warning("sampling record incomplete: %s: %s", type(exc).__name__, exc)
            state.record.update(sampler=DEFAULT, scheduler=DEFAULT)
    finally:
        if choice is not None:
            pipeline.__dict__["scheduler"] = own
            if pipeline.config.get("boundary_ratio") != boundary:
                pipeline.register_to_config(boundary_ratio=boundary)


def _record(runner: Any, choice: SamplingChoice | None) -> dict[str, Any]:
    """The sampling that ran: the choice, or the model's own scheduler as it spaced the
    levels; for two experts which one ran each step."""
    scheduler = runner.scheduler
    if choice is not None:
        record = choice.to_dict()
    else:
        record = {
            "sampler": DEFAULT,
            "scheduler": DEFAULT,
            "shift": model_shift(scheduler.config) or None,
        }
        # A flow scheduler's levels; a diffusion one (CogVideoX's DDIM) has timesteps only.
        levels = getattr(scheduler, "sigmas", None)
        name, values = ("sigmas", levels) if levels is not None else ("timesteps", None)
        values = torch.as_tensor(scheduler.timesteps if values is None else values)
        record[name] = [round(float(v), 8) for v in values.flatten().tolist()]
    if two_experts(runner):
        boundary = runner.config["boundary_ratio"] * scheduler.config.num_train_timesteps
        record["experts"] = ["high" if t >= boundary else "low" for t in scheduler.timesteps]
    return record
