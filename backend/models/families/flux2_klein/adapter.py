"""Flux.2 Klein (`Flux2KleinPipeline`; FLUX.2-klein-4B / 9B and their -base models): the
Flux.2 MMDiT without a guidance embedding, a Qwen3 text encoder (hidden states 9, 18 and 27
stacked per token), the Flux.2 VAE.

What differs from Flux.2 (dev), and how paradit treats it:
- The distilled models (`is_distilled` in the pipeline's config: FLUX.2-klein-4B, -9B) run 4
  steps with no guidance at all: guidance 1 is the default, and the pipeline ignores a larger
  scale (it logs that it does). The -base models (FLUX.2-klein-base-4B, -9B: the same shapes;
  a single file is one when its name says so, `../flux2/detect.klein_kind`) run 50 steps with
  true CFG at 4 (the model card's and the pipeline's defaults): above 1 the pipeline runs an
  unconditional branch on an empty prompt (here the request's negative prompt, empty unless
  given), as a second transformer call per step.
- CFG parallel serves that second call (`supports_cfg` for a -base pipeline): the pipeline
  slices the conditional prediction (`noise_pred[:, :n]`, a view) before the unconditional
  call, and CFG parallel's deferred result is shaped like the DiT's input, so the view sees
  it filled (`parallel/cfg.py`). A distilled pipeline has one branch: every rank goes to the
  sequence.
- Reference images (the request's `image` and `images`) edit, as Flux.2 (dev): the pipeline
  prepares them with Flux2Pipeline's own code (at most 1024x1024 pixels, floored to 16 and
  centre-cropped, the VAE's mean, the batch-norm statistics, reference i at time 10 + 10 i)
  and appends their tokens to the noise's in both branches of a -base model's CFG, as
  ComfyUI's edit templates give the references to both prompts
  (`backend/workflow/reference_nodes.py`).
- `output_type="latent"` gives the VAE's own latents (unpacked, the batch-norm normalisation
  undone, 32 channels at 8x), not Flux2Pipeline's packed tokens: the decode takes them as
  they are. The latents a step callback sees are packed as Flux.2's (previews as Flux.2).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....contract import Limits
from ....request import JobRequest
from ..base import Tensors, TiledDecode, decode_in_tiles, request_images
from ..flux2.adapter import MAX_TEXT_TOKENS, Flux2

# The model cards: 1024x1024 (Flux.2's); distilled 4 steps without guidance, base 50 steps at
# CFG 4.
DISTILLED_STEPS, DISTILLED_GUIDANCE = 4, 1.0
BASE_STEPS, BASE_GUIDANCE = 50, 4.0


def is_distilled(pipe: Any) -> bool:
    return bool(pipe.config.get("is_distilled", False))


def preset_distilled(preset: str) -> bool:
    """Whether the preset's pipeline is step-distilled (its pipeline config), read without
    building it."""
    from ...random_presets import random_preset_spec
    from .tiny import PIPELINE_CONFIG

    if preset.startswith("random:"):
        config = random_preset_spec(preset).get("pipeline_config", {})
    else:
        config = PIPELINE_CONFIG.get(preset, {})
    return bool(config.get("is_distilled", False))


class Flux2Klein(Flux2):
    def distilled(self, pipe: Any) -> bool:
        """Whether the loaded pipeline is step-distilled (its `is_distilled` config)."""
        return is_distilled(pipe)

    def model_limits(self, pipe: Any, *, tiny: bool) -> Limits:
        distilled = self.distilled(pipe)  # reference images edit as with Flux.2 (dev)
        return self.edit_limits(
            pipe,
            steps=DISTILLED_STEPS if distilled else BASE_STEPS,
            guidance=DISTILLED_GUIDANCE if distilled else BASE_GUIDANCE,
            tiny=tiny,
        )

    def supports_cfg(self, pipe: Any) -> bool:
        """The -base models' two branches (module docstring); the distilled ones have one."""
        return not is_distilled(pipe)

    def workflow_refusal(self, preset: str, request: dict[str, Any]) -> str:
        """A file whose name does not say base runs as the step-distilled model, whose
        pipeline ignores guidance: a workflow's cfg above 1 on it (ComfyUI's two branches)
        is not paradit's job."""
        guidance = request.get("guidance_scale", 1.0)
        if guidance > 1.0 and preset_distilled(preset):
            return (
                f"cfg {guidance:g} on a step-distilled FLUX.2-klein file ({preset}: its name "
                "does not say base, and no weight tells -base from it), whose pipeline "
                "ignores guidance, where ComfyUI runs both branches; the job cannot be "
                "ComfyUI's (a -base file runs CFG: its name says base, as "
                "flux-2-klein-base-4b.safetensors)"
            )
        return ""

    def encode(self, pipe: Any, request: JobRequest, device: torch.device) -> Tensors:
        prompts = {"prompt_embeds": request.prompt}
        if self.uses_cfg(pipe, request):
            prompts["negative_prompt_embeds"] = request.negative_prompt or ""
        tensors: Tensors = {}
        for name, prompt in prompts.items():
            tensors[name], _text_ids = pipe.encode_prompt(
                prompt=prompt, device=device, max_sequence_length=MAX_TEXT_TOKENS
            )
        return tensors

    def prepare(self, pipe: Any, request: JobRequest, tensors: Tensors) -> dict[str, Any]:
        # Flux.2's arguments, with both branches' text (a -base model's negative too)
        return {**tensors, **super().prepare(pipe, request, tensors)}

    def tiled_decode(self, pipe: Any, request: JobRequest, latents: Any) -> TiledDecode:
        from ..flux import vae as kl_vae  # Flux.1's tiled decode

        vae = pipe.vae
        z = latents.to(vae.dtype)  # already the VAE's latents (module docstring)
        tiles = kl_vae.tile_grid(vae, z)

        def to_frames(image: torch.Tensor) -> np.ndarray:
            return np.asarray(pipe.image_processor.postprocess(image, output_type="np"))[:1]

        return decode_in_tiles(vae, z, tiles, kl_vae.decode_tile, to_frames)


class Flux2KleinKV(Flux2Klein):
    """FLUX.2 [klein] 9B KV (`Flux2KleinKVPipeline`): the step-distilled Klein whose edits
    cache the references. At the first step the references (the request's `image` and
    `images`, prepared as Klein's) run before the noise, modulated at timestep zero and
    attending only to themselves, and every block stores their keys and values; the later
    steps run the noise alone against the stored ones. The pipeline takes no guidance and no
    negative prompt: one branch (a CFG plan spreads it over every rank); under Ulysses the
    cached keys and values are whole on every rank for its share of the heads
    (`parallel.py`)."""

    def distilled(self, pipe: Any) -> bool:
        """Always: the KV model is step-distilled (4 steps), and its pipeline takes
        `is_distilled` without recording it in its config."""
        return True

    def supports_cfg(self, pipe: Any) -> bool:
        return False  # the pipeline has no guidance scale and no negative branch

    def workflow_refusal(self, preset: str, request: dict[str, Any]) -> str:
        guidance = request.get("guidance_scale", 1.0)
        if guidance > 1.0:
            return (
                f"cfg {guidance:g} on FLUX.2-klein KV ({preset}), whose pipeline "
                "(Flux2KleinKVPipeline) runs no guidance, where ComfyUI runs both branches"
            )
        return ""

    def prepare(self, pipe: Any, request: JobRequest, tensors: Tensors) -> dict[str, Any]:
        return {
            "prompt_embeds": tensors["prompt_embeds"],
            "height": request.height,
            "width": request.width,
            "num_inference_steps": request.num_inference_steps,
            "max_sequence_length": MAX_TEXT_TOKENS,
            # the references: every rank's pipeline VAE-encodes them after the noise
            "image": request_images(request) if request.image is not None else None,
        }
