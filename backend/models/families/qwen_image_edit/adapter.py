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

from ....contract import Limits
from ....request import JobRequest
from ..base import Tensors, image_limits, request_images
from ..qwen_image.adapter import QwenImage, min_steps

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

    def prepare(self, pipe: Any, request: JobRequest, tensors: Tensors) -> dict[str, Any]:
        images = request_images(request)
        return {
            **super().prepare(pipe, request, tensors),
            "image": images if self._plus(pipe) else images[0],
        }
