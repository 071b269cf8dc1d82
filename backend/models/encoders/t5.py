"""T5 and UMT5 text encoders (Flux.1's T5-XXL in `text_encoder_2`; Wan's UMT5, whose ComfyUI
file carries its SentencePiece model), in Hugging Face's key names."""

from __future__ import annotations

from pathlib import Path

from ..single_file.detection import Detection, count_indices
from ..single_file.header import FileHeader
from .kind import EncoderKind


def detect_t5(header: FileHeader) -> Detection | None:
    keys = {k: v.shape for k, v in header.tensors.items()}
    prefix = next(
        (
            p
            for p in ("", "encoder.")
            if f"{p}encoder.block.0.layer.0.SelfAttention.q.weight" in keys
        ),
        None,
    )
    if prefix is None:
        return None
    if prefix:  # some files nest the encoder once more
        keys = {k[len(prefix) :]: v for k, v in keys.items() if k.startswith(prefix)}
    embed = keys.get("shared.weight") or keys.get("encoder.embed_tokens.weight")
    if embed is None:
        return Detection("unknown", "t5", reasons=("T5-like keys but no token embedding",))
    vocab, d_model = embed
    layers = count_indices(keys, r"encoder\.block\.(\d+)\.layer\.0\.SelfAttention\.q\.weight$")
    bias = "encoder.block.{}.layer.0.SelfAttention.relative_attention_bias.weight"
    umt5 = bias.format(1) in keys
    buckets, heads = keys[bias.format(0)]
    inner = keys["encoder.block.0.layer.0.SelfAttention.q.weight"][0]
    gated = "encoder.block.0.layer.1.DenseReluDense.wi_0.weight" in keys
    d_ff = keys[
        "encoder.block.0.layer.1.DenseReluDense." + ("wi_0" if gated else "wi") + ".weight"
    ][0]
    kind = "umt5" if umt5 else "t5"
    config = {
        "_class_name": "UMT5EncoderModel" if umt5 else "T5EncoderModel",
        "vocab_size": vocab,
        "d_model": d_model,
        "d_kv": inner // heads,
        "d_ff": d_ff,
        "num_layers": layers,
        "num_heads": heads,
        "relative_attention_num_buckets": buckets,
        "relative_attention_max_distance": 128,
        "feed_forward_proj": "gated-gelu" if gated else "relu",
        "layer_norm_epsilon": 1e-6,
        "pad_token_id": 0,
        "eos_token_id": 1,
        "decoder_start_token_id": 0,
    }
    reasons = (
        f"{kind.upper()} encoder keys (encoder.block.N"
        + (", relative attention bias in every block" if umt5 else "")
        + ")",
        f"width {d_model}, {layers} blocks, {heads} heads, vocabulary {vocab}",
    )
    return Detection("text_encoder", kind, f"{kind} {d_model}", "hf", prefix, config, reasons)


T5 = EncoderKind(
    "t5",
    recognitions=((10, detect_t5),),
    slot="text_encoder_2",
    tokenizer_class="T5TokenizerFast",
    tokenizer_files=(("tokenizer.json",), ("spiece.model",)),
    comfy_tokenizer=Path("comfy/text_encoders/t5_tokenizer"),
    hub_tokenizers=(
        ("black-forest-labs/FLUX.1-dev", "tokenizer_2"),
        ("black-forest-labs/FLUX.1-schnell", "tokenizer_2"),
        ("google/t5-v1_1-xxl", ""),
    ),
)
UMT5 = EncoderKind("umt5", slot="text_encoder")
"""Recognised by `detect_t5` (a relative attention bias in every block); its files carry
their tokenizer (ComfyUI's `spiece_model`), or are the presets' byte-vocabulary encoders."""
