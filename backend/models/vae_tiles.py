"""A VAE's tiled decode as independent tiles: which tiles there are, and their serial blend.

diffusers' VAEs decode big latents in overlapping spatial tiles (`vae.enable_tiling()`), one
after another, and only at the end blend each tile with the one above it and the one to its
left. Nothing passes between tiles before that blend, so the tiles can be decoded anywhere, in
any order (`parallel/vae.py` deals them to ranks), and blended afterwards. This module holds
what all such VAEs share: the tile grid and the blend in the VAE's own serial order with its
own `blend_v` / `blend_h`. How one tile decodes is each VAE's own (`vae.py` in each family's
folder, `families/<family>/vae.py`).

Latents that fit in one tile, or a VAE with tiling off (`vae.use_tiling`), are one "tile"
covering everything: the VAE's untiled decode.

Shapes: latents are (batch, channels, height, width) for images and (batch, channels, frames,
height, width) for videos; tiles are cut from the last two dimensions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


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
        """False for one untiled decode: nothing to blend."""
        return self.keep_height > 0


def whole(height: int, width: int) -> TileGrid:
    """One tile covering all `height` x `width` latent pixels: the untiled decode."""
    return TileGrid((Tile(0, 0, 0, height, 0, width),), 1, 1, 0, 0, 0, 0)


def grid(
    height: int,
    width: int,
    *,
    tile: tuple[int, int],
    stride: tuple[int, int],
    blend: tuple[int, int],
    keep: tuple[int, int],
) -> TileGrid:
    """Tiles of `tile` (height, width) latent pixels every `stride` latent pixels over a
    `height` x `width` latent (the last ones ragged), blended over `blend` and cropped to
    `keep` sample pixels (all as the VAE's own tiled decode computes them)."""
    tops, lefts = range(0, height, stride[0]), range(0, width, stride[1])
    tiles = tuple(
        Tile(row, col, top, min(top + tile[0], height), left, min(left + tile[1], width))
        for row, top in enumerate(tops)
        for col, left in enumerate(lefts)
    )
    return TileGrid(tiles, len(tops), len(lefts), blend[0], blend[1], keep[0], keep[1])


def cut(z: torch.Tensor, tile: Tile) -> torch.Tensor:
    """The latents of one tile."""
    return z[..., tile.top : tile.bottom, tile.left : tile.right]


def blend(vae: Any, tiles: TileGrid, decoded: list[torch.Tensor]) -> torch.Tensor:
    """Blend decoded tiles (in `tiles.tiles` order) into the sample, as the VAE does serially.

    The VAE blends in place, row by row: a tile is blended with the already blended tile
    above it and to its left, so the order matters and is kept here.
    """
    if not tiles.tiled:
        return decoded[0]
    rows = [decoded[r * tiles.num_cols : (r + 1) * tiles.num_cols] for r in range(tiles.num_rows)]
    out_rows = []
    for r, row in enumerate(rows):
        kept = []
        for c, tile in enumerate(row):
            if r > 0:
                tile = vae.blend_v(rows[r - 1][c], tile, tiles.blend_height)
            if c > 0:
                tile = vae.blend_h(row[c - 1], tile, tiles.blend_width)
            row[c] = tile
            kept.append(tile[..., : tiles.keep_height, : tiles.keep_width])
        out_rows.append(torch.cat(kept, dim=-1))
    return torch.cat(out_rows, dim=-2)


def enable_quarter_overlap_tiles(vae: Any, height: int, width: int) -> None:
    """Tiles that overlap by a quarter of their size (Wan's VAE and the ones shaped like it:
    256 every 192)."""
    vae.enable_tiling(
        tile_sample_min_height=height,
        tile_sample_min_width=width,
        tile_sample_stride_height=height * 3 // 4,
        tile_sample_stride_width=width * 3 // 4,
    )


def enable_square_tiles(vae: Any, height: int, width: int) -> None:
    """`AutoencoderKL` steps by `int(latent tile * 3/4)` latent pixels but keeps `tile - int(tile
    / 4)` sample pixels of each tile; unless the two agree its tiled decode returns more pixels
    than the image has (e.g. 48-pixel tiles on a 112-pixel-wide image give 124), so sizes that
    disagree are refused."""
    scale = 2 ** (len(vae.config.block_out_channels) - 1)
    latent = height // scale
    step = int(latent * (1 - vae.tile_overlap_factor)) * scale
    keep = height - int(height * vae.tile_overlap_factor)
    if height != width or height % scale or step != keep:
        raise ValueError(
            f"AutoencoderKL tiles must be square, a multiple of {scale} pixels and step as "
            f"much as they keep; {height}x{width} is not (try {4 * scale}, {8 * scale}, ...)"
        )
    vae.enable_tiling()
    vae.tile_sample_min_size = height
    vae.tile_latent_min_size = latent
