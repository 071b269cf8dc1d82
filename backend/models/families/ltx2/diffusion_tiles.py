"""LTX-2.5's diffusion video decoder in ComfyUI's `VAEDecodeTiled` tiles (a job's
`decode_tiles`): each tile decoded alone with its own seed-0 noise, the decoded tiles feathered
together on rank 0.

Read 2026-11-29 from Comfy-Org/ComfyUI comfy/utils.py `tiled_scale_multidim`
(b3be02d6e766a8d3743dcf99cc967118f3ec8e3e), comfy/sd.py (35ead008b9f8b0928fb0b674e97923d3ebd57be3:
the diffusion VAE's `upscale_ratio` (8F - 7, 32, 32) and `upscale_index_formula` (8, 32, 32))
and comfy/ldm/lightricks/vae/na_diffusion_decoder.py (comfyanonymous/ComfyUI
8fd62980e7e31995eea0f7f1d0fc747e44918429: `CausalDiffusionVAE.decode` seeds a generator 0 on
the latents' device on every call, `NADiffusionDecoder.forward` draws its pixel noise
`randn((B, 3, T, H, W), dtype=the latents', device=the latents')` from it):

- a tile's latents `(1, C, f, h, w)` (the batch one sample at a time) decode as a whole decode
  of those latents: the causal first frame, 8(f - 1) + 1 frames, 32h x 32w; the noise depends
  on the tile's shape only, never on its place (tiles of one shape draw the same noise);
- the decoded tile goes to frame 8 x its first latent frame, pixel 32 x its first latent row
  and column, cut where it would pass the output's end;
- its mask: ones, times on each axis a linear ramp (k + 1) / feather over the first and the
  last `feather` entries (both ends, the outer edges too) where feather (8 x overlap - 7
  frames, 32 x overlap pixels) is shorter than the tile on that axis;
- the output (float32, 8F - 7 frames) is the sum of mask x tile over the sum of the masks.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ....decode_tiles import DecodeTiles, one_tile, spans
from ..base import TiledDecode
from . import diffusion_vae


@dataclass(frozen=True)
class Placement:
    """One tile: its latents' (start, length) on each axis (frames, height, width)."""

    sample: int
    """The batch entry it belongs to."""
    latent: tuple[tuple[int, int], ...]

    @property
    def cost(self) -> int:
        return self.latent[0][1] * self.latent[1][1] * self.latent[2][1]


def ratios(decoder: Any) -> tuple[int, int]:
    """(temporal, spatial) of the decoder (LTX-2.5: 8, 32)."""
    config = decoder.config
    return int(config.temporal_compression_ratio), int(config.spatial_compression_ratio)


def placements(
    shape: tuple[int, ...], tiles: DecodeTiles, temporal: int, spatial: int
) -> list[Placement]:
    """Every tile of latents of `shape` (B, C, F, H, W), sample by sample; one whole tile per
    sample where the latents fit one of ComfyUI's tiles."""
    tile, overlap = tiles.latent(temporal, spatial)
    grid = tuple(shape[2:])
    if one_tile(grid, tile):
        axes: list[list[tuple[int, int]]] = [[(0, size)] for size in grid]
    else:
        axes = [spans(size, t, o) for size, t, o in zip(grid, tile, overlap, strict=True)]
    return [
        Placement(sample, latent)
        for sample in range(shape[0])
        for latent in itertools.product(*axes)
    ]


def out_length(axis: int, latent: int, temporal: int, spatial: int) -> int:
    """Decoded length of `latent` units on `axis` (0: frames, causal)."""
    return max(0, latent * temporal - (temporal - 1)) if axis == 0 else latent * spatial


def mask(shape: Sequence[int], feathers: Sequence[int]) -> torch.Tensor:
    """A decoded tile's weights (1, 1, *shape): a linear ramp at both ends of each axis whose
    feather is shorter than the axis."""
    weights = torch.ones((1, 1, *shape))
    for axis, (length, feather) in enumerate(zip(shape, feathers, strict=True)):
        if feather >= length:
            continue
        ramp = torch.ones(length)
        for k in range(feather):
            ramp[k] *= (k + 1) / feather
            ramp[length - 1 - k] *= (k + 1) / feather
        view = [1] * weights.dim()
        view[axis + 2] = length
        weights = weights * ramp.view(view)
    return weights


def blend(
    shape: tuple[int, ...],
    tiles: DecodeTiles,
    where: list[Placement],
    decoded: list[torch.Tensor],
    ratio: tuple[int, int],
) -> torch.Tensor:
    """The decoded tiles of latents of `shape` (B, C, F, H, W) feathered into (B, 3, 8F - 7,
    32H, 32W) float32 pixels in -1..1, as `tiled_scale_multidim` sums and divides them; one
    whole tile per sample is that tile."""
    temporal, spatial = ratio
    _, overlap = tiles.latent(temporal, spatial)
    feathers = [out_length(a, o, temporal, spatial) for a, o in enumerate(overlap)]
    size = [out_length(a, n, temporal, spatial) for a, n in enumerate(shape[2:])]
    channels = decoded[0].shape[1]
    out = torch.zeros((shape[0], channels, *size))
    weight = torch.zeros((shape[0], 1, *size))
    whole = len(where) == shape[0]
    for place, tile in zip(where, decoded, strict=True):
        tile = tile.to(torch.float32)
        if whole:
            out[place.sample] = tile[0]
            continue
        starts = [
            start * (temporal if a == 0 else spatial) for a, (start, _) in enumerate(place.latent)
        ]
        lengths = [min(n, s - o) for n, s, o in zip(tile.shape[2:], size, starts, strict=True)]
        weights = mask(tile.shape[2:], feathers)
        cut = (slice(None), slice(None), *(slice(0, n) for n in lengths))
        at = (slice(place.sample, place.sample + 1), slice(None))
        at += tuple(slice(o, o + n) for o, n in zip(starts, lengths, strict=True))
        out[at] += tile[cut] * weights[cut]
        weight[at] += weights[cut]
    return out if whole else out / weight


def window_problem(decoder: Any, z_shape: tuple[int, ...], tiles: DecodeTiles) -> str | None:
    """Why some tile of latents of `z_shape` cannot be decoded (a stage's grid under its
    attention window: `diffusion_vae.window_problem`), else None."""
    temporal, spatial = ratios(decoder)
    shapes = {tuple(n for _, n in p.latent) for p in placements(z_shape, tiles, temporal, spatial)}
    for latent in sorted(shapes):
        problem = diffusion_vae.window_problem(decoder, latent)
        if problem:
            return f"a tile of {latent[0]}x{latent[1]}x{latent[2]} latents: {problem}"
    return None


def tiled_decode(
    decoder: Any, z: torch.Tensor, tiles: DecodeTiles, to_frames: Callable[[torch.Tensor], Any]
) -> TiledDecode:
    """The job's decode in ComfyUI's tiles: any rank decodes any tile (its own seed-0 noise),
    rank 0 feathers them (`blend`) and makes the frames."""
    ratio = ratios(decoder)
    where = placements(tuple(z.shape), tiles, *ratio)

    def decode_tile(index: int) -> torch.Tensor:
        place = where[index]
        cut = z[place.sample : place.sample + 1]
        for axis, (start, length) in enumerate(place.latent):
            cut = cut.narrow(axis + 2, start, length)
        return diffusion_vae.decode(decoder, cut)

    def assemble(decoded: list[torch.Tensor]) -> Any:
        return to_frames(blend(tuple(z.shape), tiles, where, decoded, ratio))

    return TiledDecode(
        costs=tuple(p.cost for p in where),
        decode_tile=decode_tile,
        assemble=assemble,
        dtype=decoder.dtype,
        vae=decoder,
        latents=z,
        to_frames=to_frames,
    )
