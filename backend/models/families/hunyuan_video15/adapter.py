"""HunyuanVideo 1.5 text-to-video (`HunyuanVideo15Pipeline`) and image-to-video
(`HunyuanVideo15ImageToVideoPipeline`).

What differs from the other video families:

- Two text encoders, both on the encoding rank: a Qwen2.5-VL language model (the prompt in a
  chat template, 1000 tokens) and a ByT5 glyph encoder that reads only the text in quotes
  (256 tokens; zeros when the prompt quotes nothing). Each comes with its mask, and the
  pipeline takes all four tensors per branch.
- The guidance scale lives in the pipeline's `guider` component (`ClassifierFreeGuidance`),
  not in its arguments: `prepare` sets it for the job and `finish` puts the model's back.
  The guider calls the transformer for the conditional branch first, then the
  unconditional one, which is what CFG parallel expects; it must guide every step, or the
  two halves of the group would run different step counts (`prepare` checks).
- The pipeline has no `callback_on_step_end`: `pipeline_for_job` returns `StepCallbacks`,
  which calls the engine's step callback after each scheduler step.
- The transformer patches 1x1 over the 16x VAE, so a token is 16x16 pixels of a latent
  frame. The pipeline stops at the latents and the job decodes them as the pipeline would,
  tile by tile when tiling is on (`vae.py`: the tiles can be dealt to the ranks).
- diffusers declares no context-parallel plan for the transformer: ours is in
  `families/hunyuan_video15/parallel.py`.

Image-to-video conditions twice on the start image: a SigLIP vision encoder's tokens join the
text sequence (the image tokens the text-to-video model masks, all valid here), and the
image's VAE latents fill the first latent frame of the condition channels (with a mask of
ones there), concatenated to the noise token by token. The SigLIP encoder runs on the encoding
rank only (`encode`); every rank encodes the image with the VAE inside the pipeline, as Wan's
image-to-video does. The pipeline takes no size: it picks the size bucket of the image's
aspect ratio at the transformer's target size (848x480 for a 16:9 image at 480p). paradit
keeps the request's size instead (default 848x480, the text-to-video model's): the image is
resized to it (`request_image`) and `prepare` hands the pipeline that size as its bucket for
the job. A request whose size is the bucket of its image's aspect ratio is the pipeline's own
call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ....contract import IMAGE_TO_VIDEO, Limits
from ....request import IMAGE_PREP_COMFYUI, JobRequest
from ..base import (
    Family,
    Tensors,
    TiledDecode,
    decode_in_tiles,
    request_image,
    request_images,
    video_frames,
)
from . import comfyui_prep

# As the model card runs it: 121 frames at 24 fps, 50 steps; guidance is the guider's (6). The
# size is the pipeline's own default, 16:9 at the transformer's target size: 848x480 for the
# 480p models (target 640), 1280x720 for the 720p ones (960).
DEFAULT_FRAMES, FPS, DEFAULT_STEPS = 121, 24, 50
MAX_FRAMES = 257
ASPECT_RATIO = (16, 9)
"""The text-to-video pipeline's default (width, height) ratio; the defaults of both tasks."""
PROMPT_TENSORS = ("prompt_embeds", "prompt_embeds_mask", "prompt_embeds_2", "prompt_embeds_mask_2")
"""`encode_prompt`'s outputs, in its order: the Qwen2.5-VL embeddings and mask, then ByT5's."""


class HunyuanVideo15(Family):
    def model_limits(self, pipe: Any, *, tiny: bool) -> Limits:
        patch = int(pipe.transformer.config.patch_size)
        multiple = int(pipe.vae_scale_factor_spatial) * patch
        height, width = pipe.video_processor.calculate_default_height_width(
            ASPECT_RATIO[1], ASPECT_RATIO[0], pipe.target_size
        )
        return Limits(
            task=self.task,
            size_multiple=multiple,
            min_size=multiple,
            max_size=2048,
            frame_multiple=int(pipe.vae_scale_factor_temporal),
            max_frames=MAX_FRAMES,
            needs_image=self.task == IMAGE_TO_VIDEO,
            default_width=64 if tiny else int(width),
            default_height=64 if tiny else int(height),
            default_frames=5 if tiny else DEFAULT_FRAMES,
            default_steps=4 if tiny else DEFAULT_STEPS,
            default_guidance=float(pipe.guider.config.guidance_scale),
            fps=FPS,
        )

    def text_tokens(self, pipe: Any) -> int:
        """The text tokens every block attends to besides the video's: the prompt's, the
        glyphs' and the image tokens (masked in text-to-video; SigLIP's in image-to-video)."""
        return int(
            pipe.tokenizer_max_length
            + pipe.tokenizer_2_max_length
            + pipe.vision_num_semantic_tokens
        )

    def encode(self, pipe: Any, request: JobRequest, device: torch.device) -> Tensors:
        prompts = {"": request.prompt}
        if self.uses_cfg(pipe, request):
            prompts["negative_"] = request.negative_prompt or ""
        tensors: Tensors = {}
        for prefix, prompt in prompts.items():
            encoded = pipe.encode_prompt(prompt=prompt, device=device, dtype=_dit_dtype(pipe))
            for name, tensor in zip(PROMPT_TENSORS, encoded, strict=True):
                tensors[prefix + name] = tensor
        return tensors

    def prepare(self, pipe: Any, request: JobRequest, tensors: Tensors) -> dict[str, Any]:
        guider = pipe.guider
        cfg = "negative_prompt_embeds" in tensors
        if cfg and (type(guider).__name__ != "ClassifierFreeGuidance" or _skips_steps(guider)):
            raise ValueError(
                "paradit runs HunyuanVideo 1.5 with a ClassifierFreeGuidance guider that guides "
                f"every step; this model's guider is {type(guider).__name__}({dict(guider.config)})"
            )
        guider.guidance_scale = request.guidance_scale if cfg else 1.0
        return {
            **tensors,
            "height": request.height,
            "width": request.width,
            "num_frames": request.num_frames,
            "num_inference_steps": request.num_inference_steps,
        }

    def finish(self, pipe: Any) -> None:
        pipe.guider.guidance_scale = pipe.guider.config.guidance_scale

    def pipeline_for_job(self, pipe: Any, request: JobRequest) -> Any:
        return StepCallbacks(pipe)

    def tiled_decode(self, pipe: Any, request: JobRequest, latents: Any) -> TiledDecode:
        from . import vae as hunyuan_vae

        vae = pipe.vae
        # as the pipeline before its decode: to the VAE's dtype, then undo the scaling
        z = latents.to(device=vae.device, dtype=vae.dtype) / vae.config.scaling_factor
        tiles = hunyuan_vae.tile_grid(vae, z)
        return decode_in_tiles(vae, z, tiles, hunyuan_vae.decode_tile, video_frames(pipe))

    def latent_channels(self, pipe: Any) -> int:
        return int(pipe.vae.config.latent_channels)

    def preview_grid(self, pipe: Any, latents: torch.Tensor, request: JobRequest) -> torch.Tensor:
        return latents[0, :, 0]  # (batch, channels, frames, h, w)

    def decode_for_fit(self, pipe: Any, latent: torch.Tensor) -> torch.Tensor:
        z = latent[:, :, None] / pipe.vae.config.scaling_factor  # as the pipeline decodes
        return pipe.vae.decode(z, return_dict=False)[0][0, :, 0]


class HunyuanVideo15ImageToVideo(HunyuanVideo15):
    """Image-to-video: the start image through SigLIP (encoding rank) and the VAE (every rank,
    in the pipeline), at the request's size; with `image_prep` comfyui both prepared as
    ComfyUI's nodes prepare them (`comfyui_prep.py`)."""

    def encode(self, pipe: Any, request: JobRequest, device: torch.device) -> Tensors:
        tensors = super().encode(pipe, request, device)
        if request.image_prep == IMAGE_PREP_COMFYUI:
            tensors["image_embeds"] = comfyui_prep.image_embeds(
                pipe, request_images(request)[0], device, _dit_dtype(pipe)
            )
            return tensors
        # The class's method: `prepare` hands the pipeline a per-job stand-in.
        tensors["image_embeds"] = type(pipe).encode_image(
            pipe, _start_image(pipe, request), 1, device, _dit_dtype(pipe)
        )
        return tensors

    def prepare(self, pipe: Any, request: JobRequest, tensors: Tensors) -> dict[str, Any]:
        kwargs = super().prepare(pipe, request, tensors)
        # The pipeline takes no image embeddings and no size: this job's embeddings (from the
        # encoding rank) and size stand in for its encoder and size buckets until `finish`.
        embeds = kwargs.pop("image_embeds")
        size = (kwargs.pop("height"), kwargs.pop("width"))
        pipe.encode_image = lambda *_args, **_kwargs: embeds
        pipe.video_processor.calculate_default_height_width = lambda *_args, **_kwargs: size
        if request.image_prep == IMAGE_PREP_COMFYUI:
            # and the start image's latents ComfyUI's way, from the image as loaded
            original = request_images(request)[0]

            def latents(*, vae: Any, device: torch.device, **_kwargs: Any) -> torch.Tensor:
                return comfyui_prep.image_latents(vae, original, size[1], size[0], device)

            pipe._get_image_latents = latents
        return {**kwargs, "image": _start_image(pipe, request)}

    def finish(self, pipe: Any) -> None:
        super().finish(pipe)
        pipe.__dict__.pop("encode_image", None)
        pipe.__dict__.pop("_get_image_latents", None)
        pipe.video_processor.__dict__.pop("calculate_default_height_width", None)


def _start_image(pipe: Any, request: JobRequest) -> Any:
    """The request's image at its size, as the pipeline crops it to its size before encoding
    (at the same size: unchanged)."""
    image = request_image(request)
    return pipe.video_processor.resize(
        image, height=request.height, width=request.width, resize_mode="crop"
    )


class StepCallbacks:
    """The pipeline, called with a `callback_on_step_end` it does not take itself.

    The callback runs after each scheduler step, with the step's index and timestep and the
    new latents as `{"latents": ...}`, as diffusers' own pipelines call it; what it returns
    is not used (paradit's callbacks change nothing). The scheduler's `step` is wrapped for
    the call only.
    """

    def __init__(self, pipe: Any):
        self.pipe = pipe
        self.__wrapped__ = pipe  # the pipeline it calls (`inspect.unwrap`): a job's sampler
        # is set on it (`sampling/job.py`)

    def __getattr__(self, name: str) -> Any:
        """Everything else is the pipeline's (its scheduler and config, for the job's record)."""
        return getattr(self.pipe, name)

    def __call__(self, *, callback_on_step_end: Callable | None = None, **kwargs: Any) -> Any:
        if callback_on_step_end is None:
            return self.pipe(**kwargs)
        scheduler = self.pipe.scheduler
        step = scheduler.step
        index = 0

        def step_then_report(model_output, timestep, sample, *args, **step_kwargs):
            nonlocal index
            output = step(model_output, timestep, sample, *args, **step_kwargs)
            latents = output[0] if isinstance(output, tuple) else output.prev_sample
            callback_on_step_end(self.pipe, index, timestep, {"latents": latents})
            index += 1
            return output

        scheduler.step = step_then_report
        try:
            return self.pipe(**kwargs)
        finally:
            del scheduler.step  # the class's method again


def _dit_dtype(pipe: Any) -> torch.dtype:
    """The dtype the pipeline casts the prompt tensors to (the transformer's)."""
    return pipe.transformer.dtype


def _skips_steps(guider: Any) -> bool:
    config = guider.config
    return config.get("start", 0.0) != 0.0 or config.get("stop", 1.0) != 1.0
