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

With input images (the request's `image`, then `images`: up to 10) the same pipeline edits:
rank 0's Qwen3-VL reads the prompt and the images together (each image widened to one slot
per 32x32 pixels in the prompt's tokens), and every rank's pipeline VAE-encodes the images
and puts their latents in those slots (2x2 latent tokens a slot), before the target's. The
images are resized as the pipeline resizes them, at the output's area (its
`output_resolution`: the side of a square of the output's pixels, 1024 for 1024x1024). The
pipeline takes no precomputed embeddings with images (it has no argument for which of their
positions are image slots), so for an edit job `EditSlots` hands its `encode_prompt` the
slots rank 0 found: a library gap paradit fills.

With `image_prep` comfyui (`comfyui_prep.py`) the references are ComfyUI's at resolution 0,
the edit templates': each at its own size rounded to sides of 32, for the vision tower (the
processor given ComfyUI's pixel bounds) and the VAE alike, whatever the output's size; the
pipeline's own call runs with its image processor taking each reference as it is and the
DiT's `img_shapes` given the references' own token grids (`finish` takes both off). With
`image_prep` comfyui-vision (TextEncodeQwenImage21 at a resolution above 0) the references
are the pipeline's, at the output's area, and only the vision input is ComfyUI's: the
processor given ComfyUI's pixel bounds, a reference outside them refused.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from ....contract import Limits
from ....request import IMAGE_PREP_COMFYUI, IMAGE_PREP_COMFYUI_VISION, JobRequest
from ..base import (
    Family,
    Tensors,
    TiledDecode,
    decode_in_tiles,
    image_limits,
    request_images,
)
from . import comfyui_prep

DEFAULT_SIZE, DEFAULT_STEPS, DEFAULT_GUIDANCE = 1024, 25, 1.0
"""ComfyUI's Qwen-Image 2.1 template: 1024x1024, 25 steps, cfg 1 (the pipeline's own
default is 40 steps, unguided)."""
RGB = 3
MAX_IMAGES = 10
"""Qwen-Image 2.1's README (and ComfyUI's edit template): up to 10 reference images."""
EDIT_PIXELS = DEFAULT_SIZE * DEFAULT_SIZE
"""An edit's default output: the first image's aspect at the pipeline's `output_resolution`
1024 squared (ComfyUI's template: "output follows image_1", resolution 1024)."""
SLOTS = "_image_slots"
"""The tensors' suffix for a prompt's image slots (`<name>_image_slots`: True where the
encoder's token is an image slot)."""
SHAPES = "_comfyui_reference_shapes"
"""Where a ComfyUI-prepared edit's DiT hook sits on the pipeline until `finish`."""


class QwenImage21(Family):
    def model_limits(self, pipe: Any, *, tiny: bool) -> Limits:
        base = image_limits(
            self.task,
            int(pipe.vae_scale_factor * 2),
            size=DEFAULT_SIZE,
            steps=DEFAULT_STEPS,
            guidance=DEFAULT_GUIDANCE,
            tiny=tiny,
        )
        # text-to-image that also edits: with input images a job is an image edit
        return Limits(
            **{
                **base.to_dict(),
                "accepts_image": True,
                "max_images": MAX_IMAGES,
                "edit_pixels": 64 * 64 if tiny else EDIT_PIXELS,
            }
        )

    def encode(self, pipe: Any, request: JobRequest, device: torch.device) -> Tensors:
        prompts = {"prompt": request.prompt}
        if self.uses_cfg(pipe, request):
            prompts["negative_prompt"] = request.negative_prompt or ""
        images, own = None, pipe.processor
        if request.image is not None and request.image_prep == IMAGE_PREP_COMFYUI:
            images = [comfyui_prep.reference(image) for image in request_images(request)]
            sizes = [image.size for image in images]
            pipe.__dict__["processor"] = comfyui_prep.ComfyBounds(own, sizes)
        elif request.image is not None:
            images = encoder_images(pipe, request_images(request), output_resolution(request))
            if request.image_prep == IMAGE_PREP_COMFYUI_VISION:
                # the pipeline's sizes, the vision input within ComfyUI's bounds
                sizes = [image.size for image in images]
                for size in sizes:
                    comfyui_prep.check_vision_size(*size, IMAGE_PREP_COMFYUI_VISION)
                pipe.__dict__["processor"] = comfyui_prep.ComfyBounds(own, sizes)
        tensors: Tensors = {}
        try:
            for name, prompt in prompts.items():
                # (1, tokens, width); the mask is None when no token is padding (one prompt)
                embeds, mask, slots = pipe.encode_prompt(prompt=prompt, image=images, device=device)
                tensors[f"{name}_embeds"] = embeds
                if mask is not None:
                    tensors[f"{name}_embeds_mask"] = mask.bool()
                if images is not None:
                    tensors[f"{name}{SLOTS}"] = slots.bool()
        finally:
            pipe.__dict__["processor"] = own
        return tensors

    def prepare(self, pipe: Any, request: JobRequest, tensors: Tensors) -> dict[str, Any]:
        cfg = "negative_prompt_embeds" in tensors
        kwargs = {
            **{k: v for k, v in tensors.items() if not k.endswith(SLOTS)},
            "true_cfg_scale": request.guidance_scale if cfg else 1.0,
            "height": request.height,
            "width": request.width,
            "num_inference_steps": request.num_inference_steps,
        }
        if request.image is None:
            return kwargs
        slots = [
            (tensors[f"{name}_embeds"], tensors[f"{name}{SLOTS}"])
            for name in ("prompt", "negative_prompt")
            if f"{name}{SLOTS}" in tensors
        ]
        pipe.__dict__["encode_prompt"] = EditSlots(pipe.encode_prompt, slots)
        images = request_images(request)
        if request.image_prep == IMAGE_PREP_COMFYUI:
            # each reference at its own size for the VAE and in the DiT's token grids
            images = [comfyui_prep.reference(image) for image in images]
            sizes = [image.size for image in images]
            shapes = comfyui_prep.ReferenceShapes(pipe.transformer, sizes, pipe.vae_scale_factor)
            pipe.__dict__["image_processor"] = comfyui_prep.OwnSizes(pipe.image_processor)
            pipe.__dict__[SHAPES] = shapes
        # every rank VAE-encodes the images, resized as rank 0 resized them for the encoder
        return {**kwargs, "image": images, "output_resolution": output_resolution(request)}

    def finish(self, pipe: Any) -> None:
        pipe.__dict__.pop("encode_prompt", None)
        shapes = pipe.__dict__.pop(SHAPES, None)
        if shapes is not None:
            shapes.remove()
            pipe.__dict__["image_processor"] = pipe.image_processor.own

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


def output_resolution(request: JobRequest) -> int:
    """The pipeline's `output_resolution` for an edit: the side of a square of the output's
    area (1024 for 1024x1024), at which it resizes every input image (its aspect kept, sides
    in steps of 32)."""
    return round(math.sqrt(request.width * request.height))


def encoder_images(pipe: Any, images: list, resolution: int) -> list:
    """The input images as `QwenImage21Pipeline` resizes them for its text encoder: RGBA,
    each at its aspect over `resolution` squared pixels (`calculate_dimensions`)."""
    from diffusers.pipelines.qwenimage21 import pipeline_qwenimage21 as qi21

    resized = []
    for image in images:
        image = image if image.mode == "RGBA" else image.convert("RGBA")
        width, height, _ = qi21.calculate_dimensions(resolution**2, image.width / image.height)
        resized.append(pipe.image_processor.resize(image, width=width, height=height))
    return resized


class EditSlots:
    """`QwenImage21Pipeline.encode_prompt` for one edit job on every rank: the prompt
    embeddings rank 0 encoded with the images arrive with which of their tokens are image
    slots, which the pipeline's call cannot pass on (it refuses embeddings for an edit
    without them); this gives each its slots and calls the pipeline's own. Set on the
    pipeline by `prepare`, taken off by `finish`."""

    def __init__(self, own: Any, slots: list[tuple[torch.Tensor, torch.Tensor]]):
        self.own, self.slots = own, slots

    def __call__(self, *args: Any, prompt_embeds: Any = None, **kwargs: Any) -> Any:
        if prompt_embeds is not None and kwargs.get("image_pad_mask") is None:
            found = [slots for embeds, slots in self.slots if embeds is prompt_embeds]
            if not found:
                raise ValueError("an edit's prompt embeddings come with their image slots")
            kwargs["image_pad_mask"] = found[0]
        return self.own(*args, prompt_embeds=prompt_embeds, **kwargs)
