"""HunyuanVideo 1.5's DiT in a single file: `detect.py` reads it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...single_file.detection import Detection
from ...single_file.header import FileHeader
from ...single_file.rows import RowMap, Segment
from ...single_file.vocabulary import Preset
from . import keys as hunyuan
from .detect import hunyuan15_dit
from .keys import (
    BLOCK_PARTS,
    REFINER_PARTS,
    RENAMES,
    SCHEDULER_SHIFTS,
)


def detect_dit(header: FileHeader, prefix: str) -> Detection | None:
    """A HunyuanVideo 1.5 DiT in Tencent's key names under `prefix`; None when the file has
    none."""
    if f"{prefix}{hunyuan.MARKER}" in header.tensors:
        return hunyuan15_dit(header, prefix, "original")
    return None


def detect_diffusers_dit(header: FileHeader) -> Detection | None:
    """A HunyuanVideo 1.5 DiT in diffusers' key names; None when the file has none."""
    keys = header.tensors
    if hunyuan.DIFFUSERS_MARKER in keys and "x_embedder.proj.weight" in keys:
        return hunyuan15_dit(header, "", "diffusers")
    return None


def hunyuan15_row_map(keys: Mapping[str, tuple[int, ...]], config: Mapping) -> RowMap:
    """Original key names -> diffusers' `HunyuanVideo15Transformer3DModel`, as a row map."""
    mapping: RowMap = {}

    def rows(key: str) -> int:
        return keys[key][0] if keys[key] else 1

    def whole(src: str, dst: str) -> None:
        for suffix in (".weight", ".bias"):
            if src + suffix in keys:
                mapping[dst + suffix] = (Segment(src + suffix, 0, rows(src + suffix)),)

    for src, dst in RENAMES:
        whole(src, dst)
    width = config["num_attention_heads"] * config["attention_head_dim"]
    for i in range(config["num_refiner_layers"]):
        s = f"txt_in.individual_token_refiner.blocks.{i}."
        d = f"context_embedder.token_refiner.refiner_blocks.{i}."
        for src, dst in REFINER_PARTS:
            whole(s + src, d + dst)
        for suffix in (".weight", ".bias"):
            for j, name in enumerate(("to_q", "to_k", "to_v")):
                mapping[f"{d}attn.{name}{suffix}"] = (
                    Segment(f"{s}self_attn_qkv{suffix}", j * width, width),
                )
    for i in range(config["num_layers"]):
        for src, dst in BLOCK_PARTS:
            whole(f"double_blocks.{i}.{src}", f"transformer_blocks.{i}.{dst}")
    for suffix in (".weight", ".bias"):  # (shift, scale) -> diffusers' (scale, shift)
        key = "final_layer.adaLN_modulation.1" + suffix
        if key in keys:
            half = rows(key) // 2
            mapping["norm_out.linear" + suffix] = (Segment(key, half, half), Segment(key, 0, half))
    return mapping


dit_row_map = hunyuan15_row_map


def text_widths(config: Mapping) -> tuple[tuple[str, int, str], ...]:
    """Qwen2.5-VL's and ByT5's widths."""
    return (
        ("text_encoder", config["text_embed_dim"], "text embeddings"),
        ("text_encoder_2", config["text_embed_2_dim"], "text embeddings"),
    )


def file_scheduler(scheduler: Any, dit: Detection) -> Any:
    """The preset's scheduler with the flow shift of the file's resolution and task (the tiny
    presets keep theirs)."""
    if dit.variant.startswith("tiny-"):
        return scheduler
    resolution = "720p" if "720p" in dit.variant else "480p"
    shift = SCHEDULER_SHIFTS[(resolution, dit.config["task_type"])]
    return type(scheduler).from_config(scheduler.config, shift=shift)


def vae_key_names(state: dict[str, Any], detection: Detection) -> dict[str, Any]:
    """Tencent's VAE key names -> diffusers'."""
    return {hunyuan.vae_name(key): value for key, value in state.items()}


_HY15_T2V, _HY15_I2V = "HunyuanVideo15Pipeline", "HunyuanVideo15ImageToVideoPipeline"
_HY15_ENCODERS = ("qwen2.5-vl", "t5")  # ByT5 is a T5 encoder
_HY15_VAE = "the HunyuanVideo 1.5 VAE (hunyuanvideo15_vae_fp16)"
_SIGLIP = "the SigLIP image encoder (sigclip_vision_patch14_384)"
_BYT5 = {"t5": "byt5"}  # the second encoder is ByT5 (Glyph-SDXL's), tokenized as bytes
FILE_PRESETS = {
    variant: Preset(
        name,
        pipeline,
        _HY15_ENCODERS,
        vae=_HY15_VAE,
        image_encoder=image,
        tokenizer_kinds=_BYT5 if name.startswith("random:") else {},
    )
    for variant, name, pipeline, image in (
        ("tiny-hunyuanvideo1.5", "tiny-hunyuanvideo1.5", _HY15_T2V, ""),
        ("tiny-hunyuanvideo1.5-i2v", "tiny-hunyuanvideo1.5-i2v", _HY15_I2V, _SIGLIP),
        ("hunyuanvideo1.5-480p-t2v", "random:hunyuanvideo1.5-t2v", _HY15_T2V, ""),
        ("hunyuanvideo1.5-720p-t2v", "random:hunyuanvideo1.5-t2v", _HY15_T2V, ""),
        ("hunyuanvideo1.5-480p-i2v", "random:hunyuanvideo1.5-i2v", _HY15_I2V, _SIGLIP),
        ("hunyuanvideo1.5-720p-i2v", "random:hunyuanvideo1.5-i2v", _HY15_I2V, _SIGLIP),
    )
}
"""The presets HunyuanVideo 1.5's single files run on (`FileSpec.presets`)."""
