"""Qwen-Image-Edit with `image_prep` comfyui (families/qwen_image_edit/comfyui_prep.py): the
sizes and pixel values ComfyUI's nodes make, worked by hand; the vision tower's patches in
transformers' own layout; a tiny Edit-Plus job at world size 1 equals diffusers' components
driven by hand with the same prepared inputs (the text encoder on ComfyUI's pixels, the VAE on
the area-averaged reference padded to even latent sides, the DiT with those token grids and
a rotary table of ComfyUI's positions built here); `reference_method` index_timestep_zero
equals diffusers' `zero_cond_t`; the fields refused by models without them; paradit's
samplers on the edit. (3 and 2 ranks against 1: the family contract's "comfyui" job, the
2511 templates' whole job.)

Cost: about 20 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
import torch
from image_jobs import encoded, run_image_job
from PIL import Image

from paradit.backend.contract import Limits
from paradit.backend.models.families.qwen_image_edit import comfyui_prep as prep
from paradit.backend.request import JobRequest

SETTINGS = prep.VisionSettings(14, 2, 2, (0.5, 0.4, 0.3), (0.2, 0.25, 0.3), 3136, 12845056)


@pytest.mark.fast
def test_sizes_worked_by_hand():
    """64x48 at 1024x1024 in sides of 8: scale sqrt(1048576 / 3072) = 18.475, 1182.4 -> 1184,
    886.8 -> 888 (diffusers' multiples of 32 give 1184x896); at 384x384 whole pixels:
    443.4 -> 443, 332.6 -> 333; the vision sides to multiples of 28: 448x336; below the
    least pixels scaled up (ceiled), above the most scaled down (floored)."""
    assert prep.scaled_size(64, 48, prep.REFERENCE_PIXELS, 8) == (1184, 888)
    assert prep.scaled_size(64, 48, prep.VISION_PIXELS, 1) == (443, 333)
    assert prep.vision_size(443, 333, SETTINGS) == (448, 336)
    assert prep.vision_size(20, 30, SETTINGS) == (56, 84)  # 28x28 < 3136: sqrt(3136/600)
    small = prep.VisionSettings(14, 2, 2, (0, 0, 0), (1, 1, 1), 784, 784 * 4)
    assert prep.vision_size(100, 50, small) == (56, 28)  # 112x56 > 3136: floored
    with pytest.raises(ValueError, match="a side under 8"):
        prep.scaled_size(100000, 1, prep.REFERENCE_PIXELS, 8)


@pytest.mark.fast
def test_area_averaging_and_even_padding_worked_by_hand():
    """Area averaging halves a 4x2 ramp to the means of its 2x2 blocks, in float; odd latent
    sides wrap around: row 0 repeats below, column 0 to the right."""
    ramp = torch.arange(8, dtype=torch.float32).view(1, 1, 2, 4)
    assert prep.area_resize(ramp, 2, 1).flatten().tolist() == [2.5, 4.5]
    latents = torch.arange(6, dtype=torch.float32).view(1, 1, 3, 2)
    padded = prep.pad_even(latents)
    assert padded[0, 0].tolist() == [[0, 1], [2, 3], [4, 5], [0, 1]]
    image = Image.fromarray(np.array([[[255, 0, 51]]], dtype=np.uint8))
    assert prep.to_float(image).flatten().tolist() == [1.0, 0.0, pytest.approx(0.2)]


@pytest.mark.fast
def test_vision_patches_in_transformers_layout():
    """The patches equal transformers' `Qwen2VLImageProcessor` given the same float image
    (resized already, not rescaled): the layout the vision tower reads."""
    from transformers import Qwen2VLImageProcessor

    pixels = torch.rand(1, 3, 40, 70, generator=torch.Generator().manual_seed(0))
    values, grid, size = prep.vision_input(pixels, SETTINGS)
    width, height = prep.scaled_size(70, 40, prep.VISION_PIXELS, 1)
    small = prep.area_resize(pixels, width, height)
    resized = torch.nn.functional.interpolate(
        small, size=size[::-1], mode="bilinear", align_corners=False
    )
    processor = Qwen2VLImageProcessor(
        do_resize=False, do_rescale=False, image_mean=list(SETTINGS.mean),
        image_std=list(SETTINGS.std), patch_size=14, temporal_patch_size=2, merge_size=2,
    )  # fmt: skip
    theirs = processor(
        images=[resized[0].numpy()], return_tensors="pt", input_data_format="channels_first"
    )
    assert grid.tolist() == theirs["image_grid_thw"].tolist() == [[1, size[1] // 14, size[0] // 14]]
    torch.testing.assert_close(values, theirs["pixel_values"], rtol=0, atol=1e-6)


def _png(width: int, height: int) -> str:
    pixels = np.random.default_rng(3).integers(0, 256, (height, width, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return base64.b64encode(out.getvalue()).decode("ascii")


EDIT = Limits(task="image-edit", size_multiple=16, min_size=16, max_size=64, frame_multiple=0,
              max_frames=1, needs_image=True, accepts_image=True, edit_pixels=32 * 32)  # fmt: skip


@pytest.mark.fast
def test_image_prep_is_refused_without_it():
    body = {"prompt": "x", "image": _png(8, 8), "image_prep": "comfyui"}
    with pytest.raises(ValueError, match="limits.image_preps"):
        JobRequest.from_body(body, EDIT)
    comfy = Limits(**{**EDIT.to_dict(), "image_preps": ("comfyui",)})
    with pytest.raises(ValueError, match="image_prep must be one of"):
        JobRequest.from_body({**body, "image_prep": "pil"}, comfy)
    assert JobRequest.from_body(body, comfy).to_dict()["image_prep"] == "comfyui"
    assert JobRequest.from_body({"prompt": "x", "image": body["image"]}, EDIT).image_prep == (
        "pipeline"
    )


# A 3:2 input: its reference is 1256x840 pixels (diffusers' 1248x832), 157x105 latents
# wrapped to 158x106: 79x53 tokens, odd counts; the 48x32 output's 3 columns are odd too,
# and its text starts at position 1 in ComfyUI (diffusers': the reference's 39).
JOB = {"prompt": "make the fox red", "negative_prompt": "blurry", "width": 48, "height": 32,
       "num_inference_steps": 2, "guidance_scale": 4.0, "seed": 5, "image": _png(60, 40),
       "image_prep": "comfyui"}  # fmt: skip


@pytest.fixture(scope="module")
def edit():
    from paradit.backend.models.presets import build_preset

    pipe = build_preset("tiny-qwen-image-edit")
    pipe.set_progress_bar_config(disable=True)
    return pipe


def _embeds(pipe, prompt: str, image, first: bool = False) -> torch.Tensor:
    """The text encoder on the pipeline's template and ComfyUI's vision pixels, by hand
    (`first`: the first model's pipeline, its one image at the reference's 1024x1024)."""
    settings = prep.VisionSettings.of(pipe.processor.image_processor)
    area = prep.REFERENCE_PIXELS if first else prep.VISION_PIXELS
    values, grid, size = prep.vision_input(prep.to_float(image), settings, area)
    # Edit-Plus: 470x314 (60x40 at 384x384) to multiples of 28; the first model: 1254x836,
    # above the tiny processor's 1003520 pixels: floored to 1204x812
    assert size == ((1204, 812) if first else (476, 308))
    if first:
        text = pipe.prompt_template_encode.format(prompt)
    else:
        text = pipe.prompt_template_encode.format(
            "Picture 1: <|vision_start|><|image_pad|><|vision_end|>" + prompt
        )
    inputs = pipe.processor(text=[text], images=[Image.new("RGB", size)], return_tensors="pt")
    out = pipe.text_encoder(
        input_ids=inputs["input_ids"],
        attention_mask=inputs["attention_mask"],
        pixel_values=values,
        image_grid_thw=grid,
        output_hidden_states=True,
    )
    return out.hidden_states[-1][:, pipe.prompt_template_encode_start_idx :]


def _reference(pipe, image, first: bool = False) -> torch.Tensor:
    """Edit-Plus: the 60x40 image at 1256x840 by area averaging (scale sqrt(1048576 / 2400) =
    20.902: 1254.1 / 8 -> 157, 836.1 / 8 = 104.51 -> 105), VAE-encoded (its mode, normalised),
    its 157x105 latents wrapped to 158x106, packed: 79x53 tokens. The first model: at 1254x836
    (whole pixels), the VAE given the centre 1248x832 (from column 3, row 2): 78x52 tokens."""
    size = (836, 1254) if first else (840, 1256)
    pixels = torch.nn.functional.interpolate(prep.to_float(image), size, mode="area")
    if first:
        pixels = pixels[..., 2:834, 3:1251]
    config = pipe.vae.config
    z = pipe.vae.encode((pixels * 2 - 1).unsqueeze(2)).latent_dist.mode()
    mean = torch.tensor(config.latents_mean).view(1, -1, 1, 1, 1)
    std = torch.tensor(config.latents_std).view(1, -1, 1, 1, 1)
    z = ((z - mean) / std)[:, :, 0]
    if first:
        assert z.shape[-2:] == (104, 156)
        return pipe._pack_latents(z, 1, z.shape[1], 104, 156)
    assert z.shape[-2:] == (105, 157)
    z = torch.cat([z, z[..., :1, :]], dim=-2)
    z = torch.cat([z, z[..., :1]], dim=-1)
    return pipe._pack_latents(z, 1, z.shape[1], 106, 158)


def _comfy_rope(rope, shapes: list, text_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The rotary table as ComfyUI's Qwen DiT positions its tokens: image k at frame k, rows
    and columns 0..n-1 minus n // 2, the text from max(rows // 2, columns // 2) of the
    output on, each axis's angles from its own positions."""

    def table(frames, rows, cols) -> torch.Tensor:
        positions = (frames, rows, cols)
        axes = [rope.rope_params(positions[i].flatten(), dim, rope.theta)
                for i, dim in enumerate(rope.axes_dim)]  # fmt: skip
        return torch.cat(axes, dim=1)

    images = []
    for k, (_, rows, cols) in enumerate(shapes):
        r = (torch.arange(rows) - rows // 2).view(-1, 1).expand(rows, cols)
        c = (torch.arange(cols) - cols // 2).view(1, -1).expand(rows, cols)
        images.append(table(torch.full((rows, cols), k), r, c))
    start = max(shapes[0][1] // 2, shapes[0][2] // 2)
    text = torch.arange(start, start + text_len)
    return torch.cat(images), table(text, text, text)


def _velocity(pipe, both, t, embeds, shapes) -> torch.Tensor:
    """The DiT on `both` (output then reference tokens) with ComfyUI's rotary table."""
    rope = pipe.transformer.pos_embed
    table = _comfy_rope(rope, shapes[0], embeds.shape[1])
    rope.forward = lambda *_args, **_kwargs: table
    try:
        return pipe.transformer(
            hidden_states=both,
            timestep=t.expand(1).to(both.dtype) / 1000,
            encoder_hidden_states=embeds,
            encoder_hidden_states_mask=torch.ones(embeds.shape[:2], dtype=torch.long),
            img_shapes=shapes,
            return_dict=False,
        )[0]
    finally:
        del rope.forward


def _by_hand(pipe, body: dict, zero: bool = False, first: bool = False) -> np.ndarray:
    """The job's steps over diffusers' components: the pipeline's noise, levels, true CFG and
    rescale, the DiT on the output tokens then the reference's (`zero`: diffusers'
    `zero_cond_t` on the DiT and its blocks, as a 2511 config sets it; `first`: the first
    model's preparation)."""
    from diffusers.pipelines.qwenimage.pipeline_qwenimage import (
        calculate_shift,
        retrieve_timesteps,
    )

    image = Image.open(io.BytesIO(base64.b64decode(body["image"]))).convert("RGB")
    height, width, steps = body["height"], body["width"], body["num_inference_steps"]
    for module in (pipe.transformer, *pipe.transformer.transformer_blocks):
        module.zero_cond_t = zero
    with torch.no_grad():
        cond, uncond = (_embeds(pipe, body[k], image, first) for k in ("prompt", "negative_prompt"))
        reference = _reference(pipe, image, first)
        channels = pipe.transformer.config.in_channels // 4
        generator = torch.Generator("cpu").manual_seed(body["seed"])
        noise = torch.randn((1, 1, channels, height // 8, width // 8), generator=generator)
        latents = pipe._pack_latents(noise, 1, channels, height // 8, width // 8)
        shapes = [[(1, height // 16, width // 16), (1, 52, 78) if first else (1, 53, 79)]]
        config = pipe.scheduler.config
        mu = calculate_shift(latents.shape[1], config.base_image_seq_len,
                             config.max_image_seq_len, config.base_shift,
                             config.max_shift)  # fmt: skip
        sigmas = np.linspace(1.0, 1 / steps, steps)
        timesteps, _ = retrieve_timesteps(pipe.scheduler, steps, "cpu", sigmas=sigmas, mu=mu)
        pipe.scheduler.set_begin_index(0)
        for t in timesteps:
            both = torch.cat([latents, reference], dim=1)

            c, u = (
                _velocity(pipe, both, t, e, shapes)[:, : latents.shape[1]] for e in (cond, uncond)
            )
            guided = u + body["guidance_scale"] * (c - u)
            guided = guided * (c.norm(dim=-1, keepdim=True) / guided.norm(dim=-1, keepdim=True))
            latents = pipe.scheduler.step(guided, t, latents, return_dict=False)[0]
    for module in (pipe.transformer, *pipe.transformer.transformer_blocks):
        module.zero_cond_t = False
    return latents.numpy()


def test_comfyui_prepared_job_equals_diffusers_by_hand(edit):
    """World size 1 with `image_prep` comfyui: the engine's text embeddings are the text
    encoder's on ComfyUI's vision pixels, and its final latents the hand-driven loop's on
    the area-averaged, wrapped reference; the pipeline's own preparation ends elsewhere;
    nothing of the job stays on the pipeline."""
    image = Image.open(io.BytesIO(base64.b64decode(JOB["image"]))).convert("RGB")
    tensors = encoded(edit, JOB)
    with torch.no_grad():
        want_embeds = _embeds(edit, JOB["prompt"], image)
    torch.testing.assert_close(tensors["prompt_embeds"], want_embeds, rtol=0, atol=0)
    _, latents, _ = run_image_job(edit, JOB, tensors)
    want = _by_hand(edit, JOB)
    np.testing.assert_allclose(latents, want, rtol=0, atol=1e-5)
    own = {k: v for k, v in JOB.items() if k != "image_prep"}
    _, theirs, _ = run_image_job(edit, own)
    assert np.abs(theirs - want).max() > 1e-3
    assert "image_processor" not in edit.__dict__ or type(edit.image_processor).__name__ == (
        "VaeImageProcessor"
    )
    assert not edit.transformer._forward_pre_hooks


def test_references_at_timestep_zero(edit):
    """`reference_method` index_timestep_zero (ComfyUI's node, the 2511 templates): the job
    equals the hand-driven loop with diffusers' `zero_cond_t` on, differs from it off, and
    the DiT has the model's setting back after the job."""
    body = {**JOB, "reference_method": "index_timestep_zero"}
    tensors = encoded(edit, body)
    _, latents, _ = run_image_job(edit, body, tensors)
    np.testing.assert_allclose(latents, _by_hand(edit, body, zero=True), rtol=0, atol=1e-5)
    assert np.abs(latents - _by_hand(edit, body)).max() > 1e-3
    assert not edit.transformer.zero_cond_t
    assert not any(block.zero_cond_t for block in edit.transformer.transformer_blocks)


def test_the_edit_runs_paradits_samplers(edit):
    """The templates' euler (ComfyUI's `simple` at a static shift): euler on the levels the
    pipeline's own scheduler ran gives its output (float32 rounding), with ComfyUI's image
    preparation; `simple` at shift 3 runs ComfyUI's levels; the pipeline's scheduler is back."""
    from image_jobs import run_here

    own_scheduler = edit.scheduler
    _, own = run_here(edit, JOB)
    sigmas = own.clock.notes["sampling"]["sigmas"]
    _, mine = run_here(edit, {**JOB, "sampler": "euler", "sigmas": sigmas})
    assert mine.clock.notes["sampling"]["sampler"] == "euler"
    torch.testing.assert_close(mine.latents, own.latents, rtol=1e-5, atol=1e-5)
    body = {**JOB, "sampler": "euler", "scheduler": "simple", "shift": 3.0}
    _, simple = run_here(edit, body)
    assert simple.clock.notes["sampling"]["sigmas"] == pytest.approx([1.0, 0.75, 0.0])
    assert edit.scheduler is own_scheduler


def test_the_first_models_preparation(edit):
    """The first Qwen-Image-Edit (`QwenImageEditPipeline` on the same components; ComfyUI's
    TextEncodeQwenImageEdit): its one image at about 1024x1024 in whole pixels, read by the
    vision tower too, the VAE given its centre multiples of 8: the job equals the hand-driven
    loop; paradit's euler runs on it."""
    from diffusers import QwenImageEditPipeline

    from paradit.backend.models.families.base import same_components_as

    first = same_components_as(edit, QwenImageEditPipeline)
    first.set_progress_bar_config(disable=True)
    from image_jobs import run_here

    body = {k: v for k, v in JOB.items()}
    tensors = encoded(first, body)
    _, own = run_here(first, body, tensors)
    want = _by_hand(first, body, first=True)
    np.testing.assert_allclose(own.latents.numpy(), want, rtol=0, atol=1e-5)
    # paradit's euler on the levels the pipeline's scheduler ran: the same (its template's
    # sampler runs on this pipeline too)
    sigmas = own.clock.notes["sampling"]["sigmas"]
    _, euler = run_here(first, {**body, "sampler": "euler", "sigmas": sigmas}, tensors)
    torch.testing.assert_close(euler.latents, own.latents, rtol=1e-5, atol=1e-5)
