"""CogVideoX's VAE decode cut into independent tiles: what `vae.enable_tiling()` decodes.

`AutoencoderKLCogVideoX.tiled_decode` decodes overlapping spatial tiles one after another; each
tile runs through the decoder in temporal chunks of 2 latent frames (the first chunk takes the
odd one) that hand a causal-conv cache to the next. Nothing passes between tiles until the
blend at the end, so the tiles can be decoded anywhere, in any order, and blended afterwards.
This module says which tiles there are and decodes one (all its chunks, cache included);
`vae_tiles.blend` blends decoded tiles in the VAE's own serial order with its own `blend_v` /
`blend_h`, so the result equals `vae.enable_tiling(); vae.decode(z)` exactly. Latents that
fit in one tile are one "tile" covering everything: the untiled decode, which `vae.decode`
also takes for them (and which the family then calls).

Shapes: latents `z` are (batch, channels, frames, height, width), as `vae.decode` takes them.
"""

from __future__ import annotations

from typing import Any

import torch

from ...vae_tiles import Tile, TileGrid, cut, grid, whole

FRAMES_PER_CHUNK_ATTR = "num_latent_frames_batch_size"


def tile_grid(vae: Any, z: torch.Tensor) -> TileGrid:
    """The tiles `vae.decode(z)` would decode with tiling on (its current tile settings)."""
    height, width = z.shape[-2:]
    tile_h, tile_w = vae.tile_latent_min_height, vae.tile_latent_min_width
    if not (width > tile_w or height > tile_h):
        return whole(height, width)
    blend_h = int(vae.tile_sample_min_height * vae.tile_overlap_factor_height)
    blend_w = int(vae.tile_sample_min_width * vae.tile_overlap_factor_width)
    return grid(
        height,
        width,
        tile=(tile_h, tile_w),
        stride=(
            int(tile_h * (1 - vae.tile_overlap_factor_height)),
            int(tile_w * (1 - vae.tile_overlap_factor_width)),
        ),
        blend=(blend_h, blend_w),
        keep=(vae.tile_sample_min_height - blend_h, vae.tile_sample_min_width - blend_w),
    )


def decode_tile(vae: Any, z: torch.Tensor, tile: Tile) -> torch.Tensor:
    """Decode one tile through all its temporal chunks, carrying the causal-conv cache."""
    part = cut(z, tile)
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
