"""LTX-2's latent upscaler (`serve --upscaler FILE`) and its stage 2.

Lightricks ships the spatial upscaler as one safetensors file
(`ltx-2-spatial-upscaler-x2-1.0.safetensors`) whose keys are `LTX2LatentUpsamplerModel`'s own
(diffusers' converter loads it with `load_state_dict(strict=True)`, no renaming): `initial_conv`,
`res_blocks.N.conv1/norm1/conv2/norm2`, `upsampler.conv` (the rational resampler, with its blur
kernel `upsampler.blur_down.kernel`) or `upsampler.0` (a plain pixel shuffle),
`post_upsample_res_blocks.N`, `final_conv`. The configuration is read from the shapes
(`upsampler_config`); a diffusers folder (`config.json` + weights) loads as diffusers saves it.
Only spatial upscalers are taken: a temporal one changes the frame count.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch

from ..base import SecondStage, Upsampler

RATIONAL_SCALES = {2: 2.0, 4: 4.0}
"""The rational resampler's integer upscale (its conv's output channels / mid channels is its
square) -> its scale, for the whole factors: 1.5 and 0.75 would not give a whole size."""


def upsampler_config(shapes: dict[str, tuple[int, ...]]) -> dict[str, Any]:
    """`LTX2LatentUpsamplerModel`'s arguments from its state dict's shapes."""
    first = shapes.get("initial_conv.weight")
    if first is None or "final_conv.weight" not in shapes:
        raise ValueError(
            "not an LTX-2 latent upscaler (no initial_conv.weight / final_conv.weight)"
        )
    mid, channels = first[0], first[1]
    blocks = {int(m.group(1)) for k in shapes if (m := re.match(r"res_blocks\.(\d+)\.", k))}
    config: dict[str, Any] = {
        "in_channels": channels,
        "mid_channels": mid,
        "num_blocks_per_stage": len(blocks),
        "dims": len(first) - 2,
        "spatial_upsample": True,
        "temporal_upsample": False,
    }
    if "upsampler.conv.weight" in shapes:
        square = shapes["upsampler.conv.weight"][0] // mid
        whole = round(square**0.5)
        if whole * whole != square or whole not in RATIONAL_SCALES:
            raise ValueError(f"upscaler: a x{square**0.5:g} resampler is not taken (x2, x4 are)")
        config.update(use_rational_resampler=True, rational_spatial_scale=RATIONAL_SCALES[whole])
    elif "upsampler.0.weight" in shapes:
        if shapes["upsampler.0.weight"][0] != 4 * mid or len(shapes["upsampler.0.weight"]) != 4:
            raise ValueError(
                "upscaler: a temporal latent upscaler changes the frame count; a spatial one is "
                "needed (ltx-2-spatial-upscaler-x2)"
            )
        config.update(use_rational_resampler=False)
    else:
        raise ValueError("not an LTX-2 latent upscaler (no upsampler.conv / upsampler.0)")
    return config


def factor_of(config: dict[str, Any]) -> int:
    if config.get("use_rational_resampler", True):
        return int(config.get("rational_spatial_scale", 2.0))
    return 2


def load(path: str, dtype: torch.dtype) -> Upsampler:
    """The upscaler in `path` (a safetensors file as Lightricks ships it, or a diffusers
    folder), in `dtype`, on the host."""
    from diffusers.pipelines.ltx2.latent_upsampler import LTX2LatentUpsamplerModel

    source = Path(path)
    if source.is_dir():
        module = LTX2LatentUpsamplerModel.from_pretrained(source, local_files_only=True)
        return Upsampler(module.to(dtype).eval(), (factor_of(dict(module.config)),))
    if not source.is_file():
        raise ValueError(f"--upscaler {path}: no such file")
    from safetensors.torch import load_file

    state = load_file(str(source))
    config = upsampler_config({k: tuple(v.shape) for k, v in state.items()})
    with torch.device("meta"):
        module = LTX2LatentUpsamplerModel(**config)
    missing, unexpected = module.load_state_dict(state, strict=False, assign=True)
    missing = [k for k in missing if not k.endswith("blur_down.kernel")]  # a fixed buffer
    if missing or unexpected:
        raise ValueError(
            f"--upscaler {path}: not an LTX-2 latent upscaler's keys (missing {missing[:3]}, "
            f"unexpected {unexpected[:3]})"
        )
    _fixed_buffers(module, config)
    return Upsampler(module.to(dtype).eval(), (factor_of(config),))


def _fixed_buffers(module: torch.nn.Module, config: dict[str, Any]) -> None:
    """The blur kernel a file may leave out: the binomial one the class computes."""
    blur = getattr(getattr(module, "upsampler", None), "blur_down", None)
    if blur is not None and blur.kernel.is_meta:
        from diffusers.pipelines.ltx2.latent_upsampler import BlurDownsample

        blur.register_buffer("kernel", BlurDownsample(2, blur.stride, blur.kernel_size).kernel)


def tiny(seed: int = 0, in_channels: int = 128) -> torch.nn.Module:
    """A tiny x2 upscaler with seeded weights (tests): 32 mid channels, one block a stage."""
    from diffusers.pipelines.ltx2.latent_upsampler import LTX2LatentUpsamplerModel

    torch.manual_seed(seed)
    module = LTX2LatentUpsamplerModel(
        in_channels=in_channels, mid_channels=32, num_blocks_per_stage=1, dims=3
    )
    with torch.no_grad():
        for param in module.parameters():  # not the default init: a visible change
            param.normal_(0, 0.05)
    return module.eval()


def second_stage(
    pipe: Any,
    size: tuple[int, int],
    first: Any,
    upsampler: torch.nn.Module,
    sigmas: list[float],
    as_given: dict[str, Any],
    image: Any = None,
) -> SecondStage:
    """Stage 2 as diffusers' LTX-2 docs run it: stage 1's video latents (`first[0]`, from the
    pipeline's "latent" output: denormalized) through `LTX2LatentUpsamplePipeline` at stage 1's
    `size` (width, height), the audio latents as they are; both re-noised to the first level
    (`noise_scale`); the levels run as given (`as_given`: the distilled scheduler settings).
    `image` (image-to-video: the start image at the final size, PIL or float pixels): its
    latent replaces the upscaled first latent frame, as Lightricks' two-stage pipelines
    condition stage 2
    (`image_conditionings_by_replacing_latent` at stage 2's size) and ComfyUI's templates do
    (`LTXVImgToVideoInplace` after the upscale); `LTX2ImageToVideoPipeline` keeps that frame
    clean (timestep 0) in stage 2 as in stage 1."""
    from diffusers import FlowMatchEulerDiscreteScheduler, LTX2LatentUpsamplePipeline

    upsample = LTX2LatentUpsamplePipeline(vae=pipe.vae, latent_upsampler=upsampler)
    upsample.set_progress_bar_config(disable=True)
    width, height = size
    video = upsample(
        latents=first[0], width=width, height=height, output_type="latent", return_dict=False
    )[0]
    if image is not None:
        video = video.clone()
        video[:, :, :1] = image_latent(pipe, image).to(video.dtype)
    scheduler = FlowMatchEulerDiscreteScheduler.from_config(pipe.scheduler.config, **as_given)
    inputs = {
        "latents": video,
        "audio_latents": first[1],
        "noise_scale": sigmas[0],
        "sigmas": list(sigmas),
    }
    return SecondStage(inputs, scheduler)


def image_latent(pipe: Any, image: Any) -> torch.Tensor:
    """The start image (PIL, at the size it conditions) as one latent frame in the VAE's own
    scale (not normalized: as the pipeline's "latent" output and the upscaler's), encoded as
    `LTX2ImageToVideoPipeline` encodes it (its video processor, the distribution's mode). A
    float tensor (1, 3, height, width) in 0..1 (`image_prep` comfyui) is taken at its size."""
    vae = pipe.vae
    height, width = image.shape[-2:] if torch.is_tensor(image) else (image.height, image.width)
    pixels = pipe.video_processor.preprocess(image, height=height, width=width)
    pixels = pixels.to(device=vae.device, dtype=vae.dtype)
    return vae.encode(pixels.unsqueeze(2)).latent_dist.mode().to(torch.float32)
