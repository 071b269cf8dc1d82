"""Flux.1's DiT in a single file, recognised from its header: Black Forest Labs' key names
(`double_blocks.N.img_attn.qkv`) or diffusers' (`transformer_blocks.N.attn.to_q`); dev or
schnell from the guidance embedding."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...single_file.detection import (
    REAL_HEAD_DIM,
    TINY_WIDTH,
    Detection,
    count_indices,
    dit_head_dim,
)
from ...single_file.header import FileHeader
from ...single_file.rows import RowMap, Segment, rows_of
from ...single_file.vocabulary import Preset


def _flux_config(
    width: int, in_channels: int, layers: int, singles: int, joint: int, pooled: int, guided: bool
) -> dict[str, Any]:
    head_dim = dit_head_dim(width, "Wan or Flux")
    return {
        "_class_name": "FluxTransformer2DModel",
        "patch_size": 1,
        "in_channels": in_channels,
        "out_channels": None,
        "num_layers": layers,
        "num_single_layers": singles,
        "attention_head_dim": head_dim,
        "num_attention_heads": width // head_dim,
        "joint_attention_dim": joint,
        "pooled_projection_dim": pooled,
        "guidance_embeds": guided,
        "axes_dims_rope": [16, 56, 56] if head_dim == REAL_HEAD_DIM else [4, 6, 6],
    }


def _flux_dit(header: FileHeader, prefix: str) -> Detection:
    keys = {k[len(prefix) :]: v.shape for k, v in header.tensors.items() if k.startswith(prefix)}
    need = ("img_in.weight", "txt_in.weight", "vector_in.in_layer.weight")
    missing = [n for n in need if n not in keys]
    if missing:
        return Detection("unknown", "flux", reasons=(f"Flux-like keys but no {missing[0]}",))
    width, in_channels = keys["img_in.weight"]
    guided = "guidance_in.in_layer.weight" in keys
    layers = count_indices(keys, r"double_blocks\.(\d+)\.img_attn\.qkv\.weight$")
    singles = count_indices(keys, r"single_blocks\.(\d+)\.linear1\.weight$")
    joint, pooled = keys["txt_in.weight"][1], keys["vector_in.in_layer.weight"][1]
    reasons = [
        "Flux DiT keys in Black Forest Labs' layout (double_blocks.N.img_attn.qkv)"
        + (f" under {prefix!r}" if prefix else ""),
        f"width {width}, {layers} double + {singles} single blocks, "
        + ("guidance embedding (dev)" if guided else "no guidance embedding (schnell)"),
    ]
    try:
        config = _flux_config(width, in_channels, layers, singles, joint, pooled, guided)
    except ValueError as exc:
        return Detection("unknown", "flux", reasons=(*reasons, str(exc)))
    variant = _flux_variant(width, guided)
    return Detection("transformer", "flux", variant, "bfl", prefix, config, tuple(reasons))


def _flux_dit_diffusers(header: FileHeader) -> Detection:
    keys = {k: v.shape for k, v in header.tensors.items()}
    width, in_channels = keys["x_embedder.weight"]
    guided = "time_text_embed.guidance_embedder.linear_1.weight" in keys
    layers = count_indices(keys, r"transformer_blocks\.(\d+)\.attn\.to_q\.weight$")
    singles = count_indices(keys, r"single_transformer_blocks\.(\d+)\.attn\.to_q\.weight$")
    joint = keys["context_embedder.weight"][1]
    pooled = keys["time_text_embed.text_embedder.linear_1.weight"][1]
    reasons = (
        "Flux DiT keys in diffusers' layout (transformer_blocks.N.attn.to_q)",
        f"width {width}, {layers} double + {singles} single blocks",
    )
    try:
        config = _flux_config(width, in_channels, layers, singles, joint, pooled, guided)
    except ValueError as exc:
        return Detection("unknown", "flux", reasons=(*reasons, str(exc)))
    variant = _flux_variant(width, guided)
    return Detection("transformer", "flux", variant, "diffusers", "", config, reasons)


def _flux_variant(width: int, guided: bool) -> str:
    if width == TINY_WIDTH:
        return "tiny-flux"
    return "flux.1-dev" if guided else "flux.1-schnell"


def detect_dit(header: FileHeader, prefix: str) -> Detection | None:
    """A Flux.1 DiT in BFL's key names under `prefix`; None when the file has none."""
    if f"{prefix}double_blocks.0.img_attn.qkv.weight" in header.tensors:
        return _flux_dit(header, prefix)
    return None


def detect_diffusers_dit(header: FileHeader) -> Detection | None:
    """A Flux.1 DiT in diffusers' key names; None when the file has none."""
    keys = header.tensors
    if "transformer_blocks.0.attn.to_q.weight" in keys and "x_embedder.weight" in keys:
        return _flux_dit_diffusers(header)
    return None


def flux_bfl_row_map(keys: Mapping[str, tuple[int, ...]], config: Mapping) -> RowMap:
    """Black Forest Labs' Flux.1 key names -> diffusers' FluxTransformer2DModel, any width."""
    width = config["num_attention_heads"] * config["attention_head_dim"]
    mapping: RowMap = {}

    def whole(src: str, dst: str) -> None:
        for suffix in (".weight", ".bias"):
            if src + suffix in keys:
                mapping[dst + suffix] = (Segment(src + suffix, 0, rows_of(keys[src + suffix])),)

    def split(src: str, dsts: tuple[str, ...], sizes: tuple[int, ...]) -> None:
        for suffix in (".weight", ".bias"):
            if src + suffix not in keys:
                continue
            start = 0
            for dst, size in zip(dsts, sizes, strict=True):
                mapping[dst + suffix] = (Segment(src + suffix, start, size),)
                start += size

    def norm(src: str, dst: str) -> None:
        mapping[dst + ".weight"] = (Segment(src + ".scale", 0, rows_of(keys[src + ".scale"])),)

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
        mlp = rows_of(keys[s + "linear1.weight"]) - 3 * width
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
            half = rows_of(keys[key]) // 2
            mapping["norm_out.linear" + suffix] = (Segment(key, half, half), Segment(key, 0, half))
    return mapping


dit_row_map = flux_bfl_row_map


def text_widths(config: Mapping) -> tuple[tuple[str, int, str], ...]:
    """T5 (the second encoder) at the DiT's text width, CLIP at its pooled width."""
    return (
        ("text_encoder_2", config["joint_attention_dim"], "text embeddings"),
        ("text_encoder", config["pooled_projection_dim"], "pooled CLIP embeddings"),
    )


def detect_vae(header: FileHeader) -> Detection | None:
    """A 2D KL autoencoder (ldm or diffusers names): Flux's when it has 16 latent channels
    (family "flux"), else one of no family (tried after every family's own VAE)."""
    keys = {k: v.shape for k, v in header.tensors.items()}
    for layout, first, latent in (
        ("ldm", "encoder.conv_in.weight", "encoder.conv_out.weight"),
        ("diffusers", "encoder.conv_in.weight", "encoder.conv_out.weight"),
    ):
        if first in keys and len(keys[first]) == 4 and latent in keys:
            layout = "ldm" if "encoder.down.0.block.0.conv1.weight" in keys else "diffusers"
            z2 = keys[latent][0]
            reasons = (
                f"2D autoencoder keys ({layout} layout)",
                f"{z2 // 2} latent channels, base width {keys[first][0]}",
            )
            family = "flux" if z2 == 32 else None
            variant = "flux vae" if family else f"kl vae ({z2 // 2} channels)"
            config = {"latent_channels": z2 // 2, "base_width": keys[first][0]}
            return Detection("vae", family, variant, layout, "", config, reasons)
    return None


_FLUX_VAE = "the Flux VAE (ae)"
FILE_PRESETS = {
    "tiny-flux": Preset("tiny-flux", "FluxPipeline", ("clip", "t5"), vae=_FLUX_VAE),
    "flux.1-dev": Preset("random:flux.1-dev", "FluxPipeline", ("clip", "t5"), vae=_FLUX_VAE),
    "flux.1-schnell": Preset(
        "random:flux.1-schnell", "FluxPipeline", ("clip", "t5"), vae=_FLUX_VAE
    ),
}
"""The presets Flux.1's single files run on (`FileSpec.presets`)."""
