"""Krea 2's smallest job (the family contract suite's): tiny-krea2, guided."""

from __future__ import annotations

from typing import Any

from ...family_spec import TinyJob

# 64x48 px: 4 x 3 image tokens (2x2 patches of the 8x latents) after the padded text (the
# prompt and the negative one mask different numbers of padding tokens)
BODY = {"prompt": "a red fox in snow, at dawn 🦊", "negative_prompt": "blurry", "seed": 5}
BODY.update(width=64, height=48, num_inference_steps=2, guidance_scale=4.0)


def direct(pipe: Any, body: Any) -> Any:
    """`Krea2Pipeline` with the negative prompt at its own guidance scale: ours less one."""
    from ..base import called_directly

    guidance = max(body["guidance_scale"] - 1.0, 0.0)
    return called_directly(
        pipe, body, negative_prompt=body["negative_prompt"], guidance_scale=guidance
    )


TINY_JOB = TinyJob(
    "tiny-krea2",
    BODY,
    direct,
    # 32-px tiles a quarter overlapped: the 64x48 image decodes as 2 rows of 3 tiles (the
    # VAE's own tiled decode called directly; the tiles dealt to the ranks in the group)
    tile=32,
    cached={
        "num_inference_steps": 6,
        "cache": {"method": "first-block", "threshold": 1.0},
    },
)

# Turbo's way: one branch (the pipeline's guidance 0), which a CFG plan spreads over all ranks
UNGUIDED = {**BODY, "guidance_scale": 1.0, "seed": 9}
del UNGUIDED["negative_prompt"]


def direct_unguided(pipe: Any, body: Any) -> Any:
    """`Krea2Pipeline` unguided: its guidance scale 0 (no negative branch)."""
    from ..base import called_directly

    return called_directly(pipe, body, guidance_scale=0.0)


TINY_JOBS = (
    TINY_JOB,
    TinyJob("tiny-krea2", UNGUIDED, direct_unguided, name="unguided", ranks=(4,)),
)
"""The jobs the family contract runs: the smallest first."""
