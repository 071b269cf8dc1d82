"""HunyuanVideo 1.5's smallest job (the family contract suite's): tiny-hunyuanvideo1.5,
guided."""

from __future__ import annotations

from typing import Any

from ...family_spec import TinyJob

# 80x32 px and 5 frames: 2 latent frames of 2 x 5 tokens (16x, patch 1)
BODY = {"prompt": "a fox in the snow", "negative_prompt": "blurry", "seed": 5}
BODY.update(width=80, height=32, num_frames=5, num_inference_steps=2, guidance_scale=6.0)


def direct(pipe: Any, body: Any) -> Any:
    """`HunyuanVideo15Pipeline` with the negative prompt, its guider at the job's scale for
    the call (the model's again after)."""
    from ..base import called_directly

    pipe.guider.guidance_scale = body["guidance_scale"]
    try:
        return called_directly(
            pipe, body, negative_prompt=body["negative_prompt"], num_frames=body["num_frames"]
        )
    finally:
        pipe.guider.guidance_scale = pipe.guider.config.guidance_scale


def one_text_token(pipe: Any) -> tuple[dict, bool]:
    """The DiT's inputs for a prompt of one valid text token (no glyphs, no image; what no
    request reaches: the template gives every prompt hundreds), fewer than the ranks of a
    split sequence, which keep a masked padding token for the others; 2 x 2 x 5 = 20 video
    tokens, the smallest job's. Unguided."""
    import torch

    config = pipe.transformer.config
    generator = torch.Generator().manual_seed(3)
    mask = torch.zeros(1, 1000)
    mask[:, 0] = 1
    inputs = {
        "hidden_states": torch.randn(1, config.in_channels, 2, 2, 5, generator=generator),
        "timestep": torch.tensor([500.0]),
        "encoder_hidden_states": torch.randn(1, 1000, config.text_embed_dim, generator=generator),
        "encoder_attention_mask": mask,
        "encoder_hidden_states_2": torch.zeros(1, 256, config.text_embed_2_dim),
        "encoder_attention_mask_2": torch.zeros(1, 256),
        "image_embeds": torch.zeros(1, 729, config.image_embed_dim),
    }
    return inputs, False


TINY_JOB = TinyJob(
    "tiny-hunyuanvideo1.5",
    BODY,
    direct,
    forward=one_text_token,  # Ulysses 4 and 3, and 2 spread over the CFG plan
    # the first-block metric over 5 steps: -, 1.24, 1.06, 1.19, 0.88
    cached={"num_inference_steps": 5, "cache": {"method": "first-block", "threshold": 1.0}},
)


def _png(width: int = 80, height: int = 48) -> str:
    """A seeded start image (80x48 unless given) as base64 PNG."""
    import base64
    import io

    import numpy as np
    from PIL import Image

    pixels = np.random.default_rng(11).integers(0, 256, (height, width, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


# The smallest job's size with a glyph text in its prompt (the ByT5 encoder runs too).
GLYPH = {**BODY, "prompt": 'a fox holding a sign "HELLO"'}
# Unguided, no glyphs, 80x48 px and one frame: 3 x 5 = 15 tokens, as 8 + 7 on 2 ranks and
# 4 + 4 + 4 + 3 on 4 (spread over a CFG plan), with its ~241 valid text tokens.
UNGUIDED = {**BODY, "prompt": "ein Boot 🚤.", "seed": 9, "guidance_scale": 1.0}
UNGUIDED.update(height=48, num_frames=1)
# Image to video at 80x48, the size bucket of the image's aspect ratio at the tiny DiT's
# target size (64): 2 latent frames of 3 x 5 tokens, the image's latents in the first, its
# 16 SigLIP tokens among the text. Guided on the CFG halves; unguided as Ulysses 2 (the image
# tokens and its condition latents split with the rest); cached unguided over 6 steps: at
# 0.855 world size 1 skips step 1 (0.849), where each rank's half of the tokens alone would
# decide differently (0.836 and 0.863).
I2V_GUIDED = {**BODY, "prompt": "a fox turns its head", "height": 48, "seed": 4, "image": _png()}
I2V_UNGUIDED = {**I2V_GUIDED, "prompt": "the fox runs away.", "guidance_scale": 1.0}
I2V_CACHED = {**I2V_UNGUIDED, "num_inference_steps": 6}
I2V_CACHED["cache"] = {"method": "first-block", "threshold": 0.855}


def image_direct(pipe: Any, body: Any) -> Any:
    """`HunyuanVideo15ImageToVideoPipeline` as a user calls it: the image (which sizes the
    video: no size), the negative prompt, its guider at the job's scale for the call."""
    import base64
    import io

    import numpy as np
    import torch
    from PIL import Image

    image = Image.open(io.BytesIO(base64.b64decode(body["image"]))).convert("RGB")
    pipe.guider.guidance_scale = body["guidance_scale"]
    try:
        with torch.no_grad():
            frames = pipe(
                image=image,
                prompt=body["prompt"],
                negative_prompt=body["negative_prompt"],
                num_frames=body["num_frames"],
                num_inference_steps=body["num_inference_steps"],
                generator=torch.Generator().manual_seed(body["seed"]),
                output_type="np",
            ).frames[0]
    finally:
        pipe.guider.guidance_scale = pipe.guider.config.guidance_scale
    return np.asarray(frames)


# ComfyUI's preparation (`image_prep` comfyui): a 112x48 image for an 80x48 video, so the VAE's
# image is its centre 80x48 columns (16 cut at each side) and SigLIP's its centre square.
I2V_COMFYUI = {**I2V_GUIDED, "image": _png(112, 48), "image_prep": "comfyui", "seed": 6}


def comfyui_direct(pipe: Any, body: Any) -> Any:
    """`HunyuanVideo15ImageToVideoPipeline` given ComfyUI's prepared inputs for the call: its
    image encoder's output and its image latents are those of the image prepared as
    ComfyUI's nodes prepare it (`comfyui_prep.py`); the image it sizes the video by is the
    job's size (its size bucket)."""
    import base64
    import io

    from PIL import Image

    from . import comfyui_prep

    image = Image.open(io.BytesIO(base64.b64decode(body["image"]))).convert("RGB")
    width, height = body["width"], body["height"]

    def encode_image(*, device: Any, dtype: Any, **_kwargs: Any) -> Any:
        return comfyui_prep.image_embeds(pipe, image, device, dtype)

    def image_latents(*, vae: Any, device: Any, **_kwargs: Any) -> Any:
        return comfyui_prep.image_latents(vae, image, width, height, device)

    pipe.encode_image, pipe._get_image_latents = encode_image, image_latents
    try:
        sized = image.resize((width, height))
        return image_direct(pipe, {**body, "image": _b64(sized)})
    finally:
        del pipe.encode_image, pipe._get_image_latents


def _b64(image: Any) -> str:
    import base64
    import io

    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


I2V = "tiny-hunyuanvideo1.5-i2v"
TINY_JOBS = (
    TINY_JOB,
    TinyJob("tiny-hunyuanvideo1.5", GLYPH, direct, ranks=(4, 2), name="glyphs"),
    TinyJob("tiny-hunyuanvideo1.5", UNGUIDED, direct, ranks=(4, 2), name="unguided"),
    TinyJob(I2V, I2V_GUIDED, image_direct, ranks=(2,), name="i2v guided"),
    TinyJob(I2V, I2V_UNGUIDED, image_direct, ranks=(2,), name="i2v unguided"),
    TinyJob(I2V, I2V_CACHED, None, ranks=(2,), name="i2v cached", alone_fails=True),
    TinyJob(I2V, I2V_COMFYUI, comfyui_direct, ranks=(2,), name="i2v comfyui"),
)
"""The jobs the family contract runs: the smallest first, then glyphs, an unguided job
spread over the ranks (uneven tokens) and image to video (its tokens split, the step cache,
ComfyUI's image preparation)."""
