"""Why LTX-2's start image at a strength below 1 (`LTXVImgToVideoInplace` at 0.7 in ComfyUI's
LTX-2.3 and 2.5 image-to-video templates) needs paradit's wrapper (`ltx2/strength.py`):
diffusers 0.42.1's `LTX2ConditionPipeline` takes a condition `strength`, but called as it is
its stepping is not ComfyUI's noise mask. The claim the wrapper's docstring makes is checked
here against the installed pipeline, so a diffusers that changed its loop fails this file and
the question is asked again (the wrapper against ComfyUI's loop:
tests/families/test_ltx2_image_strength.py).

ComfyUI, as read (comfy_extras/nodes_lt.py `LTXVImgToVideoInplace`: the image's latent frame
under a noise mask m = 1 - strength; comfy/samplers.py `KSamplerX0Inpaint` and `KSAMPLER.sample`;
comfy/model_base.py `LTXAV.process_timestep`, `scale_latent_inpaint` returning the clean
latent; k-diffusion's `sample_euler`, the templates' sampler): the sampler's state x starts at
sigma_0 x noise + (1 - sigma_0) x the latent; each step the model is given
m x + (1 - m) x clean at timestep m x sigma on the image's tokens, its x0 there is
m x (model input - sigma x v) + (1 - m) x clean, and Euler moves the state x.
diffusers (pipeline_ltx2_condition.py): the same per-token timestep (t x (1 - strength)) and
the same x0 blend, and its first latent (noise_scale = sigma_0) is ComfyUI's first model input,
but its state is the blend itself: Euler moves the model's input. From the second step on
ComfyUI's model input on the image's tokens is (sigma_i - sigma_i+1) / sigma_i x strength x
(clean - x0) nearer the image; elsewhere the two agree.

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from diffusers import LTX2ConditionPipeline
from diffusers.pipelines.ltx2.pipeline_ltx2_condition import LTX2VideoCondition
from PIL import Image

from paradit.backend.models.families.base import same_components_as
from paradit.backend.models.families.ltx2 import strength
from paradit.backend.models.families.ltx2.guidance import PLAIN_CFG
from paradit.backend.models.presets import build_preset

S = 0.7  # the templates' strength
IMAGE_TOKENS = 4  # 64x64 px: 2 x 2 tokens in the first latent frame (of 2)


def _two_steps() -> tuple[list[tuple[torch.Tensor, ...]], torch.Tensor, torch.Tensor, Any]:
    """tiny-ltx2.3 through `LTX2ConditionPipeline` with the start image at strength S, 2
    unguided steps: each DiT call's (input, per-token timestep, velocity), the clean latent and
    conditioning mask `prepare_latents` made, and the scheduler's levels."""
    pipe = same_components_as(build_preset("tiny-ltx2.3"), LTX2ConditionPipeline)
    pipe.set_progress_bar_config(disable=True)
    calls: list[tuple[torch.Tensor, ...]] = []

    def record(module, args, kwargs, out):
        calls.append((kwargs["hidden_states"].clone(), kwargs["timestep"].clone(), out[0].clone()))

    made: dict[str, torch.Tensor] = {}
    prepare = pipe.prepare_latents

    def prepare_latents(*args, **kwargs):
        latents, mask, clean, coords = prepare(*args, **kwargs)
        made.update(mask=mask.clone(), clean=clean.clone())
        return latents, mask, clean, coords

    pipe.prepare_latents = prepare_latents
    hook = pipe.transformer.register_forward_hook(record, with_kwargs=True)
    pixels = np.random.default_rng(0).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    condition = LTX2VideoCondition(frames=Image.fromarray(pixels), index=0, strength=S, crf=0)
    try:
        with torch.no_grad():
            pipe(
                conditions=[condition], prompt="a kite", height=64, width=64, num_frames=9,
                sigmas=[1.0, 0.5], guidance_scale=1.0, audio_guidance_scale=1.0,
                max_sequence_length=32, generator=torch.Generator().manual_seed(3),
                output_type="latent", return_dict=False, **PLAIN_CFG,
            )  # fmt: skip
    finally:
        hook.remove()
    return calls, made["clean"], made["mask"], pipe.scheduler.sigmas


def test_the_condition_pipelines_strength_is_not_comfyuis_noise_mask():
    calls, clean, mask, sigmas = _two_steps()
    assert len(calls) == 2
    (y0, t0, v0), (y1, t1, _v1) = calls
    image = torch.arange(y0.shape[1]) < IMAGE_TOKENS
    assert torch.equal(mask[0, :, 0], torch.where(image, S, 0.0))
    s0, s1 = sigmas[0], sigmas[1]
    # agreed: the image's tokens at (1 - strength) of each step's timestep (ComfyUI's m x sigma)
    for t, level in ((t0, s0), (t1, s1)):
        want = torch.where(image, (1 - S) * level * 1000, level * 1000)
        torch.testing.assert_close(t[0], want.to(t.dtype))
    # agreed: the x0 on the image's tokens, m x (input - sigma x v) + (1 - m) x clean
    x0 = (1 - mask) * (y0 - s0 * v0) + mask * clean
    # diffusers steps its input: Euler from y0 to the x0 above
    torch.testing.assert_close(y1, y0 + (s1 - s0) / s0 * (y0 - x0))
    # ComfyUI steps its own state (noise at sigma_0 = 1, recovered from the blend) and gives
    # the model the blend of the next state
    state = torch.where(mask > 0, (y0 - mask * clean) / (1 - mask), y0)
    state = state + (s1 - s0) / s0 * (state - x0)
    comfy = (1 - mask) * state + mask * clean
    torch.testing.assert_close(comfy - y1, (s0 - s1) / s0 * mask * (clean - x0))
    apart = (comfy - y1).abs().amax(dim=-1)[0]
    assert bool((apart[image] > 1e-2).all()), apart
    assert float(apart[~image].max()) == 0.0
    # the wrapper's docstring says so
    said = " ".join(strength.__doc__.split())
    assert "LTX2ConditionPipeline" in said and "its scheduler moves y" in said
