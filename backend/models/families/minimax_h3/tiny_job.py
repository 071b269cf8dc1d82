"""MiniMax H3's smallest job (the family contract suite's): tiny-minimax-h3, 32x32 px, 124
frames (the shortest H3 takes: 5 s at 24 fps, 17n+5), 2 steps, unguided (guidance is
distilled into the weights). 37 latent frames of one 2x2 patch each, 414 audio rows (207
latents per stereo channel) and the prompt's rows: 460-odd rows in one packed sequence."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ...family_spec import TinyJob
from .adapter import grid_points

BODY = {"prompt": "a robot dancing, drums 🥁", "seed": 5, "guidance_scale": 1.0}
BODY.update(width=32, height=32, num_frames=124, num_inference_steps=2)


def _png(width: int, height: int, seed: int) -> str:
    """A seeded keyframe as base64 PNG."""
    import base64
    import io

    from PIL import Image

    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "PNG")
    return base64.b64encode(buffer.getvalue()).decode()


# First and last frame to audio and video (fl2va): a 48x32 first frame stretched onto the
# 32x32 canvas, a 32x64 last frame cover-cropped onto it; their latent frames are packed at the
# two ends of the video as clean conditioning rows.
FIRST_LAST = {**BODY, "prompt": "the fox runs off", "seed": 6, "image": _png(48, 32, 3)}
FIRST_LAST["last_image"] = _png(32, 64, 4)

# The first frame as ComfyUI's video_minimax_h3_i2v template prepares it (`image_prep`
# comfyui, comfyui_prep.py): ComfyUI's vision input, the posterior's mean, ComfyUI's
# keyframe noise (tests/families/test_minimax_h3_comfyui.py at world size 1).
COMFYUI_FIRST = {**BODY, "prompt": "the fox runs off", "seed": 6, "image": _png(48, 32, 3)}
COMFYUI_FIRST["image_prep"] = "comfyui"


def _image(data: str) -> Any:
    import base64
    import io

    from PIL import Image

    with Image.open(io.BytesIO(base64.b64decode(data))) as img:
        return img.convert("RGB")


def called_with_audio(pipe: Any, body: Any) -> tuple[np.ndarray, np.ndarray]:
    """`MiniMaxH3ModularPipeline` as its documentation calls it for `body` (its first and
    last frames, if any, as `image` and `last_image`): the frames (F, H, W, 3) in 0..1 and
    the stereo track (2, samples)."""
    keyframes = {k: _image(body[k]) for k in ("image", "last_image") if body.get(k)}
    with torch.no_grad():
        state = pipe(
            **keyframes,
            prompt=body["prompt"],
            height=body["height"],
            width=body["width"],
            num_frames=body["num_frames"],
            # diffusers' count: the sigma grid's points, one more than the job's DiT calls
            num_inference_steps=grid_points(body["num_inference_steps"]),
            generator=torch.Generator().manual_seed(body["seed"]),
            output_type="np",
        )
    video = np.asarray(state.get("videos"))[0]
    audio = state.get("audio")[0].float().numpy()
    return video, audio


def direct(pipe: Any, body: Any) -> np.ndarray:
    """The frames of `called_with_audio` (its audio: tests/families/test_minimax_h3.py)."""
    return called_with_audio(pipe, body)[0]


def pruned(pipe: Any) -> Any:
    """The pipeline with its DiT in the pruned-AdaLN form (`pruned.prune`: the table on 1025
    points, at the timestep MLP's full width, so the job stays close to the unpruned one)."""
    from .pruned import prune

    pipe.update_components(transformer=prune(pipe.transformer, width=32))
    return pipe


TINY_JOBS = (
    TinyJob("tiny-minimax-h3", BODY, direct),
    TinyJob("tiny-minimax-h3", FIRST_LAST, direct, name="first and last frame", ranks=(2,)),
    TinyJob("tiny-minimax-h3", COMFYUI_FIRST, None, name="comfyui first frame", ranks=(2,)),
    # the pruned-AdaLN DiT (ComfyUI's pruned files) through the job on 3 ranks (world size 1
    # against diffusers' unpruned DiT: tests/families/test_minimax_h3_pruned.py)
    TinyJob("tiny-minimax-h3", BODY, None, name="pruned AdaLN", ranks=(3,), variant=pruned),
)
"""The jobs the family contract runs: the smallest first."""
