"""Wan 2.1 and Wan 2.2 A14B: text-to-video (`WanPipeline`) and image-to-video
(`WanImageToVideoPipeline`, CLIP-conditioned in 2.1)."""

from __future__ import annotations

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
    text_len,
    video_frames,
    video_kwargs,
)


class WanTextToVideo(Family):
    def model_limits(self, pipe: Any, *, tiny: bool) -> Limits:
        patch = pipe.transformer.config.patch_size
        return Limits(
            task=self.task,
            size_multiple=int(pipe.vae_scale_factor_spatial * patch[1]),
            min_size=16,
            max_size=2048,
            frame_multiple=int(pipe.vae_scale_factor_temporal),
            max_frames=257,
            needs_image=self.task == IMAGE_TO_VIDEO,
            default_width=64 if tiny else 832,
            default_height=64 if tiny else 480,
            default_frames=5 if tiny else 81,
            default_steps=4 if tiny else 40,
            default_guidance=5.0,
            fps=16,
        )

    def _text(self, pipe: Any, request: JobRequest, device: torch.device) -> Tensors:
        positive, negative = pipe.encode_prompt(
            prompt=request.prompt,
            negative_prompt=request.negative_prompt,
            do_classifier_free_guidance=request.uses_cfg,
            max_sequence_length=text_len(pipe.tokenizer),
            device=device,
        )
        tensors = {"prompt_embeds": positive}
        if negative is not None:
            tensors["negative_prompt_embeds"] = negative
        return tensors

    def encode(self, pipe: Any, request: JobRequest, device: torch.device) -> Tensors:
        return self._text(pipe, request, device)

    def prepare(self, pipe: Any, request: JobRequest, tensors: Tensors) -> dict[str, Any]:
        return video_kwargs(request, tensors)

    def tiled_decode(self, pipe: Any, request: JobRequest, latents: Any) -> TiledDecode:
        from . import vae as wan_vae

        vae = pipe.vae
        config = vae.config
        # as the pipeline before its decode: to the VAE's dtype, then undo the normalisation
        z = latents.to(device=vae.device, dtype=vae.dtype)
        shape = (1, config.z_dim, 1, 1, 1)
        mean = torch.tensor(config.latents_mean).view(shape).to(z.device, z.dtype)
        std = 1.0 / torch.tensor(config.latents_std).view(shape).to(z.device, z.dtype)
        z = z / std + mean
        tiles = wan_vae.tile_grid(vae, z)
        return decode_in_tiles(
            vae, z, tiles, wan_vae.decode_tile, video_frames(pipe), wan_vae.finish
        )

    def latent_channels(self, pipe: Any) -> int:
        return int(pipe.vae.config.z_dim)

    def preview_grid(self, pipe: Any, latents: torch.Tensor, request: JobRequest) -> torch.Tensor:
        return latents[0, :, 0]  # (batch, channels, frames, h, w)

    def decode_for_fit(self, pipe: Any, latent: torch.Tensor) -> torch.Tensor:
        config = pipe.vae.config
        mean = torch.tensor(config.latents_mean).view(1, -1, 1, 1, 1).to(latent)
        std = torch.tensor(config.latents_std).view(1, -1, 1, 1, 1).to(latent)
        video = pipe.vae.decode(latent[:, :, None] * std + mean, return_dict=False)[0]
        return video[0, :, 0]


class WanImageToVideo(WanTextToVideo):
    def encode(self, pipe: Any, request: JobRequest, device: torch.device) -> Tensors:
        tensors = self._text(pipe, request, device)
        if pipe.transformer.config.image_dim is not None:  # Wan 2.1 i2v conditions on CLIP
            # The class's method: `prepare` hands the pipeline a per-job stand-in.
            tensors["image_embeds"] = type(pipe).encode_image(pipe, request_image(request), device)
        return tensors

    def prepare(self, pipe: Any, request: JobRequest, tensors: Tensors) -> dict[str, Any]:
        if "image_embeds" in tensors:
            # diffusers refuses `image` together with `image_embeds`, yet needs the image for
            # the VAE condition; this job's embeddings (from rank 0) stand in for the encoder
            # until `finish` removes them again.
            embeds = tensors["image_embeds"]
            pipe.encode_image = lambda *_args, **_kwargs: embeds
        return {**video_kwargs(request, tensors), "image": request_image(request)}

    def finish(self, pipe: Any) -> None:
        pipe.__dict__.pop("encode_image", None)
