"""What every tiny preset shares: seeded weights, the tiny text and image encoders, the
builders' type."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .seeded import (
    EOS_ID,
    PAD_ID,
    VOCAB_SIZE,
    seed_weights,
)

TEXT_DIM = 32  # hidden size of every tiny text encoder
TINY_WIDTHS = {
    "hidden_size": TEXT_DIM,
    "intermediate_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 8,
}
"""Every tiny language model's widths (Qwen3, Qwen3-VL, Gemma 3 and 4 take the same names):
4 heads of 8, 2 key/value heads, a 64-wide feed-forward."""
CLIP_IMAGE_SIZE = 32
CLIP_VISION_DIM = 32

Builders = dict[str, Callable[[], Any]]
"""A preset's components: name -> a function that builds it."""


def seeded(seed: int, make: Callable[[], torch.nn.Module]) -> torch.nn.Module:
    """Construct a module without touching the caller's RNG, then set every weight from `seed`.

    The weights do not depend on the library's own init code (which changes between versions):
    matrices get N(0, 1/fan_in), biases N(0, 0.02^2), norm gains 1 + N(0, 0.02^2).
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = make()
    return seed_weights(module, seed)


def tiny_text_config(vocab_size: int, num_layers: int, **settings: Any) -> dict[str, Any]:
    """A tiny language model's config arguments: `TINY_WIDTHS`, the vocabulary and depth, then
    the caller's `settings` (which may also replace a width)."""
    return {"vocab_size": vocab_size, **TINY_WIDTHS, "num_hidden_layers": num_layers, **settings}


def _t5_config(config_class):
    return config_class(
        vocab_size=VOCAB_SIZE,
        d_model=TEXT_DIM,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_heads=4,
        relative_attention_num_buckets=32,
        relative_attention_max_distance=128,
        feed_forward_proj="gated-gelu",
        pad_token_id=PAD_ID,
        eos_token_id=EOS_ID,
        decoder_start_token_id=PAD_ID,
    )


def umt5_encoder():
    from transformers import UMT5Config, UMT5EncoderModel

    return UMT5EncoderModel(_t5_config(UMT5Config))


def t5_encoder():
    from transformers import T5Config, T5EncoderModel

    return T5EncoderModel(_t5_config(T5Config))


def clip_text_encoder():
    from transformers import CLIPTextConfig, CLIPTextModel

    config = CLIPTextConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=TEXT_DIM,
        intermediate_size=64,
        projection_dim=TEXT_DIM,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=77,
        pad_token_id=PAD_ID,
        bos_token_id=EOS_ID,
        eos_token_id=EOS_ID,  # the pooled output is taken at the first </s>
    )
    return CLIPTextModel(config)


def clip_image_encoder():
    from transformers import CLIPVisionConfig, CLIPVisionModel

    config = CLIPVisionConfig(
        hidden_size=CLIP_VISION_DIM,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        image_size=CLIP_IMAGE_SIZE,
        patch_size=8,
    )
    return CLIPVisionModel(config)
