"""Flux.2's smallest job (the family contract suite's): tiny-flux2, its guidance embedded
(one branch: no CFG parallel)."""

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

TINY_JOBS = (TINY_JOB,)
"""The jobs the family contract runs: the smallest first."""
