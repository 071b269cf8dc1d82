"""The tiny Z-Image preset (Z-Image-Turbo-shaped)."""

from __future__ import annotations

from ...random_presets import shipped_scheduler
from ...seeded import (
    PAD_ID,
    QWEN_CHAT_VOCAB_SIZE,
    qwen3_chat_tokenizer,
)
from ...tiny_parts import (
    TEXT_DIM,
    Builders,
    seeded,
    tiny_text_config,
)
from ..flux.tiny import FLUX_LATENT_CHANNELS, flux_vae

_ZIMAGE_HEADS, _ZIMAGE_HEAD_DIM = 4, 16


def _qwen3_text_encoder():
    from transformers import Qwen3Config, Qwen3Model

    config = Qwen3Config(
        **tiny_text_config(QWEN_CHAT_VOCAB_SIZE, 2),
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=PAD_ID,
    )
    return Qwen3Model(config)


def _z_image_transformer():
    from diffusers import ZImageTransformer2DModel

    return ZImageTransformer2DModel(
        all_patch_size=(2,),
        all_f_patch_size=(1,),
        in_channels=FLUX_LATENT_CHANNELS,
        dim=_ZIMAGE_HEADS * _ZIMAGE_HEAD_DIM,
        n_layers=2,
        n_refiner_layers=2,
        n_heads=_ZIMAGE_HEADS,
        n_kv_heads=_ZIMAGE_HEADS,
        cap_feat_dim=TEXT_DIM,
        axes_dims=[4, 6, 6],  # sums to the head dim, as the real [32, 48, 48] to 128
        axes_lens=[1536, 512, 512],
    )


_Z_IMAGE: Builders = {
    "tokenizer": qwen3_chat_tokenizer,
    "text_encoder": lambda: seeded(501, _qwen3_text_encoder),
    "vae": lambda: seeded(502, flux_vae),
    "scheduler": lambda: shipped_scheduler("random:z-image-turbo"),
    "transformer": lambda: seeded(503, _z_image_transformer),
}

PRESETS: dict[str, tuple[str, Builders]] = {
    "tiny-z-image": ("ZImagePipeline", _Z_IMAGE),
}
