"""Qwen3-VL: the vision-language encoder Qwen-Image 2.1 reads its prompt (and, editing, its
images) through (`Qwen3VLForConditionalGeneration`, Qwen3-VL-8B; Krea 2 reads only its
language model, Qwen3-VL-4B's). Its pipeline takes a processor, not a tokenizer: the presets'
is Qwen-VL's processor on the byte tokenizer with the vision markers (`qwen_vl.py`) carrying
Qwen3-VL's chat template for messages of text parts.

Its single files (ComfyUI's `qwen3vl_4b_fp8_scaled`, `qwen3vl_8b_int8_convrot`) are recognised
by their language model in Hugging Face's names (per-head q/k norms, as Qwen3's) told apart from
a plain Qwen3 file (whose shapes Qwen3-VL-4B's language model shares) by where it sits:
`model.language_model.` (transformers' Qwen3-VL names), or `model.` beside a vision tower
(`visual.` or `model.visual.`). What no shape shows comes from Qwen3-VL's published config:
rotary theta 5e6 over interleaved multimodal sections [24, 20, 20] of 128-wide heads (the tiny
presets' [2, 1, 1] of 8-wide heads)."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from ..seeded import QWEN_CHAT_VOCAB_SIZE
from ..single_file.detection import REAL_HEAD_DIM, Detection, count_indices, stripped
from ..single_file.header import FileHeader
from .kind import EncoderKind

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}{{ part['text'] }}{% endfor %}{% endif %}"
    "<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""Qwen3-VL's chat template for text messages whose content is a string or a list of text
parts: `<|im_start|>role\ncontent<|im_end|>\n` per message (Qwen-Image 2.1's pipeline counts
its system message's tokens with it: the part of the prompt it drops)."""

LANGUAGE_PREFIX = "model.language_model."
VISION_PREFIXES = ("model.visual.", "visual.")
_MARKER = "layers.0.self_attn.q_norm.weight"
_MROPE_SECTIONS = {128: [24, 20, 20], 8: [2, 1, 1]}
"""Interleaved multimodal rotary sections per head width (Qwen3-VL's; the tiny presets')."""


def rope_parameters(head_dim: int) -> dict[str, Any]:
    """Qwen3-VL's rotary settings for `head_dim`-wide heads (a width `_MROPE_SECTIONS` has):
    theta 5e6 over interleaved multimodal sections."""
    return {
        "rope_type": "default",
        "rope_theta": 5000000.0,
        "mrope_section": list(_MROPE_SECTIONS[head_dim]),
        "mrope_interleaved": True,
    }


def _language_prefix(keys: Any) -> str | None:
    """Where a Qwen3-VL language model sits in `keys`, or None (a plain Qwen3 file too)."""
    if f"{LANGUAGE_PREFIX}{_MARKER}" in keys:
        return LANGUAGE_PREFIX
    tower = any(f"{p}patch_embed.proj.weight" in keys for p in VISION_PREFIXES)
    return "model." if tower and f"model.{_MARKER}" in keys else None


def qwen3_vl_encoder(header: FileHeader) -> Detection | None:
    """Qwen3-VL's language model (Krea 2's text encoder; Qwen-Image 2.1's language side), or
    None for other files. Its config is transformers' `Qwen3VLTextModel`'s; the reasons say
    whether the file holds the vision tower."""
    prefix = _language_prefix(header.tensors)
    if prefix is None or f"{prefix}embed_tokens.weight" not in header.tensors:
        return None
    keys = stripped(header, prefix)
    vocab, hidden = keys["embed_tokens.weight"]
    head_dim = keys[_MARKER][0]
    if head_dim not in _MROPE_SECTIONS:
        return None
    layers = count_indices(keys, r"layers\.(\d+)\.self_attn\.q_norm\.weight$")
    heads = keys["layers.0.self_attn.q_proj.weight"][0] // head_dim
    kv_heads = keys["layers.0.self_attn.k_proj.weight"][0] // head_dim
    config = {
        "_class_name": "Qwen3VLTextModel",
        "vocab_size": vocab,
        "hidden_size": hidden,
        "intermediate_size": keys["layers.0.mlp.gate_proj.weight"][0],
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": "lm_head.weight" not in header.tensors,
        "rope_parameters": rope_parameters(head_dim),
    }
    if head_dim == REAL_HEAD_DIM:  # the real models' (not the presets' reduced ones)
        config["max_position_embeddings"] = 262144
    tower = next(
        (p for p in VISION_PREFIXES if f"{p}patch_embed.proj.weight" in header.tensors), None
    )
    reasons = (
        "Qwen3-VL language model keys (layers.N.self_attn.q_norm) under "
        f"{prefix!r}" + (f" beside a vision tower under {tower!r}" if tower else ""),
        f"width {hidden}, {layers} layers, {heads} heads ({kv_heads} key/value), vocabulary "
        f"{vocab}",
        qwen3_vl_vision(header)[1],
    )
    return Detection(
        "text_encoder", "qwen3-vl", f"qwen3-vl {hidden}", "hf", prefix, config, reasons
    )


# -- the vision tower -------------------------------------------------------------------------

# What no shape shows: the heads per width (16 in Qwen3-VL-8B's 1152-wide and -4B's 1024-wide
# towers; the presets' 2 and 4, tiny-minimax-h3's 4 of its 32-wide tower) and which blocks
# feed the deepstack mergers, per depth (tiny-minimax-h3's two-block tower: its second)
_TOWER_HEADS = {1152: 16, 1024: 16, 16: 2, 32: 4, 64: 4}
_DEEPSTACK = {27: [8, 16, 24], 24: [5, 11, 17], 2: [1]}


def qwen3_vl_vision(header: FileHeader) -> tuple[dict | None, str]:
    """The vision tower's config (transformers' `Qwen3VLVisionConfig`) read off a Qwen3-VL
    file's shapes, and a reason saying what was found; None when there is none to build."""
    keys = header.tensors
    prefix = next((p for p in VISION_PREFIXES if f"{p}patch_embed.proj.weight" in keys), None)
    if prefix is None:
        return None, "no vision tower (no visual. weights)"
    names = ("patch_embed.proj.weight", "pos_embed.weight", "blocks.0.mlp.linear_fc1.weight",
             "merger.linear_fc1.weight", "merger.linear_fc2.weight")  # fmt: skip
    missing = [prefix + n for n in names if prefix + n not in keys]
    if missing:
        return None, f"an incomplete vision tower under {prefix!r} (no {missing[0]})"
    patch, positions, fc1, merge_in, merge_out = (keys[prefix + n].shape for n in names)
    width = patch[0]
    depth = count_indices(keys, rf"{re.escape(prefix)}blocks\.(\d+)\.attn\.qkv\.weight$")
    found = f"a vision tower under {prefix!r}: {depth} blocks of width {width}"
    if width not in _TOWER_HEADS or len(patch) != 5:
        return None, f"{found}, which no Qwen3-VL has (1152, 1024; the presets' 16, 32 and 64)"
    deepstack = count_indices(keys, rf"{re.escape(prefix)}deepstack_merger_list\.(\d+)\.")
    indexes = _DEEPSTACK.get(depth, []) if deepstack else []
    if len(indexes) != deepstack:
        return None, f"{found} and {deepstack} deepstack mergers, which no Qwen3-VL has"
    config = {
        "depth": depth,
        "hidden_size": width,
        "intermediate_size": fc1[0],
        "num_heads": _TOWER_HEADS[width],
        "in_channels": patch[1],
        "patch_size": patch[3],
        "temporal_patch_size": patch[2],
        "spatial_merge_size": round((merge_in[1] // width) ** 0.5),
        "out_hidden_size": merge_out[0],
        "num_position_embeddings": positions[0],
        "deepstack_visual_indexes": indexes,
    }
    return config, f"{found}, {config['num_heads']} heads, {patch[3]}-px patches"


QWEN3_VL_PIXELS = {"shortest_edge": 65536, "longest_edge": 16777216}
"""Qwen3-VL's published image bounds (its processor's `size`)."""

COMFYUI_VISION_PIXELS = (3136, 12845056)
"""The least and most pixels of ComfyUI's `process_qwen2vl_images`, which its Qwen3-VL keeps
(Qwen2-VL's defaults, not `QWEN3_VL_PIXELS`)."""
COMFYUI_VISION_SIDE = 32
"""A side of ComfyUI's Qwen3-VL vision input is a multiple of this: 16-pixel patches, merged
2x2."""


def comfyui_vision_size(width: int, height: int) -> tuple[int, int]:
    """The (width, height) ComfyUI's `process_qwen2vl_images` hands Qwen3-VL's vision tower
    for a `width` x `height` image: each side to the nearest multiple of 32; where that area
    lies over `COMFYUI_VISION_PIXELS`' most, both sides scaled down by the root of the area's
    ratio and floored to multiples of 32 (at least 32); under the least, scaled up and ceiled."""
    least, most = COMFYUI_VISION_PIXELS
    side = COMFYUI_VISION_SIDE
    new_w, new_h = round(width / side) * side, round(height / side) * side
    if new_w * new_h > most:
        beta = math.sqrt(width * height / most)
        new_w = max(side, math.floor(width / beta / side) * side)
        new_h = max(side, math.floor(height / beta / side) * side)
    elif new_w * new_h < least:
        beta = math.sqrt(least / (width * height))
        new_w = math.ceil(width * beta / side) * side
        new_h = math.ceil(height * beta / side) * side
    return new_w, new_h


def qwen3_vl_file_processor(tokenizer: Any) -> Any:
    """The processor on a real Qwen3-VL tokenizer: Qwen3-VL's published image settings
    (16-pixel patches, 2 frames a temporal patch, merged 2x2, mean and std 0.5, its pixel
    bounds) and `CHAT_TEMPLATE`."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil,
    )

    from ..qwen_vl import ImageQwenVLProcessor

    images = Qwen2VLImageProcessorPil(
        patch_size=16, image_mean=[0.5] * 3, image_std=[0.5] * 3, size=dict(QWEN3_VL_PIXELS)
    )
    processor = ImageQwenVLProcessor(images, tokenizer)
    processor.chat_template = CHAT_TEMPLATE
    return processor


def qwen3_vl_processor(max_length: int = 1024) -> Any:
    """The presets' Qwen3-VL processor: the byte tokenizer with the vision markers
    (`qwen_vl.qwen_vl_tokenizer`) and `CHAT_TEMPLATE`, its images cut as Qwen3-VL's (16-pixel
    patches merged 2x2: one image slot per 32x32 pixels, the 2x2 latent tokens of Qwen-Image
    2.1's 16x VAE) within the processor class's smaller pixel bounds (a tiny edit's 64x64
    reference is not scaled up to Qwen3-VL's 256x256 least)."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil,
    )

    from ..qwen_vl import ImageQwenVLProcessor, qwen_vl_tokenizer

    images = Qwen2VLImageProcessorPil(patch_size=16, image_mean=[0.5] * 3, image_std=[0.5] * 3)
    processor = ImageQwenVLProcessor(images, qwen_vl_tokenizer(max_length))
    processor.chat_template = CHAT_TEMPLATE
    return processor


def folder_processor(folder: str) -> Any:
    """A diffusers folder's Qwen3-VL processor without its video processor
    (`qwen_vl.ImageQwen3VLProcessor.from_folder`: its tokenizer and image settings)."""
    from ..qwen_vl import ImageQwen3VLProcessor  # transformers' processors: only when read

    return ImageQwen3VLProcessor.from_folder(folder)


def _chat_template(tokenizer: Any) -> None:
    """Qwen3-VL's text template, whatever the folder carries (ComfyUI's is Qwen2.5's)."""
    tokenizer.chat_template = CHAT_TEMPLATE


QWEN3_VL = EncoderKind(
    "qwen3-vl",
    title="Qwen3-VL",
    # before Qwen3's (50): a Qwen3-VL-4B language model has Qwen3-4B's names and shapes
    recognitions=((45, qwen3_vl_encoder),),
    slot="text_encoder",
    tokenizer_class="Qwen2TokenizerFast",
    tokenizer_files=(("tokenizer.json",), ("vocab.json", "merges.txt")),
    comfy_tokenizer=Path("comfy/text_encoders/qwen25_tokenizer"),
    hub_tokenizers=(("Qwen/Qwen3-VL-4B-Instruct", ""), ("Qwen/Qwen3-VL-8B-Instruct", "")),
    chat_template=_chat_template,
    tiny_vocab=QWEN_CHAT_VOCAB_SIZE,
    tiny_tokenizers={"qwen3_vl_processor_max_length": qwen3_vl_processor},
    # an H3 folder's processor (its requests read no video); ours saves under its own name
    folder_processors={
        "Qwen3VLProcessor": folder_processor,
        "ImageQwen3VLProcessor": folder_processor,
    },
)


# -- the tiny presets' ------------------------------------------------------------------------


def tiny_qwen3_vl_text_config(vocab_size: int, num_layers: int) -> dict[str, Any]:
    """Qwen3-VL's language model at the tiny widths (`tiny_parts.TINY_WIDTHS`), rotary
    sections for their 8-wide heads."""
    from ..tiny_parts import TINY_WIDTHS, tiny_text_config

    rope = rope_parameters(TINY_WIDTHS["head_dim"])
    return tiny_text_config(vocab_size, num_layers, rope_parameters=rope)


def tiny_qwen3_vl_text_model(vocab_size: int, num_layers: int, **settings: Any) -> Any:
    """Qwen3-VL's language model alone (`Qwen3VLTextModel`) at tiny widths; `settings` go to
    its config (`tie_word_embeddings`, ...)."""
    from transformers import Qwen3VLTextConfig, Qwen3VLTextModel

    config = Qwen3VLTextConfig(**tiny_qwen3_vl_text_config(vocab_size, num_layers), **settings)
    return Qwen3VLTextModel(config)


def tiny_qwen3_vl(num_layers: int, vision: dict[str, Any], **settings: Any) -> Any:
    """Qwen3-VL with its vision tower (`Qwen3VLForConditionalGeneration`) at tiny widths, on
    the tiny Qwen-VL tokenizer's vocabulary and vision marker ids (`qwen_vl.py`); `vision` is
    the tower's config, `settings` go to the outer config (`tie_word_embeddings`, ...)."""
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    from ..qwen_vl import (
        IMAGE_PAD_ID,
        QWEN_VL_VOCAB_SIZE,
        VIDEO_PAD_ID,
        VISION_END_ID,
        VISION_START_ID,
    )

    config = Qwen3VLConfig(
        text_config=tiny_qwen3_vl_text_config(QWEN_VL_VOCAB_SIZE, num_layers),
        vision_config=vision,
        image_token_id=IMAGE_PAD_ID,
        video_token_id=VIDEO_PAD_ID,
        vision_start_token_id=VISION_START_ID,
        vision_end_token_id=VISION_END_ID,
        **settings,
    )
    return Qwen3VLForConditionalGeneration(config)
