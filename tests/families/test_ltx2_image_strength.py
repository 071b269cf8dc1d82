"""LTX-2's start image at a strength below 1 (request `image_strength`, `ltx2/strength.py`),
sampled as ComfyUI samples `LTXVImgToVideoInplace`'s noise mask: a job on tiny-ltx2.3 at
world size 1 against a ComfyUI loop written here from its code over the same DiT calls; the
field's rules (declared by LTX-2's limits, refused elsewhere, only with an image and without a
last frame, stage 1's of a two-stage job); strength 1 the image-to-video job byte for byte.
2 ranks against 1 is the family contract's job "image strength" (`ltx2/tiny_job.py`).

The reference loop, as read in ComfyUI (comfy/samplers.py `KSAMPLER.sample`,
`KSamplerX0Inpaint`; comfy_extras/nodes_lt.py `LTXVImgToVideoInplace`; comfy/model_base.py
`LTXAV`; comfy/k_diffusion/sampling.py `sample_euler`): with m = 1 - strength on the image's
tokens (1 elsewhere) the state x starts at sigma_0 noise + (1 - sigma_0) latent; each step the
model gets m x + (1 - m) clean at timestep m sigma; x0 = m (input - sigma v) + (1 - m) clean;
Euler moves x: x + (sigma' - sigma) (x - x0) / sigma; the output is the last x. diffusers'
`LTX2ConditionPipeline` (first frame at the strength) supplies the DiT calls (its inputs,
timesteps and text), a forward hook records each call's input and velocity, and its step
callback replaces its latents by ComfyUI's next model input (the last: x). Its first input is
ComfyUI's first (its noise_scale is sigma_0), from which x_0 = (input - (1 - m) clean) / m.

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import base64
import io

import pytest
import torch
from image_jobs import preset_pipeline, run_here
from PIL import Image

from paradit.backend.contract import IMAGE_TO_VIDEO, TEXT_TO_VIDEO, Limits
from paradit.backend.models.families.base import same_components_as
from paradit.backend.models.families.ltx2 import strength
from paradit.backend.models.families.ltx2.guidance import PLAIN_CFG
from paradit.backend.models.families.ltx2.tiny_job import IMAGE_STRENGTH, STRENGTH_LEVELS
from paradit.backend.request import JobRequest

S = IMAGE_STRENGTH["image_strength"]
IMAGE = IMAGE_STRENGTH["image"]


def comfyui_loop(pipe, body) -> torch.Tensor:
    """The video latents (as the pipeline's "latent" output: denormalised, 5-D) of ComfyUI's
    loop for `body` (see the module's docstring), unguided, euler over its levels."""
    from diffusers import FlowMatchEulerDiscreteScheduler, LTX2ConditionPipeline
    from diffusers.pipelines.ltx2.pipeline_ltx2_condition import LTX2VideoCondition

    run = same_components_as(pipe, LTX2ConditionPipeline)
    run.set_progress_bar_config(disable=True)
    # the levels as given (no shift): the DiT's timesteps are sigma x 1000
    run.scheduler = FlowMatchEulerDiscreteScheduler.from_config(
        pipe.scheduler.config, use_dynamic_shifting=False, shift_terminal=None, shift=1.0
    )
    levels = STRENGTH_LEVELS
    made: dict[str, torch.Tensor] = {}
    prepare = run.prepare_latents

    def prepare_latents(*args, **kwargs):
        latents, mask, clean, coords = prepare(*args, **kwargs)
        made.update(m=1 - mask, clean=clean)
        return latents, mask, clean, coords

    run.prepare_latents = prepare_latents
    calls: list[tuple[torch.Tensor, torch.Tensor]] = []

    def record(module, args, kwargs, out):
        calls.append((kwargs["hidden_states"].float(), out[0].float()))

    state: dict[str, torch.Tensor] = {}

    def comfyui_step(_pipe, i, _t, kwargs):
        m, clean = made["m"], made["clean"]
        model_input, v = calls[i]
        sigma, after = levels[i], levels[i + 1]
        if "x" not in state:
            state["x"] = (model_input - (1 - m) * clean) / m
        x = state["x"]
        x0 = m * (model_input - sigma * v) + (1 - m) * clean
        x = x + (after - sigma) * (x - x0) / sigma
        state["x"] = x
        last = i == len(levels) - 2
        return {"latents": x if last else m * x + (1 - m) * clean}

    image = Image.open(io.BytesIO(base64.b64decode(body["image"]))).convert("RGB")
    hook = run.transformer.register_forward_hook(record, with_kwargs=True)
    try:
        with torch.no_grad():
            video, _audio = run(
                conditions=[LTX2VideoCondition(frames=image, index=0, strength=S, crf=0)],
                prompt=body["prompt"], negative_prompt=body["negative_prompt"],
                height=body["height"], width=body["width"], num_frames=body["num_frames"],
                frame_rate=24.0, sigmas=levels[:-1], num_inference_steps=len(levels) - 1,
                guidance_scale=1.0, audio_guidance_scale=1.0, max_sequence_length=32,
                generator=torch.Generator().manual_seed(body["seed"]),
                callback_on_step_end=comfyui_step, output_type="latent", return_dict=False,
                **PLAIN_CFG,
            )  # fmt: skip
    finally:
        hook.remove()
    assert len(calls) == len(levels) - 1
    return video


@pytest.fixture(scope="module")
def pipe():
    return preset_pipeline("tiny-ltx2.3", 128)[0]


def test_world_size_1_equals_comfyuis_loop(pipe):
    """The job's final latents are ComfyUI's loop's (within float32 rounding: the wrapper
    recovers x0 from the velocity the pipeline hands its scheduler); diffusers' own
    condition pipeline at the same strength is far from both on the image's latent frame."""
    _, result = run_here(pipe, dict(IMAGE_STRENGTH))
    want = comfyui_loop(pipe, IMAGE_STRENGTH)
    assert result.latents.shape == want.shape
    torch.testing.assert_close(result.latents, want, rtol=1e-5, atol=1e-5)
    # the wrapper matters: without it (diffusers stepping its input) the first frame differs
    with_plain = _diffusers_stepping(pipe, IMAGE_STRENGTH)
    first = (with_plain - want)[:, :, 0].abs().max()
    assert float(first) > 1e-3, float(first)


def _diffusers_stepping(pipe, body) -> torch.Tensor:
    """The job with the condition pipeline's own stepping (the scheduler not wrapped)."""
    original = strength.ComfyState.step

    def plain(self, model_output, timestep, sample, return_dict=True, **kwargs):
        self._index += 1
        return self.inner.step(model_output, timestep, sample, return_dict=return_dict)

    strength.ComfyState.step = plain
    try:
        return run_here(pipe, dict(body))[1].latents
    finally:
        strength.ComfyState.step = original


def test_strength_1_is_the_image_to_video_job_byte_for_byte(pipe):
    body = {k: v for k, v in IMAGE_STRENGTH.items() if k != "image_strength"}
    frames, result = run_here(pipe, body)
    same, again = run_here(pipe, {**body, "image_strength": 1.0})
    assert torch.equal(result.latents, again.latents)
    assert (frames == same).all()


def _limits(**declared) -> Limits:
    return Limits(
        TEXT_TO_VIDEO, 32, 64, 2048, 8, 481, default_frames=9, accepts_image=True, **declared
    )


@pytest.mark.fast
def test_the_field_is_declared_by_the_family_and_refused_elsewhere():
    limits = _limits(image_strength=True, last_frame=True, two_stage=True)
    request = JobRequest.from_body({"prompt": "p", "image": IMAGE, "image_strength": 0.7}, limits)
    assert request.image_strength == 0.7
    assert JobRequest.from_body({"prompt": "p", "image": IMAGE}, limits).image_strength is None
    with pytest.raises(ValueError, match="limits.image_strength is false"):
        JobRequest.from_body({"prompt": "p", "image": IMAGE, "image_strength": 0.7}, _limits())
    with pytest.raises(ValueError, match="image_strength needs an image"):
        JobRequest.from_body({"prompt": "p", "image_strength": 0.7}, limits)
    with pytest.raises(ValueError, match="not run with last_image"):
        JobRequest.from_body(
            {"prompt": "p", "image": IMAGE, "last_image": IMAGE, "image_strength": 0.5}, limits
        )
    with pytest.raises(ValueError, match="image_strength"):
        JobRequest.from_body({"prompt": "p", "image": IMAGE, "image_strength": 1.5}, limits)


@pytest.mark.fast
def test_stage_2_writes_the_image_at_full_strength():
    from paradit.backend.runtime.stages import stage_requests

    limits = Limits(IMAGE_TO_VIDEO, 32, 64, 2048, 8, 481, default_frames=9, needs_image=True,
                    image_strength=True, two_stage=True, upscale_factors=(2,))  # fmt: skip
    body = {"prompt": "p", "image": IMAGE, "image_strength": 0.7, "width": 128, "height": 128}
    request = JobRequest.from_body({**body, "upscale": {"factor": 2}}, limits)
    first, second = stage_requests(request, limits)
    assert (first.image_strength, second.image_strength) == (0.7, None)
