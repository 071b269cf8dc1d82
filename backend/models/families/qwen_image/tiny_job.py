"""Qwen-Image's smallest job (the family contract suite's): tiny-qwen-image with true CFG."""

from __future__ import annotations

from typing import Any

from ...family_spec import TinyJob

# 64x48 px: 4 x 3 image tokens (2x2 patches of the 8x latents)
BODY = {"prompt": "a red fox in snow 🦊", "negative_prompt": "blurry", "seed": 5}
BODY.update(width=64, height=48, num_inference_steps=2, guidance_scale=4.0)


def direct(pipe: Any, body: Any) -> Any:
    """`QwenImagePipeline` with the negative prompt and `true_cfg_scale`."""
    from ..base import called_directly

    return called_directly(
        pipe, body, negative_prompt=body["negative_prompt"], true_cfg_scale=body["guidance_scale"]
    )


TINY_JOB = TinyJob(
    "tiny-qwen-image",
    BODY,
    direct,
    # above 1 on every step of the guided job; unguided over 6 steps: -, 1.31, 0.90, 1.02, ...
    cached={
        "num_inference_steps": 6,
        "guidance_scale": 1.0,
        "cache": {"method": "first-block", "threshold": 1.0},
    },
)

TINY_JOBS = (TINY_JOB,)
"""The jobs the family contract runs: the smallest first."""
