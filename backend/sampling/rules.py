"""The sampling fields' rules (request.py's table calls them) and what a request resolves to.

Torch-free. A model that runs paradit's samplers says so in its `Limits` (`samplers`,
`schedulers`, `default_shift`, `two_experts`); every rule refuses a field where it does not
apply, naming the rule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..contract import Limits
from .names import (
    CFG_NORM,
    CFG_PLAIN,
    DEFAULT,
    DROPS_PENULTIMATE,
    FALLBACK_SAMPLER,
    FALLBACK_SCHEDULER,
    MIN_STEPS,
)
from .schedules import FLOW_LEVELS, NUM_LEVELS, levels

SAMPLING_FIELDS = ("sampler", "scheduler", "shift", "flow_levels", "sigmas", "switch_step")
"""Fields that make a job run paradit's sampler instead of the model's own scheduler."""


def _own_only(name: str, limits: Limits) -> ValueError:
    return ValueError(
        f"{name}: this model runs only its own scheduler (sampler {DEFAULT}); paradit's "
        "samplers run on the flow models that list them in GET /v1/info limits.samplers"
    )


def _one_of(name: str, value: str, choices: tuple[str, ...], limits: Limits) -> str:
    """`value` (empty: the model's own) if it is the model's own or one of `choices`."""
    value = value or DEFAULT
    if value == DEFAULT:
        return value
    if not choices:
        raise _own_only(name, limits)
    if value not in choices:
        raise ValueError(
            f"{name} must be one of {DEFAULT}, {', '.join(choices)} for this model, got {value!r}"
        )
    return value


def sampler_rule(value: str, limits: Limits) -> str:
    return _one_of("sampler", value, limits.samplers, limits)


def scheduler_rule(value: str, limits: Limits) -> str:
    return _one_of("scheduler", value, limits.schedulers, limits)


def shift_rule(value: float, limits: Limits) -> float:
    if not value > 0:
        raise ValueError(f"shift must be above 0, got {value}")
    if not limits.samplers:
        raise _own_only("shift", limits)
    return value


def flow_levels_rule(value: int, limits: Limits) -> int:
    if value not in FLOW_LEVELS:
        raise ValueError(
            f"flow_levels must be one of {', '.join(map(str, FLOW_LEVELS))} (ComfyUI's "
            f"ModelSamplingDiscreteFlow's table, ModelSamplingFlux's), got {value}"
        )
    if not limits.samplers:
        raise _own_only("flow_levels", limits)
    return value


def sigmas_rule(value: Any, limits: Limits) -> list[float] | None:
    """A list of noise levels, from at most 1 down to 0, strictly decreasing."""
    if value is None or value == []:
        return None
    if not limits.samplers:
        raise _own_only("sigmas", limits)
    usage = "sigmas must be a list of noise levels from 1 down to 0, strictly decreasing"
    if not isinstance(value, list) or not all(
        isinstance(s, (int, float)) and not isinstance(s, bool) for s in value
    ):
        raise ValueError(f"{usage}, e.g. [1, 0.9375, 0.8333, 0.625, 0]")
    sigmas = [float(s) for s in value]
    if len(sigmas) < 2 or len(sigmas) > limits.max_steps + 1:
        raise ValueError(f"{usage}: 2 to {limits.max_steps + 1} levels, got {len(sigmas)}")
    if not all(math.isfinite(s) for s in sigmas) or sigmas[0] != 1.0 or sigmas[-1] != 0.0:
        raise ValueError(
            f"{usage}: the first must be 1 (every job starts from pure noise) and the last 0, "
            f"got {sigmas}"
        )
    if any(b >= a for a, b in zip(sigmas, sigmas[1:], strict=False)):
        raise ValueError(f"{usage}, got {sigmas}")
    return sigmas


def two_experts_rule(name: str):
    def rule(value: Any, limits: Limits) -> Any:
        if not limits.two_experts:
            raise ValueError(
                f"{name} applies only to models with a high- and a low-noise expert (Wan 2.2 "
                "A14B); this model has one"
            )
        return value

    return rule


def check_across(values: dict[str, Any], body: dict[str, Any], limits: Limits) -> None:
    """The rules between fields; `values` are the checked fields (filled in place: the step
    count that `sigmas` fixes)."""
    sigmas = values.get("sigmas")
    steps = values["num_inference_steps"]
    if sigmas is not None:
        for name in ("scheduler", "shift", "flow_levels"):
            if values.get(name) not in (None, DEFAULT):
                raise ValueError(f"sigmas fix the noise levels: leave {name} out")
        if body.get("num_inference_steps") is not None and steps != len(sigmas) - 1:
            raise ValueError(
                f"num_inference_steps must be len(sigmas) - 1 = {len(sigmas) - 1}, got {steps}"
            )
        steps = values["num_inference_steps"] = len(sigmas) - 1
    switch = values.get("switch_step")
    if switch is not None and not 0 <= switch <= steps:
        raise ValueError(
            f"switch_step must be between 0 and num_inference_steps ({steps}), got {switch}"
        )
    mode = values.get("cfg_mode")
    if mode in (CFG_PLAIN, CFG_NORM) and values.get("cache") is not None:
        raise ValueError(
            f"cfg_mode {mode} runs both CFG branches in the unconditional call, where a step "
            "cache would take them for one: leave cache out"
        )
    if body.get("cfg_norm") is not None and mode != CFG_NORM:
        raise ValueError("cfg_norm is CFGNorm's strength: it needs cfg_mode norm")
    if mode == CFG_NORM and values["guidance_scale"] <= 1 and values.get("cfg_norm") != 1:
        # ComfyUI's CFGNorm at cfg 1 scales the conditional denoised image by its strength
        # (the norms' ratio is 1 there, but for the 1e-8); paradit runs one branch as it is
        raise ValueError(
            "cfg_norm other than 1 needs guidance_scale above 1 (one branch runs as it is)"
        )
    low = values.get("guidance_scale_low")
    if low is not None and low > 1 and values["guidance_scale"] <= 1:
        raise ValueError(
            "guidance_scale_low above 1 needs guidance_scale above 1 (the pipeline runs the "
            "negative branch for both experts or for neither)"
        )
    names = resolve_names(values, limits)
    if names is None:
        return
    sampler, scheduler, shift = names
    if steps < MIN_STEPS.get(sampler, 1):
        raise ValueError(f"{sampler} needs at least {MIN_STEPS[sampler]} steps, got {steps}")
    if sigmas is None and shift is None:
        raise ValueError("this model's shift depends on the image size: give shift with a sampler")
    if sigmas is None:  # `beta` drops repeated levels (ComfyUI then runs fewer steps)
        drop = sampler in DROPS_PENULTIMATE
        table = values.get("flow_levels") or NUM_LEVELS
        count = len(levels(scheduler, steps, shift, drop_penultimate=drop, table=table)) - 1
        if count != steps:
            raise ValueError(
                f"scheduler {scheduler} gives {count} distinct levels for {steps} steps: ask "
                f"for {count} steps or fewer"
            )


def resolve_names(values: dict[str, Any], limits: Limits) -> tuple[str, str, float | None] | None:
    """(sampler, scheduler, shift) a request runs with paradit's sampler, or None when it runs
    the model's own scheduler. A request that names any sampling field but leaves the sampler
    or scheduler at default gets ComfyUI's first choices (euler, simple); the shift left out is
    the model's (`default_shift`; None when the model has none)."""
    if all(values.get(name) in (None, DEFAULT) for name in SAMPLING_FIELDS):
        return None
    sampler = values.get("sampler") or DEFAULT
    scheduler = values.get("scheduler") or DEFAULT
    sampler = FALLBACK_SAMPLER if sampler == DEFAULT else sampler
    if values.get("sigmas") is not None:
        return sampler, "manual", None
    scheduler = FALLBACK_SCHEDULER if scheduler == DEFAULT else scheduler
    shift = values.get("shift") or (limits.default_shift or None)
    return sampler, scheduler, shift


@dataclass(frozen=True)
class SamplingChoice:
    """What a job runs instead of the model's own scheduler."""

    sampler: str
    scheduler: str
    """A spacing of SCHEDULERS, or "manual" for the request's own `sigmas`."""
    shift: float | None
    sigmas: tuple[float, ...]
    """All levels, ending in 0."""
    switch_step: int | None
    flow_levels: int | None = None
    """The table a scheduler picked the levels from (None for the request's own sigmas)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "sampler": self.sampler,
            "scheduler": self.scheduler,
            "shift": self.shift,
            "flow_levels": self.flow_levels,
            "sigmas": [round(s, 8) for s in self.sigmas],
        }


def resolve(request: Any, limits: Limits) -> SamplingChoice | None:
    """A validated request's sampling (None: the model's own scheduler)."""
    values = {name: getattr(request, name) for name in SAMPLING_FIELDS}
    names = resolve_names(values, limits)
    if names is None:
        return None
    sampler, scheduler, shift = names
    if request.sigmas is not None:
        return SamplingChoice(sampler, scheduler, shift, tuple(request.sigmas), request.switch_step)
    drop = sampler in DROPS_PENULTIMATE
    table = request.flow_levels or NUM_LEVELS
    steps = request.num_inference_steps
    sigmas = tuple(levels(scheduler, steps, shift, drop_penultimate=drop, table=table))
    return SamplingChoice(sampler, scheduler, shift, sigmas, request.switch_step, table)
