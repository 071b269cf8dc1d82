"""HunyuanVideo 1.5's smallest job (the family contract suite's): tiny-hunyuanvideo1.5,
guided."""

from __future__ import annotations

from typing import Any

from ...family_spec import TinyJob

# 80x32 px and 5 frames: 2 latent frames of 2 x 5 tokens (16x, patch 1)
BODY = {"prompt": "a fox in the snow", "negative_prompt": "blurry", "seed": 5}
BODY.update(width=80, height=32, num_frames=5, num_inference_steps=2, guidance_scale=6.0)


def direct(pipe: Any, body: Any) -> Any:
    """`HunyuanVideo15Pipeline` with the negative prompt, its guider at the job's scale for
    the call (the model's again after)."""
    from ..base import called_directly

    pipe.guider.guidance_scale = body["guidance_scale"]
    try:
        return called_directly(
            pipe, body, negative_prompt=body["negative_prompt"], num_frames=body["num_frames"]
        )
    finally:
        pipe.guider.guidance_scale = pipe.guider.config.guidance_scale


TINY_JOB = TinyJob(
    "tiny-hunyuanvideo1.5",
    BODY,
    direct,
    # the first-block metric over 5 steps: -, 1.24, 1.06, 1.19, 0.88
    cached={"num_inference_steps": 5, "cache": {"method": "first-block", "threshold": 1.0}},
)

TINY_JOBS = (TINY_JOB,)
"""The jobs the family contract runs: the smallest first."""
