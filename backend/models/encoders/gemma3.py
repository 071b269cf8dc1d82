"""Gemma 3 language models (LTX-2's text encoder, ComfyUI's `gemma_3_12B_it`, which carries its
SentencePiece model), in Hugging Face's key names."""

from __future__ import annotations

import re

from ..seeded import EOS_ID, PAD_ID, VOCAB_SIZE
from ..single_file.detection import Detection, count_indices, language_model_prefix
from ..single_file.header import FileHeader
from .kind import EncoderKind

TINY_SETTINGS = {
    "max_position_embeddings": 256,
    "sliding_window": 64,
    "pad_token_id": PAD_ID,
    "eos_token_id": EOS_ID,
    "bos_token_id": None,
}
"""The tiny presets' Gemma 3 settings a file's header cannot show (LTX-2's tiny text
encoder, `families/ltx2/tiny.py`)."""

GEMMA3_12B = {
    "sliding_window": 1024,
    "max_position_embeddings": 131072,
    "query_pre_attn_scalar": 256,
    "rms_norm_eps": 1e-6,
    "rope_parameters": {
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
    },
    "pad_token_id": 0,
    "eos_token_id": 1,
    "bos_token_id": 2,
}
"""What a header cannot show of google/gemma-3-12b-it's text model (its published config)."""
_GEMMA_PREFIXES = ("model.", "model.language_model.", "language_model.model.", "")


def gemma3_encoder(header: FileHeader) -> Detection | None:
    """Gemma 3's language model (ComfyUI's `gemma_3_12B_it`: Hugging Face's names under
    `model.`, perhaps a vision tower and the SentencePiece model `spiece_model` beside it,
    which are not weights of it), or None for other files. Gemma has norms before and after
    each feed-forward, which Qwen3 (also with per-head q/k norms) lacks."""
    keys = {k: v.shape for k, v in header.tensors.items()}
    prefix = language_model_prefix(
        keys, _GEMMA_PREFIXES, "layers.0.pre_feedforward_layernorm.weight"
    )
    if prefix is None:
        return None
    vocab, hidden = keys[f"{prefix}embed_tokens.weight"]
    head_dim = keys[f"{prefix}layers.0.self_attn.q_norm.weight"][0]
    layers = count_indices(keys, rf"{re.escape(prefix)}layers\.(\d+)\.self_attn\.q_proj\.weight$")
    config = {
        "_class_name": "Gemma3TextModel",
        "vocab_size": vocab,
        "hidden_size": hidden,
        "intermediate_size": keys[f"{prefix}layers.0.mlp.gate_proj.weight"][0],
        "num_hidden_layers": layers,
        "num_attention_heads": keys[f"{prefix}layers.0.self_attn.q_proj.weight"][0] // head_dim,
        "num_key_value_heads": keys[f"{prefix}layers.0.self_attn.k_proj.weight"][0] // head_dim,
        "head_dim": head_dim,
        **(TINY_SETTINGS if vocab == VOCAB_SIZE else GEMMA3_12B),
    }
    reasons = (
        "Gemma 3 text model keys (layers.N.pre_feedforward_layernorm)"
        + (f" under {prefix!r}" if prefix else ""),
        f"width {hidden}, {layers} layers, {config['num_attention_heads']} heads "
        f"({config['num_key_value_heads']} key/value) of {head_dim}, vocabulary {vocab}"
        + ("; carries its tokenizer (spiece_model)" if "spiece_model" in keys else ""),
    )
    return Detection("text_encoder", "gemma3", f"gemma3 {hidden}", "hf", prefix, config, reasons)


GEMMA3 = EncoderKind(
    "gemma3",
    recognitions=((40, gemma3_encoder),),  # before Qwen3's: both have per-head q/k norms
    slot="text_encoder",
    tokenizer_class="GemmaTokenizer",  # LTX2Pipeline's
    tokenizer_files=(("tokenizer.json",),),
    hub_tokenizers=(("Lightricks/LTX-2", "tokenizer"), ("google/gemma-3-12b-it", "")),
    sentencepiece_bpe=True,
)
