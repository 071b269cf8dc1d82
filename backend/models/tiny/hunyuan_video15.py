"""The tiny HunyuanVideo 1.5 preset (text-to-video)."""

from __future__ import annotations

from ..seeded import (
    QWEN_CHAT_VOCAB_SIZE,
    byte_tokenizer,
    qwen_chat_tokenizer,
)
from .common import (
    TEXT_DIM,
    Builders,
    seeded,
    t5_encoder,
)

_HY15_HEADS, _HY15_HEAD_DIM = 4, 16
_HY15_LATENT_CHANNELS = 8


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


def _hy15_vae():
    from diffusers import AutoencoderKLHunyuanVideo15

    # The real compression (16x spatial over 5 levels, 4x temporal) 8 channels wide; the
    # decoder's first width must be a multiple of the latent channels.
    return AutoencoderKLHunyuanVideo15(
        block_out_channels=(8, 8, 8, 8, 8),
        layers_per_block=1,
        latent_channels=_HY15_LATENT_CHANNELS,
    )


def _hy15_transformer():
    from diffusers import HunyuanVideo15Transformer3DModel

    # Input: the noise, the (zero) condition latents and their mask: 2 * channels + 1.
    return HunyuanVideo15Transformer3DModel(
        in_channels=2 * _HY15_LATENT_CHANNELS + 1,
        out_channels=_HY15_LATENT_CHANNELS,
        num_attention_heads=_HY15_HEADS,
        attention_head_dim=_HY15_HEAD_DIM,
        num_layers=2,
        num_refiner_layers=1,
        text_embed_dim=TEXT_DIM,
        text_embed_2_dim=TEXT_DIM,
        image_embed_dim=16,
        rope_axes_dim=(4, 6, 6),
        task_type="t2v",
    )


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

PRESETS: dict[str, tuple[str, Builders]] = {
    "tiny-hunyuanvideo1.5": ("HunyuanVideo15Pipeline", _HUNYUAN_VIDEO15),
}
