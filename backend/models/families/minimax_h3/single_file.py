"""MiniMax H3's DiT in a single file (Comfy-Org/MiniMax-H3's `minimax_h3_*`: the original key
names, `blocks.N.attn.qkv_proj` with its rows `[q; k; v]`, `condition_proj`,
`audio_patch_proj`, `final_layer`; with or without ComfyUI's prefix), the released one (its
timestep MLP, `time_embedder`) or the pruned-AdaLN one (`adaln_t_table`: `pruned.py`).

Recognised and its config read off the shapes, so `paradit models` names it; so are the video
and audio VAE files in ComfyUI's names (below; `vae_files.py` reads them into diffusers'
VAEs). The pipeline from these files: `files.py`. A DiT of 8-wide heads is the tiny preset's
(`tiny-` variants), one of 128-wide heads the released model's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...single_file.detection import REAL_HEAD_DIM, Detection, count_indices, stripped
from ...single_file.header import FileHeader

MINIMAX_H3 = "minimax-h3"
TABLE = "adaln_t_table"
"""The pruned files' curve table, (grid points, curve width), float32."""
CURVE_DIM = "time_embed_dim"
"""A pruned DiT's AdaLN input: the curve's width (8 in the published files)."""
DIT_PREFIX = "model.diffusion_model."
"""ComfyUI's prefix, when a file carries it (the published H3 files do not)."""
REAL_ROPE_FREQ_DIM = 16
DIT_CLASS = "MiniMaxH3Transformer3DModel"
PRUNED_CLASS = "MiniMaxH3PrunedTransformer3DModel"
"""The pruned DiT's class (`pruned.py`: paradit's, not diffusers')."""
MARKS = ("blocks.0.adaln_proj.linear.weight", "condition_proj.weight", "audio_patch_proj.weight")
"""Keys every H3 DiT file holds (the AdaLN projection of a block, the text and audio inputs)."""


def detect_dit(header: FileHeader, prefix: str) -> Detection | None:
    """An H3 DiT under `prefix` (original names); None when the file has none."""
    keys = stripped(header, prefix)
    if not all(mark in keys for mark in MARKS) or "blocks.0.attn.qkv_proj.weight" not in keys:
        return None
    config = dit_config(keys)
    pruned = TABLE in keys
    if pruned:
        config = pruned_config(keys, config)
    heads, head_dim = config["num_attention_heads"], config["attention_head_dim"]
    where = f" under {prefix!r}" if prefix else ""
    reasons = (
        f"MiniMax H3 DiT keys (condition_proj, audio_patch_proj, blocks.N.adaln_proj){where}",
        f"width {config['hidden_size']}, {config['num_layers']} blocks, {heads} heads of "
        f"{head_dim}, text width {config['text_dim']}",
        f"pruned AdaLN: {TABLE} {list(keys[TABLE])} in place of the timestep MLP"
        if pruned
        else "its timestep MLP (time_embedder)",
    )
    variant = f"{MINIMAX_H3}-pruned" if pruned else MINIMAX_H3
    if head_dim != REAL_HEAD_DIM:  # the tiny preset's 8-wide heads
        variant = f"tiny-{variant}"
    config["_class_name"] = PRUNED_CLASS if pruned else DIT_CLASS
    return Detection("transformer", MINIMAX_H3, variant, "comfy", prefix, config, reasons)


def is_pruned(keys: Mapping[str, Any]) -> bool:
    """A pruned-AdaLN H3 DiT's keys (its curve table in place of the timestep MLP)."""
    return TABLE in keys


def pruned_config(shapes: Mapping[str, tuple[int, ...]], base: Mapping[str, Any]) -> dict:
    """The pruned model's config: `base` (an H3 DiT config) with the curve's grid and width
    read off the table's shape."""
    grid, width = shapes[TABLE]
    return {**base, "adaln_curve_grid": int(grid), CURVE_DIM: int(width)}


def detect_config(shapes: Mapping[str, tuple[int, ...]]) -> dict[str, Any]:
    """The pruned DiT's config read off its file's shapes (original key names, prefix
    stripped; `dit_config`) with the curve's grid and width."""
    if not is_pruned(shapes):
        raise ValueError(f"a pruned H3 DiT holds `{TABLE}`; this file has none")
    return pruned_config(shapes, dit_config(shapes))


def dit_config(shapes: Mapping[str, tuple[int, ...]]) -> dict[str, Any]:
    """An H3 DiT's config read off its file's shapes (original key names, prefix stripped):
    widths and counts from the weights, the head width from the q norm's gain, the timestep
    MLP's widths where the file has one (not a pruned file); epsilons and rotary theta are
    diffusers' defaults (what no weight shows, and what every released H3 uses)."""
    hidden, video_patch = shapes["video_patch_proj.weight"]
    head_dim = shapes["blocks.0.attn.q_norm.weight"][0]
    fused = shapes["blocks.0.attn.qkv_proj.weight"][0]
    patch = (1, 2, 2)  # H3's (t, h, w) patch: the patch projection's width is channels x 4
    rope = shapes.get("rope.inv_freq")
    config = {
        "num_attention_heads": fused // 3 // head_dim,
        "attention_head_dim": head_dim,
        "hidden_size": hidden,
        "num_layers": _count(shapes, "blocks.", ".attn.qkv_proj.weight"),
        "num_refiner_layers": _count(shapes, "token_refiner.blocks.", ".attn.qkv_proj.weight"),
        "ffn_dim": shapes["blocks.0.mlp.fc1.weight"][0] // 2,
        "in_channels": video_patch // (patch[0] * patch[1] * patch[2]),
        "audio_in_channels": shapes["audio_patch_proj.weight"][1],
        "patch_size": patch,
        "text_dim": shapes["condition_proj.weight"][1],
        "rope_freq_dim": rope[0] if rope else REAL_ROPE_FREQ_DIM,
    }
    if "time_embedder.proj_in.weight" in shapes:
        inner, freq = shapes["time_embedder.proj_in.weight"]
        config |= {
            "freq_dim": freq,
            "time_embed_hidden_dim": inner,
            "time_embed_dim": shapes["time_embedder.proj_out.weight"][0],
        }
    return config


def _count(shapes: Mapping[str, Any], prefix: str, suffix: str) -> int:
    found = {
        int(key[len(prefix) :].split(".", 1)[0])
        for key in shapes
        if key.startswith(prefix) and key.endswith(suffix)
    }
    return max(found) + 1 if found else 0


# -- the VAEs (ComfyUI's `minimax_h3_video_vae_*`, `minimax_h3_audio_vae_fp32`) ----------------

VIDEO_VAE_MARKS = ("decoder.transformer_blocks.0.scale1", "encoder.down.0.block.0.conv1.weight")
"""What ComfyUI's `comfy/sd.py` tells H3's video VAE by (it asks for `encoder.down.5`, the
released sixth level; the first is asked here, so a VAE of fewer levels is recognised too)."""
AUDIO_VAE_MARK = "pre_block.attn.zero_k_bias"
"""What ComfyUI's `comfy/sd.py` tells H3's audio VAE by."""


def detect_video_vae(header: FileHeader) -> Detection | None:
    """H3's video VAE in ComfyUI's module names (`comfy/ldm/minimax/vae.py`: the causal CNN
    encoder's `encoder.down.N.block.M`, the ViT decoder's `decoder.x_embedder`,
    `transformer_blocks.N.attn.to_qkv`, `ff.w1`), no prefix; None when the file has none. Its
    config: what the shapes show (`video_vae_shapes`)."""
    keys = {k: v.shape for k, v in header.tensors.items()}
    if not all(mark in keys for mark in VIDEO_VAE_MARKS):
        return None
    config = video_vae_shapes(keys)
    reasons = (
        "MiniMax H3 video VAE keys (encoder.down.N.block.M, decoder.transformer_blocks.N.scale1)",
        f"{config['latent_channels']} latent channels, {len(config['block_out_channels'])} "
        f"encoder levels, a {config['decoder_num_layers']}-block ViT decoder of width "
        f"{config['decoder_width']}",
    )
    return Detection("vae", MINIMAX_H3, "minimax-h3 video vae", "comfy", "", config, reasons)


def video_vae_shapes(keys: Mapping[str, tuple[int, ...]]) -> dict[str, Any]:
    """The video VAE's settings its shapes show, in `AutoencoderKLMiniMaxH3`'s names (and the
    decoder's width, which its heads split: no weight shows how): widths and counts, the
    register tokens and the feed-forward's multiple. Strides, group counts, the decoder's heads
    and its temporal chunking are no weight's: the preset's."""
    levels = _count(keys, "encoder.down.", ".block.0.conv1.weight")
    width = keys["decoder.x_embedder.weight"][0]
    return {
        "in_channels": keys["encoder.conv_in.weight"][1],
        "latent_channels": keys["post_quant_conv.weight"][1],
        "block_out_channels": tuple(
            keys[f"encoder.down.{i}.block.0.conv1.weight"][0] for i in range(levels)
        ),
        "layers_per_block": _count(keys, "encoder.down.0.block.", ".conv1.weight"),
        "decoder_num_layers": _count(keys, "decoder.transformer_blocks.", ".scale1"),
        "decoder_num_register_tokens": keys["decoder.register_tokens"][1],
        "decoder_ffn_mult": keys["decoder.transformer_blocks.0.ff.w2.weight"][1] // width,
        "decoder_width": width,
    }


def detect_audio_vae(header: FileHeader) -> Detection | None:
    """H3's audio VAE in ComfyUI's module names (`comfy/ldm/minimax/audio_vae.py`: the DAC
    encoder `encoder.block`, the attention projection `pre_block`, the BigVGAN decoder
    `decoder.conv_pre`/`ups`/`resblocks`; weight norms folded into plain `weight`s), no prefix;
    None when the file has none."""
    keys = {k: v.shape for k, v in header.tensors.items()}
    if AUDIO_VAE_MARK not in keys or "decoder.conv_pre.weight" not in keys:
        return None
    config = audio_vae_shapes(keys)
    reasons = (
        f"MiniMax H3 audio VAE keys ({AUDIO_VAE_MARK}, decoder.conv_pre)",
        f"{config['latent_channels']} latent channels, encoder rates "
        f"{list(config['encoder_rates'])}, decoder rates {list(config['decoder_rates'])}",
    )
    return Detection("vae", MINIMAX_H3, "minimax-h3 audio vae", "comfy", "", config, reasons)


def audio_vae_shapes(keys: Mapping[str, tuple[int, ...]]) -> dict[str, Any]:
    """The audio VAE's settings its shapes show, in `AutoencoderKLMiniMaxH3Audio`'s names: an
    encoder block's stride is half its downsampling kernel, an upsampler's rate `u` has kernel
    `2u - u % 2` (the released 9, 9, 4, ... for 5, 5, 2, ...: diffusers' conversion script reads
    them so), the resblocks' kernels from their first convolutions. The attention heads, the
    dilations' values and the sample rate are no weight's: the preset's."""
    down = count_indices(keys, r"encoder\.block\.(\d+)\.block\.4\.weight$")  # 0: the first conv
    ups = _count(keys, "decoder.ups.", ".0.weight")
    kernels = _count(keys, "decoder.resblocks.", ".convs1.0.weight") // max(ups, 1)
    up_kernels = tuple(keys[f"decoder.ups.{i}.0.weight"][2] for i in range(ups))
    return {
        "encoder_dim": keys["encoder.block.0.weight"][0],
        "encoder_rates": tuple(
            keys[f"encoder.block.{i}.block.4.weight"][2] // 2 for i in range(1, down)
        ),
        "latent_dim": keys["pre_block.norm1.weight"][0],
        "latent_channels": keys["mean_proj.weight"][0],
        "decoder_dim": keys["decoder.conv_pre.weight"][0],
        "decoder_rates": tuple((k + 1) // 2 for k in up_kernels),
        "decoder_kernel_sizes": up_kernels,
        "resblock_kernel_sizes": tuple(
            keys[f"decoder.resblocks.{j}.convs1.0.weight"][2] for j in range(kernels)
        ),
    }
