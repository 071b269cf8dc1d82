"""LTX-2's smallest job (the family contract suite's): tiny-ltx2, guided (plain CFG)."""

from __future__ import annotations

from typing import Any

from ...family_spec import TinyJob
from .adapter import FPS, PLAIN_CFG

# 64x64 px and 9 frames: 2 latent frames of 2 x 2 tokens (32x, patch 1), one VAE tile
BODY = {"prompt": "a drum solo in the rain", "negative_prompt": "silence", "seed": 5}
BODY.update(width=64, height=64, num_frames=9, num_inference_steps=2, guidance_scale=4.0)


def called_with_audio(pipe: Any, body: Any) -> tuple[Any, Any]:
    """`LTX2Pipeline` as a user calls it for `body`: the negative prompt, plain CFG on video
    and audio at the job's scale, paradit's frame rate; its (video, audio) batches."""
    import torch

    with torch.no_grad():
        return pipe(
            prompt=body["prompt"],
            negative_prompt=body["negative_prompt"],
            height=body["height"],
            width=body["width"],
            num_frames=body["num_frames"],
            frame_rate=float(FPS),
            num_inference_steps=body["num_inference_steps"],
            guidance_scale=body["guidance_scale"],
            audio_guidance_scale=body["guidance_scale"],
            use_cross_timestep=False,
            max_sequence_length=32,
            generator=torch.Generator().manual_seed(body["seed"]),
            output_type="np",
            return_dict=False,
            **PLAIN_CFG,
        )


def direct(pipe: Any, body: Any) -> Any:
    """The video of `called_with_audio` (its audio track: tests/families/test_ltx2.py)."""
    import numpy as np

    return np.asarray(called_with_audio(pipe, body)[0][0])


TINY_JOB = TinyJob(
    "tiny-ltx2",
    BODY,
    direct,
    tile=128,
    # the first-block metric over 4 steps: -, 0.49, 0.62, 0.50
    cached={"num_inference_steps": 4, "cache": {"method": "first-block", "threshold": 0.55}},
)

TINY_JOBS = (TINY_JOB,)
"""The jobs the family contract runs: the smallest first."""
