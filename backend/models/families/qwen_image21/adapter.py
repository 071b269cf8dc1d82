"""Qwen-Image 2.1 text-to-image (`QwenImage21Pipeline`): a 7B single-stream DiT over the
prompt's tokens followed by the image's, with block-causal attention (causal over the text,
each image block bidirectional) and the prompt's keys and values computed once, at the first
step, and reused at every later one (`use_kv_cache`: the text and condition tokens are
modulated at t = 0, so they do not change with the step); a new 16x VAE of 64 channels
with RGBA in and out; a Qwen3-VL-8B encoder read through its processor.

CFG is the pipeline's true CFG (two transformer calls per step, conditional first; each
branch keeps its own prefix cache), sampled without guidance by default (ComfyUI's template:
25 steps at cfg 1). paradit's output is RGB: the VAE's alpha channel is dropped.

The decode is the Wan 2.2 VAE's tile by tile (`wan/vae.py`: the same causal decoder with its
feature cache), one latent frame.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....contract import Limits
from ....request import JobRequest
from ..base import Family, Tensors, TiledDecode, decode_in_tiles, image_limits

DEFAULT_SIZE, DEFAULT_STEPS, DEFAULT_GUIDANCE = 1024, 25, 1.0
"""ComfyUI's Qwen-Image 2.1 template: 1024x1024, 25 steps, cfg 1 (the pipeline's own
default is 40 steps, unguided)."""
RGB = 3


class QwenImage21(Family):
    def model_limits(self, pipe: Any, *, tiny: bool) -> Limits:
        return image_limits(
            self.task,
            int(pipe.vae_scale_factor * 2),
            size=DEFAULT_SIZE,
            steps=DEFAULT_STEPS,
            guidance=DEFAULT_GUIDANCE,
            tiny=tiny,
        )

    def encode(self, pipe: Any, request: JobRequest, device: torch.device) -> Tensors:
        prompts = {"prompt": request.prompt}
        if self.uses_cfg(pipe, request):
            prompts["negative_prompt"] = request.negative_prompt or ""
        tensors: Tensors = {}
        for name, prompt in prompts.items():
            # (1, tokens, width); the mask is None when no token is padding (one prompt)
            embeds, mask, _image_slots = pipe.encode_prompt(prompt=prompt, device=device)
            tensors[f"{name}_embeds"] = embeds
            if mask is not None:
                tensors[f"{name}_embeds_mask"] = mask.bool()
        return tensors

    def prepare(self, pipe: Any, request: JobRequest, tensors: Tensors) -> dict[str, Any]:
        cfg = "negative_prompt_embeds" in tensors
        return {
            **tensors,
            "true_cfg_scale": request.guidance_scale if cfg else 1.0,
            "height": request.height,
            "width": request.width,
            "num_inference_steps": request.num_inference_steps,
        }

    def _latents_for_vae(self, pipe: Any, latents: torch.Tensor, request: JobRequest):
        """As the pipeline before its decode: unpack (batch, tokens, channels) to (batch,
        channels, 1, h, w), then undo the normalisation with the VAE's latent statistics."""
        vae = pipe.vae
        z = pipe._unpack_latents(latents, request.height, request.width, pipe.vae_scale_factor)
        z = z.to(vae.dtype)
        shape = (1, vae.config.z_dim, 1, 1, 1)
        mean = torch.tensor(vae.config.latents_mean).view(shape).to(z.device, z.dtype)
        std = torch.tensor(vae.config.latents_std).view(shape).to(z.device, z.dtype)
        return z * std + mean

    def tiled_decode(self, pipe: Any, request: JobRequest, latents: Any) -> TiledDecode:
        from ..wan import vae as wan_vae

        vae = pipe.vae
        z = self._latents_for_vae(pipe, latents, request)

        def to_frames(image: torch.Tensor) -> np.ndarray:
            image = image[:, :RGB, 0]  # the one frame, without its alpha channel
            return np.asarray(pipe.image_processor.postprocess(image, output_type="np"))[:1]

        tiles = wan_vae.tile_grid(vae, z)
        return decode_in_tiles(vae, z, tiles, wan_vae.decode_tile, to_frames, wan_vae.finish)

    def latent_channels(self, pipe: Any) -> int:
        return int(pipe.vae.config.z_dim)

    def preview_grid(self, pipe: Any, latents: torch.Tensor, request: JobRequest) -> torch.Tensor:
        unpacked = pipe._unpack_latents(
            latents, request.height, request.width, pipe.vae_scale_factor
        )  # (batch, tokens, channels) -> (batch, channels, 1, h, w)
        return unpacked[0, :, 0]

    def decode_for_fit(self, pipe: Any, latent: torch.Tensor) -> torch.Tensor:
        config = pipe.vae.config
        shape = (1, config.z_dim, 1, 1)
        mean = torch.tensor(config.latents_mean).view(shape).to(latent.device, latent.dtype)
        std = torch.tensor(config.latents_std).view(shape).to(latent.device, latent.dtype)
        z = (latent * std + mean).unsqueeze(2)  # one frame
        return pipe.vae.decode(z, return_dict=False)[0][0, :RGB, 0]
