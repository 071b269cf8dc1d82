"""The tiny Qwen-Image presets: text-to-image and Edit-Plus."""

from __future__ import annotations

from ...random_presets import shipped_scheduler
from ...seeded import (
    QWEN_CHAT_VOCAB_SIZE,
    qwen_chat_tokenizer,
)
from ...tiny_parts import (
    TEXT_DIM,
    Builders,
    seeded,
)

_QWEN_HEADS, _QWEN_HEAD_DIM = 4, 16


def _qwen_text_encoder(vocab_size: int = QWEN_CHAT_VOCAB_SIZE, **token_ids: int):
    """Qwen2.5-VL at tiny widths, its vision tower included; `token_ids` name the vision
    markers' ids in the tokenizer (`image_token_id`, ...: the edit presets')."""
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    config = Qwen2_5_VLConfig(
        **token_ids,
        text_config={
            "vocab_size": vocab_size,
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


def _qwen_vae(base_dim: int = 8, num_res_blocks: int = 1):
    from diffusers import AutoencoderKLQwenImage

    # The real latent statistics (the class's defaults), 8 channels wide, one resnet per level.
    return AutoencoderKLQwenImage(
        base_dim=base_dim, dim_mult=[1, 1, 1, 1], num_res_blocks=num_res_blocks
    )


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
    return shipped_scheduler("random:qwen-image")


_QWEN_IMAGE: Builders = {
    "tokenizer": qwen_chat_tokenizer,
    "text_encoder": lambda: seeded(401, _qwen_text_encoder),
    "vae": lambda: seeded(402, _qwen_vae),
    "scheduler": _qwen_scheduler,
    "transformer": lambda: seeded(403, _qwen_transformer),
}


def _qwen_vl_text_encoder():
    from ... import qwen_vl

    return _qwen_text_encoder(
        qwen_vl.QWEN_VL_VOCAB_SIZE,
        image_token_id=qwen_vl.IMAGE_PAD_ID,
        video_token_id=qwen_vl.VIDEO_PAD_ID,
        vision_start_token_id=qwen_vl.VISION_START_ID,
        vision_end_token_id=qwen_vl.VISION_END_ID,
    )


def _qwen_vl(part: str):
    from ... import qwen_vl

    return qwen_vl.qwen_vl_tokenizer() if part == "tokenizer" else qwen_vl.qwen_vl_processor()


# Qwen-Image-Edit-2509's pipeline: the same DiT and scheduler; the text encoder reads images
# (its vision markers in the tokenizer and the processor); the VAE 4 channels wide without
# encoder resnets, since the pipeline VAE-encodes every input image at about 1024x1024 pixels.
_QWEN_IMAGE_EDIT: Builders = {
    "tokenizer": lambda: _qwen_vl("tokenizer"),
    "processor": lambda: _qwen_vl("processor"),
    "text_encoder": lambda: seeded(404, _qwen_vl_text_encoder),
    "vae": lambda: seeded(405, lambda: _qwen_vae(base_dim=4, num_res_blocks=0)),
    "scheduler": _qwen_scheduler,
    "transformer": lambda: seeded(403, _qwen_transformer),
}

PRESETS: dict[str, tuple[str, Builders]] = {
    "tiny-qwen-image": ("QwenImagePipeline", _QWEN_IMAGE),
}
EDIT_PRESETS: dict[str, tuple[str, Builders]] = {
    "tiny-qwen-image-edit": ("QwenImageEditPlusPipeline", _QWEN_IMAGE_EDIT),
}
"""Qwen-Image-Edit's (`qwen_image_edit/`): this DiT and scheduler, its own encoder and VAE."""
