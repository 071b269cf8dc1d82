"""CogVideoX's smallest job (the family contract suite's): tiny-cogvideox, guided."""

from __future__ import annotations

from typing import Any

from ...family_spec import TinyJob

# 64x48 px and 5 frames: 2 latent frames of 4 x 3 tokens (8x, patch 2)
BODY = {"prompt": "a red fox in snow", "negative_prompt": "blurry", "seed": 7}
BODY.update(width=64, height=48, num_frames=5, num_inference_steps=2, guidance_scale=6.0)


def direct(pipe: Any, body: Any) -> Any:
    """`CogVideoXPipeline` with the negative prompt and its CFG scale."""
    from ..base import called_with_cfg

    return called_with_cfg(pipe, body)


def cfg_batch(pipe: Any) -> tuple[dict, bool]:
    """The DiT's inputs for a guided step's batch (uncond, cond) at 112x80 and 3 latent
    frames, 105 video + 226 text tokens: rotary positions where the DiT has them (5B), its
    sine-cosine ones otherwise (2B)."""
    import torch

    generator = torch.Generator().manual_seed(5)
    rotary = pipe.transformer.config.use_rotary_positional_embeddings
    inputs = {
        "hidden_states": torch.randn(2, 3, 16, 10, 14, generator=generator),
        "encoder_hidden_states": torch.randn(2, 226, 32, generator=generator),
        "timestep": torch.tensor([700, 700]),
        "image_rotary_emb": (
            pipe._prepare_rotary_positional_embeddings(80, 112, 3, "cpu") if rotary else None
        ),
    }
    return inputs, True


TINY_JOB = TinyJob(
    "tiny-cogvideox",
    BODY,
    direct,
    forward=cfg_batch,
    # the first-block metric over 4 steps: -, 1.20, 1.48, 0.90
    cached={"num_inference_steps": 4, "cache": {"method": "first-block", "threshold": 1.0}},
)


def _png(width: int, height: int) -> str:
    """A ramp image as base64 PNG."""
    import base64
    import io

    import numpy as np
    from PIL import Image

    ramp = np.linspace(0, 255, width * height * 3).reshape(height, width, 3).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(ramp).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def _reshaped(pipe: Any, seed: int, **changes: Any) -> Any:
    """`pipe` with its DiT rebuilt from its config with `changes`, seeded."""
    from ...seeded import seed_weights

    config = {k: v for k, v in pipe.transformer.config.items() if not k.startswith("_")}
    config.update(changes)
    transformer = seed_weights(type(pipe.transformer).from_config(config), seed)
    parts = {name: getattr(pipe, name) for name in ("tokenizer", "text_encoder", "vae")}
    return type(pipe)(**parts, scheduler=pipe.scheduler, transformer=transformer)


def sincos(pipe: Any) -> Any:
    """CogVideoX-2B's DiT: sine-cosine positions instead of the rotary ones."""
    return _reshaped(pipe, 306, use_rotary_positional_embeddings=False)


def v15(pipe: Any) -> Any:
    """CogVideoX 1.5: temporal patches of 2, the 1.5 rotary grid (and the image-to-video
    model's `ofs` embedding)."""
    changes = {"patch_size_t": 2, "patch_bias": False, "sample_height": 300}
    changes.update(sample_width=300, sample_frames=81)
    if type(pipe).__name__ == "CogVideoXImageToVideoPipeline":
        changes["ofs_embed_dim"] = 32
    return _reshaped(pipe, 305, **changes)


# Unguided at 112x80 and 17 frames: 5 x 5 x 7 = 175 tokens over 4 ranks (spread over the CFG
# plan) and 3; the decode in 2 x 2 tiles and two temporal chunks that pass the causal-conv
# cache along. Image to video (tiny-cogvideox-i2v) guided, batched CFG on 2 ranks. CogVideoX
# 1.5: 96x64 px and 9 frames are 3 latent frames, padded to 4 in front for its 2-frame
# patches (and dropped before decoding): text to video on Ulysses 3, image to video on CFG 2.
UNGUIDED = {"prompt": "ein Boot 🚤 auf dem See", "negative_prompt": "", "seed": 11}
UNGUIDED.update(width=112, height=80, num_frames=17, num_inference_steps=2, guidance_scale=1.0)
I2V = {**UNGUIDED, "negative_prompt": "blurry", "guidance_scale": 6.0, "image": _png(112, 80)}
SMALL = {"prompt": "a folder model", "negative_prompt": "", "seed": 21, "guidance_scale": 4.0}
SMALL.update(width=96, height=64, num_frames=9, num_inference_steps=2)
V15_I2V = {**SMALL, "image": _png(96, 64)}


def image_direct(pipe: Any, body: Any) -> Any:
    """`CogVideoXImageToVideoPipeline` with the image, the negative prompt and its CFG scale."""
    import base64
    import io

    from PIL import Image

    from ..base import called_directly

    image = Image.open(io.BytesIO(base64.b64decode(body["image"]))).convert("RGB")
    return called_directly(
        pipe,
        body,
        image=image,
        negative_prompt=body["negative_prompt"],
        num_frames=body["num_frames"],
        guidance_scale=body["guidance_scale"],
    )


TINY_JOBS = (
    TINY_JOB,
    TinyJob(
        "tiny-cogvideox",
        BODY,
        direct,
        ranks=(3, 2),
        variant=sincos,
        name="2b sincos",
        forward=cfg_batch,
    ),
    TinyJob("tiny-cogvideox", UNGUIDED, direct, ranks=(4, 3), name="unguided"),
    # tiles of 128: the VAE's tiled encode of the image at 64 gives latents a row too many
    TinyJob("tiny-cogvideox-i2v", I2V, image_direct, tile=128, ranks=(2,), name="i2v"),
    TinyJob("tiny-cogvideox", SMALL, direct, ranks=(3,), variant=v15, name="1.5"),
    TinyJob(
        "tiny-cogvideox-i2v",
        V15_I2V,
        image_direct,
        tile=128,
        ranks=(2,),
        variant=v15,
        name="1.5 i2v",
    ),
)
"""The jobs the family contract runs: the smallest first, then 2B's positions, an unguided
job spread (tiles and temporal chunks), image to video, and CogVideoX 1.5's padding frame."""
