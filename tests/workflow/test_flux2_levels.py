"""ComfyUI's Flux2Scheduler against what paradit's Flux.2 and Flux.2 Klein jobs run (their
diffusers pipelines' own scheduler): the levels of a tiny job of each, read off the
scheduler after the job, equal the node's published formula (ComfyUI
`comfy_extras/nodes_flux.py`: t = 1, 1 - 1/steps, ..., 0; mu = Flux.2's empirical mu of
round(width x height / 256) tokens and the steps; sigma = e^mu / (e^mu + 1/t - 1)), written
out here. The finding the templates' refusal rests on: the levels agree (to float32), so
the scheduler is not what stands between the Flux.2 templates and a job.

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import math

import pytest
from image_jobs import run_image_job

from paradit.backend.models.presets import build_preset


def _empirical_mu(tokens: int, steps: int) -> float:
    """Flux.2's mu: linear in the tokens (two lines, at 10 and 200 steps), interpolated
    linearly in the steps; above 4300 tokens the 200-step line."""
    a1, b1 = 8.73809524e-05, 1.89833333
    a2, b2 = 0.00016927, 0.45666666
    if tokens > 4300:
        return a2 * tokens + b2
    at_200, at_10 = a2 * tokens + b2, a1 * tokens + b1
    slope = (at_200 - at_10) / 190.0
    return slope * steps + (at_200 - 200.0 * slope)


def flux2_scheduler_levels(steps: int, width: int, height: int) -> list[float]:
    """Flux2Scheduler's sigmas for its widgets (steps, width, height)."""
    mu = _empirical_mu(round(width * height / 256), steps)
    ts = [1 - k / steps for k in range(steps)]
    return [math.exp(mu) / (math.exp(mu) + 1 / t - 1) for t in ts] + [0.0]


@pytest.mark.parametrize("preset", ["tiny-flux2", "tiny-flux2-klein"])
def test_flux2_jobs_run_flux2_schedulers_levels(preset):
    pipe = build_preset(preset)
    body = {"prompt": "a lighthouse", "width": 64, "height": 48, "num_inference_steps": 3,
            "guidance_scale": 1.0, "seed": 3}  # fmt: skip
    run_image_job(pipe, body)
    ran = [float(s) for s in pipe.scheduler.sigmas]
    assert ran == pytest.approx(flux2_scheduler_levels(3, 64, 48), abs=2e-7)
