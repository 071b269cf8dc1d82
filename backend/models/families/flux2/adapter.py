"""Flux.2 (`Flux2Pipeline`; FLUX.2-dev): a 32B MMDiT whose guidance is embedded (one branch,
no negative prompt: nothing for CFG parallel to split, so the plan spends every rank on the
sequence through diffusers' own context-parallel plan), a Mistral 3 text encoder (three of its
hidden states stacked per token), the Flux.2 VAE.

The pipeline's latents are the VAE's 32 channels in 2x2 patches (128 per token), normalised by
the VAE's batch-norm statistics and packed as (batch, tokens, 128); the job undoes that as the
pipeline does before its decode, then decodes tile by tile (the Flux.2 VAE tiles as Flux's).

With reference images (the request's `image` and `images`) the same model edits: every rank's
pipeline VAE-encodes them (each at its own size, at most 1024x1024 pixels) and appends their
tokens to the noise's; the text encoder does not see them. The sequence split covers them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....contract import Limits
from ....request import JobRequest
from ..base import Family, Tensors, TiledDecode, decode_in_tiles, image_limits, request_images

# The model card's 1024x1024, 50 steps and guidance 4; the pipeline's text length.
DEFAULT_SIZE, DEFAULT_STEPS, DEFAULT_GUIDANCE = 1024, 50, 4.0
MAX_TEXT_TOKENS = 512
MAX_REFERENCES = 10
"""FLUX.2's announcement: up to 10 reference images."""
MIN_IMAGE_SIDE = 64
"""The pipeline's image check refuses smaller references."""


class Flux2(Family):
    def model_limits(self, pipe: Any, *, tiny: bool) -> Limits:
        return self.edit_limits(pipe, steps=DEFAULT_STEPS, guidance=DEFAULT_GUIDANCE, tiny=tiny)

    def edit_limits(self, pipe: Any, *, steps: int, guidance: float, tiny: bool) -> Limits:
        """Text-to-image that also edits (FLUX.2-dev and Klein), at the model card's 1024x1024
        and the model's default `steps` and `guidance`: with reference images, a job is an
        image edit (the output is the first image's size, at most 1024x1024 pixels, as the
        pipeline does)."""
        base = image_limits(
            self.task,
            int(pipe.vae_scale_factor * 2),
            size=DEFAULT_SIZE,
            steps=steps,
            guidance=guidance,
            tiny=tiny,
        )
        return Limits(
            **{
                **base.to_dict(),
                "accepts_image": True,
                "min_image_side": MIN_IMAGE_SIDE,
                "max_images": MAX_REFERENCES,
                "edit_pixels": 64 * 64 if tiny else DEFAULT_SIZE * DEFAULT_SIZE,
                "edit_keeps_smaller": True,
            }
        )

    def supports_cfg(self, pipe: Any) -> bool:
        return False  # the guidance scale is embedded: the pipeline has no negative branch

    def encode(self, pipe: Any, request: JobRequest, device: torch.device) -> Tensors:
        embeds, _text_ids = pipe.encode_prompt(
            prompt=request.prompt, device=device, max_sequence_length=MAX_TEXT_TOKENS
        )
        return {"prompt_embeds": embeds}

    def prepare(self, pipe: Any, request: JobRequest, tensors: Tensors) -> dict[str, Any]:
        return {
            "prompt_embeds": tensors["prompt_embeds"],
            "guidance_scale": request.guidance_scale,
            "height": request.height,
            "width": request.width,
            "num_inference_steps": request.num_inference_steps,
            "max_sequence_length": MAX_TEXT_TOKENS,
            # the reference images: every rank's pipeline VAE-encodes them after the noise
            "image": request_images(request) if request.image is not None else None,
        }

    def _vae_latents(self, pipe: Any, latents: torch.Tensor, height: int, width: int):
        """As the pipeline before its decode: unpack (batch, tokens, 128) to 2x2 patches
        (batch, 128, h, w), undo the batch-norm normalisation, unpatchify to (batch, 32, 2h,
        2w)."""
        vae = pipe.vae
        rows, cols = height // (pipe.vae_scale_factor * 2), width // (pipe.vae_scale_factor * 2)
        ids = pipe._prepare_latent_ids(latents.new_empty(latents.shape[0], 1, rows, cols))
        patches = pipe._unpack_latents_with_ids(latents, ids.to(latents.device))
        mean = vae.bn.running_mean.view(1, -1, 1, 1).to(patches.device, patches.dtype)
        std = torch.sqrt(vae.bn.running_var.view(1, -1, 1, 1) + vae.config.batch_norm_eps)
        patches = patches * std.to(patches.device, patches.dtype) + mean
        return pipe._unpatchify_latents(patches).to(vae.dtype)

    def tiled_decode(self, pipe: Any, request: JobRequest, latents: Any) -> TiledDecode:
        from ..flux import vae as kl_vae  # Flux.1's tiled decode

        vae = pipe.vae
        z = self._vae_latents(pipe, latents, request.height, request.width)
        tiles = kl_vae.tile_grid(vae, z)

        def to_frames(image: torch.Tensor) -> np.ndarray:
            return np.asarray(pipe.image_processor.postprocess(image, output_type="np"))[:1]

        return decode_in_tiles(vae, z, tiles, kl_vae.decode_tile, to_frames)

    def latent_channels(self, pipe: Any) -> int:
        return int(pipe.vae.config.latent_channels)

    def preview_grid(self, pipe: Any, latents: torch.Tensor, request: JobRequest) -> torch.Tensor:
        return self._vae_latents(pipe, latents, request.height, request.width)[0]

    def decode_for_fit(self, pipe: Any, latent: torch.Tensor) -> torch.Tensor:
        return pipe.vae.decode(latent, return_dict=False)[0][0]
