"""Qwen-Image text-to-image (`QwenImagePipeline`): true CFG with a negative prompt, so the
two branches run on the two halves of the group (CFG parallel); a 20B MMDiT whose image and
text tokens diffusers' context-parallel plan splits; the Wan-style VAE (one latent frame)
decoded tile by tile (`vae.py`).

The pipeline rescales the guided prediction to the conditional one's norm after combining the
branches; CFG parallel hands the pipeline both branches as a single process computes them, so
that stays the pipeline's own code.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....contract import Limits
from ....request import JobRequest
from ..base import Family, Tensors, TiledDecode, decode_in_tiles, image_limits

# The model card's 1:1 size (1328x1328), 50 steps and true CFG scale 4.0; the pipeline's
# default text length (512 tokens after the template).
DEFAULT_SIZE, DEFAULT_STEPS, DEFAULT_CFG = 1328, 50, 4.0
MAX_TEXT_TOKENS = 512
PACKED_PIXELS = 4
"""The pipelines pack 2x2 latent pixels into one token, channel-major (`_pack_latents`: a
token's value c * 4 + row * 2 + column): CFGNorm's per-pixel norm (`Family.cfg_norm_pixels`)."""


class QwenImage(Family):
    def model_limits(self, pipe: Any, *, tiny: bool) -> Limits:
        base = image_limits(
            self.task,
            int(pipe.vae_scale_factor * 2),
            size=DEFAULT_SIZE,
            steps=DEFAULT_STEPS,
            guidance=DEFAULT_CFG,
            tiny=tiny,
        )
        return Limits(**{**base.to_dict(), "min_steps": min_steps(pipe)})

    def encode(self, pipe: Any, request: JobRequest, device: torch.device) -> Tensors:
        return self._encode_prompts(pipe, request, device, self._encoder_inputs(pipe, request))

    def _encode_prompts(
        self, pipe: Any, request: JobRequest, device: torch.device, inputs: dict[str, Any]
    ) -> Tensors:
        """The prompt's (and with CFG the negative prompt's) embeddings; `inputs`: what the
        encoder reads besides the prompt."""
        tensors: Tensors = {}
        prompts = {"prompt": request.prompt}
        if self.uses_cfg(pipe, request):
            prompts["negative_prompt"] = request.negative_prompt
        for name, prompt in prompts.items():
            embeds, mask = pipe.encode_prompt(
                prompt=prompt, device=device, max_sequence_length=MAX_TEXT_TOKENS, **inputs
            )
            tensors[f"{name}_embeds"] = embeds
            if mask is not None:  # None when every token is real (one prompt: always)
                tensors[f"{name}_embeds_mask"] = mask
        return tensors

    def _encoder_inputs(self, pipe: Any, request: JobRequest) -> dict[str, Any]:
        """What the text encoder reads besides the prompt: nothing (Qwen-Image-Edit: images)."""
        return {}

    def prepare(self, pipe: Any, request: JobRequest, tensors: Tensors) -> dict[str, Any]:
        cfg = "negative_prompt_embeds" in tensors
        masks = {}
        for name in ("prompt_embeds", "negative_prompt_embeds"):
            # Every token real: the pipeline drops an all-ones mask (as `encode_prompt` does)
            # and without one warns on every job that it assumes so.
            if name in tensors and f"{name}_mask" not in tensors:
                embeds = tensors[name]
                masks[f"{name}_mask"] = torch.ones(
                    embeds.shape[:2], dtype=torch.long, device=embeds.device
                )
        return {
            **tensors,
            **masks,
            "true_cfg_scale": request.guidance_scale if cfg else 1.0,
            "height": request.height,
            "width": request.width,
            "num_inference_steps": request.num_inference_steps,
            "max_sequence_length": MAX_TEXT_TOKENS,
        }

    def _latents_for_vae(self, pipe: Any, latents: torch.Tensor, request: JobRequest):
        """As the pipeline before its decode: unpack (batch, seq, channels * 4) to (batch,
        channels, 1, h, w), then undo the normalisation with the VAE's latent statistics."""
        vae = pipe.vae
        z = pipe._unpack_latents(latents, request.height, request.width, pipe.vae_scale_factor)
        z = z.to(vae.dtype)
        shape = (1, vae.config.z_dim, 1, 1, 1)
        mean = torch.tensor(vae.config.latents_mean).view(shape).to(z.device, z.dtype)
        inv_std = 1.0 / torch.tensor(vae.config.latents_std).view(shape).to(z.device, z.dtype)
        return z / inv_std + mean

    def tiled_decode(self, pipe: Any, request: JobRequest, latents: Any) -> TiledDecode:
        from . import vae as qwen_vae

        vae = pipe.vae
        z = self._latents_for_vae(pipe, latents, request)

        def to_frames(image: torch.Tensor) -> np.ndarray:
            image = image[:, :, 0]  # the one frame
            return np.asarray(pipe.image_processor.postprocess(image, output_type="np"))[:1]

        tiles = qwen_vae.tile_grid(vae, z)
        return decode_in_tiles(
            vae, z, tiles, qwen_vae.decode_tile, to_frames, finish=qwen_vae.finish
        )

    def latent_channels(self, pipe: Any) -> int:
        return int(pipe.vae.config.z_dim)

    def preview_grid(self, pipe: Any, latents: torch.Tensor, request: JobRequest) -> torch.Tensor:
        unpacked = pipe._unpack_latents(
            latents, request.height, request.width, pipe.vae_scale_factor
        )  # (batch, seq, channels * 4) -> (batch, channels, 1, h, w)
        return unpacked[0, :, 0]

    def decode_for_fit(self, pipe: Any, latent: torch.Tensor) -> torch.Tensor:
        config = pipe.vae.config
        shape = (1, config.z_dim, 1, 1)
        mean = torch.tensor(config.latents_mean).view(shape).to(latent.device, latent.dtype)
        std = torch.tensor(config.latents_std).view(shape).to(latent.device, latent.dtype)
        z = (latent * std + mean).unsqueeze(2)  # one frame
        return pipe.vae.decode(z, return_dict=False)[0][0, :, 0]


def min_steps(pipe: Any) -> int:
    """2 when the scheduler stretches its sigmas to `shift_terminal` (Qwen-Image's): at 1 step
    the stretch divides by zero and the image is NaN."""
    return 2 if pipe.scheduler.config.get("shift_terminal") else 1
