"""CogVideoX 1.0 and 1.5, text- and image-to-video."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ....contract import IMAGE_TO_VIDEO, Limits
from ....request import JobRequest
from ..base import (
    Family,
    Tensors,
    TiledDecode,
    decode_in_tiles,
    request_image,
    video_frames,
    video_kwargs,
)


@dataclass(frozen=True)
class _CogVersion:
    """What one CogVideoX generation was made for (diffusers' docs and the model cards)."""

    width: int
    height: int
    frames: int
    max_frames: int
    fps: int


# 1.0 (2B, 5B, 5B-I2V): 720x480, 49 frames (13 latent frames, the transformer config's
# sample_frames) at 8 fps; 1.5 (5B, 5B-I2V): 1360x768, 81 frames at 16 fps, 161 at most (the
# model card's 10 s). Both: 50 steps, guidance 6 (the pipelines' defaults).
_COG_10 = _CogVersion(width=720, height=480, frames=49, max_frames=49, fps=8)
_COG_15 = _CogVersion(width=1360, height=768, frames=81, max_frames=161, fps=16)


class CogVideoX(Family):
    """CogVideoX 1.0 and 1.5 (`patch_size_t` set: two latent frames per token).

    Cond and uncond run as one batch of 2 (`batched_cfg`). The job decodes: the pipeline stops
    at the latents and `tiled_decode` decodes them tile by tile, as `vae.enable_tiling()`
    would, at every world size (so every world size gives the same frames).
    """

    def _version(self, pipe: Any) -> _CogVersion:
        return _COG_15 if pipe.transformer.config.patch_size_t else _COG_10

    def model_limits(self, pipe: Any, *, tiny: bool) -> Limits:
        config = pipe.transformer.config
        version = self._version(pipe)
        spatial = int(pipe.vae_scale_factor_spatial)
        fixed = (0, 0)
        if config.use_learned_positional_embeddings:  # 1.0 I2V: positions for one size only
            fixed = (config.sample_width * spatial, config.sample_height * spatial)
        width, height = fixed if fixed[0] else (version.width, version.height)
        return Limits(
            task=self.task,
            size_multiple=spatial * int(config.patch_size),
            min_size=16,
            max_size=2048,
            frame_multiple=int(pipe.vae_scale_factor_temporal),
            max_frames=version.max_frames,
            needs_image=self.task == IMAGE_TO_VIDEO,
            default_width=64 if tiny and not fixed[0] else width,
            default_height=64 if tiny and not fixed[0] else height,
            default_frames=9 if tiny else version.frames,
            default_steps=4 if tiny else 50,
            default_guidance=6.0,
            fps=version.fps,
            temporal_patch=int(config.patch_size_t or 1),
            fixed_width=fixed[0],
            fixed_height=fixed[1],
        )

    def encode(self, pipe: Any, request: JobRequest, device: torch.device) -> Tensors:
        positive, negative = pipe.encode_prompt(
            prompt=request.prompt,
            negative_prompt=request.negative_prompt,
            do_classifier_free_guidance=request.uses_cfg,
            max_sequence_length=int(pipe.transformer.config.max_text_seq_length),
            device=device,
        )
        tensors = {"prompt_embeds": positive}
        if negative is not None:
            tensors["negative_prompt_embeds"] = negative
        return tensors

    def prepare(self, pipe: Any, request: JobRequest, tensors: Tensors) -> dict[str, Any]:
        kwargs = {
            **video_kwargs(request, tensors),
            "max_sequence_length": tensors["prompt_embeds"].shape[1],
        }
        if self.task == IMAGE_TO_VIDEO:
            kwargs["image"] = request_image(request)
        return kwargs

    def padding_frames(self, pipe: Any, request: JobRequest) -> int:
        """Latent frames CogVideoX 1.5 puts in front so the count divides by `patch_size_t`
        (the pipeline drops them before decoding; its "latent" output still has them)."""
        patch_t = pipe.transformer.config.patch_size_t
        if not patch_t:
            return 0
        latent_frames = (request.num_frames - 1) // pipe.vae_scale_factor_temporal + 1
        return (patch_t - latent_frames % patch_t) % patch_t

    def tiled_decode(self, pipe: Any, request: JobRequest, latents: Any) -> TiledDecode:
        from .vae import decode_tile, tile_grid

        latents = latents[:, self.padding_frames(pipe, request) :]
        # as the pipeline's decode_latents: (B, F, C, H, W) -> (B, C, F, H, W), then unscale
        z = 1 / pipe.vae_scaling_factor_image * latents.permute(0, 2, 1, 3, 4)
        tiles = tile_grid(pipe.vae, z)
        return decode_in_tiles(pipe.vae, z, tiles, decode_tile, video_frames(pipe))

    def latent_channels(self, pipe: Any) -> int:
        return int(pipe.vae.config.latent_channels)

    def preview_grid(self, pipe: Any, latents: torch.Tensor, request: JobRequest) -> torch.Tensor:
        return latents[0, self.padding_frames(pipe, request)]  # (batch, frames, channels, h, w)

    def decode_for_fit(self, pipe: Any, latent: torch.Tensor) -> torch.Tensor:
        z = 1 / pipe.vae_scaling_factor_image * latent[:, :, None]
        return pipe.vae.decode(z, return_dict=False)[0][0, :, 0]
