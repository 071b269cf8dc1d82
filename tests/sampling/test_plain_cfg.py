"""Plain CFG on a pipeline that combines its branches its own way (`cfg_mode` plain,
backend/sampling/guidance.py): a tiny Qwen-Image job with it, run as the engine runs a job,
ends on the latents of a plain-CFG loop written here over diffusers' components (the
pipeline's own job, which rescales to the conditional norm, does not); the field's rules.

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import numpy as np
import pytest
from image_jobs import encoded, qwen_image_cfg_loop, run_image_job

from paradit.backend.contract import TEXT_TO_IMAGE, Limits
from paradit.backend.models.presets import build_preset
from paradit.backend.request import JobRequest

BODY = {"prompt": "a red fox in snow", "negative_prompt": "blurry", "width": 32, "height": 32,
        "num_inference_steps": 2, "guidance_scale": 4.0, "seed": 7}  # fmt: skip


@pytest.fixture(scope="module")
def pipe():
    return build_preset("tiny-qwen-image")


def _plain_loop(pipe, tensors: dict, body: dict) -> np.ndarray:
    """The job's steps written out: the pipeline's latents, levels and transformer calls,
    combined as ComfyUI's samplers combine them: uncond + cfg x (cond - uncond)."""
    scale = body["guidance_scale"]
    return qwen_image_cfg_loop(pipe, tensors, body, lambda x, sigma, c, u: u + scale * (c - u))


def test_plain_cfg_job_equals_a_plain_cfg_loop(pipe):
    """`cfg_mode` plain: the engine's job ends on the hand-written loop's latents, bit for
    bit; `model` (Qwen-Image's rescale to the conditional norm, the default) on others."""
    tensors = encoded(pipe, BODY)
    _, plain, _ = run_image_job(pipe, {**BODY, "cfg_mode": "plain"}, tensors)
    want = _plain_loop(pipe, tensors, BODY)
    assert np.array_equal(plain, want)
    _, own, _ = run_image_job(pipe, BODY, tensors)
    assert np.abs(own - want).max() > 1e-3  # the rescale changes the steps
    # the wrapper is gone after the job: the next one runs the pipeline's own again
    _, again, _ = run_image_job(pipe, BODY, tensors)
    assert np.array_equal(again, own)
    assert "forward" not in pipe.transformer.__dict__


LIMITS = Limits(task=TEXT_TO_IMAGE, size_multiple=16, min_size=16, max_size=64,
                frame_multiple=0, max_frames=1)  # fmt: skip


@pytest.mark.fast
def test_cfg_mode_plain_needs_a_model_that_switches():
    body = {"prompt": "a fox", "guidance_scale": 4.0}
    assert JobRequest.from_body(body, LIMITS).cfg_mode == "model"
    with pytest.raises(ValueError, match="limits.plain_cfg is false"):
        JobRequest.from_body({**body, "cfg_mode": "plain"}, LIMITS)
    plain = Limits(**{**LIMITS.to_dict(), "plain_cfg": True})
    assert JobRequest.from_body({**body, "cfg_mode": "plain"}, plain).cfg_mode == "plain"
    with pytest.raises(ValueError, match="cfg_mode must be one of"):
        JobRequest.from_body({**body, "cfg_mode": "rescaled"}, plain)
    cached = Limits(**{**LIMITS.to_dict(), "plain_cfg": True, "step_cache": True})
    with pytest.raises(ValueError, match="leave cache out"):
        JobRequest.from_body({**body, "cfg_mode": "plain", "cache": {"method": "first-block"}},
                             cached)  # fmt: skip
