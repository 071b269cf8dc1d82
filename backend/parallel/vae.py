"""Parallel VAE decode: independent tiles dealt to the ranks, gathered on rank 0.

Blended tiles are not the whole decode's pixels: this is the split of `--vae-tiling on` and
of the decodes the memory plan tiles to fit. `vae_bands.py` splits the whole decode exactly.

A model family cuts its decode into tiles that need nothing from each other (the VAE's own
tiles, `models/vae_tiles.py`: for Wan and CogVideoX each spatial tile with all its frames and
their causal-conv cache, for Flux a square of the image). Every rank computes the same deal
from the tiles' costs, decodes its own tiles, and rank 0 gathers all of them in tile order;
the family then blends them on rank 0 exactly as one rank would have, so the frames equal a
serial tiled decode. One tile (an untiled decode) is rank 0's alone: no collective.

The gather is two collectives on the given group: an all-gather of the tile shapes (fixed size:
one row per tile) and a gather to rank 0 of each rank's tiles packed into one buffer, padded to
the longest (gloo takes only equal-sized messages).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from typing import Protocol

import torch
import torch.distributed as dist

log = logging.getLogger(__name__)

MAX_DIMS = 8
"""Tiles have at most this many dimensions (a video tile has 5)."""


class Tiles(Protocol):
    """What a family's tiled decode offers (see `models.families.TiledDecode`)."""

    costs: tuple[int, ...]
    decode_tile: Callable[[int], torch.Tensor]
    dtype: torch.dtype


def deal(costs: Sequence[int], num_ranks: int) -> list[int]:
    """The rank that decodes each tile: largest tiles first, each to the least loaded rank
    (ties to the lowest rank). Deterministic, so every rank computes the same deal."""
    if num_ranks < 1:
        raise ValueError(f"num_ranks must be >= 1, got {num_ranks}")
    owners = [0] * len(costs)
    loads = [0] * num_ranks
    for index in sorted(range(len(costs)), key=lambda i: (-costs[i], i)):
        rank = min(range(num_ranks), key=lambda r: (loads[r], r))
        owners[index] = rank
        loads[rank] += costs[index]
    return owners


def decode_tiles(
    tiles: Tiles, device: torch.device, group: dist.ProcessGroup | None = None
) -> list[torch.Tensor] | None:
    """Decode this rank's share of `tiles`; all decoded tiles in order on rank 0, else None."""
    return gather_tiles(tiles, decode_share(tiles, group), device, group)


def decode_share(tiles: Tiles, group: dist.ProcessGroup | None = None) -> dict[int, torch.Tensor]:
    """This rank's tiles, decoded: {tile index: tile}."""
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    owners = deal(tiles.costs, world)
    log.debug("rank %d decodes tiles %s", rank, [i for i, o in enumerate(owners) if o == rank])
    return {i: tiles.decode_tile(i) for i, owner in enumerate(owners) if owner == rank}


def gather_tiles(
    tiles: Tiles,
    mine: dict[int, torch.Tensor],
    device: torch.device,
    group: dist.ProcessGroup | None = None,
) -> list[torch.Tensor] | None:
    """Every rank's decoded tiles (`decode_share`), in tile order on rank 0; None elsewhere."""
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    owners = deal(tiles.costs, world)
    if not any(owners):  # one rank, or one tile (an untiled decode): rank 0 has them all
        return [mine[i] for i in range(len(owners))] if rank == 0 else None
    shapes = _all_shapes(mine, len(owners), owners, device, group)
    sizes = [math.prod(shape) for shape in shapes]
    per_rank = [sum(s for s, o in zip(sizes, owners, strict=True) if o == r) for r in range(world)]
    longest = max(per_rank)
    packed = torch.zeros(longest, dtype=tiles.dtype, device=device)
    if mine:
        flat = torch.cat([mine[i].reshape(-1) for i in sorted(mine)])
        packed[: flat.numel()] = flat
    buffers = [torch.empty_like(packed) for _ in range(world)] if rank == 0 else None
    dist.gather(packed, buffers, group=group, group_dst=0)
    if rank != 0:
        return None
    offsets = [0] * world
    decoded = []
    for index, owner in enumerate(owners):
        start = offsets[owner]
        offsets[owner] += sizes[index]
        decoded.append(buffers[owner][start : start + sizes[index]].view(shapes[index]))
    return decoded


def _all_shapes(
    mine: dict[int, torch.Tensor],
    num_tiles: int,
    owners: list[int],
    device: torch.device,
    group: dist.ProcessGroup | None,
) -> list[tuple[int, ...]]:
    """Every tile's shape, from its owner (one row per tile, -1 where a dimension is absent)."""
    table = torch.full((num_tiles, MAX_DIMS), -1, dtype=torch.int64, device=device)
    for index, tile in mine.items():
        if tile.dim() > MAX_DIMS:
            raise ValueError(f"tiles have at most {MAX_DIMS} dimensions, got {tile.dim()}")
        table[index, : tile.dim()] = torch.tensor(tile.shape, dtype=torch.int64)
    tables = [torch.empty_like(table) for _ in range(dist.get_world_size(group))]
    dist.all_gather(tables, table, group=group)
    return [
        tuple(int(d) for d in tables[owner][index].tolist() if d >= 0)
        for index, owner in enumerate(owners)
    ]
