"""HunyuanVideo 1.5's start image prepared as ComfyUI prepares it (a job's `image_prep`
comfyui), in our own words from the behaviour of ComfyUI's nodes:
`comfy_extras/nodes_hunyuan.py` (`HunyuanVideo15ImageToVideo`), `comfy/utils.py`
(`common_upscale`), `comfy/clip_vision.py` (`clip_preprocess`, `CLIPVisionEncode`) and
`comfy/model_base.py` (`HunyuanVideo15`: which SigLIP output the DiT reads).

- The image is the PNG's 8-bit RGB values / 255 as float32 (what `LoadImage` hands on).
- For the VAE (`HunyuanVideo15ImageToVideo`): the image is centre-cropped to the video's
  aspect (the side that is too long loses `round((side - side * new / old) / 2)` pixels at
  each end), then scaled to the video's width x height by torch's bilinear interpolation
  (no corner alignment, no antialias), in float. diffusers' pipeline resizes the 8-bit image
  with PIL (Lanczos) and centre-crops it.
- For SigLIP (`CLIPVisionEncode`, crop center): the whole loaded image, its shorter side
  scaled to the encoder's size (each side `round(side * size / shorter)`) by torch's bicubic
  interpolation with antialias, the centre `size` x `size` kept (offset `(side - size) // 2`),
  the values rounded to 8 bits again, then normalised with the encoder's mean and std.
  diffusers' pipeline gives the SigLIP processor the VAE's image, squeezed to a square.
- The DiT reads SigLIP's last hidden state (after its post-layernorm), as diffusers' does,
  and the VAE latents of the first frame with a mask of ones there, as diffusers' does.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F


def to_float(image) -> torch.Tensor:
    """A PIL image -> (1, 3, H, W) float32 in 0..1 (its 8-bit RGB values / 255)."""
    pixels = np.asarray(image.convert("RGB"), dtype=np.float32) / 255.0
    return torch.from_numpy(pixels.copy()).permute(2, 0, 1).unsqueeze(0)


def aspect_crop(height: int, width: int, to_width: int, to_height: int) -> tuple[int, int]:
    """(rows, columns) cut from each end of a `height` x `width` image to give it
    `to_width` : `to_height`'s aspect (one of them 0), as ComfyUI's crop center cuts."""
    if min(height, width, to_width, to_height) < 1:
        raise ValueError(
            f"image_prep comfyui: sizes are at least 1 pixel, got a {width}x{height} image "
            f"for {to_width}x{to_height}"
        )
    old, new = width / height, to_width / to_height
    if old > new:
        return 0, round((width - width * (new / old)) / 2)
    if old < new:
        return round((height - height * (old / new)) / 2), 0
    return 0, 0


def vae_pixels(pixels: torch.Tensor, width: int, height: int) -> torch.Tensor:
    """(N, 3, H, W) in 0..1 -> (N, 3, height, width): the start image the VAE encodes."""
    rows, columns = aspect_crop(pixels.shape[-2], pixels.shape[-1], width, height)
    kept = pixels[..., rows : pixels.shape[-2] - rows, columns : pixels.shape[-1] - columns]
    return F.interpolate(kept, size=(height, width), mode="bilinear")


def siglip_pixels(
    pixels: torch.Tensor, size: int, mean: Sequence[float], std: Sequence[float]
) -> torch.Tensor:
    """(N, 3, H, W) in 0..1 -> (N, 3, size, size): SigLIP's normalised input."""
    height, width = pixels.shape[-2:]
    if (height, width) != (size, size):
        scale = size / min(height, width)
        scaled = (round(scale * height), round(scale * width))
        pixels = F.interpolate(pixels, size=scaled, mode="bicubic", antialias=True)
        top, left = (scaled[0] - size) // 2, (scaled[1] - size) // 2
        pixels = pixels[..., top : top + size, left : left + size]
    pixels = torch.clip(255.0 * pixels, 0, 255).round() / 255.0
    mean_t = torch.tensor(mean, dtype=pixels.dtype).view(3, 1, 1)
    std_t = torch.tensor(std, dtype=pixels.dtype).view(3, 1, 1)
    return (pixels - mean_t) / std_t


def image_embeds(pipe, image, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """SigLIP's last hidden state of `image` (PIL) prepared as CLIPVisionEncode's crop center
    prepares it, in the transformer's dtype: (1, tokens, width)."""
    encoder = pipe.image_encoder
    processor = pipe.feature_extractor
    size = int(encoder.config.image_size)
    pixels = siglip_pixels(to_float(image), size, processor.image_mean, processor.image_std)
    weight = next(encoder.parameters())
    hidden = encoder(pixel_values=pixels.to(device=device, dtype=weight.dtype)).last_hidden_state
    return hidden.to(device=device, dtype=dtype)


def image_latents(vae, image, width: int, height: int, device: torch.device) -> torch.Tensor:
    """The VAE latents of `image` (PIL) prepared as HunyuanVideo15ImageToVideo prepares it,
    scaled by the VAE's scaling factor (ComfyUI's latent format's): (1, C, 1, h, w)."""
    pixels = vae_pixels(to_float(image), width, height) * 2.0 - 1.0
    pixels = pixels.to(device=device, dtype=vae.dtype).unsqueeze(2)
    latents = vae.encode(pixels).latent_dist.mode()
    return latents * vae.config.scaling_factor
