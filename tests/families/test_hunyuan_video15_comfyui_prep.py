"""HunyuanVideo 1.5 image-to-video's start image prepared as ComfyUI prepares it (`image_prep`
comfyui: `hunyuan_video15/comfyui_prep.py`), against values worked by hand from ComfyUI's
`comfy_extras/nodes_hunyuan.py` (HunyuanVideo15ImageToVideo: `comfy/utils.py`
common_upscale, bilinear, crop center) and `comfy/clip_vision.py` (CLIPVisionEncode crop
center: clip_preprocess). World size 1 against the pipeline given the same prepared inputs,
and 2 ranks against 1: the family contract's "i2v comfyui" job (`tiny_job.py`).

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
import torch
from PIL import Image

from paradit.backend.models.families import family_of
from paradit.backend.models.families.hunyuan_video15 import comfyui_prep
from paradit.backend.models.presets import build_preset
from paradit.backend.request import JobRequest

HALF = (0.5, 0.5, 0.5)  # SigLIP's mean and std


def _ramp(height: int, width: int) -> torch.Tensor:
    """(1, 3, H, W): pixel (r, c) = (10 r + c) / 255 in every channel."""
    rows, cols = np.mgrid[0:height, 0:width]
    value = torch.from_numpy(((10 * rows + cols) / 255.0).astype(np.float32))
    return value.expand(1, 3, height, width).clone()


@pytest.mark.fast
def test_aspect_crop_is_comfyuis_centre_crop():
    # 112x48 to 16:9.6 (80x48): round((112 - 112 x (80/48) / (112/48)) / 2) = 16 columns
    assert comfyui_prep.aspect_crop(48, 112, 80, 48) == (0, 16)
    # 48x80 (portrait) to 80x48: round((80 - 80 x 0.6 / (5/3)) / 2) = round(25.6) = 26 rows
    assert comfyui_prep.aspect_crop(80, 48, 80, 48) == (26, 0)
    assert comfyui_prep.aspect_crop(64, 96, 48, 32) == (0, 0)  # the same aspect
    with pytest.raises(ValueError, match="at least 1 pixel"):
        comfyui_prep.aspect_crop(0, 10, 80, 48)


@pytest.mark.fast
def test_vae_pixels_crop_then_bilinear_in_float():
    """A 6x2 image to 2x1: 1 column cut at each side (round((6 - 4) / 2)), then bilinear at
    half size, which averages each 2x2 block: (1, 2, 11, 12) / 4 and (3, 4, 13, 14) / 4."""
    out = comfyui_prep.vae_pixels(_ramp(2, 6), 2, 1)
    assert out.shape == (1, 3, 1, 2)
    expected = torch.tensor([6.5, 8.5]) / 255.0
    torch.testing.assert_close(out[0, 0, 0], expected, rtol=0, atol=1e-7)


@pytest.mark.fast
def test_siglip_pixels_centre_square_of_the_original():
    """A 6x2 image at SigLIP size 2: its shorter side is already 2 (scale 1, no change), the
    centre square is columns 2..3 ((6 - 2) // 2), values k / 255 kept, normalised 2x - 1.
    diffusers' processor would squeeze all 6 columns into 2."""
    out = comfyui_prep.siglip_pixels(_ramp(2, 6), 2, HALF, HALF)
    expected = 2 * torch.tensor([[2.0, 3.0], [12.0, 13.0]]) / 255.0 - 1
    assert out.shape == (1, 3, 2, 2)
    torch.testing.assert_close(out[0, 0], expected, rtol=0, atol=1e-6)


@pytest.mark.fast
def test_siglip_pixels_scale_shorter_side_crop_and_8_bits():
    """A 24x4 image at size 2: scaled by 0.5 to 12x2 (bicubic with antialias), its columns
    5..6 kept ((12 - 2) // 2), which read the original's columns 6.5..14.5 only: all inside
    the 0.601 band (columns 4..19), so each value is 0.601, rounded to 8 bits: 153 / 255
    (0.6), normalised 0.2. A crop from the left would read the 0.2 band."""
    pixels = torch.full((1, 3, 4, 24), 0.2)
    pixels[..., 4:20] = 0.601
    out = comfyui_prep.siglip_pixels(pixels, 2, HALF, HALF)
    assert out.shape == (1, 3, 2, 2)
    torch.testing.assert_close(out, torch.full_like(out, 2 * 153 / 255 - 1), rtol=0, atol=1e-6)


def test_image_prep_comfyui_is_image_to_videos():
    """The image-to-video model's limits name `comfyui`; a job may ask for it, and the
    text-to-video model refuses it."""
    i2v = build_preset("tiny-hunyuanvideo1.5-i2v")
    limits = family_of(i2v).limits(i2v, tiny=True)
    assert limits.image_preps == ("comfyui",)
    buffer = io.BytesIO()
    Image.new("RGB", (112, 48)).save(buffer, format="PNG")
    image = base64.b64encode(buffer.getvalue()).decode()
    body = {"prompt": "x", "image": image, "image_prep": "comfyui"}
    assert JobRequest.from_body(body, limits).image_prep == "comfyui"
    t2v = build_preset("tiny-hunyuanvideo1.5")
    with pytest.raises(ValueError, match="image_prep"):
        JobRequest.from_body({"prompt": "x", "image_prep": "comfyui"},
                             family_of(t2v).limits(t2v, tiny=True))  # fmt: skip


def test_siglip_input_and_vae_latents_on_the_tiny_pipeline():
    """On the tiny pipeline (SigLIP at 32x32): an 80x32 image's SigLIP input is its centre
    32x32 (columns 24..55: its shorter side is already 32), normalised with the processor's
    mean and std (not the squeezed image diffusers' processor makes); a 112x48 image's
    latents for an 80x48 video are those of its columns 16..95 (no resize left)."""
    pipe = build_preset("tiny-hunyuanvideo1.5-i2v")
    assert pipe.image_encoder.config.image_size == 32
    rng = np.random.default_rng(3)
    image = Image.fromarray(rng.integers(0, 256, (32, 80, 3), dtype=np.uint8))
    embeds = comfyui_prep.image_embeds(pipe, image, torch.device("cpu"), torch.float32)
    processor = pipe.feature_extractor
    mean = torch.tensor(processor.image_mean).view(3, 1, 1)
    std = torch.tensor(processor.image_std).view(3, 1, 1)
    pixels = (comfyui_prep.to_float(image.crop((24, 0, 56, 32))) - mean) / std
    with torch.no_grad():
        by_hand = pipe.image_encoder(pixel_values=pixels).last_hidden_state
    torch.testing.assert_close(embeds, by_hand)
    diffusers = pipe.encode_image(image, 1, torch.device("cpu"), torch.float32)
    assert (embeds - diffusers).abs().max() > 1e-3
    wide = Image.fromarray(rng.integers(0, 256, (48, 112, 3), dtype=np.uint8))
    with torch.no_grad():
        latents = comfyui_prep.image_latents(pipe.vae, wide, 80, 48, torch.device("cpu"))
        cropped = comfyui_prep.to_float(wide.crop((16, 0, 96, 48))) * 2 - 1
        z = pipe.vae.encode(cropped.unsqueeze(2)).latent_dist.mode()
    assert latents.shape == (1, pipe.vae.config.latent_channels, 1, 3, 5)
    torch.testing.assert_close(latents, z * pipe.vae.config.scaling_factor)
