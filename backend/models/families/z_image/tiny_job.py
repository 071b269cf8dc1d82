"""Z-Image's smallest job (the family contract suite's): tiny-z-image, guided."""

from __future__ import annotations

from typing import Any

from ...family_spec import TinyJob

# 64x48 px: 4 x 3 image tokens (2x2 patches of the 8x latents), padded to 32; the prompt and
# the negative one pad to 64 and 32 text tokens, so the batch of two branches is masked
BODY = {"prompt": "a red fox in snow, at dawn, with a long tail 🦊", "seed": 5}
BODY["negative_prompt"] = "blurry"
BODY.update(width=64, height=48, num_inference_steps=2, guidance_scale=4.0)


def direct(pipe: Any, body: Any) -> Any:
    """`ZImagePipeline` with the negative prompt at its own guidance scale: ours less one."""
    from ..base import called_directly

    guidance = max(body["guidance_scale"] - 1.0, 0.0)
    return called_directly(
        pipe, body, negative_prompt=body["negative_prompt"], guidance_scale=guidance
    )


TINY_JOB = TinyJob("tiny-z-image", BODY, direct)

TINY_JOBS = (TINY_JOB,)
"""The jobs the family contract runs: the smallest first."""
