"""HunyuanVideo 1.5's single files, recognised from their headers: the DiT (ComfyUI's
`hunyuanvideo1.5_*`, in Tencent's original names, or in diffusers' names), its VAE, its
Qwen2.5-VL text encoder (`qwen_2.5_vl_7b`, Hugging Face's names, with the shapes of its vision
tower, which Qwen-Image-Edit reads; ByT5 is a T5, recognised in detect.py) and the SigLIP
vision tower of image-to-video (`sigclip_vision_patch14_384`).

The name tables and the config readers are in `keys.py`; the head width is 128 for
the real model, 16 for the tiny preset (whose DiT is 64 wide).
"""

from __future__ import annotations

from ...single_file.detection import (
    TINY_WIDTH,
    Detection,
    dit_head_dim,
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
