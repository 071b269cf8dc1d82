"""Qwen-Image-Edit: an instruction applied to input images (`QwenImageEditPlusPipeline`, the
2509/2511 models, up to 3 images; `QwenImageEditPipeline`, the first model, one image).

The same 20B MMDiT, VAE and true CFG as Qwen-Image (`qwen_image.py`). What the edit adds:
- Rank 0's Qwen2.5-VL encoder reads the images too (through its vision tower): each image,
  resized as the pipeline resizes it for the encoder, becomes image tokens in the prompt, so
  the broadcast prompt embeddings already hold them.
- Every rank hands the pipeline the input images; it resizes each to about 1024x1024 pixels
  (its fixed budget), VAE-encodes it and concatenates the image latents to the noise along the
  token sequence: the DiT sees output tokens then reference tokens, and the pipeline keeps the
  first (output) part of each prediction. diffusers' context-parallel plan splits that whole
  sequence (and the rotary table built for all its parts) and gathers it whole again; CFG
  parallel swaps whole predictions, which the pipeline then cuts (`parallel/cfg.py`).
"""

from __future__ import annotations

from typing import Any

import torch

from ....contract import Limits
from ....request import (
    IMAGE_PREP_COMFYUI,
    REFERENCE_MODEL,
    REFERENCE_TIMESTEP_ZERO,
    JobRequest,
)
from ..base import Tensors, image_limits, request_images
from ..qwen_image.adapter import QwenImage, min_steps
from . import comfyui_prep
from .comfyui_dit import ComfyDiT

# The model cards: 40 steps for 2509 (50 for the first model), true CFG scale 4.0; the
# pipelines' output area when no size is given (1024x1024 at the input's aspect).
PLUS_STEPS, EDIT_STEPS, DEFAULT_CFG = 40, 50, 4.0
EDIT_PIXELS = 1024 * 1024
PLUS_MAX_IMAGES = 3
"""Qwen-Image-Edit-2509's card: one to three input images."""


class QwenImageEdit(QwenImage):
    def model_limits(self, pipe: Any, *, tiny: bool) -> Limits:
        plus = self._plus(pipe)
        base = image_limits(
            self.task,
            int(pipe.vae_scale_factor * 2),
            size=1024,
            steps=PLUS_STEPS if plus else EDIT_STEPS,
            guidance=DEFAULT_CFG,
            tiny=tiny,
        )
        return Limits(
            **{
                **base.to_dict(),
                "needs_image": True,
                "accepts_image": True,
                "max_images": PLUS_MAX_IMAGES if plus else 1,
                "edit_pixels": 64 * 64 if tiny else EDIT_PIXELS,
                "min_steps": min_steps(pipe),
            }
        )

    @staticmethod
    def _plus(pipe: Any) -> bool:
        return type(pipe).__name__ == "QwenImageEditPlusPipeline"

    def _encoder_inputs(self, pipe: Any, request: JobRequest) -> dict[str, Any]:
        return {"image": self._encoder_images(pipe, request_images(request))}

    def _encoder_images(self, pipe: Any, images: list) -> Any:
        """The images as the pipeline resizes them for the text encoder: Edit-Plus each to
        about 384x384 pixels, the first model its one image to about 1024x1024."""
        if self._plus(pipe):
            from diffusers.pipelines.qwenimage import pipeline_qwenimage_edit_plus as plus

            resized = []
            for image in images:
                width, height = plus.calculate_dimensions(
                    plus.CONDITION_IMAGE_SIZE, image.width / image.height
                )
                resized.append(pipe.image_processor.resize(image, height, width))
            return resized
        from diffusers.pipelines.qwenimage import pipeline_qwenimage_edit as edit

        (image,) = images
        width, height, _ = edit.calculate_dimensions(EDIT_PIXELS, image.width / image.height)
        return pipe.image_processor.resize(image, height, width)

    def encode(self, pipe: Any, request: JobRequest, device: torch.device) -> Tensors:
        if request.image_prep != IMAGE_PREP_COMFYUI:
            return super().encode(pipe, request, device)
        plus = self._plus(pipe)
        area = comfyui_prep.VISION_PIXELS if plus else comfyui_prep.REFERENCE_PIXELS
        with _vision_inputs(pipe, request_images(request), area) as images:
            image = images if plus else images[0]
            return self._encode_prompts(pipe, request, device, {"image": image})

    def prepare(self, pipe: Any, request: JobRequest, tensors: Tensors) -> dict[str, Any]:
        images = request_images(request)
        kwargs = super().prepare(pipe, request, tensors)
        if request.reference_method != REFERENCE_MODEL:
            _zero_cond_t(pipe.transformer, request.reference_method == REFERENCE_TIMESTEP_ZERO)
        if request.image_prep != IMAGE_PREP_COMFYUI:
            return {**kwargs, "image": images if self._plus(pipe) else images[0]}
        embeds = tensors["prompt_embeds"]
        multiple = comfyui_prep.REFERENCE_MULTIPLE if self._plus(pipe) else 1
        references = [
            _reference(pipe, image, embeds.device, embeds.dtype, multiple) for image in images
        ]
        # the pipeline takes each reference as latents already; its own resize, its
        # references' token grids (from sides of 32) and its rotary positions give way to
        # ComfyUI's for this job (`finish` takes them off)
        grids = [(1, ref.latents.shape[-2] // 2, ref.latents.shape[-1] // 2) for ref in references]
        dit = ComfyDiT(pipe.transformer, grids)
        pipe.__dict__["image_processor"] = _Prepared(pipe.image_processor, dit)
        return {**kwargs, "image": references if self._plus(pipe) else references[0]}

    def finish(self, pipe: Any) -> None:
        _zero_cond_t(pipe.transformer, bool(pipe.transformer.config.get("zero_cond_t")))
        prepared = pipe.__dict__.get("image_processor")
        if isinstance(prepared, _Prepared):
            pipe.__dict__["image_processor"] = prepared.own
            prepared.dit.remove()


def _zero_cond_t(transformer: Any, zero: bool) -> None:
    """diffusers' `zero_cond_t` on the DiT and its blocks (each reads its own): the reference
    tokens modulated as at noise level 0 (ComfyUI's `index_timestep_zero`)."""
    for module in (transformer, *transformer.transformer_blocks):
        module.zero_cond_t = zero


class _Reference:
    """A reference image as ComfyUI prepares it: its VAE latents (normalised, padded to even
    sides); `size` is the input's, which the pipeline reads (and whose sizes it discards)."""

    def __init__(self, latents: torch.Tensor, size: tuple[int, int]):
        self.latents = latents
        self.size = size


class _Prepared:
    """Stands in for the pipeline's image processor during a ComfyUI-prepared job: the
    references are latents already (the pipeline takes latents as they are). Holds the
    job's changes on the DiT, taken off with it (`finish`)."""

    def __init__(self, own: Any, dit: ComfyDiT):
        self.own, self.dit = own, dit

    def resize(self, image: _Reference, height: int, width: int) -> _Reference:
        return image  # the vision tower's images: rank 0 encoded them already

    def preprocess(self, image: _Reference, height: int, width: int) -> torch.Tensor:
        return image.latents


def _reference(
    pipe: Any, image: Any, device: torch.device, dtype: torch.dtype, multiple: int
) -> _Reference:
    """One input image's reference latents, ComfyUI's way (`comfyui_prep`): at about
    1024x1024 pixels in sides of `multiple`, the VAE given the centre multiples of 8."""
    pixels = comfyui_prep.reference_pixels(comfyui_prep.to_float(image), multiple)
    pixels = comfyui_prep.crop_for_vae(pixels)
    sample = (pixels * 2 - 1).unsqueeze(2).to(device, dtype)  # the VAE's -1..1, one frame
    vae, tiled = pipe.vae, getattr(pipe.vae, "use_tiling", False)
    vae.use_tiling = False  # ComfyUI encodes whole; diffusers' tiles miscount sides of 8
    try:
        with torch.no_grad():
            latents = pipe._encode_vae_image(sample, generator=None)[:, :, 0]
    finally:
        vae.use_tiling = tiled
    latents = comfyui_prep.pad_even(latents)
    return _Reference(latents, image.size)


class _VisionProcessor:
    """The pipeline's processor for one encode: its text and grids, ComfyUI's pixel values."""

    def __init__(self, own: Any, values: torch.Tensor, grids: torch.Tensor):
        self.own, self.values, self.grids = own, values, grids

    def __call__(self, **kwargs: Any) -> Any:
        inputs = self.own(**kwargs)
        if not torch.equal(inputs["image_grid_thw"], self.grids):
            raise ValueError("image_prep comfyui: the processor's image grid is not ComfyUI's")
        inputs["pixel_values"] = self.values
        return inputs


class _vision_inputs:
    """For one encode: the pipeline's processor hands the vision tower ComfyUI's pixels;
    yields the images to give the pipeline (blank, at the vision sizes: the processor's
    grids and token counts follow from their sizes)."""

    def __init__(self, pipe: Any, images: list, area: int):
        self.pipe, self.images, self.area = pipe, images, area

    def __enter__(self) -> list:
        from PIL import Image

        own = self.pipe.processor
        settings = comfyui_prep.VisionSettings.of(own.image_processor)
        values, grids, blanks = [], [], []
        for image in self.images:
            pixels, grid, size = comfyui_prep.vision_input(
                comfyui_prep.to_float(image), settings, self.area
            )
            values.append(pixels)
            grids.append(grid)
            blanks.append(Image.new("RGB", size))
        self.pipe.__dict__["processor"] = _VisionProcessor(own, torch.cat(values), torch.cat(grids))
        self.own = own
        return blanks

    def __exit__(self, *exc: Any) -> None:
        self.pipe.__dict__["processor"] = self.own
