"""Wan's DiT in a single file, recognised from its header: ComfyUI's and Wan's own key names
(`blocks.N.self_attn.q`) or diffusers' (`blocks.N.attn1.to_q`); the variant from the width,
the input channels and whether it embeds a CLIP image. The file's key mapping is
`single_file/convert.py`'s."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...single_file.detection import TINY_WIDTH, Detection, count_indices, dit_head_dim
from ...single_file.header import FileHeader
from ...single_file.rows import RowMap, trace_converter

_WAN_NAMES = {
    # (width, input channels, image embedding) -> variant
    (1536, 16, False): "wan2.1-t2v-1.3b",
    (5120, 16, False): "wan-t2v-14b",  # Wan 2.1 T2V 14B, or one expert of Wan 2.2 T2V A14B
    (5120, 36, True): "wan2.1-i2v-14b",
    (5120, 36, False): "wan2.2-i2v-a14b",  # one expert of the pair
    (3072, 48, False): "wan2.2-ti2v-5b",
    (TINY_WIDTH, 16, False): "tiny-wan",
    (TINY_WIDTH, 36, True): "tiny-wan-i2v",
    (TINY_WIDTH, 36, False): "tiny-wan2.2-i2v-a14b",
    (TINY_WIDTH, 48, False): "tiny-wan2.2-ti2v-5b",
}


def _wan_dit(header: FileHeader, prefix: str, layout: str) -> Detection:
    keys = {k[len(prefix) :]: v.shape for k, v in header.tensors.items() if k.startswith(prefix)}
    if layout == "diffusers":
        names = {
            "patch": "patch_embedding.weight",
            "text": "condition_embedder.text_embedder.linear_1.weight",
            "ffn": "blocks.0.ffn.net.0.proj.weight",
            "head": "proj_out.weight",
            "img": "condition_embedder.image_embedder.norm1.weight",
            "freq": "condition_embedder.time_embedder.linear_1.weight",
        }
        block = r"blocks\.(\d+)\.attn1\.to_q\.weight$"
    else:
        names = {
            "patch": "patch_embedding.weight",
            "text": "text_embedding.0.weight",
            "ffn": "blocks.0.ffn.0.weight",
            "head": "head.head.weight",
            "img": "img_emb.proj.0.weight",
            "freq": "time_embedding.0.weight",
        }
        block = r"blocks\.(\d+)\.self_attn\.q\.weight$"
    missing = [n for k, n in names.items() if k != "img" and n not in keys]
    if missing:
        return Detection(
            "unknown", "wan", layout=layout, reasons=(f"Wan-like keys but no {missing[0]}",)
        )
    patch = keys[names["patch"]]
    if len(patch) != 5:
        return Detection("unknown", "wan", reasons=(f"patch_embedding has shape {patch}",))
    width, in_channels, patch_size = patch[0], patch[1], tuple(patch[2:])
    has_image = names["img"] in keys
    num_layers = count_indices(keys, block)
    reasons = [
        f"Wan DiT keys ({'blocks.N.self_attn.q' if layout == 'wan' else 'blocks.N.attn1.to_q'})"
        + (f" under {prefix!r}" if prefix else ""),
        f"width {width}, {num_layers} blocks, {in_channels} input channels"
        + (", image embedding (img_emb)" if has_image else ""),
    ]
    variant = _WAN_NAMES.get((width, in_channels, has_image))
    if variant is None:
        return Detection(
            "unknown",
            "wan",
            layout=layout,
            reasons=(*reasons, "no Wan 2.1/2.2 variant has this width and channel count"),
        )
    head_dim = dit_head_dim(width, "Wan or Flux")
    config: dict[str, Any] = {
        "_class_name": "WanTransformer3DModel",
        "patch_size": list(patch_size),
        "num_attention_heads": width // head_dim,
        "attention_head_dim": head_dim,
        "in_channels": in_channels,
        "out_channels": keys[names["head"]][0] // (patch_size[0] * patch_size[1] * patch_size[2]),
        "text_dim": keys[names["text"]][1],
        "freq_dim": keys[names["freq"]][1],
        "ffn_dim": keys[names["ffn"]][0],
        "num_layers": num_layers,
        "cross_attn_norm": True,
        "qk_norm": "rms_norm_across_heads",
        "eps": 1e-6,
        "image_dim": keys[names["img"]][0] if has_image else None,
        "added_kv_proj_dim": width if has_image else None,
        "rope_max_seq_len": 1024,
    }
    if "img_emb.emb_pos" in keys:
        config["pos_embed_seq_len"] = keys["img_emb.emb_pos"][1]
    reasons.append(f"head width {head_dim} ({width // head_dim} heads)")
    return Detection("transformer", "wan", variant, layout, prefix, config, tuple(reasons))


def detect_dit(header: FileHeader, prefix: str) -> Detection | None:
    """A Wan DiT in ComfyUI's/Wan's key names under `prefix`; None when the file has none."""
    if f"{prefix}blocks.0.self_attn.q.weight" in header.tensors:
        return _wan_dit(header, prefix, "wan")
    return None


def detect_diffusers_dit(header: FileHeader) -> Detection | None:
    """A Wan DiT in diffusers' key names; None when the file has none."""
    keys = header.tensors
    if "blocks.0.attn1.to_q.weight" in keys and "scale_shift_table" in keys:
        return _wan_dit(header, "", "diffusers")
    return None


# -- key mapping ------------------------------------------------------------------------


def _wan_converter():
    from diffusers.loaders.single_file_utils import convert_wan_transformer_to_diffusers

    return convert_wan_transformer_to_diffusers


def dit_row_map(keys: Mapping[str, tuple[int, ...]], config: Mapping) -> RowMap:
    """ComfyUI's/Wan's key names -> diffusers', as a row map: diffusers' own converter
    (`convert_wan_transformer_to_diffusers`) run on row traces."""
    return trace_converter(_wan_converter(), keys)
