"""Qwen3.5: a language model ComfyUI runs to write text, which paradit recognises only to refuse
it with the reason. Qwen-Image 2.1's prompt rewriters (`qwen3.5_9b_qwen_image_2.1_pe_t2i` and
`_pe_i2i`) are Qwen3.5-9B: in ComfyUI's Turbo templates a CLIPLoader reads one and hands it to
`TextGenerate`, which writes a longer prompt before `TextEncodeQwenImage21` encodes that one
with Qwen3-VL-8B (read off the templates of comfyui-workflow-templates-json 0.1.123; the model
is `comfy/text_encoders/qwen35.py`'s `qwen35_9b`). paradit generates no text, so the file is
never the encoder a DiT reads.

A Qwen3.5 language model is told from every other encoder by its gated delta-net layers
(`layers.N.linear_attn.in_proj_qkv`: three of every four layers; Qwen3's and Qwen3-VL's have
`self_attn` in each), under `model.language_model.` (transformers' names) or `model.` (ComfyUI's).
"""

from __future__ import annotations

import re

from ..single_file.detection import Detection, count_indices, stripped
from ..single_file.header import FileHeader
from .kind import EncoderKind

PREFIXES = ("model.language_model.", "model.")
_MARKER = "linear_attn.in_proj_qkv.weight"

REFUSED = (
    "a language model that writes text and encodes none: ComfyUI's Qwen-Image 2.1 templates "
    "run it as their prompt rewriter (qwen3.5_9b_qwen_image_2.1_pe_t2i / _pe_i2i, read by "
    "TextGenerate, whose longer prompt TextEncodeQwenImage21 then encodes with Qwen3-VL-8B), "
    "and paradit generates no text: give the prompt as it should be encoded, and the model's "
    "own encoder as --text-encoder (Qwen-Image 2.1: qwen3vl_8b_int8_convrot)"
)
"""Why paradit runs no Qwen3.5 file (every place a file is given says it)."""


def qwen35_language_model(header: FileHeader) -> Detection | None:
    """A Qwen3.5 language model (a prompt rewriter's), or None for other files."""
    keys = header.tensors
    prefix = next(
        (p for p in PREFIXES if any(k.startswith(p) and k.endswith(_MARKER) for k in keys)), None
    )
    if prefix is None or f"{prefix}embed_tokens.weight" not in keys:
        return None
    shapes = stripped(header, prefix)
    vocab, hidden = shapes["embed_tokens.weight"]
    layers = count_indices(shapes, r"layers\.(\d+)\.input_layernorm\.weight$")
    linear = sum(1 for k in shapes if re.match(r"layers\.\d+\.linear_attn\.in_proj_qkv\.", k))
    tower = any(k.startswith(("visual.", "model.visual.")) for k in keys)
    reasons = (
        f"Qwen3.5 language model keys (gated delta-net layers: layers.N.{_MARKER}) under "
        f"{prefix!r}" + (" beside a vision tower" if tower else ""),
        f"width {hidden}, {layers} layers ({linear} of them linear attention), vocabulary {vocab}",
    )
    config = {"vocab_size": vocab, "hidden_size": hidden, "num_hidden_layers": layers}
    return Detection("text_encoder", "qwen3.5", f"qwen3.5 {hidden}", "hf", prefix, config, reasons)


QWEN35 = EncoderKind(
    "qwen3.5",
    title="Qwen3.5",
    recognitions=((42, qwen35_language_model),),
    refused=REFUSED,
)
