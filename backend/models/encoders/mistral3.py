"""Mistral 3 language models (FLUX.2-dev's `mistral_3_small_flux2`), in Hugging Face's key names."""

from __future__ import annotations

from ..seeded import MISTRAL_CHAT_VOCAB_SIZE, PAD_ID, mistral_chat_tokenizer
from ..single_file.detection import Detection, count_indices, language_model_prefix, stripped
from ..single_file.header import FileHeader
from .kind import EncoderKind

MISTRAL3 = "mistral3"

_MISTRAL_PREFIXES = ("model.", "model.language_model.", "")
MISTRAL_SMALL_31 = {  # Mistral-Small-3.1-24B-Instruct-2503's text settings no shape shows
    "head_dim": 128,
    "rms_norm_eps": 1e-5,
    "rope_theta": 1000000000.0,
    "max_position_embeddings": 131072,
    "sliding_window": None,  # full attention (MistralConfig's default window is 4096)
}
TINY_MISTRAL = {"head_dim": 8, "bos_token_id": None, "eos_token_id": None, "pad_token_id": PAD_ID}
"""The tiny-flux2 preset's encoder settings (its byte vocabulary with Mistral's chat markers)."""


def mistral3_encoder(header: FileHeader) -> Detection | None:
    """The Detection of a Mistral 3 language model (FLUX.2-dev's text encoder), or None."""
    prefix = language_model_prefix(
        header.tensors, _MISTRAL_PREFIXES, "layers.0.self_attn.q_proj.weight"
    )
    if prefix is None:
        return None
    keys = stripped(header, prefix)
    if "layers.0.self_attn.q_proj.bias" in keys or "layers.0.self_attn.q_norm.weight" in keys:
        return None  # Qwen2.5 (biases), Qwen3 (q/k norms)
    vocab, hidden = keys["embed_tokens.weight"]
    settings = TINY_MISTRAL if vocab == MISTRAL_CHAT_VOCAB_SIZE else MISTRAL_SMALL_31
    head_dim = settings["head_dim"]
    layers = count_indices(keys, r"layers\.(\d+)\.self_attn\.q_proj\.weight$")
    heads = keys["layers.0.self_attn.q_proj.weight"][0] // head_dim
    kv_heads = keys["layers.0.self_attn.k_proj.weight"][0] // head_dim
    config = {
        "_class_name": "MistralModel",
        "vocab_size": vocab,
        "hidden_size": hidden,
        "intermediate_size": keys["layers.0.mlp.gate_proj.weight"][0],
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        **settings,
    }
    reasons = (
        "Mistral 3 language model keys (layers.N.self_attn.q_proj without biases or q/k norms)"
        + (f" under {prefix!r}" if prefix else ""),
        f"width {hidden}, {layers} layers, {heads} heads ({kv_heads} key/value) of {head_dim}, "
        f"vocabulary {vocab}",
    )
    return Detection("text_encoder", MISTRAL3, f"mistral3 {hidden}", "hf", prefix, config, reasons)


MISTRAL = EncoderKind(
    MISTRAL3,
    recognitions=((60, mistral3_encoder),),
    slot="text_encoder",
    tokenizer_class="AutoProcessor",  # Flux2Pipeline's: Pixtral's processor and its chat template
    tokenizer_files=(("tokenizer.json",),),
    hub_tokenizers=(
        ("black-forest-labs/FLUX.2-dev", "tokenizer"),
        ("mistralai/Mistral-Small-3.1-24B-Instruct-2503", ""),
    ),
    tiny_vocab=MISTRAL_CHAT_VOCAB_SIZE,
    tiny_tokenizers={"mistral_chat_byte_level_max_length": mistral_chat_tokenizer},
)
