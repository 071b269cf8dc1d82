"""Wan's smallest job (the family contract suite's): tiny-wan, guided, 5 frames."""

from __future__ import annotations

from typing import Any

from ...family_spec import TinyJob

# 64x48 px and 5 frames: 2 latent frames of 4 x 3 tokens (8x, patch 2)
BODY = {"prompt": "a red fox in snow", "negative_prompt": "blurry", "seed": 7}
BODY.update(width=64, height=48, num_frames=5, num_inference_steps=2, guidance_scale=5.0)


def direct(pipe: Any, body: Any) -> Any:
    """`WanPipeline` with the negative prompt and its CFG scale."""
    from ..base import called_with_cfg

    return called_with_cfg(pipe, body)


TINY_JOB = TinyJob(
    "tiny-wan",
    BODY,
    direct,
    # the first-block metric over 4 steps: -, 0.76, 1.05, 0.91
    cached={"num_inference_steps": 4, "cache": {"method": "first-block", "threshold": 0.85}},
)


def _png(width: int, height: int) -> str:
    """A ramp image as base64 PNG."""
    import base64
    import io

    import numpy as np
    from PIL import Image

    ramp = np.linspace(0, 255, width * height * 3).reshape(height, width, 3).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(ramp).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


# Wan 2.2 TI2V-5B: 160x64 px and 5 frames are 2 latent frames of 5 x 2 tokens (16x, then 2x2
# patches): 20 tokens, which 3 ranks do not divide (nor the 4 heads); the VAE decodes 2 tiles
# of 128 px. With an image, `WanImageToVideoPipeline` on the same components. I2V-A14B: 80x48
# px and 9 frames through the 8x VAE are 3 x 5 x 3 = 45 tokens, which 2 and 4 ranks do not
# divide; 2 tiles of 64 px. All guided, two steps: with shift 3 the timesteps are ~999 and
# ~750, so I2V-A14B's high-noise expert runs the first step and its low-noise one the second
# (on 2 ranks the contract swaps them too, sharded).
TI2V_TEXT = {"prompt": "a red fox in snow", "negative_prompt": "blurry", "seed": 5}
TI2V_TEXT.update(width=160, height=64, num_frames=5, num_inference_steps=2, guidance_scale=5.0)
TI2V_IMAGE = {**TI2V_TEXT, "prompt": "ein Boot 🚤", "image": _png(160, 64)}
I2V_A14B = {"prompt": "a lighthouse", "seed": 9, "width": 80, "height": 48, "num_frames": 9}
I2V_A14B.update(num_inference_steps=2, guidance_scale=4.0, image=_png(80, 48))


def with_image(pipe: Any, body: Any) -> Any:
    """diffusers' documented `WanImageToVideoPipeline` for a job with an image, on the
    pipeline's own components (TI2V-5B loads as `WanPipeline`): the image, the negative prompt
    (empty where the job has none) and the CFG scale."""
    import base64
    import io

    from diffusers import WanImageToVideoPipeline
    from PIL import Image

    from ..base import called_directly

    if type(pipe) is not WanImageToVideoPipeline:
        pipe = WanImageToVideoPipeline(**pipe.components, expand_timesteps=True)
        pipe.set_progress_bar_config(disable=True)
    image = Image.open(io.BytesIO(base64.b64decode(body["image"]))).convert("RGB")
    return called_directly(
        pipe,
        body,
        image=image,
        negative_prompt=body.get("negative_prompt", ""),
        num_frames=body["num_frames"],
        guidance_scale=body["guidance_scale"],
    )


TINY_JOBS = (
    TINY_JOB,
    TinyJob("tiny-wan2.2-ti2v-5b", TI2V_TEXT, direct, tile=128, name="ti2v text"),
    TinyJob("tiny-wan2.2-ti2v-5b", TI2V_IMAGE, with_image, tile=128, name="ti2v image"),
    TinyJob("tiny-wan2.2-i2v-a14b", I2V_A14B, with_image, name="i2v-a14b experts"),
)
"""The jobs the family contract runs: the smallest first, then Wan 2.2's text and image to
video in one model and its two experts."""
