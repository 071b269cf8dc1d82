"""Krea 2 text-to-image (`Krea2Pipeline`): a 12.9B single-stream DiT over the text tokens
followed by the image tokens (grouped-query attention, 48 query heads to 12 key/value heads;
every attention carries the text padding mask), the Qwen-Image VAE, a Qwen3-VL-4B text model
whose hidden states at 12 layers the DiT fuses itself.

The pipeline runs the two CFG branches as two transformer calls (conditional first), so CFG
parallel splits them as for Qwen-Image. Guidance keeps paradit's meaning (above 1 runs the
negative branch; 1 is none): the pipeline's own scale is one less (its guided prediction is
`cond + g * (cond - uncond)`, i.e. `uncond + (g + 1) * (cond - uncond)`) and 0 unguided. The
distilled Turbo checkpoint (`is_distilled`: a fixed time shift) defaults to 8 steps unguided,
the base model to 28 steps at the pipeline's 4.5 (here 5.5).

The decode is Qwen-Image's (the same VAE, one latent frame): `qwen_image/adapter.py`.
"""

from __future__ import annotations

from typing import Any

import torch

from ....contract import Limits
from ....request import JobRequest
from ..base import Tensors, image_limits
from ..qwen_image.adapter import QwenImage

DEFAULT_SIZE = 1024
TURBO_STEPS, TURBO_GUIDANCE = 8, 1.0
BASE_STEPS, BASE_GUIDANCE = 28, 5.5
MAX_TEXT_TOKENS = 512
"""The pipeline's fixed text length: every prompt is padded to it (the mask marks the
padding)."""


def pipeline_guidance(request: JobRequest) -> float:
    """The pipeline's `guidance_scale` for the request's: one less, 0 when unguided."""
    return request.guidance_scale - 1.0 if request.uses_cfg else 0.0


class Krea2(QwenImage):
    def model_limits(self, pipe: Any, *, tiny: bool) -> Limits:
        turbo = bool(pipe.config.get("is_distilled", False))
        return image_limits(
            self.task,
            int(pipe.vae_scale_factor * pipe.patch_size),
            size=DEFAULT_SIZE,
            steps=TURBO_STEPS if turbo else BASE_STEPS,
            guidance=TURBO_GUIDANCE if turbo else BASE_GUIDANCE,
            tiny=tiny,
        )

    def encode(self, pipe: Any, request: JobRequest, device: torch.device) -> Tensors:
        prompts = {"prompt": request.prompt}
        if self.uses_cfg(pipe, request):
            prompts["negative_prompt"] = request.negative_prompt or ""
        tensors: Tensors = {}
        for name, prompt in prompts.items():
            # (1, tokens, tapped layers, width) and its (1, tokens) bool padding mask
            embeds, mask = pipe.encode_prompt(
                prompt=prompt, device=device, max_sequence_length=MAX_TEXT_TOKENS
            )
            tensors[f"{name}_embeds"] = embeds
            tensors[f"{name}_embeds_mask"] = mask
        return tensors

    def prepare(self, pipe: Any, request: JobRequest, tensors: Tensors) -> dict[str, Any]:
        masks = {k: v.bool() for k, v in tensors.items() if k.endswith("_mask")}
        return {
            **tensors,
            **masks,
            "guidance_scale": pipeline_guidance(request) if len(masks) == 2 else 0.0,
            "height": request.height,
            "width": request.width,
            "num_inference_steps": request.num_inference_steps,
            "max_sequence_length": MAX_TEXT_TOKENS,
        }

    def _latents_for_vae(self, pipe: Any, latents: torch.Tensor, request: JobRequest):
        """As the pipeline before its decode: unpack (batch, tokens, channels * 4) to (batch,
        channels, 1, h, w), then undo the normalisation with the VAE's latent statistics."""
        vae = pipe.vae
        z = pipe._unpack_latents(latents, request.height, request.width).to(vae.dtype)
        shape = (1, vae.config.z_dim, 1, 1, 1)
        mean = torch.tensor(vae.config.latents_mean).view(shape).to(z.device, z.dtype)
        inv_std = 1.0 / torch.tensor(vae.config.latents_std).view(shape).to(z.device, z.dtype)
        return z / inv_std + mean

    def preview_grid(self, pipe: Any, latents: torch.Tensor, request: JobRequest) -> torch.Tensor:
        unpacked = pipe._unpack_latents(latents, request.height, request.width)
        return unpacked[0, :, 0]  # (batch, channels, 1, h, w) -> (channels, h, w)
