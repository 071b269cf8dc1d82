"""Wan's VAE decode cut into independent tiles: what `AutoencoderKLWan.tiled_decode` decodes.

With tiling on, `AutoencoderKLWan` decodes overlapping spatial tiles one after another; each
tile runs all its latent frames, one at a time, through the causal decoder, whose feature
cache is cleared before every tile. Nothing passes between tiles until the blend at the end
(`vae_tiles.blend`), after which the video is cropped to the sample size, unpatchified (Wan
2.2's VAE) and clamped to -1..1. This module says which tiles there are, decodes one, and does
that finish, so tile by tile equals `vae.enable_tiling(); vae.decode(z)` exactly.

Shapes: latents `z` are (batch, z_dim, frames, height, width), as `vae.decode` takes them.
"""

from __future__ import annotations

from typing import Any

import torch

from ...vae_tiles import Tile, TileGrid, cut, grid, whole


def _checked_internals() -> list[Any]:
    """The diffusers internals a tile's decode relies on (ending with `unpatchify`), checked."""
    from ....diffusers_internals import require

    return require(
        "tiled Wan VAE decode",
        "autoencoder_kl_wan.AutoencoderKLWan.clear_cache",
        "autoencoder_kl_wan.WanDecoder3d.forward",
        "autoencoder_kl_wan.unpatchify",
    )


def _patch(vae: Any) -> int:
    return int(vae.config.get("patch_size") or 1)  # Qwen-Image's VAE has no patches


def tile_grid(vae: Any, z: torch.Tensor) -> TileGrid:
    """The tiles `vae.decode(z)` decodes: one whole tile when tiling is off or `z` fits."""
    height, width = z.shape[-2:]
    ratio = vae.spatial_compression_ratio
    tile = (vae.tile_sample_min_height // ratio, vae.tile_sample_min_width // ratio)
    if not (vae.use_tiling and (width > tile[1] or height > tile[0])):
        return whole(height, width)
    patch = _patch(vae)
    stride = (vae.tile_sample_stride_height, vae.tile_sample_stride_width)
    keep = (stride[0] // patch, stride[1] // patch)
    return grid(
        height,
        width,
        tile=tile,
        stride=(stride[0] // ratio, stride[1] // ratio),
        blend=(
            vae.tile_sample_min_height // patch - keep[0],
            vae.tile_sample_min_width // patch - keep[1],
        ),
        keep=keep,
    )


def decode_tile(vae: Any, z: torch.Tensor, tile: Tile) -> torch.Tensor:
    """Decode one tile of a tiled grid: its frames one by one, the causal cache cleared first."""
    _checked_internals()
    part = cut(z, tile)
    vae.clear_cache()
    frames = []
    for index in range(part.shape[2]):
        vae._conv_idx = [0]
        frame = vae.post_quant_conv(part[:, :, index : index + 1])
        frames.append(
            vae.decoder(
                frame, feat_cache=vae._feat_map, feat_idx=vae._conv_idx, first_chunk=index == 0
            )
        )
    vae.clear_cache()
    return torch.cat(frames, dim=2)


def finish(vae: Any, z: torch.Tensor, blended: torch.Tensor) -> torch.Tensor:
    """The blended tiles of a tiled grid as `vae.decode(z)` returns them: cropped to the sample
    size, unpatchified, clamped to -1..1."""
    (unpatchify,) = _checked_internals()[-1:]
    patch = _patch(vae)
    height, width = (size * vae.spatial_compression_ratio // patch for size in z.shape[-2:])
    video = blended[..., :height, :width]
    if vae.config.get("patch_size") is not None:
        video = unpatchify(video, patch_size=vae.config.patch_size)
    return torch.clamp(video, min=-1.0, max=1.0)
