"""Qwen-Image-Edit's smallest job (the family contract suite's): tiny-qwen-image-edit edits
one seeded image, with true CFG."""

from __future__ import annotations

import base64
import io
from typing import Any

from ...family_spec import TinyJob


def _png(width: int, height: int) -> str:
    """A seeded image as base64 PNG."""
    import numpy as np
    from PIL import Image

    pixels = np.random.default_rng(1).integers(0, 256, (height, width, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "PNG")
    return base64.b64encode(buffer.getvalue()).decode()


# Edit-Plus VAE-encodes every input at about 1024x1024 pixels: 4096 reference tokens behind
# the 80x48 px output's 5 x 3 (the image's aspect at the tiny preset's 64x64 budget, the size
# the request's rule chooses). True CFG (two branches).
BODY = {"prompt": "make the fox red 🦊", "negative_prompt": "blurry", "seed": 5}
BODY.update(image=_png(64, 48), width=80, height=48, num_inference_steps=2, guidance_scale=4.0)


def direct(pipe: Any, body: Any) -> Any:
    """`QwenImageEditPlusPipeline` with the image, the negative prompt and `true_cfg_scale`."""
    from PIL import Image

    from ..base import called_directly

    image = Image.open(io.BytesIO(base64.b64decode(body["image"]))).convert("RGB")
    return called_directly(
        pipe,
        body,
        image=[image],
        negative_prompt=body["negative_prompt"],
        true_cfg_scale=body["guidance_scale"],
    )


# tiles of 128: the 1024x1024 inputs VAE-encode 3 times faster than in tiles of 64
TINY_JOB = TinyJob("tiny-qwen-image-edit", BODY, direct, tile=128)

# The job ComfyUI's 2511 templates import to: ComfyUI's preparation (`image_prep` comfyui,
# comfyui_prep.py; a 60x40 input's 79x53 reference tokens: odd sides, ComfyUI's positions),
# the references at noise level 0, CFGNorm, euler/simple at shift 3.1; the 48x32 output's 3x2
# tokens. On 3 ranks (split unevenly) and 2 (CFG parallel). World size 1 against diffusers'
# components driven by hand: tests/families/test_qwen_image_edit_comfyui.py.
COMFYUI = {**BODY, "image": _png(60, 40), "width": 48, "height": 32, "image_prep": "comfyui"}
COMFYUI.update(reference_method="index_timestep_zero", cfg_mode="norm")
COMFYUI.update(sampler="euler", scheduler="simple", shift=3.1)

TINY_JOBS = (
    TINY_JOB,
    TinyJob("tiny-qwen-image-edit", COMFYUI, None, tile=128, ranks=(3, 2), name="comfyui"),
)
"""The jobs the family contract runs: the smallest first."""
