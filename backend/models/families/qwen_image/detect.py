"""Qwen-Image's DiT in a single file, recognised from its header.

The Qwen-Image DiT, whose files keep diffusers' names (`transformer_blocks.N.img_mod.1`,
`txt_norm`), with or without ComfyUI's prefix; Qwen-Image-Edit's DiTs (the first model and
the Edit-Plus releases 2509, 2511) have the same names and shapes, so their file name tells
them apart (`qwen_image_edit_release`).

Widths and counts are read off the shapes (head width from the q norm's gain); what no weight
shows (rotary axes and theta, epsilon) comes from the published config the `random:` preset
ships, the tiny preset's rotary axes for its 16-wide heads.
"""

from __future__ import annotations

import re

from ...random_presets import random_dit_config
from ...single_file.detection import REAL_HEAD_DIM, Detection, count_indices, stripped
from ...single_file.header import FileHeader

QWEN_IMAGE = "qwen-image"


def qwen_image_dit(header: FileHeader, prefix: str):
    """The Detection of a Qwen-Image DiT (diffusers' names), or None for other files."""
    keys = stripped(header, prefix)
    if "transformer_blocks.0.img_mod.1.weight" not in keys or "txt_norm.weight" not in keys:
        return None
    width, in_channels = keys["img_in.weight"]
    head_dim = keys["transformer_blocks.0.attn.norm_q.weight"][0]
    config = {
        **random_dit_config("random:qwen-image", "transformer"),
        "in_channels": in_channels,
        "out_channels": keys["proj_out.weight"][0] // 4,
        "num_layers": count_indices(keys, r"transformer_blocks\.(\d+)\.img_mod\.1\.weight$"),
        "attention_head_dim": head_dim,
        "num_attention_heads": width // head_dim,
        "joint_attention_dim": keys["txt_norm.weight"][0],
    }
    variant = "tiny-qwen-image" if head_dim != REAL_HEAD_DIM else "qwen-image"
    if head_dim != REAL_HEAD_DIM:
        config["axes_dims_rope"] = [4, 6, 6]  # the tiny preset's (16-wide heads)
    edit, why = qwen_image_edit_release(header.name)
    reasons = (
        "Qwen-Image DiT keys (transformer_blocks.N.img_mod, txt_norm)"
        + (f" under {prefix!r}" if prefix else ""),
        f"width {width}, {config['num_layers']} blocks, {width // head_dim} heads of {head_dim}, "
        f"text width {config['joint_attention_dim']}",
        why,
    )
    if edit:
        variant = variant.replace("qwen-image", edit)
    return Detection("transformer", QWEN_IMAGE, variant, "diffusers", prefix, config, reasons)


# Qwen-Image-Edit's DiTs have Qwen-Image's names and shapes, and the first one (ComfyUI's
# qwen_image_edit_bf16) the Edit-Plus releases' (qwen_image_edit_2509_bf16, _2511_): only the
# file name tells them apart.
_EDIT = re.compile(r"edit(?:[-_. ]?(\d{4}|plus))?")
NO_WEIGHT_TELLS = "no weight tells the edit DiTs from each other or from Qwen-Image's"


def qwen_image_edit_release(name: str) -> tuple[str, str]:
    """From a Qwen-Image DiT's file name: "qwen-image-edit-plus" (a release date after 'edit':
    2509, 2511), "qwen-image-edit" (the first model) or "" (text-to-image), and the reason."""
    found = _EDIT.search(name.lower())
    if found is None:
        return "", "Qwen-Image (text-to-image): no 'edit' in the file name"
    if found.group(1):
        release = "Qwen-Image-Edit-" + found.group(1) if found.group(1) != "plus" else "Edit-Plus"
        return "qwen-image-edit-plus", (
            f"{release} by its file name ({found.group(0)!r}: the Edit-Plus releases, "
            f"QwenImageEditPlusPipeline, 1 to 3 input images; {NO_WEIGHT_TELLS})"
        )
    return "qwen-image-edit", (
        "the first Qwen-Image-Edit by its file name ('edit' without a release date such as "
        f"2509 or 2511: QwenImageEditPipeline, 1 input image; {NO_WEIGHT_TELLS})"
    )
