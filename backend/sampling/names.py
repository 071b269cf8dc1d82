"""The sampling names every frontend shows, torch-free: samplers, schedulers, the word for the
model's own, and the rule on which samplers compute one step more (ComfyUI's)."""

from __future__ import annotations

from .schedules import SCHEDULERS

DEFAULT = "default"
"""`sampler` / `scheduler`: the model's own scheduler, as diffusers ships it."""

SAMPLERS = (
    "euler",
    "uni_pc",
    "uni_pc_bh2",
    "dpmpp_2m",
    "lcm",
    "res_multistep",
    "euler_ancestral",
    "gradient_estimation",
)
"""The samplers paradit runs, with ComfyUI's names (`uni_pc` is UniPC bh1, as ComfyUI's)."""

DROPS_PENULTIMATE = frozenset({"uni_pc", "uni_pc_bh2"})
"""Samplers that ComfyUI's KSampler runs on levels computed for one step more, the
next-to-last one dropped."""

MIN_STEPS = {"uni_pc": 2, "uni_pc_bh2": 2}
"""UniPC's first step only evaluates the model: one step would not move x."""

CFG_MODEL, CFG_PLAIN, CFG_NORM = "model", "plain", "norm"
CFG_MODES = (CFG_MODEL, CFG_PLAIN, CFG_NORM)
"""`cfg_mode`: the model's own pipeline's CFG combination, ComfyUI's plain one, or the plain
one followed by ComfyUI's CFGNorm node (sampling/guidance.py)."""

FALLBACK_SAMPLER, FALLBACK_SCHEDULER = "euler", "simple"
"""What a job gets when it names a scheduler, shift, levels or switch step but leaves the
sampler (or the scheduler) at `default`: ComfyUI's KSampler's first choices."""

__all__ = [
    "CFG_MODEL",
    "CFG_MODES",
    "CFG_NORM",
    "CFG_PLAIN",
    "DEFAULT",
    "DROPS_PENULTIMATE",
    "FALLBACK_SAMPLER",
    "FALLBACK_SCHEDULER",
    "MIN_STEPS",
    "SAMPLERS",
    "SCHEDULERS",
]
