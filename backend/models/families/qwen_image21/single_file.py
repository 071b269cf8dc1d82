"""Qwen-Image 2.1's DiT and VAE in single files (ComfyUI's `qwen_image_2.1_int8_convrot`, its
turbo, and `qwen_image_2.1_vae_bf16`).

The DiT keeps diffusers' names, with or without ComfyUI's prefix, except that each block's
SwiGLU gate and up projections are one fused weight, gate rows first
(`img_mlp.gate_up`, as diffusers' converter for these files reads it); the recognition reads
widths and counts off the shapes (head width from the q norm's gain) and what no weight shows
(rotary axes, epsilon, the causal condition) from the published config the `random:` preset
ships (the tiny preset's rotary axes for its 16-wide heads). No weight tells the turbo model
from the base one: their recipes do (`recipes.json`).

The VAE (64 latent channels, 16x, RGBA) is the Wan 2.2 VAE's structure with a temporal kernel of
1. ComfyUI's `qwen_image_2.1_vae_bf16` holds it as ComfyUI builds it (`comfy/ldm/wan/vae2_2.py`'s
`WanVAE` with `temporal_kernel=1`, `patch_size=1`, `image_channels=4`, loaded strictly): the Wan
2.2 VAE's original names, every causal convolution a 3D weight of time 1 (`[out, in, 1, k, k]`:
the first and last convolutions, the residual blocks', the shortcuts, `conv1`/`conv2`, each
`time_conv` at `[.., .., 1, 1, 1]`), the resamples' and the middle attention's (`to_qkv`,
`proj`) 2D weights, the RMS norms' `gamma` at `[dim, 1, 1, 1]` (`[dim, 1, 1]` in the attention).
diffusers' `AutoencoderKLQwenImage21` (a diffusers folder's VAE) keeps every weight 2D. Both are
recognised; the original names are read with the Wan 2.2 VAE's renames and each time-1 weight
squeezed to diffusers' 2D one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ...casting import cast_model
from ...encoders.qwen3_vl import qwen3_vl_file_processor, qwen3_vl_vision
from ...random_presets import random_dit_config
from ...single_file.detection import REAL_HEAD_DIM, Detection, count_indices, stripped
from ...single_file.header import FileHeader
from ...single_file.rows import RowMap, trace_converter
from ...single_file.tokenizers import vision_token_ids
from ...single_file.vocabulary import FileTools, Part, Preset
from ..qwen_image_edit.single_file import transformers_names
from ..wan.single_file import wan22_vae_name

QWEN_IMAGE21 = "qwen-image2.1"
_FUSED = "transformer_blocks.0.img_mlp.gate_up.weight"
_SPLIT = "transformer_blocks.0.img_mlp.gate_layer.weight"
TINY_AXES = [4, 6, 6]  # the tiny preset's rotary axes (its heads are 16 wide)


def detect_dit(header: FileHeader, prefix: str) -> Detection | None:
    """A Qwen-Image 2.1 DiT under `prefix` (the gate and up projections fused, or diffusers'
    own names); None when the file has none."""
    keys = stripped(header, prefix)
    if "modulation.1.weight" not in keys or "txt_in.text_norm.weight" not in keys:
        return None
    if _FUSED in keys:
        layout, hidden = "comfy", keys[_FUSED][0] // 2
    elif _SPLIT in keys:
        layout, hidden = "diffusers", keys[_SPLIT][0]
    else:
        return None
    width, in_channels = keys["img_in.weight"]
    head_dim = keys["transformer_blocks.0.attn.norm_q.weight"][0]
    config = {
        **random_dit_config("random:qwen-image2.1", "transformer"),
        "in_channels": in_channels,
        "out_channels": keys["proj_out.weight"][0],
        "num_layers": count_indices(keys, r"transformer_blocks\.(\d+)\.attn\.to_q\.weight$"),
        "attention_head_dim": head_dim,
        "num_attention_heads": width // head_dim,
        "context_in_dim": keys["txt_in.text_norm.weight"][0],
        "mlp_ratio": hidden // width,
    }
    tiny = head_dim != REAL_HEAD_DIM
    if tiny:
        config["axes_dims_rope"] = TINY_AXES
    where = f" under {prefix!r}" if prefix else ""
    reasons = (
        "Qwen-Image 2.1 DiT keys (one shared modulation, txt_in.text_norm"
        + (", the fused img_mlp.gate_up" if layout == "comfy" else "")
        + f"){where}",
        f"width {width}, {config['num_layers']} blocks, {width // head_dim} heads of {head_dim}, "
        f"text width {config['context_in_dim']}",
    )
    variant = "tiny-qwen-image2.1" if tiny else "qwen-image2.1"
    return Detection("transformer", QWEN_IMAGE21, variant, layout, prefix, config, reasons)


def text_widths(config: Mapping) -> tuple[tuple[str, int, str], ...]:
    """The Qwen3-VL hidden states the DiT's text projection takes."""
    return (("text_encoder", config["context_in_dim"], "text embeddings"),)


def _converter():
    from diffusers.loaders.single_file_utils import (
        convert_qwen_image21_transformer_checkpoint_to_diffusers,
    )

    return convert_qwen_image21_transformer_checkpoint_to_diffusers


def dit_row_map(keys: Mapping[str, tuple[int, ...]], config: Mapping) -> RowMap:
    """ComfyUI's names -> diffusers', as a row map: diffusers' converter on row traces (each
    fused gate_up's first half of rows the gate, its second the up projection)."""
    return trace_converter(_converter(), keys)


# -- the VAE ------------------------------------------------------------------------------------

_ORIGINAL = ("encoder.conv1.weight", "conv2.weight", "encoder.head.0.gamma")
_DIFFUSERS = ("encoder.conv_in.weight", "post_quant_conv.weight", "encoder.norm_out.gamma")
_CONV_RANK = {"wan": 5, "diffusers": 4}  # the first convolution's rank in each layout


def _first_conv_fits(layout: str, shape: tuple[int, ...]) -> bool:
    """ComfyUI's first convolution is 3D of time 1 (`[out, in, 1, 3, 3]`), diffusers' 2D."""
    return len(shape) == _CONV_RANK[layout] and (layout == "diffusers" or shape[2] == 1)


def detect_vae(header: FileHeader) -> Detection | None:
    """Qwen-Image 2.1's VAE (ComfyUI's `qwen_image_2.1_vae_bf16` or diffusers' names), or None."""
    keys = {k: v.shape for k, v in header.tensors.items()}
    found = next(
        (
            (layout, names)
            for layout, names in (("wan", _ORIGINAL), ("diffusers", _DIFFUSERS))
            if all(n in keys for n in names) and _first_conv_fits(layout, keys[names[0]])
        ),
        None,
    )
    if found is None:
        return None
    layout, (first, post, _) = found
    base_dim, in_channels = keys[first][0], keys[first][1]
    z_dim = keys[post][0]
    config = {"base_dim": base_dim, "z_dim": z_dim, "in_channels": in_channels}
    shape = (
        "the Wan 2.2 VAE's original names, 3D convolutions of time 1"
        if layout == "wan"
        else "AutoencoderKLQwenImage21's names, 2D convolutions"
    )
    reasons = (
        f"Qwen-Image 2.1 VAE keys ({layout} layout: {shape})",
        f"{z_dim} latent channels, base width {base_dim}, {in_channels} input channels",
    )
    return Detection("vae", QWEN_IMAGE21, "qwen-image2.1 vae", layout, "", config, reasons)


def _image_weight(name: str, value: Any) -> Any:
    """A causal convolution's 3D weight of time 1 -> diffusers' 2D one (`[o, i, 1, k, k]` ->
    `[o, i, k, k]`); ValueError for a longer temporal kernel (a video VAE's)."""
    if len(value.shape) != 5:
        return value
    if value.shape[2] != 1:
        raise ValueError(
            f"{name} has shape {tuple(value.shape)}: the Qwen-Image 2.1 VAE's convolutions have "
            "a temporal kernel of 1 (ComfyUI's WanVAE with temporal_kernel=1)"
        )
    return value.squeeze(2)


def vae_key_names(state: dict[str, Any], detection: Detection) -> dict[str, Any]:
    """The VAE's state in diffusers' names: ComfyUI's by the Wan 2.2 VAE's renames, each 3D
    weight of time 1 squeezed to diffusers' 2D one."""
    if detection.layout != "wan":
        return state
    return {wan22_vae_name(k): _image_weight(k, v) for k, v in state.items()}


# -- the text side: Qwen3-VL whole, and its processor ------------------------------------------


def check_vision_tower(part: Part, dit: Detection) -> None:
    """ValueError naming the file when it holds no Qwen3-VL vision tower: the pipeline takes
    the whole `Qwen3VLForConditionalGeneration` (its edit task reads images through it)."""
    vision, found = qwen3_vl_vision(part.header)
    if vision is None:
        raise ValueError(
            f"--text-encoder {part.header.name} holds {found}: {dit.label} takes Qwen3-VL "
            "whole, with its vision tower; give a Qwen3-VL file that holds it (ComfyUI's "
            "qwen3vl_8b_int8_convrot)"
        )
    width = part.detection.config["hidden_size"]
    if vision["out_hidden_size"] != width:
        raise ValueError(
            f"--text-encoder {part.header.name}: its vision tower gives tokens of width "
            f"{vision['out_hidden_size']}, its language model takes {width}"
        )


def text_parts(
    part: Part, preset_name: str, dtype: torch.dtype, skip: frozenset[str], tools: FileTools
) -> dict[str, Any]:
    """ "text_encoder" and "processor" of the pipeline (None where skipped): for the presets'
    reduced encoders (their vocabulary) the preset's processor, else one on the tokenizer
    found offline with Qwen3-VL's published image settings. A rank that does not encode
    still builds the processor: `QwenImage21Pipeline` reads its chat template when built."""
    wanted = {"text_encoder", "processor"} - skip
    if not wanted:
        return {"text_encoder": None, "processor": None}
    from ...qwen_vl import QWEN_VL_VOCAB_SIZE  # transformers' processors: only when built

    if part.detection.config["vocab_size"] == QWEN_VL_VOCAB_SIZE:
        processor = tools.preset_parts(preset_name, {"processor"}).processor
    else:
        processor = qwen3_vl_file_processor(tools.tokenizer(part, preset_name, "tokenizer"))
    encoder = None
    if "text_encoder" in wanted:
        ids = vision_token_ids(part, processor.tokenizer, "Qwen3-VL's vision markers")
        encoder = _qwen3_vl_model(part, dtype, ids, tools)
    return {"text_encoder": encoder, "processor": processor if "processor" in wanted else None}


def _qwen3_vl_model(
    part: Part, dtype: torch.dtype, token_ids: dict[str, int], tools: FileTools
) -> torch.nn.Module:
    """`Qwen3VLForConditionalGeneration` of the file: the language model with the config its
    header gave, the vision tower as its shapes show, the tokenizer's vision marker ids."""
    from accelerate import init_empty_weights
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    vision, _ = qwen3_vl_vision(part.header)
    text = {k: v for k, v in part.detection.config.items() if k != "_class_name"}
    tied = text.pop("tie_word_embeddings")
    config = Qwen3VLConfig(
        text_config=text, vision_config=vision, tie_word_embeddings=tied, **token_ids
    )
    with init_empty_weights(include_buffers=False):
        model = Qwen3VLForConditionalGeneration(config)
    state = transformers_names(tools.read_whole(part, dtype), part.detection.prefix)
    expected = set(model.state_dict())
    if "lm_head.weight" not in state:  # tied, or unused: the pipeline reads hidden states
        state["lm_head.weight"] = state.get("model.language_model.embed_tokens.weight")
    missing = sorted(k for k in expected if state.get(k) is None)
    if missing:
        raise ValueError(
            f"--text-encoder {part.header.name}: no weights for {missing[:3]} ({len(missing)} "
            f"in all) of a {part.detection.variant} encoder with its vision tower"
        )
    model.load_state_dict({k: state[k] for k in expected}, assign=True, strict=True)
    if tied:
        model.tie_weights()
    return cast_model(model, dtype).eval()


QWEN_IMAGE21_VAE = "the Qwen-Image 2.1 VAE (qwen_image_2.1_vae_bf16)"
FILE_PRESETS = {
    variant: Preset(
        name,
        "QwenImage21Pipeline",
        ("qwen3-vl",),
        vae=QWEN_IMAGE21_VAE,
        vision=True,
        text_parts=text_parts,
        check_text_encoder=check_vision_tower,
    )
    for variant, name in (
        ("tiny-qwen-image2.1", "tiny-qwen-image2.1"),
        ("qwen-image2.1", "random:qwen-image2.1"),
    )
}
"""The presets Qwen-Image 2.1's single files run on (`FileSpec.presets`)."""
