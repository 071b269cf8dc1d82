"""Gemma 4 language models in Hugging Face's key names: LTX-2.5's text encoder
(`gemma4-12b-ltx-v1`, a Gemma 4 "unified" model; ComfyUI's `gemma4-12b-with-proj-...`), read as
`Gemma4UnifiedTextModel`.

Gemma 4 has Gemma 3's four norms a layer and a per-layer output scale (`layer_scalar`, which
tells it apart); its full-attention layers have wider heads and, where the model shares keys
and values (`attention_k_eq_v`), no value projection: the header shows which layers are full
attention, their head width and their key/value heads.
"""

from __future__ import annotations

import re
from typing import Any

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
"""The tiny presets' Gemma 4 settings a file's header cannot show (`families/ltx2/tiny.py`)."""
GEMMA4_12B_LTX = {
    "sliding_window": 1024,
    "rms_norm_eps": 1e-6,
    "pad_token_id": 0,
    "eos_token_id": 1,
    "bos_token_id": 2,
}
"""What a header cannot show of LTX-2.5's Gemma 4 12B (its rotary settings are the config
class's defaults: 10000 on the sliding layers, 1000000 with a quarter of the dimensions
rotated on the full ones)."""
_PREFIXES = ("model.language_model.", "model.", "language_model.model.", "")
_SCALAR = "layers.0.layer_scalar"


def gemma4_encoder(header: FileHeader) -> Detection | None:
    """Gemma 4's language model (Hugging Face's names, perhaps the vision and audio towers or a
    projection beside it, which are not weights of it), or None for other files."""
    keys = {k: v.shape for k, v in header.tensors.items()}
    prefix = language_model_prefix(keys, _PREFIXES, _SCALAR)
    if prefix is None:
        return None
    layers = count_indices(keys, rf"{re.escape(prefix)}layers\.(\d+)\.self_attn\.q_proj\.weight$")

    def shape(layer: int, name: str) -> Any:
        return keys.get(f"{prefix}layers.{layer}.{name}.weight")

    full = [i for i in range(layers) if shape(i, "self_attn.v_proj") is None]
    shares_values = bool(full)
    if not full:  # every layer has its values: the full layers by their wider heads
        width = shape(0, "self_attn.q_norm")[0]
        full = [i for i in range(layers) if shape(i, "self_attn.q_norm")[0] != width]
    sliding = next(i for i in range(layers) if i not in full)
    vocab, hidden = keys[f"{prefix}embed_tokens.weight"]
    head_dim = shape(sliding, "self_attn.q_norm")[0]
    config = {
        "_class_name": "Gemma4UnifiedTextModel",
        "vocab_size": vocab,
        "hidden_size": hidden,
        "intermediate_size": shape(0, "mlp.gate_proj")[0],
        "num_hidden_layers": layers,
        "num_attention_heads": shape(sliding, "self_attn.q_proj")[0] // head_dim,
        "num_key_value_heads": shape(sliding, "self_attn.k_proj")[0] // head_dim,
        "head_dim": head_dim,
        "layer_types": [
            "full_attention" if i in full else "sliding_attention" for i in range(layers)
        ],
        "attention_k_eq_v": shares_values,
        **(TINY_SETTINGS if vocab == VOCAB_SIZE else GEMMA4_12B_LTX),
    }
    if full:
        global_dim = shape(full[0], "self_attn.q_norm")[0]
        config["global_head_dim"] = global_dim
        config["num_global_key_value_heads"] = shape(full[0], "self_attn.k_proj")[0] // global_dim
    reasons = (
        "Gemma 4 text model keys (layers.N.layer_scalar)"
        + (f" under {prefix!r}" if prefix else ""),
        f"width {hidden}, {layers} layers ({len(full)} of full attention"
        + (", keys as values" if shares_values else "")
        + f"), {config['num_attention_heads']} heads of {head_dim}, vocabulary {vocab}",
    )
    return Detection("text_encoder", "gemma4", f"gemma4 {hidden}", "hf", prefix, config, reasons)


GEMMA4 = EncoderKind(
    "gemma4",
    title="Gemma 4",
    recognitions=((39, gemma4_encoder),),  # before Gemma 3's: Gemma 4 has its norms too
    slot="text_encoder",
    sentencepiece_bpe=True,  # a file's own `spiece_model`, as Gemma 3's (not checked on one)
)
