"""CogVideoX's VAE decode cut into independent tiles: what `vae.enable_tiling()` decodes.

`AutoencoderKLCogVideoX.tiled_decode` decodes overlapping spatial tiles one after another; each
tile runs through the decoder in temporal chunks of 2 latent frames (the first chunk takes the
odd one) that hand a causal-conv cache to the next. Nothing passes between tiles until the
blend at the end, so the tiles can be decoded anywhere, in any order, and blended afterwards.
This module says which tiles there are, decodes one (all its chunks, cache included), and
blends decoded tiles in the VAE's own serial order with its own `blend_v` / `blend_h`, so the
result equals `vae.enable_tiling(); vae.decode(z)` exactly. Latents that fit in one tile are
one "tile" covering everything: the untiled decode, which `decode` also takes for them.

Shapes: latents `z` are (batch, channels, frames, height, width), as `vae.decode` takes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

FRAMES_PER_CHUNK_ATTR = "num_latent_frames_batch_size"


@dataclass(frozen=True)
class Tile:
    """One tile: latent rows [top, bottom) and columns [left, right), at grid (row, col)."""

    row: int
    col: int
    top: int
    bottom: int
    left: int
    right: int

    @property
    def cost(self) -> int:
        """Relative decode cost (latent pixels)."""
        return (self.bottom - self.top) * (self.right - self.left)


@dataclass(frozen=True)
class TileGrid:
    """The tiles of one decode and how they are blended back together (sample pixels)."""

    tiles: tuple[Tile, ...]
    num_rows: int
    num_cols: int
    blend_height: int
    blend_width: int
    keep_height: int
    keep_width: int

    @property
    def tiled(self) -> bool:
        """False for latents that fit in one tile: one untiled decode, nothing to blend."""
        return self.keep_height > 0


def tile_grid(vae: Any, z: torch.Tensor) -> TileGrid:
    """The tiles `vae.decode(z)` would decode with tiling on (its current tile settings)."""
    height, width = z.shape[-2:]
    tile_h, tile_w = vae.tile_latent_min_height, vae.tile_latent_min_width
    if not (width > tile_w or height > tile_h):
        whole = Tile(0, 0, 0, height, 0, width)
        return TileGrid((whole,), 1, 1, 0, 0, 0, 0)
    step_h = int(tile_h * (1 - vae.tile_overlap_factor_height))
    step_w = int(tile_w * (1 - vae.tile_overlap_factor_width))
    blend_h = int(vae.tile_sample_min_height * vae.tile_overlap_factor_height)
    blend_w = int(vae.tile_sample_min_width * vae.tile_overlap_factor_width)
    tops, lefts = range(0, height, step_h), range(0, width, step_w)
    tiles = tuple(
        Tile(row, col, top, min(top + tile_h, height), left, min(left + tile_w, width))
        for row, top in enumerate(tops)
        for col, left in enumerate(lefts)
    )
    return TileGrid(
        tiles,
        len(tops),
        len(lefts),
        blend_h,
        blend_w,
        vae.tile_sample_min_height - blend_h,
        vae.tile_sample_min_width - blend_w,
    )


def decode_tile(vae: Any, z: torch.Tensor, tile: Tile) -> torch.Tensor:
    """Decode one tile through all its temporal chunks, carrying the causal-conv cache."""
    part = z[:, :, :, tile.top : tile.bottom, tile.left : tile.right]
    frames = part.shape[2]
    per_chunk = getattr(vae, FRAMES_PER_CHUNK_ATTR)
    num_chunks = max(frames // per_chunk, 1)
    extra = frames % per_chunk  # the first chunk takes the frames that do not divide
    cache = None
    chunks = []
    for index in range(num_chunks):
        start = 0 if index == 0 else per_chunk * index + extra
        stop = per_chunk * (index + 1) + extra
        chunk = part[:, :, start:stop]
        if vae.post_quant_conv is not None:
            chunk = vae.post_quant_conv(chunk)
        chunk, cache = vae.decoder(chunk, conv_cache=cache)
        chunks.append(chunk)
    return torch.cat(chunks, dim=2)


def blend(vae: Any, grid: TileGrid, decoded: list[torch.Tensor]) -> torch.Tensor:
    """Blend decoded tiles (in `grid.tiles` order) into the video, as the VAE does serially.

    The VAE blends in place, row by row: a tile is blended with the already blended tile
    above it and to its left, so the order matters and is kept here.
    """
    if not grid.tiled:
        return decoded[0]
    rows = [decoded[r * grid.num_cols : (r + 1) * grid.num_cols] for r in range(grid.num_rows)]
    out_rows = []
    for r, row in enumerate(rows):
        kept = []
        for c, tile in enumerate(row):
            if r > 0:
                tile = vae.blend_v(rows[r - 1][c], tile, grid.blend_height)
            if c > 0:
                tile = vae.blend_h(row[c - 1], tile, grid.blend_width)
            row[c] = tile
            kept.append(tile[:, :, :, : grid.keep_height, : grid.keep_width])
        out_rows.append(torch.cat(kept, dim=4))
    return torch.cat(out_rows, dim=3)
