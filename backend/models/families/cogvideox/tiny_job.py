"""CogVideoX's smallest job (the family contract suite's): tiny-cogvideox, guided."""

from __future__ import annotations

from typing import Any

from ...family_spec import TinyJob

# 64x48 px and 5 frames: 2 latent frames of 4 x 3 tokens (8x, patch 2)
BODY = {"prompt": "a red fox in snow", "negative_prompt": "blurry", "seed": 7}
BODY.update(width=64, height=48, num_frames=5, num_inference_steps=2, guidance_scale=6.0)


def direct(pipe: Any, body: Any) -> Any:
    """`CogVideoXPipeline` with the negative prompt and its CFG scale."""
    from ..base import called_with_cfg

    return called_with_cfg(pipe, body)


TINY_JOB = TinyJob(
    "tiny-cogvideox",
    BODY,
    direct,
    # the first-block metric over 4 steps: -, 1.20, 1.48, 0.90
    cached={"num_inference_steps": 4, "cache": {"method": "first-block", "threshold": 1.0}},
)

TINY_JOBS = (TINY_JOB,)
"""The jobs the family contract runs: the smallest first."""
