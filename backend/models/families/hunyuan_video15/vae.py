"""HunyuanVideo 1.5's VAE (`AutoencoderKLHunyuanVideo15`) decode cut into independent tiles, as
its `tiled_decode` does.

With tiling on, the VAE decodes overlapping spatial tiles of the latents, each over all the
frames at once (its decoder keeps no cache between tiles), one after another, and blends
them at the end (`vae_tiles.blend`). This module says which tiles there are and decodes one,
so tile by tile equals `vae.enable_tiling(); vae.decode(z)` exactly.

Shapes: latents `z` are (batch, latent_channels, frames, height, width), as `vae.decode`
takes them.
"""

from __future__ import annotations

from typing import Any

import torch

from ...vae_tiles import Tile, TileGrid, cut, grid, whole


def tile_grid(vae: Any, z: torch.Tensor) -> TileGrid:
    """The tiles `vae.decode(z)` decodes: one whole tile when tiling is off or `z` fits."""
    height, width = z.shape[-2:]
    tile = (vae.tile_latent_min_height, vae.tile_latent_min_width)
    if not (vae.use_tiling and (width > tile[1] or height > tile[0])):
        return whole(height, width)
    overlap = vae.tile_overlap_factor
    sample = (vae.tile_sample_min_height, vae.tile_sample_min_width)
    blend = (int(sample[0] * overlap), int(sample[1] * overlap))
    return grid(
        height,
        width,
        tile=tile,
        stride=(int(tile[0] * (1 - overlap)), int(tile[1] * (1 - overlap))),
        blend=blend,
        keep=(sample[0] - blend[0], sample[1] - blend[1]),
    )


def decode_tile(vae: Any, z: torch.Tensor, tile: Tile) -> torch.Tensor:
    """Decode one tile of a tiled grid."""
    return vae.decoder(cut(z, tile))


def enable_tiles(vae: Any, height: int, width: int) -> None:
    """`AutoencoderKLHunyuanVideo15` keeps its latent tile size apart from its sample tile size
    (it derives one from the other only when built): both are set, so tiles of a multiple of
    its compression decode to exactly their size; ValueError for other sizes."""
    ratio = vae.spatial_compression_ratio
    if height % ratio or width % ratio:
        raise ValueError(
            f"HunyuanVideo 1.5's VAE tiles are multiples of {ratio} pixels, not {height}x{width}"
        )
    vae.enable_tiling(
        tile_sample_min_height=height,
        tile_sample_min_width=width,
        tile_latent_min_height=height // ratio,
        tile_latent_min_width=width // ratio,
    )
