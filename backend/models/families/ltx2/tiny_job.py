"""LTX-2's smallest job (the family contract suite's): tiny-ltx2, guided (plain CFG); then
what the family adds: uneven token counts, image to video, the step cache with audio, and
LTX-2.3's settings (`tiny-ltx2.3`: gated attention, prompt AdaLN, per-head rotary tables) and
LTX-2.5's (`tiny-ltx2.5`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from ...family_spec import TinyJob
from .adapter import FPS
from .guidance import PLAIN_CFG

# 64x64 px and 9 frames: 2 latent frames of 2 x 2 tokens (32x, patch 1), one VAE tile
BODY = {"prompt": "a drum solo in the rain", "negative_prompt": "silence", "seed": 5}
BODY.update(width=64, height=64, num_frames=9, num_inference_steps=2, guidance_scale=4.0)


LTX20 = {"use_cross_timestep": False}
"""What a user of LTX-2.0 passes beside the defaults (those of LTX-2.3 and later): the
cross-modal attention modulated by each stream's own timestep."""


def called_with_audio(pipe: Any, body: Any, model: Any = LTX20) -> tuple[Any, Any]:
    """`LTX2Pipeline` as a user calls it for `body`: the negative prompt, plain CFG on video
    and audio at the job's scale, the body's `fps` (paradit's 24 when left out), `model`'s
    settings (LTX-2.0's, or
    none for LTX-2.3; guidance terms under their own names win), the body's
    `audio_latent_frames` as `audio_latents` of that length (zeros, re-noised whole at
    `noise_scale` 1); its (video, audio) batches."""
    import torch

    arguments = {"audio_guidance_scale": body["guidance_scale"], **PLAIN_CFG, **model}
    frames = body.get("audio_latent_frames")
    if frames is not None:  # an audio of that length: zeros re-noised whole (noise_scale 1)
        bins = pipe.audio_vae.config.mel_bins // pipe.audio_vae_mel_compression_ratio
        shape = (1, pipe.audio_vae.config.latent_channels, frames, bins)
        arguments.update(audio_latents=torch.zeros(shape), noise_scale=1.0)
    with torch.no_grad():
        return pipe(
            prompt=body["prompt"],
            negative_prompt=body["negative_prompt"],
            height=body["height"],
            width=body["width"],
            num_frames=body["num_frames"],
            frame_rate=float(body.get("fps") or FPS),
            num_inference_steps=body["num_inference_steps"],
            guidance_scale=body["guidance_scale"],
            max_sequence_length=32,
            generator=torch.Generator().manual_seed(body["seed"]),
            output_type="np",
            return_dict=False,
            **arguments,
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


# ComfyUI's audio length for 9 frames at 24 fps: ceil(9 / 24 x 25) = 10 latent frames (the
# pipeline's own: round(9.375) = 9); guided, so that 2 ranks split the CFG batch
AUDIO_LENGTH = {**BODY, "prompt": "a bell at dusk", "seed": 21, "audio_latent_frames": 10}

TINY_JOB = TinyJob(
    "tiny-ltx2",
    BODY,
    direct,
    tile=128,
    # the first-block metric over 4 steps: -, 0.49, 0.62, 0.50
    cached={"num_inference_steps": 4, "cache": {"method": "first-block", "threshold": 0.55}},
)


@contextlib.contextmanager
def one_cpu() -> Iterator[None]:
    """The calling thread may use one CPU while inside: diffusers' own H.264 round trip
    (`apply_image_conditioning_crf`, x264 on as many threads as the thread may use CPUs) then
    encodes on one thread, as paradit always does (`image_crf.THREADS`)."""
    import os

    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(allowed)})
    try:
        yield
    finally:
        os.sched_setaffinity(0, allowed)


def _png(width: int, height: int, seed: int = 3) -> str:
    """A seeded start image as base64 PNG."""
    import base64
    import io

    import numpy as np
    from PIL import Image

    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
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
    """`LTX2ImageToVideoPipeline` as a user calls it with the job's image, re-compressed at
    the model's default CRF (diffusers resolves it: `image_crf` left out) on one CPU
    (`one_cpu`), `model`'s settings (LTX-2.0's, or none for LTX-2.3): its video."""
    import base64
    import io

    import numpy as np
    import torch
    from PIL import Image

    image = Image.open(io.BytesIO(base64.b64decode(body["image"]))).convert("RGB")
    guidance = body["guidance_scale"]
    with torch.no_grad(), one_cpu():
        video, _audio = pipe(
            image=image,
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
# LTX-2.5's diffusion video decoder in ComfyUI's VAEDecodeTiled tiles (`decode_tiles`; the
# widgets 128, 32, 16, 8: tiles of 2 latent frames x 4 x 4 sharing 1 x 1 x 1): guided at
# 160x160 and 17 frames, 3 latent frames of 5 x 5, tiles at frames 0 and 1 (2 long), rows and
# columns 0 (4 long) and 3 (2 long): 8 tiles of 4 sizes, each with its own seed-0 noise,
# feathered over 9 frames and 32 pixels. Dealt largest first (`parallel/vae.py`), out of tile
# order: on 2 ranks rank 0 decodes tiles 0, 1, 3, 5 and rank 1 2, 4, 6, 7; on 3 ranks 0 and 5,
# 4 and 6, and 1, 2, 3, 7; rank 0 sums them in tile order, as world size 1 does.
DECODE_TILES = {**BODY, "prompt": "a choir in a cave, in tiles", "seed": 18}
DECODE_TILES.update(width=160, height=160, num_frames=17)
DECODE_TILES["decode_tiles"] = {
    "tile_size": 128, "overlap": 32, "temporal_size": 16, "temporal_overlap": 8,
}  # fmt: skip


def with_diffusion_decoder(pipe: Any) -> Any:
    """tiny-ltx2.5 with LTX-2.5's diffusion video decoder on its VAE (the tiny one,
    `tiny.diffusion_decoder`, its latent statistics the VAE's), as the diffusion VAE file
    builds it (`diffusion_vae.build`): no conv decoder, `vae.diffusion_decoder`."""
    import torch

    from ...casting import cast_model
    from . import diffusion_vae, tiny

    decoder = tiny.diffusion_decoder()
    with torch.no_grad():
        decoder.latents_mean.copy_(pipe.vae.latents_mean)
        decoder.latents_std.copy_(pipe.vae.latents_std)
    pipe.vae.decoder = diffusion_vae.NoConvDecoder()
    pipe.vae.diffusion_decoder = cast_model(decoder, pipe.vae.dtype)
    return pipe


# LTX-2.3's own guidance terms (`guidance_terms`): CFG with the audio at its own scale,
# spatio-temporal guidance on the last of the 2 blocks, modality isolation and the rescale:
# per step the CFG pair (each half its row on 2 ranks) and two passes at batch 1 (whole on
# each half; Ulysses 2 within it on 4 ranks), 8 tokens.
TERMS = {**BODY, "prompt": "a brass band at dusk, louder", "seed": 15}
TERMS["guidance_terms"] = {
    "stg_scale": 1.0,
    "spatio_temporal_guidance_blocks": [1],
    "modality_scale": 3.0,
    "guidance_rescale": 0.7,
    "audio_guidance_scale": 7.0,
}


FOLLOW = {"audio_stg_scale": None, "audio_modality_scale": None, "audio_guidance_rescale": None}
"""The audio's terms left to follow the video's, as `LTX2Pipeline` reads None (its own
defaults for them are LTX-2.3's values)."""


def terms_direct(pipe: Any, body: Any, model: Any = None) -> Any:
    """`LTX2Pipeline` as a user calls it with the body's guidance terms under their own
    names, the audio's left to follow the video's; `model`: LTX-2.3's settings (none) unless
    given. Its video."""
    import numpy as np

    terms = {**FOLLOW, **body["guidance_terms"], **(model or {})}
    return np.asarray(called_with_audio(pipe, body, terms)[0][0])


# First and last frame (`last_image`, `LTX2ConditionPipeline`): guided at 64x64 and 17
# frames, 3 latent frames of 2 x 2 tokens and the last frame's 4 keyframe tokens appended, 16
# in all: CFG parallel on 2 ranks, Ulysses on 3 (6 + 5 + 5: the last rank holds one video
# token and the 4 keyframe tokens, with their own coordinates and timesteps). The images are
# larger than the video and not square (the pipeline covers and crops the centre).
KEYFRAMES = {**BODY, "prompt": "a kite rises, then lands", "seed": 16, "num_frames": 17}
KEYFRAMES.update(image=_png(80, 64, seed=1), last_image=_png(64, 96, seed=2))


def keyframes_direct(pipe: Any, body: Any) -> Any:
    """`LTX2ConditionPipeline` as a user calls it for a first and a last frame (latent
    indices 0 and -1, full strength, re-compressed at the model's default CRF on one CPU:
    `crf` left out, `one_cpu`) on LTX-2.0's settings, at the body's `fps` (paradit's 24 when
    left out): its video."""
    import base64
    import io

    import numpy as np
    import torch
    from diffusers import LTX2ConditionPipeline
    from diffusers.pipelines.ltx2.pipeline_ltx2_condition import LTX2VideoCondition
    from PIL import Image

    from ..base import same_components_as

    def image(name: str) -> Any:
        return Image.open(io.BytesIO(base64.b64decode(body[name]))).convert("RGB")

    run = same_components_as(pipe, LTX2ConditionPipeline)
    run.set_progress_bar_config(disable=True)
    conditions = [
        LTX2VideoCondition(frames=image("image"), index=0, strength=1.0),
        LTX2VideoCondition(frames=image("last_image"), index=-1, strength=1.0),
    ]
    guidance = body["guidance_scale"]
    with torch.no_grad(), one_cpu():
        video, _audio = run(
            conditions=conditions,
            prompt=body["prompt"],
            negative_prompt=body["negative_prompt"],
            height=body["height"],
            width=body["width"],
            num_frames=body["num_frames"],
            frame_rate=float(body.get("fps") or FPS),
            num_inference_steps=body["num_inference_steps"],
            guidance_scale=guidance,
            audio_guidance_scale=guidance,
            max_sequence_length=32,
            generator=torch.Generator().manual_seed(body["seed"]),
            output_type="np",
            return_dict=False,
            **PLAIN_CFG,
            **LTX20,
        )
    return np.asarray(video[0])


# The start image at a strength below 1 (`image_strength`, `strength.py`): ComfyUI's noise
# mask sampled on LTX-2.3, unguided at 64x64 (8 tokens, 4 of them the image's: the per-token
# timesteps split with them on 2 ranks), euler over three given levels, the image as sent
# (`image_crf` 0). World size 1 against a hand-written ComfyUI loop is
# tests/families/test_ltx2_image_strength.py's.
STRENGTH_LEVELS = [1.0, 0.7, 0.4, 0.0]
IMAGE_STRENGTH = {**UNGUIDED, "prompt": "a kite over dunes", "seed": 17, "width": 64}
IMAGE_STRENGTH.update(height=64, num_frames=9, num_inference_steps=3, sampler="euler")
IMAGE_STRENGTH.update(sigmas=STRENGTH_LEVELS, image=_png(64, 64, seed=4), image_crf=0)
IMAGE_STRENGTH.update(image_strength=0.7)


# Two stages (`upscale`): stage 1 guided at 64x64 (CFG parallel on 2 ranks), the tiny x2
# upscaler, stage 2 unguided at 128x128 over two levels: 2 latent frames of 4 x 4 tokens, which
# 2 ranks split (an unguided stage spreads over the CFG plan).
TWO_STAGE = {**BODY, "prompt": "a drum solo in the rain, closer", "width": 128, "height": 128}
TWO_STAGE["upscale"] = {"sigmas": [0.9, 0.5]}
# The two-stage job with ComfyUI's image preparation (`image_prep` comfyui, the LTX-2 i2v
# templates'): a 150x90 image compressed once at its size, cut to the square's aspect (30
# columns off each side) and scaled in float to 64x64 for stage 1 and 128x128 for stage 2.
COMFYUI_I2V = {**TWO_STAGE, "prompt": "a drummer, then the crowd", "seed": 17}
COMFYUI_I2V.update(image=_png(150, 90, seed=5), image_prep="comfyui")


def tiny_upsampler(pipe: Any) -> Any:
    """The tiny x2 latent upscaler for `pipe`'s VAE (seeded: every rank makes the same), as
    `serve --upscaler` gives it (`families.base.Upsampler`)."""
    from ..base import Upsampler
    from . import upscaler

    return Upsampler(upscaler.tiny(0, pipe.vae.config.latent_channels), (2,))


def _image(body: Any, width: int | None, height: int | None) -> Any:
    """The body's start image (PIL) at `width` x `height`, resized as paradit resizes it (None:
    at its own size)."""
    import base64
    import io

    from PIL import Image

    image = Image.open(io.BytesIO(base64.b64decode(body["image"]))).convert("RGB")
    return image if width is None or height is None else image.resize((width, height))


def two_stage_called(
    pipe: Any, body: Any, upsampler: Any, stage_2: Any = None, output_type: str = "latent"
) -> tuple[Any, Any]:
    """The two-stage job as diffusers' LTX-2 docs chain it, one generator: stage 1
    (`LTX2Pipeline`, or `LTX2ImageToVideoPipeline` with the body's image at stage 1's size)
    at the size / 2 with the body's guidance, `LTX2LatentUpsamplePipeline`, stage 2 at the
    size on the upscale's levels (the distilled scheduler settings), unguided; with an image
    (re-compressed at the model's CRF at each stage's size, on one CPU: `one_cpu`), its latent
    at the final size replaces the upscaled first frame first (Lightricks' two-stage
    pipelines). `stage_2`: a context around stage 2 only (its LoRA). (video, audio)
    of stage 2 in `output_type`."""
    import numpy as np
    import torch
    from diffusers import (
        FlowMatchEulerDiscreteScheduler,
        LTX2ImageToVideoPipeline,
        LTX2LatentUpsamplePipeline,
        LTX2Pipeline,
    )
    from diffusers.pipelines.ltx2.utils import resolve_default_image_crf
    from PIL import Image

    from ..base import same_components_as
    from . import comfyui_image
    from .adapter import DISTILLED_SCHEDULER

    sigmas = list(body["upscale"]["sigmas"])
    width, height = body["width"], body["height"]
    has_image = body.get("image") is not None
    run = same_components_as(pipe, LTX2ImageToVideoPipeline if has_image else LTX2Pipeline)
    run.set_progress_bar_config(disable=True)
    generator = torch.Generator().manual_seed(body["seed"])
    common = dict(
        prompt=body["prompt"],
        negative_prompt=body["negative_prompt"],
        num_frames=body["num_frames"],
        frame_rate=float(FPS),
        use_cross_timestep=False,
        max_sequence_length=32,
        generator=generator,
        return_dict=False,
        **PLAIN_CFG,
    )
    first_image = final_image = {}
    comfyui = body.get("image_prep") == comfyui_image.PREP
    if comfyui:  # the float pixels ComfyUI's nodes make, given as they are
        sent = _image(body, None, None)
        crf = resolve_default_image_crf(run.text_encoder)
        first_image = {
            "image": comfyui_image.stage_pixels(sent, crf, width // 2, height // 2),
            "image_crf": 0,
        }
        final_image = {"image": comfyui_image.stage_pixels(sent, crf, width, height)}
        final_image["image_crf"] = 0
    elif has_image:
        first_image = {"image": _image(body, width // 2, height // 2)}
        final_image = {"image": _image(body, width, height)}
    own = run.scheduler
    with torch.no_grad(), one_cpu():
        video, audio = run(
            height=height // 2, width=width // 2, output_type="latent",
            num_inference_steps=body["num_inference_steps"],
            guidance_scale=body["guidance_scale"], audio_guidance_scale=body["guidance_scale"],
            **common, **first_image,
        )  # fmt: skip
        upsample = LTX2LatentUpsamplePipeline(vae=run.vae, latent_upsampler=upsampler)
        upsample.set_progress_bar_config(disable=True)
        up = upsample(
            latents=video, height=height // 2, width=width // 2, output_type="latent",
            return_dict=False,
        )[0]  # fmt: skip
        if comfyui:  # ComfyUI's pixels at the final size through the VAE's encoder
            pixels = run.video_processor.preprocess(final_image["image"], height, width)
            up[:, :, :1] = run.vae.encode(pixels[:, :, None]).latent_dist.mode()
        elif has_image:  # the image at the final size, re-compressed, through the encoder
            from diffusers.pipelines.ltx2.utils import apply_image_conditioning_crf

            crf = resolve_default_image_crf(run.text_encoder)
            sent = np.asarray(final_image["image"])
            squeezed = Image.fromarray(apply_image_conditioning_crf(sent, crf))
            pixels = run.video_processor.preprocess(squeezed, height, width)
            up[:, :, :1] = run.vae.encode(pixels[:, :, None]).latent_dist.mode()
        run.scheduler = FlowMatchEulerDiscreteScheduler.from_config(
            own.config, **DISTILLED_SCHEDULER
        )
        try:
            with stage_2 if stage_2 is not None else torch.no_grad():
                return run(
                    latents=up, audio_latents=audio, height=height, width=width,
                    num_inference_steps=len(sigmas), sigmas=sigmas, noise_scale=sigmas[0],
                    guidance_scale=1.0, audio_guidance_scale=1.0, output_type=output_type,
                    **common, **final_image,
                )  # fmt: skip
        finally:
            run.scheduler = own


def two_stage_direct(pipe: Any, body: Any) -> Any:
    """`two_stage_called`'s video as frames, with the tiny upscaler."""
    import numpy as np

    upsampler = tiny_upsampler(pipe).module
    return np.asarray(two_stage_called(pipe, body, upsampler, output_type="np")[0][0])


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
    TinyJob(
        "tiny-ltx2.5",
        DECODE_TILES,
        None,
        tile=128,
        ranks=(3, 2),
        name="2.5 comfyui decode tiles",
        variant=with_diffusion_decoder,
    ),
    TinyJob("tiny-ltx2.3", TERMS, terms_direct, tile=128, ranks=(4, 2), name="guidance terms"),
    TinyJob("tiny-ltx2", KEYFRAMES, keyframes_direct, tile=128, ranks=(3, 2), name="keyframes"),
    TinyJob("tiny-ltx2", AUDIO_LENGTH, direct, tile=128, ranks=(2,), name="audio length"),
    TinyJob("tiny-ltx2.3", IMAGE_STRENGTH, None, tile=128, ranks=(2,), name="image strength"),
    TinyJob(
        "tiny-ltx2",
        TWO_STAGE,
        two_stage_direct,
        tile=128,
        ranks=(2,),
        name="two stages",
        upsampler=tiny_upsampler,
    ),
    TinyJob(
        "tiny-ltx2",
        COMFYUI_I2V,
        two_stage_direct,
        tile=128,
        ranks=(2,),
        name="comfyui i2v",
        upsampler=tiny_upsampler,
    ),
)
"""The jobs the family contract runs: the smallest first, then unguided jobs spread over the
ranks (uneven tokens), image to video (per-token timesteps), the step cache with audio and
first and last frame (keyframe tokens appended to the sequence) and a two-stage job (stage 1
CFG parallel, stage 2 spread), also with ComfyUI's image preparation (`image_prep` comfyui)."""
