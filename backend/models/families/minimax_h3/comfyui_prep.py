"""MiniMax H3's first frame as ComfyUI's nodes present, encode and noise it (a job's
`image_prep` comfyui: the `video_minimax_h3_i2v` template's job), in our own words from
ComfyUI's behaviour (read 2026: comfy_extras/nodes_minimax_h3.py at 542de101,
comfy/text_encoders/minimax.py, qwen3vl.py, qwen_vl.py `process_qwen2vl_images`,
comfy/ldm/minimax/vae.py `encode`, comfy/ldm/minimax/model.py `_cond_video_rows`,
comfy/model_base.py `MiniMaxH3.extra_conds`).

What is the same as diffusers' fl2va steps (tests/families/test_minimax_h3_comfyui.py proves
it): the presentation's tokens (`"<Picture 1>: "`, `<|vision_start|>`, the image pads,
`<|vision_end|>`, the prompt, no chat template, no special tokens), their modality tags (the
vision block with its two markers video, the rest text), no attention mask (one unpadded
sequence), the rotary positions of the image, the hidden state (after decoder layer 50, no
norm). What differs, and is ComfyUI's here:

- the vision tower's input (`VisionInput`): ComfyUI resizes the canvas image in float with
  bilinear to sides of 32 between 3136 and 12845056 pixels (Qwen2-VL's bounds, not the
  processor's) and normalises it with mean and std 0.5; the processor resizes the 8-bit
  image with its own resample and bounds and normalises with its own statistics. A canvas
  inside both bounds with a Qwen3-VL processor (statistics 0.5) gives the same pixels;
- the keyframe latents (`keyframe_latents`): ComfyUI takes the posterior's mean, unrounded,
  from pixels it scales to [-1, 1] and back (`image * 2 - 1`, then `(x + 1) * 0.5`: a float
  round trip that moves 63 of the 256 8-bit values by an ulp); diffusers samples the
  posterior under seed 42 and rounds it to float16;
- the keyframe noise (`condition_rows`): ComfyUI draws each keyframe's noise in the packed
  rows' shape from a CPU generator seeded with the job's seed, restarted per keyframe, and
  mixes `0.999 * rows + (1.0 - 0.999) * noise` in Python floats; diffusers draws from the
  request's generator in the latents' shape and mixes with a float32 level. The request's
  generator still makes the draws diffusers makes there (discarded), so the job's own video
  and audio noise stay paradit's.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch

from ....request import IMAGE_PREP_COMFYUI
from ...encoders.qwen3_vl import comfyui_vision_size

PREP = IMAGE_PREP_COMFYUI
COND_LEVEL = 0.999
"""The `t` a keyframe's rows are noised to (ComfyUI's `VISUAL_COND_TIMESTEP`)."""
VISION_MEAN = VISION_STD = 0.5
PATCH, MERGE, TEMPORAL = 16, 2, 2
"""Qwen3-VL's vision patches: 16 px, 2x2 merged, 2 frames."""


def image_floats(image: Any) -> torch.Tensor:
    """An 8-bit RGB PIL image as ComfyUI's IMAGE holds it: (height, width, 3) float32 in
    0..1, each value `k / 255`."""
    return torch.from_numpy(np.asarray(image.convert("RGB"), dtype=np.float32) / 255.0)


def vision_size(height: int, width: int) -> tuple[int, int]:
    """The (height, width) ComfyUI's Qwen3-VL resizes an image to (`comfyui_vision_size`, in
    the tensor's order)."""
    w, h = comfyui_vision_size(width, height)
    return h, w


def vision_patches(pixels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One image (height, width, 3) in 0..1 as ComfyUI feeds Qwen3-VL's vision tower: the
    flattened patches (the frame twice, for the temporal patch) and its grid (1, 3)."""
    height, width = int(pixels.shape[0]), int(pixels.shape[1])
    h, w = vision_size(height, width)
    chw = pixels[..., :3].permute(2, 0, 1).unsqueeze(0).float()
    chw = torch.nn.functional.interpolate(chw, size=(h, w), mode="bilinear", align_corners=False)
    chw = ((chw[0] - VISION_MEAN) / VISION_STD).unsqueeze(0).repeat(TEMPORAL, 1, 1, 1)
    gh, gw = h // PATCH, w // PATCH
    patches = chw.reshape(1, TEMPORAL, 3, gh // MERGE, MERGE, PATCH, gw // MERGE, MERGE, PATCH)
    patches = patches.permute(0, 3, 6, 4, 7, 2, 1, 5, 8)
    flat = patches.reshape(gh * gw, 3 * TEMPORAL * PATCH * PATCH)
    return flat, torch.tensor([[1, gh, gw]], dtype=torch.long)


class VisionInput:
    """Stands in for the processor's image processor in diffusers' fl2va text step: the
    keyframes (canvas-sized PIL images) to `pixel_values` / `image_grid_thw` ComfyUI's way."""

    merge_size = MERGE

    def __call__(self, images: list[Any], return_tensors: str = "pt") -> dict[str, torch.Tensor]:
        if return_tensors != "pt":
            raise ValueError("the ComfyUI vision input returns torch tensors (return_tensors='pt')")
        parts = [vision_patches(image_floats(image)) for image in images]
        return {
            "pixel_values": torch.cat([flat for flat, _ in parts]),
            "image_grid_thw": torch.cat([grid for _, grid in parts]),
        }


def presenting_processor(processor: Any) -> Any:
    """A shallow copy of the pipeline's Qwen3-VL processor whose image processor is
    `VisionInput` (its tokenizer and token-type ids are the processor's own)."""
    presenting = copy.copy(processor)
    presenting.image_processor = VisionInput()
    return presenting


def keyframe_latents(vae: Any, image: Any, pixel_mean: Any, pixel_std: Any) -> torch.Tensor:
    """One canvas-sized keyframe through the video VAE as ComfyUI's `VAE.encode` runs
    H3's: pixels `k / 255` to [-1, 1] and back, ImageNet-normalised, the single frame
    through the (tiled) spatial encoder, the posterior's mean normalised with the VAE's
    latent statistics: (1, channels, 1, height / 16, width / 16) float32 on the CPU."""
    param = next(vae.encoder.parameters())
    pixels = image_floats(image).permute(2, 0, 1)[None, :, None].to(param.device)
    pixels = pixels * 2.0 - 1.0  # ComfyUI's VAE process_input
    mean = torch.tensor(pixel_mean, dtype=torch.float32).view(1, -1, 1, 1, 1).to(pixels)
    std = torch.tensor(pixel_std, dtype=torch.float32).view(1, -1, 1, 1, 1).to(pixels)
    pixels = pixels.add(1.0).mul_(0.5).sub_(mean).div_(std)
    with torch.no_grad():
        posterior = vae.encode(pixels.to(param.dtype), return_dict=False)[0]
    latents = posterior.mean[:, :, -1:].float().cpu()
    latents_mean = torch.tensor(vae.config.latents_mean, dtype=torch.float32).view(1, -1, 1, 1, 1)
    latents_std = torch.tensor(vae.config.latents_std, dtype=torch.float32).view(1, -1, 1, 1, 1)
    return (latents - latents_mean) / latents_std


def condition_rows(latents: list[torch.Tensor], seed: int, patch_size: Any) -> torch.Tensor:
    """The keyframes' packed rows, noised as ComfyUI's H3 model noises them: each one's
    rows mixed with `torch.randn(rows.shape)` from a CPU generator seeded with `seed`,
    restarted for every keyframe, at `COND_LEVEL` (Python floats)."""
    from diffusers.modular_pipelines.minimax_h3.before_denoise import patchify_video_latents

    packed = []
    for condition in latents:
        rows = patchify_video_latents(condition.float().cpu(), tuple(patch_size))
        noise = torch.randn(
            rows.shape, generator=torch.Generator("cpu").manual_seed(seed), dtype=torch.float32
        )
        packed.append(COND_LEVEL * rows + (1.0 - COND_LEVEL) * noise)
    return torch.cat(packed)
