"""The tiny Krea 2 preset: Krea 2's structure (grouped-query attention, 4 query heads to a
key/value head as the real 48/12; a text-fusion stage over tapped encoder layers; the
Qwen-Image VAE; a Qwen3-VL text model) at tiny widths."""

from __future__ import annotations

from ...encoders.qwen3_vl import tiny_qwen3_vl_text_model
from ...random_presets import shipped_scheduler
from ...seeded import QWEN_CHAT_VOCAB_SIZE, qwen_chat_tokenizer
from ...tiny_parts import TEXT_DIM, Builders, seeded
from ..qwen_image.tiny import _qwen_vae

HEADS, KV_HEADS, HEAD_DIM = 4, 1, 16
ENCODER_LAYERS = 6
TAPPED_LAYERS = (2, 4, 6)
"""The tiny encoder's hidden states the DiT reads (every second layer; the real model taps
12 of Qwen3-VL-4B's 36 layers, every third from the second)."""


def qwen3_vl_text_encoder():
    """Qwen3-VL's language model at tiny widths, its embeddings tied (as Qwen3-VL-4B's)."""
    return tiny_qwen3_vl_text_model(QWEN_CHAT_VOCAB_SIZE, ENCODER_LAYERS, tie_word_embeddings=True)


def krea2_transformer():
    from diffusers import Krea2Transformer2DModel

    return Krea2Transformer2DModel(
        in_channels=64,
        num_layers=2,
        attention_head_dim=HEAD_DIM,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        intermediate_size=64,
        timestep_embed_dim=32,
        text_hidden_dim=TEXT_DIM,
        num_text_layers=len(TAPPED_LAYERS),
        text_num_attention_heads=2,
        text_num_key_value_heads=2,
        text_intermediate_size=64,
        axes_dims_rope=(4, 6, 6),  # sums to the head width, as the real (32, 48, 48) to 128
    )


_KREA2: Builders = {
    "tokenizer": qwen_chat_tokenizer,
    "text_encoder": lambda: seeded(601, qwen3_vl_text_encoder),
    "vae": lambda: seeded(602, _qwen_vae),
    "scheduler": lambda: shipped_scheduler("random:krea2"),
    "transformer": lambda: seeded(603, krea2_transformer),
}

PRESETS: dict[str, tuple[str, Builders]] = {
    "tiny-krea2": ("Krea2Pipeline", _KREA2),
}
PIPELINE_CONFIG = {"tiny-krea2": {"text_encoder_select_layers": TAPPED_LAYERS}}
"""The tiny preset's pipeline settings: its tapped layers (the base model's schedule)."""
