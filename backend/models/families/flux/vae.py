"""Flux's VAE (`AutoencoderKL`) decode cut into independent tiles, as its `tiled_decode` does.

With tiling on, `AutoencoderKL` decodes overlapping square tiles of the image latents one after
another (post-quant conv, then the decoder) and blends them at the end (`vae_tiles.blend`);
nothing else passes between tiles. This module says which tiles there are and decodes one, so
tile by tile equals `vae.enable_tiling(); vae.decode(z)` exactly.

Shapes: latents `z` are (batch, latent_channels, height, width), as `vae.decode` takes them.
"""

from __future__ import annotations

from typing import Any

import torch

from ...vae_tiles import Tile, TileGrid, cut, grid, whole


def tile_grid(vae: Any, z: torch.Tensor) -> TileGrid:
    """The tiles `vae.decode(z)` decodes: one whole tile when tiling is off or `z` fits."""
    height, width = z.shape[-2:]
    tile = vae.tile_latent_min_size
    if not (vae.use_tiling and (width > tile or height > tile)):
        return whole(height, width)
    stride = int(tile * (1 - vae.tile_overlap_factor))
    blend = int(vae.tile_sample_min_size * vae.tile_overlap_factor)
    keep = vae.tile_sample_min_size - blend
    return grid(
        height,
        width,
        tile=(tile, tile),
        stride=(stride, stride),
        blend=(blend, blend),
        keep=(keep, keep),
    )


def decode_tile(vae: Any, z: torch.Tensor, tile: Tile) -> torch.Tensor:
    """Decode one tile of a tiled grid."""
    part = cut(z, tile)
    if vae.config.use_post_quant_conv:
        part = vae.post_quant_conv(part)
    return vae.decoder(part)
