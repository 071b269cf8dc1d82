"""ComfyUI/Wan and Black Forest Labs key names to diffusers', as row maps (no tensor is read).

A row map says, for every diffusers parameter, which rows of which file tensors make it up
(in order, stacked along dim 0): a rename is one segment, Flux's fused q/k/v is three row
ranges of one tensor, its final modulation is two halves swapped. A rank that holds rows
a..b of a parameter (its FSDP2 shard) reads just those rows from the file.

For Wan the map is diffusers' own converter (`convert_wan_transformer_to_diffusers`) run on
*row traces*: every file tensor is replaced by a 1-D float64 tensor whose values number its
rows, the converter renames/splits them as it would the weights, and the values that come out
say which rows went where. Flux's converter hard-codes the 12B model's width, so the BFL
layout is mapped here for any width (the tiny test model's included).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import torch

from . import ltx2
from .detect import Detection
from .header import FileHeader
from .hunyuan_video15 import BLOCK_PARTS, REFINER_PARTS, RENAMES
from .quant import is_scale_key

_ROW_BITS = 32


@dataclass(frozen=True)
class Segment:
    """Rows start..start+rows of file tensor `key`."""

    key: str
    start: int
    rows: int

    def __post_init__(self) -> None:
        if self.start < 0 or self.rows < 0:
            raise ValueError(f"segment rows must be >= 0, got {self.start}+{self.rows}")


RowMap = dict[str, tuple[Segment, ...]]


def weight_keys(header: FileHeader, prefix: str) -> dict[str, tuple[int, ...]]:
    """The file's weight tensors (prefix stripped), without fp8_scaled's scales and marker."""
    # the marker sits under the DiT's prefix in an all-in-one checkpoint
    return {
        key[len(prefix) :]: info.shape
        for key, info in header.tensors.items()
        if key.startswith(prefix) and not is_scale_key(key[len(prefix) :])
    }


def dit_row_map(header: FileHeader, detection: Detection) -> RowMap:
    """Diffusers parameter name -> the file rows that make it (keys keep the file's prefix)."""
    keys = weight_keys(header, detection.prefix)
    if detection.layout == "diffusers":
        mapping = {k: (Segment(k, 0, _rows(s)),) for k, s in keys.items()}
    elif detection.family == "wan":
        mapping = trace_converter(_wan_converter(), keys)
    elif detection.family == "flux":
        mapping = flux_bfl_row_map(keys, detection.config)
    elif detection.family == "hunyuanvideo1.5":
        mapping = hunyuan15_row_map(keys, detection.config)
    elif detection.family == "z-image":
        mapping = trace_converter(_z_image_converter(), keys)
    elif detection.family == "flux2":
        mapping = trace_converter(_flux2_converter(), keys)
    elif detection.family == "ltx2":
        mapping = trace_converter(ltx2.dit_converter(), ltx2.dit_keys(keys))
    else:
        raise ValueError(f"{header.name}: no key conversion for {detection.describe()}")
    return {
        name: tuple(Segment(detection.prefix + s.key, s.start, s.rows) for s in segments)
        for name, segments in mapping.items()
    }


def _rows(shape: tuple[int, ...]) -> int:
    return shape[0] if shape else 1


def _wan_converter():
    from diffusers.loaders.single_file_utils import convert_wan_transformer_to_diffusers

    return convert_wan_transformer_to_diffusers


def _z_image_converter():
    from diffusers.loaders.single_file_utils import (
        convert_z_image_transformer_checkpoint_to_diffusers,
    )

    return convert_z_image_transformer_checkpoint_to_diffusers


def _flux2_converter():
    from diffusers.loaders.single_file_utils import (
        convert_flux2_transformer_checkpoint_to_diffusers,
    )

    return convert_flux2_transformer_checkpoint_to_diffusers


def trace_converter(converter, keys: Mapping[str, tuple[int, ...]]) -> RowMap:
    """Run a diffusers state-dict converter on row traces of `keys` and read off its row map."""
    names = sorted(keys)
    traces = {
        name: torch.arange(_rows(keys[name]), dtype=torch.float64) + (i << _ROW_BITS)
        for i, name in enumerate(names)
    }
    converted = converter(dict(traces))
    mapping: RowMap = {}
    for new_name, trace in converted.items():
        mapping[new_name] = _segments(trace, names)
    return mapping


def _segments(values: torch.Tensor, names: list[str]) -> tuple[Segment, ...]:
    """Runs of consecutive rows of one tensor in a trace (vectorised: a 14B DiT has millions
    of rows)."""
    values = values.reshape(-1).to(torch.int64)
    if not values.numel():
        return ()
    breaks = torch.nonzero(values[1:] - values[:-1] != 1).reshape(-1) + 1
    starts = [0, *breaks.tolist()]
    ends = [*breaks.tolist(), values.numel()]
    mask = (1 << _ROW_BITS) - 1
    segments = []
    for begin, end in zip(starts, ends, strict=True):
        first = int(values[begin])
        segments.append(Segment(names[first >> _ROW_BITS], first & mask, end - begin))
    return tuple(segments)


def flux_bfl_row_map(keys: Mapping[str, tuple[int, ...]], config: Mapping) -> RowMap:
    """Black Forest Labs' Flux.1 key names -> diffusers' FluxTransformer2DModel, any width."""
    width = config["num_attention_heads"] * config["attention_head_dim"]
    mapping: RowMap = {}

    def whole(src: str, dst: str) -> None:
        for suffix in (".weight", ".bias"):
            if src + suffix in keys:
                mapping[dst + suffix] = (Segment(src + suffix, 0, _rows(keys[src + suffix])),)

    def split(src: str, dsts: tuple[str, ...], sizes: tuple[int, ...]) -> None:
        for suffix in (".weight", ".bias"):
            if src + suffix not in keys:
                continue
            start = 0
            for dst, size in zip(dsts, sizes, strict=True):
                mapping[dst + suffix] = (Segment(src + suffix, start, size),)
                start += size

    def norm(src: str, dst: str) -> None:
        mapping[dst + ".weight"] = (Segment(src + ".scale", 0, _rows(keys[src + ".scale"])),)

    for src, dst in (
        ("time_in.in_layer", "time_text_embed.timestep_embedder.linear_1"),
        ("time_in.out_layer", "time_text_embed.timestep_embedder.linear_2"),
        ("vector_in.in_layer", "time_text_embed.text_embedder.linear_1"),
        ("vector_in.out_layer", "time_text_embed.text_embedder.linear_2"),
        ("guidance_in.in_layer", "time_text_embed.guidance_embedder.linear_1"),
        ("guidance_in.out_layer", "time_text_embed.guidance_embedder.linear_2"),
        ("txt_in", "context_embedder"),
        ("img_in", "x_embedder"),
        ("final_layer.linear", "proj_out"),
    ):
        whole(src, dst)
    qkv = (width, width, width)
    for i in range(config["num_layers"]):
        s, d = f"double_blocks.{i}.", f"transformer_blocks.{i}."
        whole(s + "img_mod.lin", d + "norm1.linear")
        whole(s + "txt_mod.lin", d + "norm1_context.linear")
        split(s + "img_attn.qkv", (d + "attn.to_q", d + "attn.to_k", d + "attn.to_v"), qkv)
        split(
            s + "txt_attn.qkv",
            (d + "attn.add_q_proj", d + "attn.add_k_proj", d + "attn.add_v_proj"),
            qkv,
        )
        norm(s + "img_attn.norm.query_norm", d + "attn.norm_q")
        norm(s + "img_attn.norm.key_norm", d + "attn.norm_k")
        norm(s + "txt_attn.norm.query_norm", d + "attn.norm_added_q")
        norm(s + "txt_attn.norm.key_norm", d + "attn.norm_added_k")
        whole(s + "img_mlp.0", d + "ff.net.0.proj")
        whole(s + "img_mlp.2", d + "ff.net.2")
        whole(s + "txt_mlp.0", d + "ff_context.net.0.proj")
        whole(s + "txt_mlp.2", d + "ff_context.net.2")
        whole(s + "img_attn.proj", d + "attn.to_out.0")
        whole(s + "txt_attn.proj", d + "attn.to_add_out")
    for i in range(config["num_single_layers"]):
        s, d = f"single_blocks.{i}.", f"single_transformer_blocks.{i}."
        mlp = _rows(keys[s + "linear1.weight"]) - 3 * width
        whole(s + "modulation.lin", d + "norm.linear")
        split(
            s + "linear1",
            (d + "attn.to_q", d + "attn.to_k", d + "attn.to_v", d + "proj_mlp"),
            (*qkv, mlp),
        )
        norm(s + "norm.query_norm", d + "attn.norm_q")
        norm(s + "norm.key_norm", d + "attn.norm_k")
        whole(s + "linear2", d + "proj_out")
    # BFL's final modulation is (shift, scale); diffusers' AdaLayerNormContinuous (scale, shift)
    for suffix in (".weight", ".bias"):
        key = "final_layer.adaLN_modulation.1" + suffix
        if key in keys:
            half = _rows(keys[key]) // 2
            mapping["norm_out.linear" + suffix] = (Segment(key, half, half), Segment(key, 0, half))
    return mapping


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


def unused_keys(header: FileHeader, detection: Detection, row_map: RowMap) -> list[str]:
    """File weights the row map never reads (a sign the architecture was misread)."""
    from .detect_z_image import DROPPED

    used = {s.key for segments in row_map.values() for s in segments}
    dropped = DROPPED if detection.family == "z-image" else ()
    keys = weight_keys(header, detection.prefix)
    if detection.family == "ltx2":  # the connectors beside the DiT: another component's
        keys = ltx2.dit_keys(keys)
    return sorted(
        detection.prefix + k for k in keys if detection.prefix + k not in used and k not in dropped
    )


# -- Wan 2.2 VAE ------------------------------------------------------------------------------

_WAN22_VAE_RENAMES = tuple(
    (re.compile(pattern), replacement)
    for pattern, replacement in (
        # the original Wan 2.2 VAE's module names (ComfyUI's wan2.2_vae keeps them) -> diffusers'
        (r"^conv1\.", "quant_conv."),
        (r"^conv2\.", "post_quant_conv."),
        (r"^(encoder|decoder)\.conv1\.", r"\1.conv_in."),
        (r"^(encoder|decoder)\.head\.0\.", r"\1.norm_out."),
        (r"^(encoder|decoder)\.head\.2\.", r"\1.conv_out."),
        (r"^(encoder|decoder)\.middle\.0\.", r"\1.mid_block.resnets.0."),
        (r"^(encoder|decoder)\.middle\.1\.", r"\1.mid_block.attentions.0."),
        (r"^(encoder|decoder)\.middle\.2\.", r"\1.mid_block.resnets.1."),
        # a level's list holds its residual blocks, then (not on the last level) its resample
        (
            r"^encoder\.downsamples\.(\d+)\.downsamples\.\d+\.(resample|time_conv)\.",
            r"encoder.down_blocks.\1.downsampler.\2.",
        ),
        (
            r"^encoder\.downsamples\.(\d+)\.downsamples\.(\d+)\.",
            r"encoder.down_blocks.\1.resnets.\2.",
        ),
        (
            r"^decoder\.upsamples\.(\d+)\.upsamples\.\d+\.(resample|time_conv)\.",
            r"decoder.up_blocks.\1.upsampler.\2.",
        ),
        (r"^decoder\.upsamples\.(\d+)\.upsamples\.(\d+)\.", r"decoder.up_blocks.\1.resnets.\2."),
        # inside a residual block: RMS norm, SiLU, conv, RMS norm, SiLU, dropout, conv
        (r"\.residual\.0\.", ".norm1."),
        (r"\.residual\.2\.", ".conv1."),
        (r"\.residual\.3\.", ".norm2."),
        (r"\.residual\.6\.", ".conv2."),
        (r"\.shortcut\.", ".conv_shortcut."),
    )
)


def wan22_vae_name(key: str) -> str:
    """An original Wan 2.2 VAE key -> diffusers' `AutoencoderKLWan` (is_residual) name.
    (diffusers' single-file converter knows only the Wan 2.1 VAE's layout.)"""
    for pattern, replacement in _WAN22_VAE_RENAMES:
        key = pattern.sub(replacement, key, count=1)
    return key
