"""ComfyUI's `VAEDecodeTiled` tiles as a job asks for them (`decode_tiles`): the node's four
widgets, and where they put the tiles of a video's latents. Torch-free: the request reads it.

Read 2026-11-29 from Comfy-Org/ComfyUI: nodes.py `VAEDecodeTiled.decode` (commit
5aabaf5171541aa26738d53f9d1f91c1b3e3497a), comfy/sd.py `VAE.decode_tiled` and
`decode_tiled_3d` (35ead008b9f8b0928fb0b674e97923d3ebd57be3), comfy/utils.py
`tiled_scale_multidim` (b3be02d6e766a8d3743dcf99cc967118f3ec8e3e):

- the node: an overlap above a quarter of the tile becomes a quarter (`tile_size // 4`), a
  temporal overlap above half the temporal size becomes half; in latent units the temporal
  tile is max(2, temporal_size // t) and its overlap max(1, min(tile // 2, temporal_overlap //
  t)) with t the VAE's temporal ratio (8: comfy/sd.py's `temporal_compression_decode`, the
  round of its frame formula at 8192), the spatial tile tile_size // s and its overlap
  overlap // s (s: 32);
- `decode_tiled`: the temporal overlap at least 1, the temporal tile at least 2;
- `tiled_scale_multidim`, per dimension (frames, height, width): latents that fit one tile on
  every axis are decoded whole; otherwise tiles start at range(0, size - overlap, tile -
  overlap) (one at 0 where the axis fits), each start clamped to size - overlap, each tile
  min(tile, size - start) long (the last may be shorter).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

FIELDS = ("tile_size", "overlap", "temporal_size", "temporal_overlap")
"""The node's widgets, in its order; a request's `decode_tiles` object has these keys."""


@dataclass(frozen=True)
class DecodeTiles:
    """`VAEDecodeTiled`'s widgets: pixels (`tile_size`, `overlap`) and frames."""

    tile_size: int
    """A tile's side in pixels (ComfyUI's widget: 64 to 4096)."""
    overlap: int
    """Pixels two neighbouring tiles share (0 or more)."""
    temporal_size: int
    """A tile's length in frames (8 or more)."""
    temporal_overlap: int
    """Frames two neighbouring tiles share (4 or more in ComfyUI's widget; 0 or more here)."""

    def __post_init__(self) -> None:
        for name in FIELDS:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"decode_tiles.{name} must be an integer, got {value!r}")
        if self.tile_size < 64 or self.temporal_size < 8:
            raise ValueError(
                f"decode_tiles: tile_size at least 64 and temporal_size at least 8 (ComfyUI's "
                f"VAEDecodeTiled), got {self.tile_size} and {self.temporal_size}"
            )
        if self.overlap < 0 or self.temporal_overlap < 0:
            raise ValueError("decode_tiles: overlap and temporal_overlap are 0 or more")

    @classmethod
    def from_json(cls, value: Any) -> DecodeTiles:
        """A request's object (the four widgets by name, every one given)."""
        if not isinstance(value, Mapping) or set(value) != set(FIELDS):
            raise ValueError(f"decode_tiles: an object with exactly {', '.join(FIELDS)}")
        return cls(**{name: value[name] for name in FIELDS})

    def to_json(self) -> dict[str, int]:
        return dataclasses.asdict(self)

    def latent(
        self, temporal_ratio: int, spatial_ratio: int
    ) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        """(tile, overlap), each (frames, height, width) in latent units, as the node and
        `VAE.decode_tiled` turn the widgets into `decode_tiled_3d`'s arguments."""
        overlap = self.overlap if self.tile_size >= self.overlap * 4 else self.tile_size // 4
        temporal_overlap = self.temporal_overlap
        if self.temporal_size < temporal_overlap * 2:
            temporal_overlap = self.temporal_size // 2
        tile_t = max(2, self.temporal_size // temporal_ratio)
        overlap_t = max(1, min(tile_t // 2, temporal_overlap // temporal_ratio))
        side, shared = self.tile_size // spatial_ratio, overlap // spatial_ratio
        return (max(2, tile_t), side, side), (max(1, overlap_t), shared, shared)


def spans(size: int, tile: int, overlap: int) -> list[tuple[int, int]]:
    """(start, length) of each tile along one axis of `size` latent units, as
    `tiled_scale_multidim` walks it (one whole span where the axis fits a tile)."""
    if size <= tile:
        return [(0, size)]
    if tile <= overlap:
        raise ValueError(
            f"decode_tiles: a tile of {tile} latent units under an overlap of {overlap}"
        )
    out = []
    for start in range(0, size - overlap, tile - overlap):
        start = max(0, min(size - overlap, start))
        out.append((start, min(tile, size - start)))
    return out


def one_tile(shape: tuple[int, ...], tile: tuple[int, ...]) -> bool:
    """Whether latents of `shape` (frames, height, width) fit one tile (ComfyUI decodes whole)."""
    return all(s <= t for s, t in zip(shape, tile, strict=True))
