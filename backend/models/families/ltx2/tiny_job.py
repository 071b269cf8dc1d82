"""LTX-2's smallest job (the family contract suite's): tiny-ltx2, guided (plain CFG); then
what the family adds: uneven token counts, image to video, the step cache with audio, and
LTX-2.3's settings (`tiny-ltx2.3`: gated attention, prompt AdaLN, per-head rotary tables) and
LTX-2.5's (`tiny-ltx2.5`)."""

from __future__ import annotations

from typing import Any

from ...family_spec import TinyJob
from .adapter import FPS, PLAIN_CFG

# 64x64 px and 9 frames: 2 latent frames of 2 x 2 tokens (32x, patch 1), one VAE tile
BODY = {"prompt": "a drum solo in the rain", "negative_prompt": "silence", "seed": 5}
BODY.update(width=64, height=64, num_frames=9, num_inference_steps=2, guidance_scale=4.0)


LTX20 = {"use_cross_timestep": False}
"""What a user of LTX-2.0 passes beside the defaults (those of LTX-2.3 and later): the
cross-modal attention modulated by each stream's own timestep."""


def called_with_audio(pipe: Any, body: Any, model: Any = LTX20) -> tuple[Any, Any]:
    """`LTX2Pipeline` as a user calls it for `body`: the negative prompt, plain CFG on video
    and audio at the job's scale, paradit's frame rate, `model`'s settings (LTX-2.0's, or
    none for LTX-2.3); its (video, audio) batches."""
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
            max_sequence_length=32,
            generator=torch.Generator().manual_seed(body["seed"]),
            output_type="np",
            return_dict=False,
            **PLAIN_CFG,
            **model,
        )


def direct(pipe: Any, body: Any) -> Any:
    """The video of `called_with_audio` (its audio track: tests/families/test_ltx2.py)."""
    import numpy as np

    return np.asarray(called_with_audio(pipe, body)[0][0])


def direct_23(pipe: Any, body: Any) -> Any:
    """LTX-2.3's video as a user calls `LTX2Pipeline` for it (the pipeline's defaults are
    2.3's)."""
    import numpy as np

    return np.asarray(called_with_audio(pipe, body, {})[0][0])


TINY_JOB = TinyJob(
    "tiny-ltx2",
    BODY,
    direct,
    tile=128,
    # the first-block metric over 4 steps: -, 0.49, 0.62, 0.50
    cached={"num_inference_steps": 4, "cache": {"method": "first-block", "threshold": 0.55}},
)


def _png(width: int, height: int) -> str:
    """A seeded start image as base64 PNG."""
    import base64
    import io

    import numpy as np
    from PIL import Image

    pixels = np.random.default_rng(3).integers(0, 256, (height, width, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "PNG")
    return base64.b64encode(buffer.getvalue()).decode()


# Unguided at 96x96 and 17 frames: 3 latent frames of 3 x 3 tokens, 27, which 2 ranks split
# as 14 + 13 and 4 as 7 + 7 + 7 + 6 (spread over a CFG plan); the audio whole on every rank.
UNGUIDED = {"prompt": "ein Boot 🚤.", "negative_prompt": "silence", "seed": 9}
UNGUIDED.update(width=96, height=96, num_frames=17, num_inference_steps=2, guidance_scale=1.0)
# Image to video (`tiny-ltx2-i2v`): the first latent frame's 9 tokens the image's (timestep
# 0), its per-token timesteps split with the tokens; guided: each CFG row's 27 tokens.
I2V = {**UNGUIDED, "prompt": "the boat sails off", "seed": 4, "image": _png(96, 96)}
I2V_GUIDED = {**I2V, "seed": 6, "guidance_scale": 4.0}
# The smallest video unguided: 2 latent frames of 2 x 2 tokens, 8, as 3 + 3 + 2 on 3 ranks.
SMALL = {**UNGUIDED, "prompt": "waves on a pebble beach", "seed": 7, "width": 64, "height": 64}
SMALL["num_frames"] = 9
# The step cache unguided over 4 steps (the metric 0.47-0.57): at 0.535 world size 1 skips
# step 2 (0.532), where rank 0's 14 of the 27 tokens alone would compute it (0.541): a rank
# deciding alone fails the job. Guided at 96x96: the conditional row decides for the batch
# of 2; at 0.52 world size 1 skips steps 1 (0.509) and 3, where the unconditional half alone
# would compute (0.743).
CACHED = {**UNGUIDED, "num_inference_steps": 4}
CACHED["cache"] = {"method": "first-block", "threshold": 0.535}
CACHED_GUIDED = {**BODY, "width": 96, "height": 96, "num_inference_steps": 4}
CACHED_GUIDED["cache"] = {"method": "first-block", "threshold": 0.52}


def image_direct(pipe: Any, body: Any, model: Any = LTX20) -> Any:
    """`LTX2ImageToVideoPipeline` as a user calls it with the job's image, not re-compressed
    (`image_crf=0`), `model`'s settings (LTX-2.0's, or none for LTX-2.3): its video."""
    import base64
    import io

    import numpy as np
    import torch
    from PIL import Image

    image = Image.open(io.BytesIO(base64.b64decode(body["image"]))).convert("RGB")
    guidance = body["guidance_scale"]
    with torch.no_grad():
        video, _audio = pipe(
            image=image,
            image_crf=0,
            prompt=body["prompt"],
            negative_prompt=body["negative_prompt"],
            height=body["height"],
            width=body["width"],
            num_frames=body["num_frames"],
            frame_rate=float(FPS),
            num_inference_steps=body["num_inference_steps"],
            guidance_scale=guidance,
            audio_guidance_scale=guidance,
            max_sequence_length=32,
            generator=torch.Generator().manual_seed(body["seed"]),
            output_type="np",
            return_dict=False,
            **PLAIN_CFG,
            **model,
        )
    return np.asarray(video[0])


def image_direct_23(pipe: Any, body: Any) -> Any:
    """LTX-2.3's image-to-video as a user calls `LTX2ImageToVideoPipeline` for it."""
    return image_direct(pipe, body, {})


# LTX-2.3 (`tiny-ltx2.3`): guided at 64x64 (8 tokens: CFG 2 x Ulysses 2 on 4 ranks, 3 + 3 + 2
# on 3, the per-head rotary tables split on their token axis); image to video unguided at
# 96x96 (27 tokens as 7 + 7 + 7 + 6, the conditioning frame's timesteps with them); the step
# cache unguided over 4 steps (the metric -, 1.43, 0.84, 1.05: at 0.9 world size 1 skips step
# 2 only), each rank's share of 27 tokens deciding with the group.
V23 = {**BODY, "prompt": "a brass band at dusk", "seed": 11}
V23_I2V = {**I2V, "prompt": "the band marches off", "seed": 12}
V23_CACHED = {**CACHED, "prompt": "rain on a tin roof", "seed": 13}
V23_CACHED["cache"] = {"method": "first-block", "threshold": 0.9}
# LTX-2.5 (`tiny-ltx2.5`: no video feed-forward biases, the keyframe embedding, Gemma 4):
# unguided at 96x96, 27 tokens spread over the ranks.
V25 = {**UNGUIDED, "prompt": "a choir in a cave", "seed": 14}


TINY_JOBS = (
    TINY_JOB,
    TinyJob("tiny-ltx2", UNGUIDED, direct, tile=128, ranks=(4, 2), name="unguided"),
    TinyJob("tiny-ltx2", SMALL, None, tile=128, ranks=(3,), name="smallest unguided"),
    TinyJob("tiny-ltx2-i2v", I2V, image_direct, tile=128, ranks=(2,), name="i2v"),
    TinyJob("tiny-ltx2-i2v", I2V_GUIDED, image_direct, tile=128, ranks=(4, 2), name="i2v guided"),
    TinyJob("tiny-ltx2", CACHED, None, tile=128, ranks=(2,), name="cached", alone_fails=True),
    TinyJob("tiny-ltx2", CACHED_GUIDED, None, tile=128, ranks=(2,), name="cached guided"),
    TinyJob("tiny-ltx2.3", V23, direct_23, tile=128, ranks=(4, 3), name="2.3"),
    TinyJob("tiny-ltx2.3-i2v", V23_I2V, image_direct_23, tile=128, ranks=(4,), name="2.3 i2v"),
    TinyJob("tiny-ltx2.3", V23_CACHED, None, tile=128, ranks=(2,), name="2.3 cached"),
    TinyJob("tiny-ltx2.5", V25, direct_23, tile=128, ranks=(4,), name="2.5"),
)
"""The jobs the family contract runs: the smallest first, then unguided jobs spread over the
ranks (uneven tokens), image to video (per-token timesteps) and the step cache with audio."""
