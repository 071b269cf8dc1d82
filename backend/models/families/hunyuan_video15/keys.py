"""HunyuanVideo 1.5 single files as ComfyUI users hold them: the DiT in Tencent's original key
names (`hunyuanvideo1.5_720p_t2v_fp16.safetensors`, `..._480p_i2v_...`: bf16, fp16, fp8_scaled
or GGUF) and the VAE (`hunyuanvideo15_vae_fp16.safetensors`) in the original names too, or
either in diffusers' names.

diffusers 0.42 has no single-file converter for HunyuanVideo 1.5, so the key mapping is written
here from the module names of the two architectures (Tencent's `double_blocks.N.img_attn_q` and
`txt_in.individual_token_refiner`, diffusers' `HunyuanVideo15Transformer3DModel`): renames,
the token refiner's fused q/k/v split in three row ranges, and the final modulation's two
halves swapped ((shift, scale) in the original, (scale, shift) in diffusers).

What a header cannot show: text- or image-to-video and 480p or 720p have the same weights'
shapes (both tasks hold the image projection `vision_in`). ComfyUI's file names carry both
(`_480p_i2v_`), so they are read off the name, and the reasons say so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ...single_file.detection import count_indices
from ...single_file.header import FileHeader

MARKER = "double_blocks.0.img_attn_q.weight"
"""The key that tells a HunyuanVideo 1.5 DiT in the original names (Flux: `img_attn.qkv`,
HunyuanVideo 1.0: `img_attn_qkv`)."""
DIFFUSERS_MARKER = "context_embedder_2.linear_3.weight"
TARGET_SIZES = {"480p": 640, "720p": 960}
"""The resolution's target size, which sizes the pipeline's default video (diffusers' configs)."""
TINY_TARGET_SIZES = {"t2v": 640, "i2v": 64}
"""The tiny presets' (their image-to-video model's target size makes its videos tiny)."""
SCHEDULER_SHIFTS = {("480p", "t2v"): 5.0, ("480p", "i2v"): 5.0, ("720p", "t2v"): 9.0}
SCHEDULER_SHIFTS[("720p", "i2v")] = 7.0
"""The flow-matching shift per resolution and task (Tencent's and diffusers' configs)."""


def task_and_resolution(name: str) -> tuple[str, str, tuple[str, ...]]:
    """("t2v" | "i2v", "480p" | "720p", reasons), read off a ComfyUI file name."""
    lower = name.lower()
    reasons = []
    if "i2v" in lower:
        task = "i2v"
        reasons.append("image-to-video: the file name says i2v (the header cannot)")
    elif "t2v" in lower:
        task = "t2v"
        reasons.append("text-to-video: the file name says t2v (the header cannot)")
    else:
        task = "t2v"
        reasons.append("text-to-video: the file name names no task (t2v/i2v), taken as t2v")
    found = re.search(r"(480|720)p", lower)
    resolution = f"{found.group(1)}p" if found else "480p"
    if not found:
        reasons.append("480p: the file name names no resolution (480p/720p), taken as 480p")
    return task, resolution, tuple(reasons)


def dit_config(keys: Mapping[str, tuple[int, ...]], head_dim: int) -> dict[str, Any]:
    """diffusers' `HunyuanVideo15Transformer3DModel` config from the shapes of the original
    keys (prefix stripped)."""
    patch = keys["img_in.proj.weight"]
    width, in_channels, patch_t, patch_size = patch[0], patch[1], patch[2], patch[3]
    out = keys["final_layer.linear.weight"][0] // (patch_t * patch_size * patch_size)
    ffn = keys["double_blocks.0.img_mlp.fc1.weight"][0]
    real = head_dim == 128
    return {
        "_class_name": "HunyuanVideo15Transformer3DModel",
        "in_channels": in_channels,
        "out_channels": out,
        "num_attention_heads": width // head_dim,
        "attention_head_dim": head_dim,
        "num_layers": count_indices(keys, r"double_blocks\.(\d+)\.img_attn_q\.weight$"),
        "num_refiner_layers": count_indices(
            keys, r"txt_in\.individual_token_refiner\.blocks\.(\d+)\.norm1\.weight$"
        ),
        "mlp_ratio": ffn / width,
        "patch_size": patch_size,
        "patch_size_t": patch_t,
        "qk_norm": "rms_norm",
        "text_embed_dim": keys["txt_in.input_embedder.weight"][1],
        "text_embed_2_dim": keys["byt5_in.layernorm.weight"][0],
        "image_embed_dim": keys["vision_in.proj.0.weight"][0],
        "rope_theta": 256.0,
        "rope_axes_dim": [16, 56, 56] if real else [4, 6, 6],
        "use_meanflow": False,
    }


def diffusers_dit_config(keys: Mapping[str, tuple[int, ...]], head_dim: int) -> dict[str, Any]:
    """The same config from a DiT saved in diffusers' names."""
    patch = keys["x_embedder.proj.weight"]
    width = patch[0]
    original = {
        "img_in.proj.weight": patch,
        "final_layer.linear.weight": keys["proj_out.weight"],
        "double_blocks.0.img_mlp.fc1.weight": keys["transformer_blocks.0.ff.net.0.proj.weight"],
        "txt_in.input_embedder.weight": keys["context_embedder.proj_in.weight"],
        "byt5_in.layernorm.weight": keys["context_embedder_2.norm.weight"],
        "vision_in.proj.0.weight": keys["image_embedder.norm_in.weight"],
    }
    for i in range(count_indices(keys, r"transformer_blocks\.(\d+)\.attn\.to_q\.weight$")):
        original[f"double_blocks.{i}.img_attn_q.weight"] = (width, width)
    refiner = r"context_embedder\.token_refiner\.refiner_blocks\.(\d+)\.norm1\.weight$"
    for i in range(count_indices(keys, refiner)):
        original[f"txt_in.individual_token_refiner.blocks.{i}.norm1.weight"] = (width,)
    return dit_config(original, head_dim)


# -- the DiT's key mapping (convert.hunyuan15_row_map applies it) ------------------------------

RENAMES = (
    ("time_in.mlp.0", "time_embed.timestep_embedder.linear_1"),
    ("time_in.mlp.2", "time_embed.timestep_embedder.linear_2"),
    ("txt_in.t_embedder.mlp.0", "context_embedder.time_text_embed.timestep_embedder.linear_1"),
    ("txt_in.t_embedder.mlp.2", "context_embedder.time_text_embed.timestep_embedder.linear_2"),
    ("txt_in.c_embedder.linear_1", "context_embedder.time_text_embed.text_embedder.linear_1"),
    ("txt_in.c_embedder.linear_2", "context_embedder.time_text_embed.text_embedder.linear_2"),
    ("txt_in.input_embedder", "context_embedder.proj_in"),
    ("byt5_in.layernorm", "context_embedder_2.norm"),
    ("byt5_in.fc1", "context_embedder_2.linear_1"),
    ("byt5_in.fc2", "context_embedder_2.linear_2"),
    ("byt5_in.fc3", "context_embedder_2.linear_3"),
    ("vision_in.proj.0", "image_embedder.norm_in"),
    ("vision_in.proj.1", "image_embedder.linear_1"),
    ("vision_in.proj.3", "image_embedder.linear_2"),
    ("vision_in.proj.4", "image_embedder.norm_out"),
    ("img_in.proj", "x_embedder.proj"),
    ("cond_type_embedding", "cond_type_embed"),
    ("final_layer.linear", "proj_out"),
)
REFINER_PARTS = (
    ("norm1", "norm1"),
    ("self_attn_proj", "attn.to_out.0"),
    ("norm2", "norm2"),
    ("mlp.fc1", "ff.net.0.proj"),
    ("mlp.fc2", "ff.net.2"),
    ("adaLN_modulation.1", "norm_out.linear"),
)
BLOCK_PARTS = (
    ("img_mod.linear", "norm1.linear"),
    ("txt_mod.linear", "norm1_context.linear"),
    ("img_attn_q", "attn.to_q"),
    ("img_attn_k", "attn.to_k"),
    ("img_attn_v", "attn.to_v"),
    ("img_attn_q_norm", "attn.norm_q"),
    ("img_attn_k_norm", "attn.norm_k"),
    ("img_attn_proj", "attn.to_out.0"),
    ("txt_attn_q", "attn.add_q_proj"),
    ("txt_attn_k", "attn.add_k_proj"),
    ("txt_attn_v", "attn.add_v_proj"),
    ("txt_attn_q_norm", "attn.norm_added_q"),
    ("txt_attn_k_norm", "attn.norm_added_k"),
    ("txt_attn_proj", "attn.to_add_out"),
    ("img_mlp.fc1", "ff.net.0.proj"),
    ("img_mlp.fc2", "ff.net.2"),
    ("txt_mlp.fc1", "ff_context.net.0.proj"),
    ("txt_mlp.fc2", "ff_context.net.2"),
)


# -- the VAE -----------------------------------------------------------------------------------

VAE_MARKER = "decoder.conv_in.conv.weight"
_VAE_RENAMES = tuple(
    (re.compile(pattern), replacement)
    for pattern, replacement in (
        (r"^encoder\.down\.(\d+)\.block\.(\d+)\.", r"encoder.down_blocks.\1.resnets.\2."),
        (r"^encoder\.down\.(\d+)\.downsample\.", r"encoder.down_blocks.\1.downsamplers.0."),
        (r"^decoder\.up\.(\d+)\.block\.(\d+)\.", r"decoder.up_blocks.\1.resnets.\2."),
        (r"^decoder\.up\.(\d+)\.upsample\.", r"decoder.up_blocks.\1.upsamplers.0."),
        (r"^(encoder|decoder)\.mid\.block_1\.", r"\1.mid_block.resnets.0."),
        (r"^(encoder|decoder)\.mid\.block_2\.", r"\1.mid_block.resnets.1."),
        (r"^(encoder|decoder)\.mid\.attn_1\.(q|k|v)\.", r"\1.mid_block.attentions.0.to_\2."),
        (r"^(encoder|decoder)\.mid\.attn_1\.", r"\1.mid_block.attentions.0."),
    )
)


def vae_name(key: str) -> str:
    """An original HunyuanVideo 1.5 VAE key -> diffusers' `AutoencoderKLHunyuanVideo15` name
    (diffusers' names pass unchanged)."""
    for pattern, replacement in _VAE_RENAMES:
        key = pattern.sub(replacement, key, count=1)
    return key


def vae_facts(header: FileHeader) -> tuple[str, dict[str, Any], tuple[str, ...]] | None:
    """(layout, config, reasons) of a HunyuanVideo 1.5 VAE file, None for any other file."""
    keys = {k: v.shape for k, v in header.tensors.items()}
    if VAE_MARKER not in keys or "encoder.conv_in.conv.weight" not in keys:
        return None
    if "encoder.norm_out.gamma" not in keys:  # HunyuanVideo 1.0's VAE: group norms
        return None
    if len(keys[VAE_MARKER]) != 5:
        return None
    if any(k.startswith("encoder.down.") for k in keys):
        layout = "original"
    elif any(k.startswith("encoder.down_blocks.") for k in keys):
        layout = "diffusers"
    else:
        return None
    latent = keys[VAE_MARKER][1]
    base = keys["encoder.conv_in.conv.weight"][0]
    reasons = (
        f"HunyuanVideo 1.5 video VAE keys ({layout} layout: causal 3D convolutions "
        "conv_in.conv, RMS norms' gamma)",
        f"{latent} latent channels, base width {base}",
    )
    return layout, {"latent_channels": latent, "base_width": base}, reasons
