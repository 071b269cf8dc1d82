"""LTX-2's video VAE (`AutoencoderKLLTX2Video`) decode cut into independent tiles, as its
`tiled_decode` does.

With tiling on, the VAE decodes overlapping spatial tiles of the latents, each over all the
frames at once, one after another, blends them at the end (`vae_tiles.blend`) and crops the
result to the latents' size. This module says which tiles there are and decodes one, so tile by
tile equals `vae.enable_tiling(); vae.decode(z)` exactly. (Its frame-wise decode,
`use_framewise_decoding`, stays off: paradit never turns it on.)

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
    ratio = vae.spatial_compression_ratio
    sample = (vae.tile_sample_min_height, vae.tile_sample_min_width)
    stride = (vae.tile_sample_stride_height, vae.tile_sample_stride_width)
    tile = (sample[0] // ratio, sample[1] // ratio)
    if not (vae.use_tiling and (width > tile[1] or height > tile[0])):
        return whole(height, width)
    tiles = grid(
        height,
        width,
        tile=tile,
        stride=(stride[0] // ratio, stride[1] // ratio),
        blend=(sample[0] - stride[0], sample[1] - stride[1]),
        keep=stride,
    )
    if any(t.bottom - t.top < 2 or t.right - t.left < 2 for t in tiles.tiles):
        # the decoder's reflect padding needs 2 latent pixels: the VAE's own tiled decode
        # fails there too, deep inside; say which sizes work instead
        raise ValueError(
            f"LTX-2's tiled decode would leave a tile of one latent pixel at {width * ratio}x"
            f"{height * ratio}: with tiles of {sample[1]}x{sample[0]} every {stride[1]}x"
            f"{stride[0]} pixels, pick a size {ratio} pixels larger or smaller, or another "
            "--vae-tile"
        )
    return tiles


def decode_tile(vae: Any, z: torch.Tensor, tile: Tile, temb: torch.Tensor | None) -> torch.Tensor:
    """Decode one tile of a tiled grid."""
    return vae.decoder(cut(z, tile), temb, causal=None)


def crop(vae: Any, z: torch.Tensor, blended: torch.Tensor) -> torch.Tensor:
    """The blended tiles cut to the latents' size, as the VAE's tiled decode ends."""
    ratio = vae.spatial_compression_ratio
    return blended[..., : z.shape[-2] * ratio, : z.shape[-1] * ratio]


def enable_tiles(vae: Any, height: int, width: int) -> None:
    """`AutoencoderKLLTX2Video` (LTX-2): tiles of a multiple of its 32x compression that
    overlap by 64 pixels, as its own 512 every 448 do (32 for tiles of 64); ValueError for
    other sizes (`tiled_decode` here decodes them one by one)."""
    ratio = vae.spatial_compression_ratio
    if height % ratio or width % ratio:
        raise ValueError(f"LTX-2's VAE tiles are multiples of {ratio} pixels, not {height}x{width}")
    vae.enable_tiling(
        tile_sample_min_height=height,
        tile_sample_min_width=width,
        tile_sample_stride_height=max(ratio, height - 2 * ratio),
        tile_sample_stride_width=max(ratio, width - 2 * ratio),
    )
