"""Qwen-Image's VAE decode cut into independent tiles: what
`AutoencoderKLQwenImage.tiled_decode` decodes.

The VAE is Wan 2.1's causal 3D VAE fine-tuned for images: an image is one latent frame. With
tiling on it decodes overlapping spatial tiles one after another, each from a cleared feature
cache, and blends them at the end (`vae_tiles.blend`); the tile grid is Wan's without patches
(`families/wan/vae.py`'s `tile_grid`). Unlike its untiled decode, its tiled decode crops to the
sample size and does not clamp; `finish` does the same, so tile by tile equals
`vae.enable_tiling(); vae.decode(z)` exactly.

Shapes: latents `z` are (batch, z_dim, frames, height, width), as `vae.decode` takes them.
"""

from __future__ import annotations

from typing import Any

import torch

from ...vae_tiles import Tile, cut
from ..wan.vae import tile_grid

__all__ = ["decode_tile", "finish", "tile_grid"]


def decode_tile(vae: Any, z: torch.Tensor, tile: Tile) -> torch.Tensor:
    """Decode one tile of a tiled grid: its frames one by one, the causal cache cleared first."""
    from ....diffusers_internals import require

    require(
        "tiled Qwen-Image VAE decode",
        "autoencoder_kl_qwenimage.AutoencoderKLQwenImage.clear_cache",
        "autoencoder_kl_qwenimage.QwenImageDecoder3d.forward",
    )
    part = cut(z, tile)
    vae.clear_cache()
    frames = []
    for index in range(part.shape[2]):
        vae._conv_idx = [0]
        frame = vae.post_quant_conv(part[:, :, index : index + 1])
        frames.append(vae.decoder(frame, feat_cache=vae._feat_map, feat_idx=vae._conv_idx))
    vae.clear_cache()
    return torch.cat(frames, dim=2)


def finish(vae: Any, z: torch.Tensor, blended: torch.Tensor) -> torch.Tensor:
    """The blended tiles as the VAE's tiled decode returns them: cropped to the sample size."""
    height, width = (size * vae.spatial_compression_ratio for size in z.shape[-2:])
    return blended[..., :height, :width]
