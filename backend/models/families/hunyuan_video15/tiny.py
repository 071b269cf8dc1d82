"""The tiny HunyuanVideo 1.5 presets: text-to-video and image-to-video."""

from __future__ import annotations

from ...image_processors import siglip_image_processor
from ...seeded import (
    QWEN_CHAT_VOCAB_SIZE,
    byte_tokenizer,
    qwen_chat_tokenizer,
)
from ...tiny_parts import (
    TEXT_DIM,
    Builders,
    seeded,
    t5_encoder,
)

_HY15_HEADS, _HY15_HEAD_DIM = 4, 16
_HY15_LATENT_CHANNELS = 8
_HY15_IMAGE_DIM = 16
_SIGLIP_IMAGE_SIZE = 32


def _hy15_text_encoder():
    from transformers import Qwen2_5_VLTextConfig, Qwen2_5_VLTextModel

    # The pipeline takes the third hidden state from the end: 2 layers give 3.
    config = Qwen2_5_VLTextConfig(
        vocab_size=QWEN_CHAT_VOCAB_SIZE,
        hidden_size=TEXT_DIM,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        rope_scaling={"type": "mrope", "mrope_section": [2, 1, 1]},
        bos_token_id=None,
        eos_token_id=None,
    )
    return Qwen2_5_VLTextModel(config)


def _hy15_vae(widths: tuple[int, ...] = (8, 8, 8, 8, 8)):
    """`widths`: image-to-video encodes too, and the encoder's last width must be a multiple
    of its output (2 * latent channels: the mean and log-variance): (8, 8, 8, 8, 16)."""
    from diffusers import AutoencoderKLHunyuanVideo15

    # The real compression (16x spatial over 5 levels, 4x temporal) 8 channels wide; the
    # decoder's first width must be a multiple of the latent channels.
    return AutoencoderKLHunyuanVideo15(
        block_out_channels=widths,
        layers_per_block=1,
        latent_channels=_HY15_LATENT_CHANNELS,
    )


def _hy15_transformer(**i2v: object):
    """`i2v`: the image-to-video model's settings (its task type, and a target size whose
    buckets are tiny: the image-to-video pipeline sizes its video from them)."""
    from diffusers import HunyuanVideo15Transformer3DModel

    # Input: the noise, the condition latents (zeros, or the start image's in the first
    # latent frame) and their mask: 2 * channels + 1.
    settings = {"task_type": "t2v", **i2v}
    return HunyuanVideo15Transformer3DModel(
        in_channels=2 * _HY15_LATENT_CHANNELS + 1,
        out_channels=_HY15_LATENT_CHANNELS,
        num_attention_heads=_HY15_HEADS,
        attention_head_dim=_HY15_HEAD_DIM,
        num_layers=2,
        num_refiner_layers=1,
        text_embed_dim=TEXT_DIM,
        text_embed_2_dim=TEXT_DIM,
        image_embed_dim=_HY15_IMAGE_DIM,
        rope_axes_dim=(4, 6, 6),
        **settings,
    )


def _siglip_image_encoder():
    from transformers import SiglipVisionConfig, SiglipVisionModel

    # SigLIP's vision tower as the image-to-video pipeline uses it (its last hidden states, one
    # token per patch): 32x32 pixels in patches of 8 are 16 tokens of the transformer's
    # image_embed_dim.
    config = SiglipVisionConfig(
        hidden_size=_HY15_IMAGE_DIM,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=_SIGLIP_IMAGE_SIZE,
        patch_size=8,
    )
    return SiglipVisionModel(config)


def _hy15_scheduler():
    from diffusers import FlowMatchEulerDiscreteScheduler

    return FlowMatchEulerDiscreteScheduler(shift=5.0)  # the 480p text-to-video model's


def _hy15_guider():
    from diffusers import ClassifierFreeGuidance

    return ClassifierFreeGuidance(guidance_scale=6.0)


_HUNYUAN_VIDEO15: Builders = {
    "tokenizer": lambda: qwen_chat_tokenizer(1108),  # 1000 prompt tokens after 108 dropped
    "text_encoder": lambda: seeded(501, _hy15_text_encoder),
    "tokenizer_2": lambda: byte_tokenizer(256),
    "text_encoder_2": lambda: seeded(502, t5_encoder),
    "vae": lambda: seeded(503, _hy15_vae),
    "scheduler": _hy15_scheduler,
    "transformer": lambda: seeded(504, _hy15_transformer),
    "guider": _hy15_guider,
}

# Image-to-video: the same text encoders, a VAE that can encode, SigLIP for the start image,
# and a transformer of its own whose target size (64) makes the pipeline's sizes tiny: it takes
# the size bucket of the image's aspect ratio at that target, e.g. 80x48 or 64x64 pixels.
_HUNYUAN_VIDEO15_I2V: Builders = {
    **_HUNYUAN_VIDEO15,
    "vae": lambda: seeded(507, lambda: _hy15_vae((8, 8, 8, 8, 16))),
    "transformer": lambda: seeded(506, lambda: _hy15_transformer(task_type="i2v", target_size=64)),
    "image_encoder": lambda: seeded(505, _siglip_image_encoder),
    "feature_extractor": lambda: siglip_image_processor(_SIGLIP_IMAGE_SIZE),
}

PRESETS: dict[str, tuple[str, Builders]] = {
    "tiny-hunyuanvideo1.5": ("HunyuanVideo15Pipeline", _HUNYUAN_VIDEO15),
    "tiny-hunyuanvideo1.5-i2v": ("HunyuanVideo15ImageToVideoPipeline", _HUNYUAN_VIDEO15_I2V),
}
