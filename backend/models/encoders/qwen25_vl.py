"""Qwen2.5-VL: the language model (HunyuanVideo 1.5's and Qwen-Image's text encoder,
`qwen_2.5_vl_7b`) and the vision tower a file may hold beside it (Qwen-Image-Edit reads its
input images through it), in Hugging Face's key names."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..seeded import QWEN_CHAT_TEMPLATE, QWEN_CHAT_VOCAB_SIZE, qwen_chat_tokenizer
from ..single_file.detection import (
    REAL_HEAD_DIM,
    Detection,
    count_indices,
    language_model_prefix,
    stripped,
)
from ..single_file.header import FileHeader
from .kind import EncoderKind

_MROPE_SECTIONS = {128: [16, 24, 24], 8: [2, 1, 1]}
_QWEN_PREFIXES = ("model.", "model.language_model.", "")


def qwen25_vl_encoder(header: FileHeader) -> Detection | None:
    """Qwen2.5-VL's language model (ComfyUI's `qwen_2.5_vl_7b`, the text encoder of
    HunyuanVideo 1.5, Qwen-Image and Qwen-Image-Edit): `model.layers.N` with q/k/v biases; the
    reasons say whether the file holds the vision tower (`visual.`), which only Qwen-Image-Edit
    reads (`qwen25_vl_vision`)."""
    prefix = language_model_prefix(header.tensors, _QWEN_PREFIXES, "layers.0.self_attn.q_proj.bias")
    if prefix is None:
        return None
    keys = stripped(header, prefix)
    vocab, hidden = keys["embed_tokens.weight"]
    head_dim = REAL_HEAD_DIM if hidden % REAL_HEAD_DIM == 0 else 8
    if head_dim not in _MROPE_SECTIONS:
        return None
    layers = count_indices(keys, r"layers\.(\d+)\.self_attn\.q_proj\.weight$")
    heads, kv_heads = hidden // head_dim, keys["layers.0.self_attn.k_proj.weight"][0] // head_dim
    real = head_dim == REAL_HEAD_DIM
    config = {
        "_class_name": "Qwen2_5_VLTextModel",
        "vocab_size": vocab,
        "hidden_size": hidden,
        "intermediate_size": keys["layers.0.mlp.gate_proj.weight"][0],
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "rope_scaling": {"type": "mrope", "mrope_section": _MROPE_SECTIONS[head_dim]},
        "bos_token_id": 151643 if real else None,
        "eos_token_id": 151645 if real else None,
    }
    reasons = (
        "Qwen2.5-VL language model keys (layers.N.self_attn.q_proj with biases)"
        + (f" under {prefix!r}" if prefix else ""),
        f"width {hidden}, {layers} layers, {heads} heads ({kv_heads} key/value), vocabulary "
        f"{vocab}",
        qwen25_vl_vision(header)[1],
    )
    variant = f"qwen2.5-vl {hidden}"
    return Detection("text_encoder", "qwen2.5-vl", variant, "hf", prefix, config, reasons)


# -- Qwen2.5-VL's vision tower ----------------------------------------------------------------

# Qwen2.5-VL's vision tower (Qwen-Image-Edit reads its input images through it): ComfyUI's
# file holds it under `visual.` in the names of transformers' Qwen2_5_VisionTransformer
# (patch_embed.proj, blocks.N.attn.qkv, merger.mlp.0); transformers 5 saves it under
# `model.visual.`. What no shape shows: the heads (16 of 80 in the 1280-wide tower of every
# Qwen2.5-VL; 2 in the presets' towers) and which blocks attend over the whole image instead
# of 112-pixel windows (the published [7, 15, 23, 31]; the presets' one block).
VISION_PREFIXES = ("visual.", "model.visual.")
_VISION_TOWERS = {1280: {"num_heads": 16, "fullatt_block_indexes": [7, 15, 23, 31],
                         "tokens_per_second": 2}}  # fmt: skip
_PRESET_TOWER = {"num_heads": 2, "fullatt_block_indexes": [0]}
_PRESET_TOWER_WIDTHS = (16, 32)  # tiny-qwen-image(-edit)'s and random:qwen-image-edit's


def qwen25_vl_vision(header: FileHeader) -> tuple[dict | None, str]:
    """The vision tower's config (transformers' Qwen2_5_VLVisionConfig) read off a Qwen2.5-VL
    file's shapes, and a reason saying what was found; None when there is none to build."""
    keys = header.tensors
    prefix = next((p for p in VISION_PREFIXES if f"{p}patch_embed.proj.weight" in keys), None)
    if prefix is None:
        return None, "no vision tower (no visual. weights)"
    names = ("patch_embed.proj.weight", "blocks.0.mlp.gate_proj.weight", "merger.mlp.0.weight",
             "merger.mlp.2.weight")  # fmt: skip
    missing = [prefix + n for n in names if prefix + n not in keys]
    if missing:
        return None, f"an incomplete vision tower under {prefix!r} (no {missing[0]})"
    patch, gate, merge_in, merge_out = (keys[prefix + n].shape for n in names)
    if len(patch) != 5:
        return None, f"a vision tower under {prefix!r} whose patch embedding has shape {patch}"
    width, channels, temporal, size = patch[0], patch[1], patch[2], patch[3]
    depth = count_indices(keys, rf"{re.escape(prefix)}blocks\.(\d+)\.attn\.qkv\.weight$")
    known = _VISION_TOWERS.get(width) or (_PRESET_TOWER if width in _PRESET_TOWER_WIDTHS else None)
    found = f"a vision tower under {prefix!r}: {depth} blocks of width {width}"
    if known is None:
        return None, f"{found}, which no Qwen2.5-VL has (1280; the presets' 16 and 32)"
    config = {
        **known,
        "depth": depth,
        "hidden_size": width,
        "intermediate_size": gate[0],
        "in_channels": channels,
        "patch_size": size,
        "temporal_patch_size": temporal,
        "spatial_merge_size": round((merge_in[1] // width) ** 0.5),
        "out_hidden_size": merge_out[0],
    }
    return config, f"{found}, {config['num_heads']} heads, {size}-px patches"


# -- the SigLIP vision tower ------------------------------------------------------------------

# SigLIP vision towers: heads per width (so400m, HunyuanVideo 1.5's `sigclip_vision_patch14_384`);
# the tiny preset's has 8-wide heads


def _chat_template(tokenizer: Any) -> None:
    """Qwen's where the folder carries none (HunyuanVideo 1.5 applies the chat template)."""
    if not getattr(tokenizer, "chat_template", None):
        tokenizer.chat_template = QWEN_CHAT_TEMPLATE


def _vl_tokenizer(max_length: int) -> Any:
    from ..qwen_vl import qwen_vl_tokenizer  # transformers' processors: only when built

    return qwen_vl_tokenizer(max_length)


def _vl_processor(max_length: int) -> Any:
    from ..qwen_vl import qwen_vl_processor

    return qwen_vl_processor(max_length)


_HY15_REPOS = tuple(
    "hunyuanvideo-community/HunyuanVideo-1.5-Diffusers-" + v for v in ("480p_t2v", "720p_t2v")
)
QWEN25_VL = EncoderKind(
    "qwen2.5-vl",
    recognitions=((20, qwen25_vl_encoder),),
    slot="text_encoder",
    tokenizer_class="Qwen2Tokenizer",
    tokenizer_files=(("tokenizer.json",), ("vocab.json", "merges.txt")),
    comfy_tokenizer=Path("comfy/text_encoders/qwen25_tokenizer"),
    hub_tokenizers=(
        *((repo, "tokenizer") for repo in _HY15_REPOS),
        ("Qwen/Qwen-Image", "tokenizer"),
        *((f"Qwen/Qwen-Image-Edit{r}", "tokenizer") for r in ("-2511", "-2509", "")),
        ("Qwen/Qwen2.5-VL-7B-Instruct", ""),
    ),
    chat_template=_chat_template,
    tiny_vocab=QWEN_CHAT_VOCAB_SIZE,
    tiny_tokenizers={
        "qwen_chat_byte_level_max_length": qwen_chat_tokenizer,
        "qwen_vl_byte_level_max_length": _vl_tokenizer,
        "qwen_vl_processor_max_length": _vl_processor,
    },
)
