"""Qwen-Image 2.1's tiny jobs (the family contract suite's): tiny-qwen-image2.1 guided (two
branches, each with its own prefix cache), then unguided (its default: one branch, which a
CFG plan spreads over all ranks), then an edit of two input images (their slots in the
prompt's tokens, each image a block of the cached prefix; guided), then an edit whose
references ComfyUI's way keep their own sizes (`image_prep` comfyui)."""

from __future__ import annotations

import base64
import io
from typing import Any

from ...family_spec import TinyJob

# 128x96 px: 4 x 3 image tokens (the VAE is 16x, a token is one latent pixel) after the text
BODY = {"prompt": "a red fox in snow, at dawn 🦊", "negative_prompt": "blurry", "seed": 5}
BODY.update(width=128, height=96, num_inference_steps=3, guidance_scale=4.0)


def rgb(image: Any) -> Any:
    """The pipeline's RGBA images as paradit's RGB frames."""
    return image[..., :3]


def direct(pipe: Any, body: Any) -> Any:
    """`QwenImage21Pipeline` with the negative prompt at its true CFG scale (ours)."""
    from ..base import called_directly

    return rgb(
        called_directly(
            pipe,
            body,
            negative_prompt=body["negative_prompt"],
            true_cfg_scale=body["guidance_scale"],
        )
    )


UNGUIDED = {**BODY, "guidance_scale": 1.0, "seed": 9}
del UNGUIDED["negative_prompt"]


def direct_unguided(pipe: Any, body: Any) -> Any:
    """`QwenImage21Pipeline` as its documentation calls it: unguided."""
    from ..base import called_directly

    return rgb(called_directly(pipe, body))


def _png(width: int, height: int, seed: int) -> str:
    """A seeded image as base64 PNG."""
    import numpy as np
    from PIL import Image

    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "PNG")
    return base64.b64encode(buffer.getvalue()).decode()


# 96x64 px out (6 x 4 tokens); the inputs resized at its area (`output_resolution` 78): the
# 64x48 image to 96x64 and the 48x64 one to 64x96, 6 slots of 2x2 latent tokens each
EDIT = {**BODY, "prompt": "put the fox of <image2> into <image1> 🦊", "seed": 7}
EDIT.update(image=_png(64, 48, 1), images=[_png(48, 64, 2)], width=96, height=64)
EDIT.update(num_inference_steps=2)


def direct_edit(pipe: Any, body: Any) -> Any:
    """`QwenImage21Pipeline` editing its images (in the request's order), the negative prompt
    at its true CFG scale, the inputs resized at the output's area (`output_resolution`)."""
    import math

    from PIL import Image

    from ..base import called_directly

    images = [
        Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB")
        for data in (body["image"], *body["images"])
    ]
    return rgb(
        called_directly(
            pipe,
            body,
            image=images,
            output_resolution=round(math.sqrt(body["width"] * body["height"])),
            negative_prompt=body["negative_prompt"],
            true_cfg_scale=body["guidance_scale"],
        )
    )


# The edit ComfyUI's edit templates import to (`image_prep` comfyui, comfyui_prep.py): each
# reference at its own size in sides of 32 (the 100x70 image Lanczos'd to 96x64, the 64x64 one
# as loaded), where the pipeline makes them 128x96 and 96x96 at the 96x96 output's area;
# guided, 2 steps. On 2 ranks (CFG parallel). World size 1 against the pipeline's parts driven
# by hand: tests/families/test_qwen_image21_comfyui.py.
COMFYUI_EDIT = {**BODY, "prompt": "the fox of <image2> in <image1>", "seed": 11}
COMFYUI_EDIT.update(image=_png(100, 70, 3), images=[_png(64, 64, 4)], width=96, height=96)
COMFYUI_EDIT.update(num_inference_steps=2, image_prep="comfyui")

TINY_JOBS = (
    TinyJob("tiny-qwen-image2.1", BODY, direct),
    TinyJob("tiny-qwen-image2.1", UNGUIDED, direct_unguided, name="unguided", ranks=(4, 3)),
    TinyJob("tiny-qwen-image2.1", EDIT, direct_edit, name="edit", ranks=(4, 3, 2)),
    TinyJob("tiny-qwen-image2.1", COMFYUI_EDIT, None, name="comfyui", ranks=(2,)),
)
"""The jobs the family contract runs: the smallest first."""
