"""Z-Image's single files, recognised from their headers: the DiT (`z_image_turbo_bf16`, in
the original key names ComfyUI keeps: fused `attention.qkv`, `attention.out`, `x_embedder`,
`final_layer`; or in diffusers' names) and its Qwen3 text encoder (`qwen_3_4b`, Hugging Face's
names under `model.`). The VAE is Flux's `ae`, recognised in detect.py.

Widths and counts are read off the shapes: the head width from `attention.q_norm` (one gain
per head channel), the heads from the fused q/k/v rows, the text width from `cap_embedder`.
What no weight shows (the rotary axes, theta, the norm's epsilon) comes from the published
config (`configs/z-image-turbo.json`); the tiny preset's rotary axes for its 16-wide heads.
"""

from __future__ import annotations

from typing import Any

from ...random_presets import random_dit_config
from ...single_file.detection import Detection, count_indices
from ...single_file.header import FileHeader

Z_IMAGE = "z-image"
TINY_AXES = [4, 6, 6]  # the tiny preset's rotary axes (its heads are 16 wide)
DROPPED = ("norm_final.weight",)
"""Original Z-Image keys no diffusers parameter takes (diffusers' converter drops them)."""


def z_image_layout(keys: Any, prefix: str) -> str | None:
    """ "comfy" (original names), "diffusers", or None when the keys are no Z-Image DiT's."""
    if f"{prefix}layers.0.adaLN_modulation.0.weight" not in keys:
        return None
    if f"{prefix}layers.0.attention.qkv.weight" in keys:
        return "comfy"
    if f"{prefix}layers.0.attention.to_q.weight" in keys:
        return "diffusers"
    return None


def z_image_dit(header: FileHeader, prefix: str, layout: str):
    """The Detection of a Z-Image DiT (role "unknown" with the reasons when a key is missing)."""
    keys = {k[len(prefix) :]: v.shape for k, v in header.tensors.items() if k.startswith(prefix)}
    comfy = layout == "comfy"
    names = {
        "embed": "x_embedder.weight" if comfy else "all_x_embedder.2-1.weight",
        "norm_q": "layers.0.attention.q_norm.weight"
        if comfy
        else "layers.0.attention.norm_q.weight",
        "caption": "cap_embedder.1.weight",
    }
    missing = [n for n in names.values() if n not in keys]
    if missing:
        return Detection(
            "unknown", Z_IMAGE, layout=layout, reasons=(f"Z-Image-like keys but no {missing[0]}",)
        )
    dim, patch_items = keys[names["embed"]]
    head_dim = keys[names["norm_q"]][0]
    if comfy:
        qkv_rows = keys["layers.0.attention.qkv.weight"][0]
    else:
        qkv_rows = sum(keys[f"layers.0.attention.to_{x}.weight"][0] for x in "qkv")
    heads = dim // head_dim
    kv_heads = (qkv_rows - dim) // (2 * head_dim)
    published = random_dit_config("random:z-image-turbo", "transformer")
    patch, f_patch = published["all_patch_size"][0], published["all_f_patch_size"][0]
    config = {
        **published,
        "dim": dim,
        "n_heads": heads,
        "n_kv_heads": kv_heads,
        "n_layers": count_indices(keys, r"layers\.(\d+)\.adaLN_modulation\.0\.weight$"),
        "n_refiner_layers": count_indices(
            keys, r"noise_refiner\.(\d+)\.adaLN_modulation\.0\.weight$"
        ),
        "cap_feat_dim": keys[names["caption"]][1],
        "in_channels": patch_items // (patch * patch * f_patch),
    }
    tiny = head_dim != 128
    if tiny:
        config["axes_dims"] = TINY_AXES
    variant = "tiny-z-image" if tiny else "z-image-turbo"
    reasons = (
        f"Z-Image DiT keys ({'attention.qkv, original names' if comfy else 'diffusers names'})"
        + (f" under {prefix!r}" if prefix else ""),
        f"width {dim}, {config['n_layers']} layers and {config['n_refiner_layers']} + "
        f"{config['n_refiner_layers']} refiners, {heads} heads of {head_dim}, text width "
        f"{config['cap_feat_dim']}",
    )
    return Detection("transformer", Z_IMAGE, variant, layout, prefix, config, reasons)
