"""Flux.1's smallest job (the family contract suite's): tiny-flux with true CFG."""

from __future__ import annotations

from typing import Any

from ...family_spec import TinyJob

# 64x48 px: 4 x 3 image tokens (2x2 patches of the 8x latents)
BODY = {"prompt": "a lighthouse at dusk", "negative_prompt": "fog", "seed": 3}
BODY.update(width=64, height=48, num_inference_steps=2, guidance_scale=4.0)


def direct(pipe: Any, body: Any) -> Any:
    """`FluxPipeline` with the negative prompt: tiny-flux is not guidance-distilled, so the
    guidance is true CFG (`true_cfg_scale`)."""
    from ..base import called_directly

    guidance = body["guidance_scale"]
    return called_directly(
        pipe,
        body,
        negative_prompt=body["negative_prompt"],
        true_cfg_scale=guidance,
        guidance_scale=guidance,
    )


TINY_JOB = TinyJob(
    "tiny-flux",
    BODY,
    direct,
    # the first-block metric over 4 steps: -, 0.57, 0.83, 0.90
    cached={"num_inference_steps": 4, "cache": {"method": "first-block", "threshold": 0.75}},
)

TINY_JOBS = (TINY_JOB,)
"""The jobs the family contract runs: the smallest first."""
