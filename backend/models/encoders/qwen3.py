"""Qwen3 text encoders (Z-Image's `qwen_3_4b`, Flux.2 Klein's), in Hugging Face's key names."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..seeded import PAD_ID, QWEN3_CHAT_TEMPLATE, QWEN_CHAT_VOCAB_SIZE, qwen3_chat_tokenizer
from ..single_file.detection import Detection, count_indices
from ..single_file.header import FileHeader
from .kind import EncoderKind


def qwen3_encoder(header: FileHeader):
    """The Detection of a Qwen3 text encoder (Hugging Face's names, under `model.` or not),
    or None for other files. Qwen3 has per-head q/k norms, which Qwen2/2.5 lack."""
    keys = {k: v.shape for k, v in header.tensors.items()}
    prefix = next(
        (p for p in ("model.", "") if f"{p}layers.0.self_attn.q_norm.weight" in keys), None
    )
    if prefix is None or f"{prefix}embed_tokens.weight" not in keys:
        return None
    vocab, hidden = keys[f"{prefix}embed_tokens.weight"]
    head_dim = keys[f"{prefix}layers.0.self_attn.q_norm.weight"][0]
    config = {
        "_class_name": "Qwen3Model",
        "vocab_size": vocab,
        "hidden_size": hidden,
        "intermediate_size": keys[f"{prefix}layers.0.mlp.gate_proj.weight"][0],
        "num_hidden_layers": count_indices(
            keys, rf"{re.escape(prefix)}layers\.(\d+)\.self_attn\.q_norm"
        ),
        "num_attention_heads": keys[f"{prefix}layers.0.self_attn.q_proj.weight"][0] // head_dim,
        "num_key_value_heads": keys[f"{prefix}layers.0.self_attn.k_proj.weight"][0] // head_dim,
        "head_dim": head_dim,
        "tie_word_embeddings": "lm_head.weight" not in keys,
    }
    if vocab == QWEN_CHAT_VOCAB_SIZE:  # the tiny presets' byte vocabulary, their settings
        config.update(bos_token_id=None, eos_token_id=None, pad_token_id=PAD_ID)
    else:  # Qwen3-4B's and -8B's
        config.update(rms_norm_eps=1e-6, rope_theta=1000000.0, max_position_embeddings=40960)
    reasons = (
        "Qwen3 text model keys (layers.N.self_attn.q_norm)"
        + (f" under {prefix!r}" if prefix else ""),
        f"width {hidden}, {config['num_hidden_layers']} layers, {config['num_attention_heads']} "
        f"heads, vocabulary {vocab}",
    )
    return Detection("text_encoder", "qwen3", f"qwen3 {hidden}", "hf", prefix, config, reasons)


def _chat_template(tokenizer: Any) -> None:
    """Qwen3's, whatever the folder carries: ComfyUI's folder is Qwen2.5's, whose template adds
    a default system message."""
    tokenizer.chat_template = QWEN3_CHAT_TEMPLATE


QWEN3 = EncoderKind(
    "qwen3",
    recognitions=((50, qwen3_encoder),),
    slot="text_encoder",
    tokenizer_class="Qwen2TokenizerFast",
    tokenizer_files=(("tokenizer.json",), ("vocab.json", "merges.txt")),
    comfy_tokenizer=Path("comfy/text_encoders/qwen25_tokenizer"),
    hub_tokenizers=(("Tongyi-MAI/Z-Image-Turbo", "tokenizer"), ("Qwen/Qwen3-4B", "")),
    chat_template=_chat_template,
    tiny_vocab=QWEN_CHAT_VOCAB_SIZE,
    tiny_tokenizers={"qwen3_chat_byte_level_max_length": qwen3_chat_tokenizer},
)
