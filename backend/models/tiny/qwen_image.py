"""The tiny Qwen-Image preset."""

from __future__ import annotations

from ..seeded import (
    QWEN_CHAT_VOCAB_SIZE,
    qwen_chat_tokenizer,
)
from .common import (
    TEXT_DIM,
    Builders,
    seeded,
)

_QWEN_HEADS, _QWEN_HEAD_DIM = 4, 16


def _qwen_text_encoder():
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    config = Qwen2_5_VLConfig(
        text_config={
            "vocab_size": QWEN_CHAT_VOCAB_SIZE,
            "hidden_size": TEXT_DIM,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "rope_scaling": {"type": "mrope", "mrope_section": [2, 1, 1]},
            "bos_token_id": None,
            "eos_token_id": None,
        },
        vision_config={
            "depth": 1,
            "hidden_size": 16,
            "intermediate_size": 32,
            "num_heads": 2,
            "out_hidden_size": TEXT_DIM,
            "fullatt_block_indexes": [0],
        },
    )
    return Qwen2_5_VLForConditionalGeneration(config)


def _qwen_vae():
    from diffusers import AutoencoderKLQwenImage

    # The real latent statistics (the class's defaults), 8 channels wide, one resnet per level.
    return AutoencoderKLQwenImage(base_dim=8, dim_mult=[1, 1, 1, 1], num_res_blocks=1)


def _qwen_transformer():
    from diffusers import QwenImageTransformer2DModel

    return QwenImageTransformer2DModel(
        patch_size=2,
        in_channels=64,
        out_channels=16,
        num_layers=2,
        attention_head_dim=_QWEN_HEAD_DIM,
        num_attention_heads=_QWEN_HEADS,
        joint_attention_dim=TEXT_DIM,
        axes_dims_rope=(4, 6, 6),
    )


def _qwen_scheduler():
    import diffusers

    from ..random_presets import random_preset_spec

    shipped = dict(random_preset_spec("random:qwen-image")["components"]["scheduler"]["config"])
    return getattr(diffusers, shipped.pop("_class_name")).from_config(shipped)


_QWEN_IMAGE: Builders = {
    "tokenizer": qwen_chat_tokenizer,
    "text_encoder": lambda: seeded(401, _qwen_text_encoder),
    "vae": lambda: seeded(402, _qwen_vae),
    "scheduler": _qwen_scheduler,
    "transformer": lambda: seeded(403, _qwen_transformer),
}

PRESETS: dict[str, tuple[str, Builders]] = {
    "tiny-qwen-image": ("QwenImagePipeline", _QWEN_IMAGE),
}
