"""LTX-2's start image prepared as ComfyUI's LTX-2 image-to-video templates prepare it
(request `image_prep` "comfyui"; `backend/workflow/` makes the sent image).

The templates (`video_ltx2_i2v`, `_distilled`) resize the loaded image (`ResizeImageMaskNode`,
made when the job is sent), compress it once with `LTXVPreprocess`, and hand the decoded frame
to `LTXVImgToVideoInplace` at each stage's latent size. As read in ComfyUI's
`comfy_extras/nodes_lt.py` (`preprocess`, `LTXVImgToVideoInplace`) and `comfy/utils.py`
(`common_upscale`), in this order:

1. `LTXVPreprocess`: the float image (0..1) cropped to even sides, turned into 8 bits by
   x 255 and truncation (not rounding), one H.264 frame at the CRF (`image_crf.round_trip_array`,
   on one x264 thread), decoded back to 8 bits and divided by 255 in float32. The sent image is
   the 8-bit image that truncation gives (the import truncates a float resize's output as this
   node would), so here the truncation gives its bytes back.
2. `LTXVImgToVideoInplace`: where the frame's size is not the latent's in pixels, ComfyUI's
   `common_upscale(..., "bilinear", "center")`: the centre cut to the target's aspect (an
   offset of round((old - old x new_aspect / old_aspect) / 2) on the longer axis, that many
   rows or columns off each side), then torch's bilinear interpolation (align_corners false,
   no antialiasing) in float32; a frame already at the size is taken as it is.
3. The float pixels go to the VAE (x 2 - 1: ComfyUI's VAE input and diffusers' normalisation
   alike), no 8-bit step in between.

diffusers' `LTX2ImageToVideoPipeline` takes a float tensor (0..1) at the job's size as its
`image` and encodes it unchanged (its processor's resize to the same size is the identity), so
the pipeline is given step 2's output with `image_crf=0`; stage 2 of a two-stage job writes the
same compressed frame, scaled to the final size, into the upscaled latent.
"""

from __future__ import annotations

from typing import Any

import torch

from . import image_crf

PREP = "comfyui"
"""The `image_prep` value (`Limits.image_preps`)."""


def compressed_frame(pixels: torch.Tensor, crf: int) -> torch.Tensor:
    """`LTXVPreprocess` of one float image (height, width, 3) in 0..1: the frame H.264 gives
    back at `crf` (0: the image as it is), float32 in 0..1, even sides."""
    if pixels.ndim != 3 or pixels.shape[2] != 3:
        raise ValueError(f"an RGB image (height, width, 3), got {tuple(pixels.shape)}")
    if crf < 0:
        raise ValueError(f"image_crf must be at least 0, got {crf}")
    if crf == 0:
        return pixels
    height, width = pixels.shape[0] // 2 * 2, pixels.shape[1] // 2 * 2
    as_bytes = (pixels[:height, :width] * 255.0).to(torch.uint8)  # truncates, as ComfyUI's
    decoded = image_crf.round_trip_array(as_bytes.numpy(), min(crf, image_crf.MAX_CRF))
    return torch.from_numpy(decoded).to(torch.float32) / 255.0


def centre_offsets(old: tuple[int, int], new: tuple[int, int]) -> tuple[int, int]:
    """(x, y): the columns and rows `common_upscale`'s centre crop takes off each side of an
    `old` (width, height) image for a `new` (width, height) one."""
    old_aspect, new_aspect = old[0] / old[1], new[0] / new[1]
    if old_aspect > new_aspect:
        return round((old[0] - old[0] * (new_aspect / old_aspect)) / 2), 0
    if old_aspect < new_aspect:
        return 0, round((old[1] - old[1] * (old_aspect / new_aspect)) / 2)
    return 0, 0


def scaled(frame: torch.Tensor, width: int, height: int) -> torch.Tensor:
    """The frame (height, width, 3) as `LTXVImgToVideoInplace` hands it to the VAE at
    `width` x `height`: (1, 3, height, width) float32, centre-cut and bilinear where the sizes
    differ."""
    pixels = frame.movedim(-1, 0)[None].to(torch.float32)
    old = (pixels.shape[-1], pixels.shape[-2])
    if old == (width, height):
        return pixels
    x, y = centre_offsets(old, (width, height))
    cut = pixels.narrow(-2, y, old[1] - 2 * y).narrow(-1, x, old[0] - 2 * x)
    return torch.nn.functional.interpolate(cut, size=(height, width), mode="bilinear")


def stage_pixels(image: Any, crf: int, width: int, height: int) -> torch.Tensor:
    """The sent image (an RGB PIL image at its own size) prepared for a stage of
    `width` x `height`: compressed once, scaled in float (1, 3, height, width)."""
    import numpy as np

    pixels = torch.from_numpy(np.asarray(image.convert("RGB")).copy()).to(torch.float32) / 255.0
    return scaled(compressed_frame(pixels, crf), width, height)
