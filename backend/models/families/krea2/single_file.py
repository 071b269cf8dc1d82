"""Krea 2's DiT in a single file (ComfyUI's `krea2_turbo_fp8_scaled`: the original key names,
`blocks.N`, `txtfusion`, `first`, `last`; with or without ComfyUI's prefix).

Recognised by its text fusion's projection (`txtfusion.projector.weight`, as diffusers'
single-file loader recognises it). Widths and counts are read off the shapes (head widths
from the q norms' gains, key/value heads from `wk`); what no weight shows (rotary axes and
theta, epsilon) comes from the published config the `random:` preset ships, the tiny
preset's rotary axes for its 16-wide heads. The key mapping is diffusers' converter run on
row traces; each block's six modulation vectors are stored as one flat vector, which
`dit_shapes` has read as six rows (the converter's own reshape), so that every row is one of
`scale_shift_table`'s.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ...random_presets import random_dit_config
from ...single_file.detection import REAL_HEAD_DIM, Detection, count_indices, stripped
from ...single_file.header import FileHeader
from ...single_file.rows import RowMap, trace_converter
from ...single_file.vocabulary import Preset
from .tiny import TAPPED_LAYERS

KREA2 = "krea2"
MARK = "txtfusion.projector.weight"
TINY_AXES = [4, 6, 6]  # the tiny preset's rotary axes (its heads are 16 wide)
_BLOCK_MODULATION = re.compile(r"^blocks\.\d+\.mod\.lin$")
MODULATION_ROWS = 6
"""A block's modulation vectors (shift, scale, gate before and after attention)."""


def detect_dit(header: FileHeader, prefix: str) -> Detection | None:
    """A Krea 2 DiT under `prefix` (original names); None when the file has none."""
    keys = stripped(header, prefix)
    if MARK not in keys or "blocks.0.attn.wq.weight" not in keys:
        return None
    width, in_channels = keys["first.weight"]
    head_dim = keys["blocks.0.attn.qknorm.qnorm.scale"][0]
    fusion = "txtfusion.layerwise_blocks.0."
    text_dim = keys["txtmlp.0.scale"][0]
    text_head_dim = keys[f"{fusion}attn.qknorm.qnorm.scale"][0]
    config = {
        **random_dit_config("random:krea2", "transformer"),
        "in_channels": in_channels,
        "num_layers": count_indices(keys, r"blocks\.(\d+)\.mod\.lin$"),
        "attention_head_dim": head_dim,
        "num_attention_heads": width // head_dim,
        "num_key_value_heads": keys["blocks.0.attn.wk.weight"][0] // head_dim,
        "intermediate_size": keys["blocks.0.mlp.gate.weight"][0],
        "timestep_embed_dim": keys["tmlp.0.weight"][1],
        "text_hidden_dim": text_dim,
        "num_text_layers": keys[MARK][1],
        "text_num_attention_heads": text_dim // text_head_dim,
        "text_num_key_value_heads": keys[f"{fusion}attn.wk.weight"][0] // text_head_dim,
        "text_intermediate_size": keys[f"{fusion}mlp.gate.weight"][0],
        "num_layerwise_text_blocks": count_indices(
            keys, r"txtfusion\.layerwise_blocks\.(\d+)\.attn\.wq\.weight$"
        ),
        "num_refiner_text_blocks": count_indices(
            keys, r"txtfusion\.refiner_blocks\.(\d+)\.attn\.wq\.weight$"
        ),
    }
    tiny = head_dim != REAL_HEAD_DIM
    if tiny:
        config["axes_dims_rope"] = TINY_AXES
    reasons = (
        f"Krea 2 DiT keys ({MARK}, blocks.N.attn.wq)" + (f" under {prefix!r}" if prefix else ""),
        f"width {width}, {config['num_layers']} blocks, {width // head_dim} heads of {head_dim} "
        f"({config['num_key_value_heads']} key/value heads), text width {text_dim} at "
        f"{config['num_text_layers']} layers",
    )
    variant = "tiny-krea2" if tiny else "krea2"
    return Detection("transformer", KREA2, variant, "comfy", prefix, config, reasons)


def dit_shapes(keys: Mapping[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """Each block's flat modulation (6 x width,) read as (6, width)."""
    return {
        key: (MODULATION_ROWS, shape[0] // MODULATION_ROWS)
        for key, shape in keys.items()
        if _BLOCK_MODULATION.match(key) and len(shape) == 1
    }


def text_widths(config: Mapping) -> tuple[tuple[str, int, str], ...]:
    """The text model whose hidden states (at `num_text_layers` layers) the DiT fuses."""
    return (
        (
            "text_encoder",
            config["text_hidden_dim"],
            f"hidden states at {config['num_text_layers']} layers",
        ),
    )


def _krea2_converter():
    from diffusers.loaders.single_file_utils import (
        convert_krea2_transformer_checkpoint_to_diffusers,
    )

    return convert_krea2_transformer_checkpoint_to_diffusers


def dit_row_map(keys: Mapping[str, tuple[int, ...]], config: Mapping) -> RowMap:
    """The original key names -> diffusers', as a row map: diffusers' converter on row traces
    (the block modulation already six rows: `dit_shapes`)."""
    return trace_converter(_krea2_converter(), keys)


QWEN_IMAGE_VAE = "the Qwen-Image VAE (qwen_image_vae: the Wan 2.1 VAE's key names)"
FILE_PRESETS = {
    # the tiny encoder's taps (the pipeline's default taps are Qwen3-VL-4B's 12 of 36 layers)
    "tiny-krea2": Preset(
        "tiny-krea2",
        "Krea2Pipeline",
        ("qwen3-vl",),
        vae=QWEN_IMAGE_VAE,
        settings={"text_encoder_select_layers": TAPPED_LAYERS},
    ),
    # Krea 2 Turbo (`is_distilled`, random:krea2's), the pipeline's own taps of the real encoder
    "krea2": Preset("random:krea2", "Krea2Pipeline", ("qwen3-vl",), vae=QWEN_IMAGE_VAE),
}
"""The presets Krea 2's single files run on (`FileSpec.presets`)."""
