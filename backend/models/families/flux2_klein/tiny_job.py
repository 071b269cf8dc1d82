"""Flux.2 [klein]'s tiny jobs (the family contract suite's): the smallest is the undistilled
-base model's (tiny-flux2-klein-base), true CFG, so that CFG parallel runs its branches on the
halves of 2 and 4 ranks; then the step-distilled model (tiny-flux2-klein: one branch, which
spreads over every rank); then the KV model's edit (tiny-flux2-klein-kv: its reference's keys
and values cached at the first step and reused at the second, under Ulysses whole on every
rank: `parallel.py`)."""

from __future__ import annotations

from typing import Any

from ...family_spec import TinyJob
from ..flux2.tiny_job import png


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


def direct_kv(pipe: Any, body: Any) -> Any:
    """`Flux2KleinKVPipeline` editing the body's reference images (it takes no guidance)."""
    import base64
    import io

    from PIL import Image

    from ..base import called_directly

    images = [
        Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB")
        for data in (body["image"], *body.get("images", ()))
    ]
    return called_directly(pipe, body, image=images)


# The KV model's edit at 64x48 px (4 x 3 tokens) of an 80x64 px reference (5 x 4 tokens, at
# time 10): the first step's last block sees 512 + 20 + 12 tokens (the references cached),
# the second's 512 + 12 (the cached keys and values put back); 544 and 524 split unevenly on 3
# ranks, the cache whole on every rank for its share of the 4 heads (one head each on 4 ranks,
# a padded head on 3).
KV_EDIT = {"prompt": "ein Boot", "seed": 11, "guidance_scale": 1.0}
KV_EDIT.update(width=64, height=48, num_inference_steps=2, image=png(80, 64, 5))

TINY_JOBS = (
    TINY_JOB,
    TinyJob("tiny-flux2-klein", BODY, direct, name="distilled"),
    TinyJob("tiny-flux2-klein-kv", KV_EDIT, direct_kv, name="kv edit"),
)
"""The jobs the family contract runs: the -base model's true CFG first, then the distilled,
then the KV model's cached edit."""
