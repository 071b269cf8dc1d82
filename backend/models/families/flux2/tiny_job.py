"""Flux.2's tiny jobs (the family contract suite's): tiny-flux2, its guidance embedded (one
branch: no CFG parallel); the smallest, then an edit with two reference images."""

from __future__ import annotations

from typing import Any

from ...family_spec import TinyJob

# 64x48 px: 4 x 3 image tokens (2x2 patches of the 8x latents) and 512 text tokens
BODY = {"prompt": "a red fox in snow 🦊", "seed": 5, "guidance_scale": 4.0}
BODY.update(width=64, height=48, num_inference_steps=2)


def direct(pipe: Any, body: Any) -> Any:
    """`Flux2Pipeline` with its embedded guidance."""
    from ..base import called_directly

    return called_directly(pipe, body, guidance_scale=body["guidance_scale"])


TINY_JOB = TinyJob("tiny-flux2", BODY, direct)


def png(width: int, height: int, seed: int) -> str:
    """A seeded noise image as base64 PNG."""
    import base64
    import io

    import numpy as np
    from PIL import Image

    pixels = (np.random.RandomState(seed).rand(height, width, 3) * 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


# An edit: Flux.2 keeps a reference's own size, so 80x64 px and 96x64 px are 20 + 24 tokens
# of 2x2 patches of the 16x latents behind the output's 28 (112x64 px). diffusers' plan splits
# the text (512) and the image tokens (72) each on its own, so a rank's share at the joint
# blocks is the sum of the two: 72 divides by 2, 3 and 4 so that it is also the share of the
# 584 together (the contract's rule); the text stays uneven on Ulysses 3 (171 + 171 + 170, 4
# heads). Its world size 1 against `Flux2Pipeline` called with the images (and after a LoRA
# job): tests/families/test_image_edit.py.
EDIT = {"prompt": "ein Boot", "seed": 9, "width": 112, "height": 64, "num_inference_steps": 2}
EDIT.update(image=png(80, 64, 3), images=[png(96, 64, 4)])

TINY_JOBS = (TINY_JOB, TinyJob("tiny-flux2", EDIT, None, name="edit"))
"""The jobs the family contract runs: the smallest first, then an edit (reference images)."""
