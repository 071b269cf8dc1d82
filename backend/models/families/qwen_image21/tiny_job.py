"""Qwen-Image 2.1's tiny jobs (the family contract suite's): tiny-qwen-image2.1 guided (two
branches, each with its own prefix cache), then unguided (its default: one branch, which a
CFG plan spreads over all ranks)."""

from __future__ import annotations

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


TINY_JOBS = (
    TinyJob("tiny-qwen-image2.1", BODY, direct),
    TinyJob("tiny-qwen-image2.1", UNGUIDED, direct_unguided, name="unguided", ranks=(4, 3)),
)
"""The jobs the family contract runs: the smallest first."""
