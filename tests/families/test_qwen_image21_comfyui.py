"""Qwen-Image 2.1's edit with `image_prep` comfyui (families/qwen_image21/comfyui_prep.py): the
references as ComfyUI's TextEncodeQwenImage21 presents them at resolution 0 (Comfy-Org/ComfyUI
`comfy_extras/nodes_qwen.py` ed26919d; the vision input `process_qwen2vl_images` of
`comfy/text_encoders/qwen_vl.py` 0f5aa305 as `comfy/text_encoders/qwen3vl.py` 1ad32705 calls
it). The sizes worked by hand; the vision tower's pixel values worked here from ComfyUI's
steps equal transformers' processor's bit for bit (given ComfyUI's pixel bounds; Qwen3-VL's
published ones would upscale a small reference); a two-reference job whose references keep
their own, different sizes (neither the output's) equals diffusers' components driven by
hand at world size 1, latents bit for bit; a reference ComfyUI's vision tower reads at
another size is refused. (2 ranks against 1: the family contract's "comfyui" job.)

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
import torch
from image_jobs import run_image_job
from PIL import Image
from qwen3_vl_patches import patches_by_hand

from paradit.backend.models.families.qwen_image21 import comfyui_prep as prep
from paradit.backend.models.families.qwen_image21.tiny_job import COMFYUI_EDIT
from paradit.backend.models.presets import build_preset


@pytest.mark.fast
def test_reference_sizes_worked_by_hand():
    """At resolution 0 each side goes to the nearest multiple of 32 (100 / 32 = 3.125 -> 96,
    70 / 32 = 2.19 -> 64; 1000 / 32 = 31.25 -> 992; 760 / 32 = 23.75 -> 768), at least 32;
    ComfyUI's vision input keeps 3136 to 12845056 pixels: 64x32 (2048) and 3616x3616
    (13075456) lie outside, 64x64 and 3584x3584 (12845056) inside."""
    assert prep.reference_size(100, 70) == (96, 64)
    assert prep.reference_size(1000, 760) == (992, 768)
    assert prep.reference_size(10, 20) == (32, 32)
    prep.check_vision_size(64, 64)
    prep.check_vision_size(3584, 3584)
    for size in ((64, 32), (3616, 3616)):
        with pytest.raises(ValueError, match="outside the 3136 to 12845056 pixels"):
            prep.check_vision_size(*size)


def _comfy_values(pixels: np.ndarray) -> torch.Tensor:
    """ComfyUI's vision input for an 8-bit (H, W, 3) image whose sides are multiples of 32
    inside its bounds (no resize), element by element: the values x / 255 in float32, then
    (x - 0.5) / 0.5; patch k of the (rows / 2) x (columns / 2) blocks of 2x2 16-pixel
    patches, in block order and within a block row by row, holds channel, frame (the image
    twice), row and column of its 16x16 pixels in that order."""
    image = torch.from_numpy(pixels.astype(np.float32) / 255.0).permute(2, 0, 1)
    return patches_by_hand((image - 0.5) / 0.5)


def test_vision_values_are_comfyuis():
    """A 96x64 reference (6144 pixels: under Qwen3-VL's published least, 65536, so
    transformers' processor with those bounds scales it up to 320x224) and a 256x64 one of
    every 8-bit value: through `ComfyBounds` the processor keeps each at its size, a grid of
    (1, 4, 6) and (1, 4, 16) patches, and its pixel values are ComfyUI's, bit for bit."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil,
    )

    from paradit.backend.models.encoders.qwen3_vl import QWEN3_VL_PIXELS, qwen3_vl_processor

    processor = qwen3_vl_processor()
    processor.image_processor = Qwen2VLImageProcessorPil(
        patch_size=16, image_mean=[0.5] * 3, image_std=[0.5] * 3, size=dict(QWEN3_VL_PIXELS)
    )
    noise = np.random.default_rng(3).integers(0, 256, (64, 96, 3), dtype=np.uint8)
    levels = np.arange(256, dtype=np.uint8).reshape(4, 64).repeat(16, axis=0)
    levels = np.stack([levels, levels[::-1], levels[:, ::-1]], axis=-1).repeat(4, axis=1)[:, :256]
    images = [Image.fromarray(noise), Image.fromarray(levels)]
    text = ["<|vision_start|><|image_pad|><|vision_end|> and <|vision_start|><|image_pad|>"
            "<|vision_end|> a fox"]  # fmt: skip
    own = processor(text=text, images=images, return_tensors="pt")
    assert own["image_grid_thw"][0].tolist() == [1, 14, 20]  # Qwen3-VL's bounds: 320x224
    bounded = prep.ComfyBounds(processor, [(96, 64), (256, 64)])
    inputs = bounded(text=text, images=images, return_tensors="pt")
    assert inputs["image_grid_thw"].tolist() == [[1, 4, 6], [1, 4, 16]]
    want = torch.cat([_comfy_values(noise), _comfy_values(levels)])
    assert inputs["pixel_values"].dtype == torch.float32
    assert torch.equal(inputs["pixel_values"], want)
    # one slot per 2x2 patches: 6 + 16 image tokens in the prompt
    assert int((inputs["input_ids"] == processor.tokenizer.encode("<|image_pad|>")[0]).sum()) == 22


@pytest.fixture(scope="module")
def pipe():
    return build_preset("tiny-qwen-image2.1")


def _images(body: dict) -> list:
    return [
        Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB")
        for data in (body["image"], *body["images"])
    ]


def _by_hand(pipe, body: dict) -> np.ndarray:
    """The job over the pipeline's parts: ComfyUI's references (the 100x70 image Lanczos'd
    to 96x64 by PIL, the 64x64 one as loaded) for the text encoder and the VAE, their own
    token grids (6x4, 4x4) before the 6x6 output's, the pipeline's noise, levels, prefix
    caches and true CFG."""
    from diffusers.models.transformers.transformer_qwenimage21 import QwenImage21KVCache
    from diffusers.pipelines.qwenimage21.pipeline_qwenimage21 import (
        calculate_shift,
        retrieve_timesteps,
    )

    first, second = _images(body)
    refs = [first.resize((96, 64), Image.Resampling.LANCZOS), second]
    height, width, steps = body["height"], body["width"], body["num_inference_steps"]
    scale = body["guidance_scale"]
    with torch.no_grad():
        cond, _, cond_slots = pipe.encode_prompt(body["prompt"], image=refs)
        uncond, _, uncond_slots = pipe.encode_prompt(body["negative_prompt"], image=refs)
        vae_images = [
            pipe.image_processor.preprocess(r.convert("RGBA"), height=r.height, width=r.width)
            for r in refs
        ]
        generator = torch.Generator().manual_seed(body["seed"])
        channels = pipe.transformer.config.in_channels
        latents, ref_latents = pipe.prepare_latents(
            [image.unsqueeze(2) for image in vae_images], 1, channels, height, width,
            cond.dtype, torch.device("cpu"), generator,
        )  # fmt: skip
        shapes = [[(1, 4, 6), (1, 4, 4), (1, height // 16, width // 16)]]
        config = pipe.scheduler.config
        mu = calculate_shift(latents.shape[1], config.base_image_seq_len,
                             config.max_image_seq_len, config.base_shift,
                             config.max_shift)  # fmt: skip
        sigmas = np.linspace(1.0, 1 / steps, steps)
        timesteps, _ = retrieve_timesteps(pipe.scheduler, steps, "cpu", sigmas=sigmas, mu=mu)
        blocks = len(pipe.transformer.transformer_blocks)
        caches = [QwenImage21KVCache(blocks), QwenImage21KVCache(blocks)]
        target = latents.shape[1] // 4
        masks = [torch.cat([m, m.new_ones(1, target)], dim=1) for m in (cond_slots, uncond_slots)]
        pipe.scheduler.set_begin_index(0)
        for i, t in enumerate(timesteps):
            both = torch.cat([ref_latents, latents], dim=1)
            out = [
                pipe.transformer(
                    hidden_states=both, timestep=t.expand(1).to(latents.dtype) / 1000,
                    encoder_hidden_states=embeds, encoder_hidden_states_mask=None,
                    img_shapes=shapes, img_mask=mask, kv_cache=cache,
                    kv_cache_mode="extract" if i == 0 else "cached", return_dict=False,
                )[0][:, -latents.shape[1] :]
                for embeds, mask, cache in zip((cond, uncond), masks, caches, strict=True)
            ]  # fmt: skip
            guided = out[1] + scale * (out[0] - out[1])
            latents = pipe.scheduler.step(guided, t, latents, return_dict=False)[0]
    return latents.numpy()


def test_comfyui_prepared_edit_equals_the_pipelines_parts_by_hand(pipe):
    """World size 1 with `image_prep` comfyui: two references at their own, different sizes
    (96x64 and 64x64; the output 96x96, at whose area the pipeline makes them 128x96 and
    96x96): the final latents are the hand-driven loop's, bit for
    bit; the pipeline's own preparation (both resized to the output's area) ends elsewhere;
    nothing of the job stays on the pipeline."""
    own = pipe.processor, pipe.image_processor
    _, latents, _ = run_image_job(pipe, COMFYUI_EDIT)
    want = _by_hand(pipe, COMFYUI_EDIT)
    np.testing.assert_array_equal(latents, want)
    plain = {k: v for k, v in COMFYUI_EDIT.items() if k != "image_prep"}
    _, theirs, _ = run_image_job(pipe, plain)
    assert np.abs(theirs - want).max() > 1e-3
    assert (pipe.processor, pipe.image_processor) == own
    assert not pipe.transformer._forward_pre_hooks
    assert "encode_prompt" not in pipe.__dict__


def test_a_reference_outside_comfyuis_vision_bounds_is_refused(pipe):
    """A 40x40 image comes to 32x32 (1024 pixels): ComfyUI's vision input scales it up to
    64x64, four slots for its one of 2x2 latents: refused, naming the size."""
    from paradit.backend.models.families.qwen_image21.tiny_job import _png

    body = {**COMFYUI_EDIT, "images": [_png(40, 40, 6)]}
    with pytest.raises(ValueError, match="a 32x32 reference"):
        run_image_job(pipe, body)
    assert not pipe.transformer._forward_pre_hooks


@pytest.mark.fast
def test_comfyuis_vision_sizes_worked_by_hand():
    """`process_qwen2vl_images` (ComfyUI `comfy/text_encoders/qwen_vl.py` 0f5aa305, patch 16
    x merge 2): 32x32 (1024 pixels, under 3136) scales by sqrt(3136 / 1024) = 1.75 to 56,
    ceiled to 64; 3616x3616 (13075456, over 12845056) by 1 / (3616 / 3584), floored to 3584;
    96x64 and 3584x3584 stay."""
    assert prep.vision_size(32, 32) == (64, 64)
    assert prep.vision_size(3616, 3616) == (3584, 3584)
    assert prep.vision_size(96, 64) == (96, 64)
    assert prep.vision_size(3584, 3584) == (3584, 3584)


class _Grids:
    """The pipeline's processor, recording the image grids it gives."""

    def __init__(self, own):
        self.own, self.grids = own, []

    def __call__(self, **kwargs):
        inputs = self.own(**kwargs)
        self.grids.append(inputs["image_grid_thw"].tolist())
        return inputs

    def __getattr__(self, name):
        return getattr(self.own, name)


def test_comfyui_vision_keeps_comfyuis_vision_sizes_and_refuses_outside_its_bounds(pipe):
    """`image_prep` comfyui-vision (TextEncodeQwenImage21 at a resolution above 0): the
    references at the pipeline's sizes (the 96x96 output's area: 96x96 both), the processor,
    given Qwen3-VL's published bounds here (65536 to 16777216 pixels: it would scale a 96x96
    reference up to 256x256), reads each at its size, a grid of (1, 6, 6), as ComfyUI's vision
    input does; at a 32x32 output the references come to 32x32 (1024 pixels), which ComfyUI's
    vision tower reads at 64x64: refused when the job runs, naming both sizes."""
    from paradit.backend.models.encoders.qwen3_vl import QWEN3_VL_PIXELS
    from paradit.backend.models.families.qwen_image21.tiny_job import _png

    own = pipe.processor
    bounds = own.image_processor.size
    recording = _Grids(own)
    own.image_processor.size = type(bounds)(**QWEN3_VL_PIXELS)
    pipe.__dict__["processor"] = recording
    body = {**COMFYUI_EDIT, "image": _png(96, 96, 3), "image_prep": "comfyui-vision"}
    try:
        run_image_job(pipe, body)
        assert recording.grids and all(g == [[1, 6, 6], [1, 6, 6]] for g in recording.grids)
        small = {**body, "width": 32, "height": 32}
        with pytest.raises(ValueError, match="a 32x32 reference .* read it at 64x64"):
            run_image_job(pipe, small)
    finally:
        pipe.__dict__["processor"] = own
        own.image_processor.size = bounds
