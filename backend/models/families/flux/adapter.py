"""Flux.1 (dev: guidance embedded, one branch; schnell and others: true CFG). A request's
`prompt_2` is T5's own prompt (`prompt` then CLIP-L's alone); the negative prompt goes to both."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....contract import Limits
from ....request import JobRequest
from ..base import Family, Tensors, TiledDecode, decode_in_tiles, image_limits, text_len


class Flux(Family):
    def model_limits(self, pipe: Any, *, tiny: bool) -> Limits:
        guidance = 4.0 if self.supports_cfg(pipe) else 3.5
        size_multiple = int(pipe.vae_scale_factor * 2)
        return image_limits(
            self.task, size_multiple, size=1024, steps=28, guidance=guidance, tiny=tiny
        )

    def supports_cfg(self, pipe: Any) -> bool:
        # Guidance-distilled Flux (dev) embeds the guidance scale: one branch, no CFG.
        return not pipe.transformer.config.guidance_embeds

    def _max_len(self, pipe: Any) -> int:
        return text_len(pipe.tokenizer_2) if pipe.tokenizer_2 is not None else 512

    def encode(self, pipe: Any, request: JobRequest, device: torch.device) -> Tensors:
        max_len = self._max_len(pipe)
        # prompt goes to CLIP-L (the pooled vector), prompt_2 to T5 (the text tokens); the
        # pipeline gives T5 `prompt` too where prompt_2 is empty
        embeds, pooled, _ids = pipe.encode_prompt(
            prompt=request.prompt,
            prompt_2=request.prompt_2 or None,
            device=device,
            max_sequence_length=max_len,
        )
        tensors = {"prompt_embeds": embeds, "pooled_prompt_embeds": pooled}
        if self.uses_cfg(pipe, request):
            neg, neg_pooled, _ids = pipe.encode_prompt(
                prompt=request.negative_prompt,
                prompt_2=None,
                device=device,
                max_sequence_length=max_len,
            )
            tensors["negative_prompt_embeds"] = neg
            tensors["negative_pooled_prompt_embeds"] = neg_pooled
        return tensors

    def prepare(self, pipe: Any, request: JobRequest, tensors: Tensors) -> dict[str, Any]:
        cfg = self.uses_cfg(pipe, request)
        return {
            **tensors,
            "true_cfg_scale": request.guidance_scale if cfg else 1.0,
            "guidance_scale": request.guidance_scale,
            "height": request.height,
            "width": request.width,
            "num_inference_steps": request.num_inference_steps,
            "max_sequence_length": tensors["prompt_embeds"].shape[1],
        }

    def tiled_decode(self, pipe: Any, request: JobRequest, latents: Any) -> TiledDecode:
        from . import vae as kl_vae

        vae = pipe.vae
        # as the pipeline before its decode: unpack (batch, seq, channels * 4) to (batch,
        # channels, h, w), then undo the scaling and shift
        z = pipe._unpack_latents(latents, request.height, request.width, pipe.vae_scale_factor)
        z = (z / vae.config.scaling_factor) + vae.config.shift_factor
        tiles = kl_vae.tile_grid(vae, z)

        def to_frames(image: torch.Tensor) -> np.ndarray:
            return np.asarray(pipe.image_processor.postprocess(image, output_type="np"))[:1]

        return decode_in_tiles(vae, z, tiles, kl_vae.decode_tile, to_frames)

    def latent_channels(self, pipe: Any) -> int:
        return int(pipe.vae.config.latent_channels)

    def preview_grid(self, pipe: Any, latents: torch.Tensor, request: JobRequest) -> torch.Tensor:
        unpacked = pipe._unpack_latents(
            latents, request.height, request.width, pipe.vae_scale_factor
        )  # (batch, seq, channels * 4) -> (batch, channels, h, w)
        return unpacked[0]

    def decode_for_fit(self, pipe: Any, latent: torch.Tensor) -> torch.Tensor:
        config = pipe.vae.config
        scaled = latent / config.scaling_factor + config.shift_factor
        return pipe.vae.decode(scaled, return_dict=False)[0][0]
