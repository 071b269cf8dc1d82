"""Z-Image (`ZImagePipeline`; Z-Image-Turbo): a 6B single-stream DiT over the image tokens
followed by the text tokens, Flux's VAE, a Qwen3 text encoder.

Turbo is distilled (8-9 steps, the model card's guidance 0): one branch, so there is nothing
for CFG parallel to split and the plan spends every rank on the sequence (`supports_cfg` is
False; `families/z_image/parallel.py` is the sequence-parallel plan diffusers lacks for this model).

Guidance keeps paradit's meaning (above 1 runs the negative branch; 1 is none, the default):
the pipeline's own scale is one less (its guided prediction is `pos + g * (pos - neg)`, i.e.
`neg + (g + 1) * (pos - neg)`), and it is 0 for an unguided job. A guided job (the
non-distilled Z-Image, or Turbo asked for guidance) runs both branches as the pipeline does,
as one batch of two through the transformer on every rank (`batched_cfg`), not split in halves.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....contract import Limits
from ....request import JobRequest
from ..base import Family, Tensors, TiledDecode, decode_in_tiles, image_limits

# The model card's 1024x1024, 9 steps (8 DiT calls of weight) and guidance 0 (here 1: none);
# the pipeline's default text length.
DEFAULT_SIZE, DEFAULT_STEPS, DEFAULT_GUIDANCE = 1024, 9, 1.0
MAX_TEXT_TOKENS = 512


def pipeline_guidance(request: JobRequest) -> float:
    """The pipeline's `guidance_scale` for the request's: one less, 0 when unguided."""
    return request.guidance_scale - 1.0 if request.uses_cfg else 0.0


class ZImage(Family):
    def model_limits(self, pipe: Any, *, tiny: bool) -> Limits:
        return image_limits(
            self.task,
            int(pipe.vae_scale_factor * 2),
            size=DEFAULT_SIZE,
            steps=DEFAULT_STEPS,
            guidance=DEFAULT_GUIDANCE,
            tiny=tiny,
        )

    def supports_cfg(self, pipe: Any) -> bool:
        # Both branches go through one transformer call as a list of two: no CFG parallel.
        return False

    def encode(self, pipe: Any, request: JobRequest, device: torch.device) -> Tensors:
        guided = request.uses_cfg
        embeds, negative = pipe.encode_prompt(
            prompt=request.prompt,
            negative_prompt=request.negative_prompt if guided else None,
            do_classifier_free_guidance=guided,
            device=device,
            max_sequence_length=MAX_TEXT_TOKENS,
        )
        # One (tokens, width) tensor per prompt: the pipeline keeps only the real tokens.
        tensors = {"prompt_embeds": embeds[0]}
        if guided:
            tensors["negative_prompt_embeds"] = negative[0]
        return tensors

    def prepare(self, pipe: Any, request: JobRequest, tensors: Tensors) -> dict[str, Any]:
        negative = tensors.get("negative_prompt_embeds")
        return {
            "prompt_embeds": [tensors["prompt_embeds"]],
            "negative_prompt_embeds": None if negative is None else [negative],
            "guidance_scale": pipeline_guidance(request),
            "height": request.height,
            "width": request.width,
            "num_inference_steps": request.num_inference_steps,
            "max_sequence_length": MAX_TEXT_TOKENS,
        }

    def tiled_decode(self, pipe: Any, request: JobRequest, latents: Any) -> TiledDecode:
        from ..flux import vae as kl_vae  # Flux.1's tiled decode

        vae = pipe.vae
        # as the pipeline before its decode: undo the scaling and shift of the (batch,
        # channels, h, w) latents
        z = latents.to(vae.dtype)
        z = (z / vae.config.scaling_factor) + vae.config.shift_factor
        tiles = kl_vae.tile_grid(vae, z)

        def to_frames(image: torch.Tensor) -> np.ndarray:
            return np.asarray(pipe.image_processor.postprocess(image, output_type="np"))[:1]

        return decode_in_tiles(vae, z, tiles, kl_vae.decode_tile, to_frames)

    def latent_channels(self, pipe: Any) -> int:
        return int(pipe.vae.config.latent_channels)

    def preview_grid(self, pipe: Any, latents: torch.Tensor, request: JobRequest) -> torch.Tensor:
        return latents[0]  # (batch, channels, h, w): not packed

    def decode_for_fit(self, pipe: Any, latent: torch.Tensor) -> torch.Tensor:
        config = pipe.vae.config
        scaled = latent / config.scaling_factor + config.shift_factor
        return pipe.vae.decode(scaled, return_dict=False)[0][0]
