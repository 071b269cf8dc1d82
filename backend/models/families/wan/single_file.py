"""Wan's DiT in a single file, recognised from its header: ComfyUI's and Wan's own key names
(`blocks.N.self_attn.q`) or diffusers' (`blocks.N.attn1.to_q`); the variant from the width,
the input channels and whether it embeds a CLIP image. The file's key mapping is
`single_file/convert.py`'s."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ...single_file.detection import TINY_WIDTH, Detection, count_indices, dit_head_dim
from ...single_file.header import FileHeader
from ...single_file.rows import RowMap, trace_converter
from ...single_file.vocabulary import Preset

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


def detect_vae(header: FileHeader) -> Detection | None:
    """A Wan 2.1 or 2.2 VAE (Wan's names or diffusers'), or None for other files."""
    keys = {k: v.shape for k, v in header.tensors.items()}
    if "encoder.conv1.weight" in keys and "decoder.conv1.weight" in keys and "conv2.weight" in keys:
        layout, first, post = "wan", "encoder.conv1.weight", "conv2.weight"
    elif "encoder.conv_in.weight" in keys and "post_quant_conv.weight" in keys:
        layout, first, post = "diffusers", "encoder.conv_in.weight", "post_quant_conv.weight"
        if len(keys[first]) != 5:
            return None  # a 2D (Flux/SD) VAE in diffusers' layout
    else:
        return None
    if len(keys[first]) != 5 or keys[first][2] == 1:
        return None  # a temporal kernel of 1: an image VAE in Wan's names (Qwen-Image 2.1's)
    base_dim, in_channels = keys[first][0], keys[first][1]
    z_dim = keys[post][0]
    version = "wan2.2" if z_dim == 48 else "wan2.1"
    reasons = (
        f"Wan video VAE keys ({layout} layout, 3D convolutions)",
        f"{z_dim} latent channels, base width {base_dim}, {in_channels} input channels",
    )
    config = {"base_dim": base_dim, "z_dim": z_dim, "in_channels": in_channels}
    return Detection("vae", "wan", f"{version} vae", layout, "", config, reasons)


_WAN21_VAE, _WAN22_VAE = "the Wan 2.1 VAE (wan_2.1_vae)", "the Wan 2.2 VAE (wan2.2_vae)"
_CLIP_VISION_H = "the CLIP ViT-H/14 image encoder (ComfyUI's clip_vision_h)"
FILE_PRESETS = {
    "tiny-wan": Preset(
        "tiny-wan", "WanPipeline", ("umt5",), "tiny-wan", _WAN21_VAE, pair_boundary=0.875
    ),
    "wan2.1-t2v-1.3b": Preset("random:wan2.1-t2v-1.3b", "WanPipeline", ("umt5",), vae=_WAN21_VAE),
    "wan-t2v-14b": Preset(
        "random:wan2.1-t2v-14b", "WanPipeline", ("umt5",), "random:wan2.2-t2v-a14b", _WAN21_VAE
    ),
    "tiny-wan-i2v": Preset(
        "tiny-wan-i2v",
        "WanImageToVideoPipeline",
        ("umt5",),
        vae=_WAN21_VAE,
        image_encoder="the tiny CLIP vision encoder",
    ),
    # Wan 2.1 I2V 14B: the T2V 14B preset's scheduler (UniPC, shift 3: the 480p model's) and VAE
    "wan2.1-i2v-14b": Preset(
        "random:wan2.1-t2v-14b",
        "WanImageToVideoPipeline",
        ("umt5",),
        vae=_WAN21_VAE,
        image_encoder=_CLIP_VISION_H,
    ),
    "tiny-wan2.2-ti2v-5b": Preset(
        "tiny-wan2.2-ti2v-5b", "WanPipeline", ("umt5",), vae="the tiny Wan 2.2 VAE"
    ),
    "wan2.2-ti2v-5b": Preset("random:wan2.2-ti2v-5b", "WanPipeline", ("umt5",), vae=_WAN22_VAE),
    "tiny-wan2.2-i2v-a14b": Preset(
        "", "WanImageToVideoPipeline", ("umt5",), "tiny-wan2.2-i2v-a14b", _WAN21_VAE
    ),
    "wan2.2-i2v-a14b": Preset(
        "", "WanImageToVideoPipeline", ("umt5",), "random:wan2.2-i2v-a14b", _WAN21_VAE
    ),
}
"""The presets Wan's single files run on (`FileSpec.presets`); the tiny Wan pair
switches experts at 0.875 (the other pairs at their preset's boundary_ratio)."""


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


def vae_key_names(state: dict[str, Any], detection: Detection) -> dict[str, Any]:
    """A Wan VAE file's state in diffusers' names: the Wan 2.2 VAE's original names by the
    renames above, the Wan 2.1 VAE's by diffusers' converter; diffusers' own layout as it is."""
    if detection.layout != "wan":
        return state
    if detection.variant == "wan2.2 vae":
        return {wan22_vae_name(k): v for k, v in state.items()}
    from diffusers.loaders.single_file_utils import convert_wan_vae_to_diffusers

    return convert_wan_vae_to_diffusers(state)
