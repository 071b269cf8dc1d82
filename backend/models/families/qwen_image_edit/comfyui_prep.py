"""Qwen-Image-Edit's input images prepared as ComfyUI's nodes prepare them (a job's
`image_prep` comfyui), in our own words from the nodes' published behaviour
(`TextEncodeQwenImageEditPlus`, `comfy.utils.common_upscale`, `process_qwen2vl_images`):

- An image is the PNG's 8-bit RGB values / 255 as float32 (what `LoadImage` hands on).
- The reference (VAE) image: scaled to about 1024x1024 pixels at its aspect, each side
  `round(side * scale / 8) * 8`, by area averaging in float (torch's `area` interpolation);
  diffusers' pipeline takes sides `round(.. / 32) * 32` through PIL's Lanczos on 8-bit pixels.
- Its latents, after the VAE's normalisation, are padded to even sides by wrapping around
  (circular padding) before they are cut into 2x2 tokens, as ComfyUI's DiT pads its input.
- The first model (`TextEncodeQwenImageEdit`): one image scaled to about 1024x1024 pixels in
  whole pixels by area averaging, which the vision tower reads too; its VAE encode keeps the
  centre multiple of 8 of each side (ComfyUI crops what the VAE cannot take).
- The vision tower's image (Edit-Plus): scaled to about 384x384 pixels, each side
  `round(side * scale)`, by area averaging; then bilinear (no corner alignment) in float to
  sides that are multiples of patch x merge (28), kept between the processor's least and
  most pixels; normalised with the processor's mean and std and cut into the patches the
  Qwen2.5-VL vision tower reads (the layout transformers' `Qwen2VLImageProcessor` gives).
  Transformers' processor resizes 8-bit pixels bicubically instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

REFERENCE_PIXELS = 1024 * 1024
"""The area ComfyUI scales each reference image to before its VAE encode."""
REFERENCE_MULTIPLE = 8
VISION_PIXELS = 384 * 384
"""The area ComfyUI scales each image to before the vision tower's own resize."""


def scaled_size(width: int, height: int, pixels: int, multiple: int) -> tuple[int, int]:
    """(width, height) scaled to about `pixels` at the same aspect, each side rounded to a
    multiple of `multiple` (Python's rounding: halves to even)."""
    if width < 1 or height < 1:
        raise ValueError(f"an image has sides of at least 1 pixel, got {width}x{height}")
    scale = math.sqrt(pixels / (width * height))
    size = (round(width * scale / multiple) * multiple, round(height * scale / multiple) * multiple)
    if min(size) < multiple:
        raise ValueError(
            f"image_prep comfyui: a {width}x{height} image scales to {size[0]}x{size[1]} at "
            f"{pixels} pixels (a side under {multiple}): give an image closer to square"
        )
    return size


def to_float(image) -> torch.Tensor:
    """A PIL RGB image -> (1, 3, H, W) float32 in 0..1 (its 8-bit values / 255)."""
    pixels = np.asarray(image.convert("RGB"), dtype=np.float32) / 255.0
    return torch.from_numpy(pixels.copy()).permute(2, 0, 1).unsqueeze(0)


def area_resize(pixels: torch.Tensor, width: int, height: int) -> torch.Tensor:
    """(N, C, H, W) -> (N, C, height, width) by area averaging (torch's `area` mode)."""
    return F.interpolate(pixels, size=(height, width), mode="area")


def reference_pixels(pixels: torch.Tensor, multiple: int = REFERENCE_MULTIPLE) -> torch.Tensor:
    """(1, 3, H, W) in 0..1 -> the reference image at about 1024x1024 pixels, sides multiples
    of `multiple` (Edit-Plus: 8; the first model: 1)."""
    width, height = scaled_size(pixels.shape[-1], pixels.shape[-2], REFERENCE_PIXELS, multiple)
    return area_resize(pixels, width, height)


def crop_for_vae(pixels: torch.Tensor, multiple: int = REFERENCE_MULTIPLE) -> torch.Tensor:
    """(..., H, W) -> the centre `multiple`s of each side (offset (side % multiple) // 2): what
    ComfyUI's VAE encode keeps of an image whose sides it cannot take whole."""
    for dim in (-2, -1):
        side = pixels.shape[dim]
        kept = side // multiple * multiple
        if kept != side:
            pixels = pixels.narrow(dim, (side % multiple) // 2, kept)
    return pixels


def pad_even(latents: torch.Tensor) -> torch.Tensor:
    """Latents (..., h, w) padded at the bottom and right to even sides, wrapping around."""
    pad_h, pad_w = latents.shape[-2] % 2, latents.shape[-1] % 2
    if not (pad_h or pad_w):
        return latents
    flat = latents.reshape(-1, *latents.shape[-3:])  # circular padding wants (N, C, H, W)
    padded = F.pad(flat, (0, pad_w, 0, pad_h), mode="circular")
    return padded.reshape(*latents.shape[:-2], *padded.shape[-2:])


@dataclass(frozen=True)
class VisionSettings:
    """What the vision tower's processor declares (Qwen2.5-VL: 14-pixel patches, 2 frames a
    temporal patch, merged 2x2, CLIP's mean and std, 3136 to 12845056 pixels)."""

    patch_size: int
    temporal_patch_size: int
    merge_size: int
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    min_pixels: int
    max_pixels: int

    def __post_init__(self) -> None:
        if min(self.patch_size, self.temporal_patch_size, self.merge_size) < 1:
            raise ValueError("a vision processor's patch, temporal patch and merge sizes are >= 1")
        if not 0 < self.min_pixels <= self.max_pixels:
            raise ValueError(
                f"a vision processor's pixel bounds satisfy 0 < min <= max, got "
                f"{self.min_pixels} and {self.max_pixels}"
            )

    @classmethod
    def of(cls, image_processor) -> VisionSettings:
        """The settings of a transformers `Qwen2VLImageProcessor` (or its PIL twin)."""
        size = getattr(image_processor, "size", None) or {}
        return cls(
            patch_size=int(image_processor.patch_size),
            temporal_patch_size=int(image_processor.temporal_patch_size),
            merge_size=int(image_processor.merge_size),
            mean=tuple(float(v) for v in image_processor.image_mean),
            std=tuple(float(v) for v in image_processor.image_std),
            min_pixels=int(size.get("shortest_edge") or image_processor.min_pixels),
            max_pixels=int(size.get("longest_edge") or image_processor.max_pixels),
        )


def vision_size(width: int, height: int, settings: VisionSettings) -> tuple[int, int]:
    """The vision tower's input size for a `width` x `height` image: each side the nearest
    multiple of patch x merge; above the most pixels both sides scaled down (floored), below
    the least scaled up (ceiled), as `process_qwen2vl_images` rules."""
    factor = settings.patch_size * settings.merge_size
    w_bar, h_bar = round(width / factor) * factor, round(height / factor) * factor
    if w_bar * h_bar > settings.max_pixels:
        beta = math.sqrt(height * width / settings.max_pixels)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
    elif w_bar * h_bar < settings.min_pixels:
        beta = math.sqrt(settings.min_pixels / (height * width))
        w_bar = math.ceil(width * beta / factor) * factor
        h_bar = math.ceil(height * beta / factor) * factor
    return w_bar, h_bar


def vision_input(
    pixels: torch.Tensor, settings: VisionSettings, area: int = VISION_PIXELS
) -> tuple[torch.Tensor, torch.Tensor, tuple[int, int]]:
    """(1, 3, H, W) in 0..1 -> (pixel values (patches, C x T x P x P), grid (1, 3) = (1,
    rows, columns) of patches, the resized (width, height)): the vision tower's input, from
    the image scaled to about `area` pixels (Edit-Plus: 384x384; the first model: its
    reference's 1024x1024)."""
    width, height = scaled_size(pixels.shape[-1], pixels.shape[-2], area, 1)
    small = area_resize(pixels, width, height)
    w_bar, h_bar = vision_size(width, height, settings)
    image = F.interpolate(small, size=(h_bar, w_bar), mode="bilinear", align_corners=False)[0]
    mean = torch.tensor(settings.mean, dtype=image.dtype).view(3, 1, 1)
    std = torch.tensor(settings.std, dtype=image.dtype).view(3, 1, 1)
    image = (image - mean) / std
    patch, merge, frames = settings.patch_size, settings.merge_size, settings.temporal_patch_size
    rows, cols = h_bar // patch, w_bar // patch
    # one still image fills every frame of a temporal patch
    clip = image.unsqueeze(0).expand(frames, -1, -1, -1)
    patches = clip.reshape(
        1, frames, 3, rows // merge, merge, patch, cols // merge, merge, patch
    ).permute(0, 3, 6, 4, 7, 2, 1, 5, 8)
    values = patches.reshape(rows * cols, 3 * frames * patch * patch)
    grid = torch.tensor([[1, rows, cols]], dtype=torch.long)
    return values.contiguous(), grid, (w_bar, h_bar)
