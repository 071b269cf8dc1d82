"""HunyuanVideo 1.5's single files, recognised from their headers: the DiT (ComfyUI's
`hunyuanvideo1.5_*`, in Tencent's original names, or in diffusers' names), its VAE, its
Qwen2.5-VL text encoder (`qwen_2.5_vl_7b`, Hugging Face's names, with the shapes of its vision
tower, which Qwen-Image-Edit reads; ByT5 is a T5, recognised in detect.py) and the SigLIP
vision tower of image-to-video (`sigclip_vision_patch14_384`).

The name tables and the config readers are in `keys.py`; the head width is 128 for
the real model, 16 for the tiny preset (whose DiT is 64 wide).
"""

from __future__ import annotations

import re

from ...single_file.detection import (
    REAL_HEAD_DIM,
    TINY_WIDTH,
    Detection,
    count_indices,
    dit_head_dim,
    language_model_prefix,
    stripped,
)
from ...single_file.header import FileHeader
from . import keys as hunyuan

# -- the DiT and the VAE ----------------------------------------------------------------------


def hunyuan15_dit(header: FileHeader, prefix: str, layout: str) -> Detection:
    """The Detection of a HunyuanVideo 1.5 DiT, in Tencent's names ("original") or diffusers'
    (role "unknown" with the reasons when a key is missing)."""
    keys = {k[len(prefix) :]: v.shape for k, v in header.tensors.items() if k.startswith(prefix)}
    patch = keys.get("img_in.proj.weight" if layout == "original" else "x_embedder.proj.weight")
    if patch is None or len(patch) != 5:
        return Detection(
            "unknown", "hunyuanvideo1.5", reasons=(f"HunyuanVideo 1.5-like keys, patch {patch}",)
        )
    width = patch[0]
    reasons = [
        "HunyuanVideo 1.5 DiT keys "
        + (
            "in Tencent's original layout (double_blocks.N.img_attn_q, byt5_in, vision_in)"
            if layout == "original"
            else "in diffusers' layout (transformer_blocks.N, context_embedder_2)"
        )
        + (f" under {prefix!r}" if prefix else "")
    ]
    try:
        head_dim = dit_head_dim(width, "HunyuanVideo 1.5")
        read = hunyuan.dit_config if layout == "original" else hunyuan.diffusers_dit_config
        config = read(keys, head_dim)
    except (KeyError, ValueError) as exc:
        return Detection("unknown", "hunyuanvideo1.5", reasons=(*reasons, f"no {exc}"))
    task, resolution, named = hunyuan.task_and_resolution(header.name)
    tiny = width == TINY_WIDTH
    config["task_type"] = task
    config["target_size"] = (
        hunyuan.TINY_TARGET_SIZES[task] if tiny else hunyuan.TARGET_SIZES[resolution]
    )
    reasons.append(
        f"width {width}, {config['num_layers']} double-stream blocks, "
        f"{config['num_refiner_layers']} token-refiner blocks, {config['in_channels']} input "
        f"channels, head width {head_dim}"
    )
    reasons.extend(named)
    if tiny:
        variant = "tiny-hunyuanvideo1.5" + ("-i2v" if task == "i2v" else "")
    else:
        variant = f"hunyuanvideo1.5-{resolution}-{task}"
    return Detection(
        "transformer", "hunyuanvideo1.5", variant, layout, prefix, config, tuple(reasons)
    )


def hunyuan15_vae(header: FileHeader) -> Detection | None:
    """The Detection of a HunyuanVideo 1.5 VAE, or None for other files."""
    found = hunyuan.vae_facts(header)
    if found is None:
        return None
    layout, config, reasons = found
    return Detection("vae", "hunyuanvideo1.5", "hunyuanvideo1.5 vae", layout, "", config, reasons)


# -- the text encoder -------------------------------------------------------------------------

# Qwen2.5-VL's text model: rotary sections per head width (the 7B's 128; the presets' 8)
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
_SIGLIP_HEADS = {1152: 16, 768: 12}
_SIGLIP_IMAGE_SIZES = {(27, 14): 384}
"""Patches per side and patch size -> the image size SigLIP's config names, where the patches do
not tile it (so400m-patch14-384: 27 patches of 14 px, the last 6 pixels never seen)."""


def siglip_vision(header: FileHeader) -> Detection | None:
    """A SigLIP vision tower (no class embedding, unlike CLIP), with or without `vision_model.`."""
    keys = {k: v.shape for k, v in header.tensors.items()}
    prefix = next(
        (
            p
            for p in ("vision_model.", "")
            if f"{p}embeddings.patch_embedding.weight" in keys
            and f"{p}encoder.layers.0.layer_norm1.weight" in keys
        ),
        None,
    )
    if prefix is None or f"{prefix}embeddings.class_embedding" in keys:
        return None
    keys = {k[len(prefix) :]: v for k, v in keys.items() if k.startswith(prefix)}
    hidden, channels, patch_size = keys["embeddings.patch_embedding.weight"][:3]
    side = round(keys["embeddings.position_embedding.weight"][0] ** 0.5)
    layers = count_indices(keys, r"encoder\.layers\.(\d+)\.self_attn\.q_proj\.weight$")
    heads = _SIGLIP_HEADS.get(hidden, hidden // 8)
    image_size = _SIGLIP_IMAGE_SIZES.get((side, patch_size), side * patch_size)
    config = {
        "_class_name": "SiglipVisionModel",
        "hidden_size": hidden,
        "intermediate_size": keys["encoder.layers.0.mlp.fc1.weight"][0],
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_channels": channels,
        "image_size": image_size,
        "patch_size": patch_size,
        "vision_use_head": "head.probe" in keys,
    }
    reasons = (
        "SigLIP vision tower keys (encoder.layers.N, no class embedding)"
        + (f" under {prefix!r}" if prefix else ""),
        f"width {hidden}, {layers} layers, {heads} heads, {image_size} px images in "
        f"{patch_size}-px patches",
    )
    return Detection(
        "clip_vision", "siglip", f"siglip vision {hidden}", "hf", prefix, config, reasons
    )
