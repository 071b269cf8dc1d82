"""Wan 2.2's own models: TI2V-5B (text- and image-to-video in one model) and I2V-A14B.

TI2V-5B is a `WanPipeline` with `expand_timesteps` and the Wan 2.2 VAE (48 latent channels,
16x spatial compression). Its repo ships `WanPipeline` for text-to-video, and diffusers runs
its image-to-video with `WanImageToVideoPipeline` on the same components: the image's latent
becomes the first latent frame and that frame's tokens get timestep 0 (a per-token timestep,
which diffusers' context-parallel plan for Wan splits with the tokens). So one loaded model
serves both: a job with an image runs the image-to-video pipeline, one without runs the
text-to-video pipeline, each built on the loaded components (no weights are copied).

I2V-A14B is a `WanImageToVideoPipeline` with two experts (`transformer` above
`boundary_ratio` of the training timesteps, `transformer_2` below) and no CLIP encoder: the
start image enters only through the VAE latents concatenated to the noise. The Wan 2.1
image-to-video family runs it; only its defaults differ.

Both experts, the per-token timesteps and the 48-channel VAE go through the same parallel path
as Wan 2.1 (sequence parallel, CFG parallel, FSDP2 per expert, the VAE's tiles dealt to the
ranks: `vae.py` handles the 2.2 VAE's patches).
"""

from __future__ import annotations

from typing import Any

from ....contract import IMAGE_TO_VIDEO, TEXT_TO_VIDEO, Limits
from ....request import JobRequest
from ....sampling.names import SAMPLERS
from ..base import Family, Tensors, request_image, same_components_as, video_kwargs
from .adapter import WanImageToVideo, WanTextToVideo

# The published defaults: TI2V-5B makes 1280x704 (720p) videos of 121 frames at 24 fps with 50
# steps and guidance 5 (the model card and Wan 2.2's `ti2v_5B` config); I2V-A14B makes 81 frames
# at 16 fps, 40 steps, guidance 3.5 (diffusers' example; Wan 2.2's `i2v_A14B` config), at
# 832x480 like the other Wan 14B presets here.
TI2V_WIDTH, TI2V_HEIGHT, TI2V_FRAMES, TI2V_FPS, TI2V_STEPS = 1280, 704, 121, 24, 50
I2V_A14B_GUIDANCE = 3.5


class WanTextImageToVideo(WanTextToVideo):
    """Wan 2.2 TI2V-5B: text-to-video, or image-to-video when the request has an image."""

    def model_limits(self, pipe: Any, *, tiny: bool) -> Limits:
        wan = super().model_limits(pipe, tiny=tiny)
        return Limits(
            **{
                **wan.to_dict(),
                "min_size": wan.size_multiple,
                "accepts_image": True,
                "default_width": 64 if tiny else TI2V_WIDTH,
                "default_height": 64 if tiny else TI2V_HEIGHT,
                "default_frames": 5 if tiny else TI2V_FRAMES,
                "default_steps": 4 if tiny else TI2V_STEPS,
                "fps": TI2V_FPS,
            }
        )

    def pipeline_for_job(self, pipe: Any, request: JobRequest) -> Any:
        from diffusers import WanImageToVideoPipeline, WanPipeline

        wanted = WanPipeline if request.image is None else WanImageToVideoPipeline
        return same_components_as(pipe, wanted)

    def prepare(self, pipe: Any, request: JobRequest, tensors: Tensors) -> dict[str, Any]:
        kwargs = video_kwargs(request, tensors)
        if request.image is not None:
            kwargs["image"] = request_image(request)
        return kwargs


class Wan22ImageToVideo(WanImageToVideo):
    """Wan 2.2 I2V-A14B: the Wan image-to-video family with the model's own guidance."""

    def model_limits(self, pipe: Any, *, tiny: bool) -> Limits:
        wan = super().model_limits(pipe, tiny=tiny)
        return Limits(**{**wan.to_dict(), "default_guidance": I2V_A14B_GUIDANCE})


WAN22_TI2V = WanTextImageToVideo(
    "wan2.2-ti2v",
    TEXT_TO_VIDEO,
    ("WanPipeline", "WanImageToVideoPipeline"),
    frozenset({"text_encoder", "tokenizer"}),
    vae_float32=True,
    samplers=SAMPLERS,
)
WAN22_I2V = Wan22ImageToVideo(
    "wan2.2-i2v",
    IMAGE_TO_VIDEO,
    ("WanImageToVideoPipeline",),
    frozenset({"text_encoder", "tokenizer", "image_encoder"}),
    vae_float32=True,
    samplers=SAMPLERS,
)


def specialize(family: Family, pipe: Any) -> Family:
    """The Wan 2.2 family of a loaded Wan pipeline, when its settings say it is one: any Wan
    pipeline with `expand_timesteps` is TI2V-5B; an image-to-video one with two experts is
    I2V-A14B. Other pipelines keep `family`."""
    if type(pipe).__name__ not in WAN22_TI2V.pipeline_classes:
        return family
    config = pipe.config
    if config.get("expand_timesteps"):
        return WAN22_TI2V
    if type(pipe).__name__ in WAN22_I2V.pipeline_classes and config.get("boundary_ratio"):
        return WAN22_I2V
    return family
