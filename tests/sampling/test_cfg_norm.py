"""ComfyUI's CFGNorm on Qwen-Image (`cfg_mode` norm, backend/sampling/guidance.py): a tiny
Qwen-Image job with it, run as the engine runs a job, ends on the latents of a loop written
here from the node's description (plain CFG; the guided and the conditional velocity as
denoised images; at every latent pixel the guided one scaled by the ratio of their norms over
the channels, never above 1, and by the strength), computed on the unpacked latent image, not
on the pipeline's packed tokens; the fields' rules. (2 ranks CFG-parallel against 1:
tests/families/test_qwen_image.py's `norm` job.) On Qwen-Image-Edit, whose DiT sees the
reference tokens after the output's: every step's velocity the pipeline steps with is
CFGNorm's, from the two raw branches the DiT returned, on the output tokens.

Cost: about 2 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
import torch
from image_jobs import encoded, qwen_image_cfg_loop, run_image_job

from paradit.backend.contract import TEXT_TO_IMAGE, Limits
from paradit.backend.models.presets import build_preset
from paradit.backend.request import JobRequest
from paradit.backend.sampling.guidance import cfg_norm

BODY = {"prompt": "a red fox in snow", "negative_prompt": "blurry", "width": 32, "height": 32,
        "num_inference_steps": 2, "guidance_scale": 4.0, "seed": 7, "cfg_mode": "norm"}  # fmt: skip


@pytest.fixture(scope="module")
def pipe():
    return build_preset("tiny-qwen-image")


def _comfy_cfg_norm(x, sigma, cond, uncond, cfg, strength):
    """CFGNorm as its node describes it, on [batch, channels, height, width] latents:
    denoised = x - sigma v; guided = uncond + cfg (cond - uncond); at each pixel the guided
    denoised image times min(1, |cond's| / (|guided's| + 1e-8)) times strength, the norms
    over the channels; back to a velocity (x - denoised) / sigma."""
    d_cond, d_uncond = x - sigma * cond, x - sigma * uncond
    d_guided = d_uncond + cfg * (d_cond - d_uncond)
    n_cond = d_cond.pow(2).sum(dim=1, keepdim=True).sqrt()
    n_guided = d_guided.pow(2).sum(dim=1, keepdim=True).sqrt()
    ratio = torch.minimum(n_cond / (n_guided + 1e-8), torch.ones_like(n_cond))
    return (x - d_guided * ratio * strength) / sigma


def _norm_loop(pipe, tensors: dict, body: dict, strength: float) -> np.ndarray:
    """The job's steps written out over diffusers' components, each step's two velocities
    unpacked to the latent image, combined by `_comfy_cfg_norm`, packed again."""
    height, width = body["height"], body["width"]
    channels = pipe.transformer.config.in_channels // 4

    def image(packed: torch.Tensor) -> torch.Tensor:  # [1, C, H, W]
        return pipe._unpack_latents(packed, height, width, pipe.vae_scale_factor)[:, :, 0]

    def combine(latents, sigma, c, u):
        v = _comfy_cfg_norm(image(latents), sigma, image(c), image(u),
                            body["guidance_scale"], strength)  # fmt: skip
        return pipe._pack_latents(v, 1, channels, v.shape[2], v.shape[3])

    return qwen_image_cfg_loop(pipe, tensors, body, combine)


@pytest.mark.parametrize("strength", [1.0, 0.9])
def test_norm_cfg_job_equals_a_cfg_norm_loop(pipe, strength):
    """`cfg_mode` norm (strength `cfg_norm`): the engine's job ends on the loop's latents
    (float32 rounding apart: the loop computes on the unpacked image); plain CFG and the
    pipeline's own rescale end elsewhere; the wrapper is gone after the job."""
    body = {**BODY, "cfg_norm": strength}
    tensors = encoded(pipe, body)
    _, norm, _ = run_image_job(pipe, body, tensors)
    want = _norm_loop(pipe, tensors, body, strength)
    np.testing.assert_allclose(norm, want, rtol=0, atol=1e-5)
    plain_body = {k: v for k, v in body.items() if k != "cfg_norm"}
    _, plain, _ = run_image_job(pipe, {**plain_body, "cfg_mode": "plain"}, tensors)
    assert np.abs(plain - want).max() > 1e-3  # CFGNorm scales down where plain CFG does not
    assert "forward" not in pipe.transformer.__dict__


def _png(width: int, height: int) -> str:
    from PIL import Image

    pixels = (np.random.RandomState(3).rand(height, width, 3) * 255).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return base64.b64encode(out.getvalue()).decode("ascii")


def test_norm_cfg_on_an_edit_steps_with_cfg_norm_of_the_raw_branches():
    """Qwen-Image-Edit (reference tokens after the output's): the DiT's raw calls recorded
    beneath the wrapper, the velocity the scheduler gets recorded above it; each step's is
    `_comfy_cfg_norm` of that step's two raw branches, on the output tokens unpacked."""
    edit = build_preset("tiny-qwen-image-edit")
    edit.set_progress_bar_config(disable=True)
    body = {"prompt": "make it red", "negative_prompt": "blurry", "image": _png(32, 32),
            "width": 32, "height": 32, "num_inference_steps": 2, "guidance_scale": 3.0,
            "seed": 4, "cfg_mode": "norm", "cfg_norm": 0.9}  # fmt: skip
    raw, stepped = [], []
    forward = edit.transformer.forward

    def spy(*args, **kwargs):
        out = forward(*args, **kwargs)
        raw.append((kwargs["hidden_states"], kwargs["timestep"], out[0]))
        return out

    step = edit.scheduler.step

    def step_spy(model_output, *args, **kwargs):
        stepped.append(model_output.clone())
        return step(model_output, *args, **kwargs)

    edit.transformer.forward, edit.scheduler.step = spy, step_spy
    try:
        run_image_job(edit, body)
    finally:
        del edit.transformer.forward, edit.scheduler.step
    assert len(raw) == 4 and len(stepped) == 2  # two branches a step beneath the wrapper
    channels = edit.transformer.config.in_channels // 4

    def image(packed: torch.Tensor) -> torch.Tensor:
        tokens = packed[:, : stepped[0].shape[1]]  # the output's, before the references'
        return edit._unpack_latents(tokens, 32, 32, edit.vae_scale_factor)[:, :, 0]

    for k, velocity in enumerate(stepped):
        (x, sigma, cond), (_, _, uncond) = raw[2 * k], raw[2 * k + 1]
        want = _comfy_cfg_norm(image(x), sigma, image(cond), image(uncond), 3.0, 0.9)
        want = edit._pack_latents(want, 1, channels, want.shape[2], want.shape[3])
        # float32 rounding apart (the norms summed in another order, then over sigma)
        torch.testing.assert_close(velocity, want, rtol=1e-5, atol=1e-5)


@pytest.mark.fast
def test_cfg_norm_scales_down_never_up():
    """One packed token of 2 channels x 4 pixels: where the guided denoised pixel is longer
    than the conditional one it is scaled to its length, where shorter it is kept."""
    x = torch.zeros(1, 1, 8)
    sigma = torch.tensor([1.0])
    # velocity = -denoised at sigma 1, x 0; value c * 4 + pixel
    cond = -torch.tensor([[[3.0, 1.0, 0.0, 0.0, 4.0, 1.0, 0.0, 0.0]]])
    guided = -torch.tensor([[[6.0, 0.5, 0.0, 0.0, 8.0, 0.5, 0.0, 0.0]]])
    out = -cfg_norm(x, sigma, cond, guided, 1.0, 4)
    # pixel 0: |(6, 8)| = 10 over |(3, 4)| = 5 -> halved; pixel 1: |(0.5, 0.5)| < |(1, 1)| kept
    want = torch.tensor([[[3.0, 0.5, 0.0, 0.0, 4.0, 0.5, 0.0, 0.0]]])
    torch.testing.assert_close(out, want, rtol=0, atol=1e-6)
    torch.testing.assert_close(-cfg_norm(x, sigma, cond, guided, 0.5, 4), want * 0.5)
    with pytest.raises(ValueError, match="noise level above 0"):
        cfg_norm(x, torch.tensor([0.0]), cond, guided, 1.0, 4)


LIMITS = Limits(task=TEXT_TO_IMAGE, size_multiple=16, min_size=16, max_size=64,
                frame_multiple=0, max_frames=1, plain_cfg=True)  # fmt: skip


@pytest.mark.fast
def test_cfg_mode_norm_rules():
    body = {"prompt": "a fox", "guidance_scale": 4.0}
    with pytest.raises(ValueError, match="limits.cfg_norm_pixels is 0"):
        JobRequest.from_body({**body, "cfg_mode": "norm"}, LIMITS)
    normed = Limits(**{**LIMITS.to_dict(), "cfg_norm_pixels": 4})
    request = JobRequest.from_body({**body, "cfg_mode": "norm"}, normed)
    assert (request.cfg_mode, request.cfg_norm) == ("norm", 1.0)
    stronger = JobRequest.from_body({**body, "cfg_mode": "norm", "cfg_norm": 2.5}, normed)
    assert stronger.cfg_norm == 2.5
    with pytest.raises(ValueError, match="it needs cfg_mode norm"):
        JobRequest.from_body({**body, "cfg_mode": "plain", "cfg_norm": 2.0}, normed)
    with pytest.raises(ValueError, match="cfg_norm"):
        JobRequest.from_body({**body, "cfg_mode": "norm", "cfg_norm": 101}, normed)
    with pytest.raises(ValueError, match="needs guidance_scale above 1"):
        JobRequest.from_body({**body, "guidance_scale": 1.0, "cfg_mode": "norm", "cfg_norm": 2},
                             normed)  # fmt: skip
    cached = Limits(**{**normed.to_dict(), "step_cache": True})
    with pytest.raises(ValueError, match="cfg_mode norm runs both"):
        JobRequest.from_body({**body, "cfg_mode": "norm", "cache": {"method": "first-block"}},
                             cached)  # fmt: skip
