"""Flux.2 [klein]'s tiny jobs (the family contract suite's): the smallest is the undistilled
-base model's (tiny-flux2-klein-base), true CFG, so that CFG parallel runs its branches on the
halves of 2 and 4 ranks; then the step-distilled model (tiny-flux2-klein: one branch, which
spreads over every rank)."""

from __future__ import annotations

from typing import Any

from ...family_spec import TinyJob


def direct(pipe: Any, body: Any) -> Any:
    """`Flux2KleinPipeline` at its own guidance scale."""
    from ..base import called_directly

    return called_directly(pipe, body, guidance_scale=body["guidance_scale"])


# The -base model at 96x64 px: 6 x 4 = 24 image tokens and 512 text tokens; the unconditional
# branch is the (empty) negative prompt. diffusers' plan splits the text and the image tokens
# each on its own, so a rank's share at the joint blocks is the sum of the two: 24 divides by
# 2, 3 and 4 so that it is also the share of the 536 together (the contract's rule); the text
# stays uneven on Ulysses 3 (171 + 171 + 170, 4 heads).
BASE = {"prompt": "ein Boot", "seed": 9, "guidance_scale": 4.0}
BASE.update(width=96, height=64, num_inference_steps=2)

# The distilled model at 64x48 px: 4 x 3 image tokens (2x2 patches of the 8x latents) and 512
# text tokens; no guidance.
BODY = {"prompt": "ein Boot", "seed": 9, "guidance_scale": 1.0}
BODY.update(width=64, height=48, num_inference_steps=2)

TINY_JOB = TinyJob("tiny-flux2-klein-base", BASE, direct)

TINY_JOBS = (TINY_JOB, TinyJob("tiny-flux2-klein", BODY, direct, name="distilled"))
"""The jobs the family contract runs: the -base model's true CFG first, then the distilled."""
