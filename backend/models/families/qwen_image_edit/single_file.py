"""Qwen-Image-Edit's text side from single files: Qwen2.5-VL with its vision tower, its
tokenizer and the processor that turns the input images into the vision tower's patches.

The edit pipelines (`QwenImageEditPlusPipeline`, `QwenImageEditPipeline`) take the whole
`Qwen2_5_VLForConditionalGeneration`: the images become image tokens of the prompt through the
vision tower. ComfyUI's `qwen_2.5_vl_7b` (and `_fp8_scaled`) holds the language model under
`model.` and the tower under `visual.`, both in transformers' module names (older transformers
saved them so); transformers 5 names them `model.language_model.` and `model.visual.`, and its
files are read too. `lm_head` is not needed for the hidden states the pipelines read: a file
without it (ComfyUI's model has none) gets the token embeddings in its place.

The vision markers' ids (`<|image_pad|>`, ...) are the tokenizer's: a tokenizer without them is
refused, as is a text encoder file without the vision tower (the Qwen-Image and HunyuanVideo
1.5 pipelines never run it, so a text-only file serves them but not the edit models).
"""

from __future__ import annotations

from typing import Any

import torch

from ...casting import cast_model
from ...encoders.qwen25_vl import VISION_PREFIXES, qwen25_vl_vision
from ...single_file.detection import Detection
from ...single_file.tokenizers import vision_token_ids
from ...single_file.vocabulary import FileTools, Part, Preset
from ..qwen_image.single_file import QWEN_IMAGE_VAE


def check_vision_tower(part: Part, dit: Detection) -> None:
    """ValueError naming the file when it holds no vision tower the edit DiT can read through,
    or one whose output width is not the language model's."""
    vision, found = qwen25_vl_vision(part.header)
    if vision is None:
        raise ValueError(
            f"--text-encoder {part.header.name} holds {found}: {dit.label} reads its input "
            "images through Qwen2.5-VL's vision tower; give a Qwen2.5-VL file that holds it "
            "(ComfyUI's qwen_2.5_vl_7b and qwen_2.5_vl_7b_fp8_scaled do, under visual.)"
        )
    width = part.detection.config["hidden_size"]
    if vision["out_hidden_size"] != width:
        raise ValueError(
            f"--text-encoder {part.header.name}: its vision tower gives tokens of width "
            f"{vision['out_hidden_size']}, its language model takes {width}"
        )


def edit_text_parts(
    part: Part, preset_name: str, dtype: torch.dtype, skip: frozenset[str], tools: FileTools
) -> dict[str, Any]:
    """ "text_encoder", "tokenizer" and "processor" of an edit pipeline (None where skipped):
    for the presets' reduced encoders (their vocabulary) the preset's tokenizer and processor,
    else the tokenizer found offline and a processor with Qwen2.5-VL's published settings."""
    if "text_encoder" in skip:
        return {"text_encoder": None, "tokenizer": None, "processor": None}
    # transformers' processors (about 1.5 s to import): when a file is built, not when the
    # family registry is read (every command)
    from ...qwen_vl import QWEN_VL_VOCAB_SIZE, qwen25_vl_processor

    if part.detection.config["vocab_size"] == QWEN_VL_VOCAB_SIZE:
        reference = tools.preset_parts(preset_name, {"tokenizer", "processor"})
        text_tokenizer, processor = reference.tokenizer, reference.processor
    else:
        text_tokenizer = tools.tokenizer(part, preset_name, "tokenizer")
        processor = qwen25_vl_processor(text_tokenizer)
    markers = "Qwen2.5-VL's vision markers, which Qwen-Image-Edit puts its images in"
    ids = vision_token_ids(part, text_tokenizer, markers)
    return {
        "text_encoder": qwen25_vl_model(part, dtype, ids, tools),
        "tokenizer": text_tokenizer,
        "processor": None if "processor" in skip else processor,
    }


def qwen25_vl_model(
    part: Part, dtype: torch.dtype, token_ids: dict[str, int], tools: FileTools
) -> torch.nn.Module:
    """`Qwen2_5_VLForConditionalGeneration` of the file: the language model with the config its
    header gave, the vision tower as its shapes show, the tokenizer's vision marker ids."""
    from accelerate import init_empty_weights
    from transformers import Qwen2_5_VLForConditionalGeneration

    with init_empty_weights(include_buffers=False):
        model = Qwen2_5_VLForConditionalGeneration(qwen25_vl_config(part, token_ids))
    state = transformers_names(tools.read_whole(part, dtype), part.detection.prefix)
    expected = set(model.state_dict())
    if "lm_head.weight" not in state:  # the pipelines read hidden states, never the logits
        state["lm_head.weight"] = state.get("model.language_model.embed_tokens.weight")
    missing = sorted(k for k in expected if state.get(k) is None)
    if missing:
        raise ValueError(
            f"--text-encoder {part.header.name}: no weights for {missing[:3]} ({len(missing)} "
            f"in all) of a {part.detection.variant} encoder with its vision tower"
        )
    model.load_state_dict({k: state[k] for k in expected}, assign=True, strict=True)
    return cast_model(model, dtype).eval()


def qwen25_vl_config(part: Part, token_ids: dict[str, int]) -> Any:
    """transformers' Qwen2_5_VLConfig of a file: its language model's config as the header
    gave it, its vision tower's as `qwen25_vl_vision` reads it, the vision markers' ids."""
    from transformers import Qwen2_5_VLConfig

    vision, _ = qwen25_vl_vision(part.header)
    text = {k: v for k, v in part.detection.config.items() if k != "_class_name"}
    return Qwen2_5_VLConfig(text_config=text, vision_config=vision, **token_ids)


def transformers_names(state: dict[str, torch.Tensor], text_prefix: str) -> dict[str, Any]:
    """A Qwen2.5-VL file's weights by transformers 5's names: the tower (`visual.` or
    `model.visual.`) under `model.visual.`, the language model (under `text_prefix`) under
    `model.language_model.`, `lm_head` as it is; other keys are left out."""
    out: dict[str, Any] = {}
    for key, value in state.items():
        vision = next((p for p in VISION_PREFIXES if key.startswith(p)), None)
        if vision is not None:
            out["model.visual." + key[len(vision) :]] = value
        elif key == "lm_head.weight":
            out[key] = value
        elif key.startswith(text_prefix):
            out["model.language_model." + key[len(text_prefix) :]] = value
    return out


_EDIT_PLUS, _EDIT = "QwenImageEditPlusPipeline", "QwenImageEditPipeline"
# Qwen-Image-Edit: Qwen-Image's DiT and VAE; Qwen2.5-VL with its vision tower reads the
# images. The file name tells the Edit-Plus releases (2509, 2511) from the first model.
FILE_PRESETS = {
    variant: Preset(
        name,
        pipeline,
        ("qwen2.5-vl",),
        vae=QWEN_IMAGE_VAE,
        vision=True,
        text_parts=edit_text_parts,
        check_text_encoder=check_vision_tower,
    )
    for variant, name, pipeline in (
        ("tiny-qwen-image-edit-plus", "tiny-qwen-image-edit", _EDIT_PLUS),
        ("tiny-qwen-image-edit", "tiny-qwen-image-edit", _EDIT),
        ("qwen-image-edit-plus", "random:qwen-image-edit", _EDIT_PLUS),
        ("qwen-image-edit", "random:qwen-image-edit", _EDIT),
    )
}
"""The presets Qwen-Image-Edit's single files run on (`FileSpec.presets`)."""
