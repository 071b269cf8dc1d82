"""MiniMax H3's pipeline from the single files users hold (ComfyUI's templates name them):

    --model minimax_h3_fl2va_pruned_int8_convrot.safetensors
    --text-encoder qwen3vl_32b_minimax_h3_nvfp4_awq.safetensors
    --vae minimax_h3_video_vae_int8_convrot.safetensors --vae minimax_h3_audio_vae_fp32.safetensors

- The DiT (released, or pruned-AdaLN: `pruned.py`) is read row block by row block as every
  family's (`dit_row_map`: diffusers' converter on row traces, the pruned file's curve table
  to `time_embedder.table`), so several ranks read only their FSDP2 shards.
- The two `--vae` files: the audio VAE is told apart by its keys (`single_file.
  detect_audio_vae`) and taken as a part of its own (`file_parts`), the video VAE is the job's
  `--vae`. Both read whole by `vae_files.py`, their latent statistics from the files; what no
  weight shows from the preset's VAEs (`tiny-minimax-h3`, `random:minimax-h3`).
- The text encoder: Qwen3-VL whole, with its vision tower (ComfyUI's `model.` + `visual.`
  layout), as Qwen-Image 2.1 builds it (`qwen_image21.single_file.text_parts`), with the
  processor H3's blocks read (`qwen_vl.ImageQwen3VLProcessor`: no video processor) and its
  tokenizer.
- The schedulers (video shift 12, audio shift 3) are the preset's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import torch

from ...casting import cast_model
from ...single_file.rows import RowMap, trace_converter
from ...single_file.vocabulary import FileTools, Part, Preset
from ..qwen_image21.single_file import check_vision_tower
from ..qwen_image21.single_file import text_parts as qwen3_vl_parts
from . import vae_files
from .single_file import TABLE

AUDIO_VAE = "audio_vae"
EXTRA_COMPONENTS = (AUDIO_VAE,)
"""The pipeline component built from a part besides the DiT, encoder and video VAE."""
AUDIO_VAE_FILE = "minimax_h3_audio_vae_fp32"
VAES = (
    "the MiniMax H3 video VAE (minimax_h3_video_vae_int8_convrot) and audio VAE "
    f"({AUDIO_VAE_FILE}), one --vae each"
)
DROPPED_KEYS = ("rope.inv_freq",)
"""A buffer some files carry that the model recomputes from its config."""


def dit_row_map(keys: Mapping[str, tuple[int, ...]], config: Mapping) -> RowMap:
    """The original key names -> diffusers' (or the pruned model's), as a row map: diffusers'
    converter on row traces (fused QKV rows `[q; k; v]` in thirds, the SwiGLU halves
    swapped), the pruned file's curve table to `time_embedder.table`."""
    from diffusers.loaders.single_file_utils import (
        convert_minimax_h3_transformer_checkpoint_to_diffusers,
    )

    from .pruned import TABLE_PARAMETER

    settings = {k: v for k, v in config.items() if not k.startswith("_")}

    def convert(checkpoint: dict) -> dict:
        table = checkpoint.pop(TABLE, None)
        state = convert_minimax_h3_transformer_checkpoint_to_diffusers(
            checkpoint, settings, qkv_layout="stacked"
        )
        if table is not None:
            state[TABLE_PARAMETER] = table
        return state

    return trace_converter(convert, keys)


def vae_latent_channels(config: Mapping) -> int:
    """The DiT's video input channels (its patch projection reads channels x 4)."""
    return config["in_channels"]


def file_parts(dit: Part, files: Any, tools: FileTools) -> tuple[Any, dict[str, Part]]:
    """The audio VAE among the --vae files (by its keys), checked against the DiT's audio
    input; the files left hold the video VAE (checked as the job's VAE). ValueError naming
    the file to give when no --vae file or more than one is an audio VAE."""
    videos, audio = [], []
    for path in files.vaes:
        part = tools.recognise(path)
        is_audio = part.detection.role == "vae" and part.detection.variant.endswith("audio vae")
        (audio if is_audio else videos).append((path, part))
    if not audio:
        raise ValueError(
            f"{dit.header.name} holds MiniMax H3's DiT, which makes sound too: give "
            f"{VAES} (no --vae file given is the audio VAE)"
        )
    if len(audio) > 1:
        names = ", ".join(p.header.name for _, p in audio)
        raise ValueError(
            f"--vae {names} are all MiniMax H3 audio VAEs: give one, and the video VAE"
        )
    part = audio[0][1]
    expected = dit.detection.config["audio_in_channels"]
    channels = part.detection.config["latent_channels"]
    if channels != expected:
        raise ValueError(
            f"--vae {part.header.name} is an audio VAE of {channels} latent channels; "
            f"{dit.header.name} takes audio latents of {expected}"
        )
    left = dataclasses.replace(files, vaes=tuple(path for path, _ in videos))
    return left, {AUDIO_VAE: part}


def file_extras(parts: dict[str, Part], encoder: Part) -> dict[str, Part]:
    """The audio VAE (checked against the DiT in `file_parts`; the encoder reads no audio)."""
    return {AUDIO_VAE: parts[AUDIO_VAE]}


def _base(tools: FileTools, preset_name: str, component: str) -> dict[str, Any]:
    """The preset VAE's config: what no weight of the file shows."""
    reference = getattr(tools.preset_parts(preset_name, {component}), component)
    return dict(reference.config)


def build_extra(
    name: str, parts: Mapping[str, Part], preset_name: str, dtype: torch.dtype, tools: FileTools
) -> torch.nn.Module:
    """The audio VAE of its file (`vae_files.load_audio_vae`, weight norms folded)."""
    if name != AUDIO_VAE:
        raise ValueError(f"no MiniMax H3 component {name!r} built from a file; known: {AUDIO_VAE}")
    state = tools.read_whole(parts[name], torch.float32)
    model = vae_files.load_audio_vae(state, _base(tools, preset_name, name))
    return cast_model(model, dtype)


def build_vae(part: Part, preset_name: str, dtype: torch.dtype, tools: FileTools) -> Any:
    """The video VAE of its file (`vae_files.load_video_vae`; int8 layers dequantized by the
    reader), its latent statistics the file's."""
    state = tools.read_whole(part, torch.float32)
    return cast_model(vae_files.load_video_vae(state, _base(tools, preset_name, "vae")), dtype)


def text_parts(
    part: Part, preset_name: str, dtype: torch.dtype, skip: frozenset[str], tools: FileTools
) -> dict[str, Any]:
    """ "text_encoder", "processor" and "tokenizer" (None where skipped): Qwen3-VL whole as
    Qwen-Image 2.1 builds it; for a real tokenizer the processor H3's blocks read (Qwen3-VL's
    published image settings, no video processor)."""
    from ...qwen_vl import QWEN_VL_VOCAB_SIZE

    parts = qwen3_vl_parts(part, preset_name, dtype, skip, tools)
    processor = parts["processor"]
    if processor is None:
        return {**parts, "tokenizer": None}
    if part.detection.config["vocab_size"] != QWEN_VL_VOCAB_SIZE:
        processor = file_processor(processor.tokenizer)
    return {**parts, "processor": processor, "tokenizer": processor.tokenizer}


def file_processor(tokenizer: Any) -> Any:
    """H3's processor on a real Qwen3-VL tokenizer: 16-pixel patches merged 2x2, 2 frames a
    temporal patch, mean and std 0.5, Qwen3-VL's pixel bounds."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil,
    )

    from ...encoders.qwen3_vl import QWEN3_VL_PIXELS
    from ...qwen_vl import ImageQwen3VLProcessor

    images = Qwen2VLImageProcessorPil(
        patch_size=16,
        merge_size=2,
        temporal_patch_size=2,
        image_mean=[0.5] * 3,
        image_std=[0.5] * 3,
        size=dict(QWEN3_VL_PIXELS),
    )
    return ImageQwen3VLProcessor(image_processor=images, tokenizer=tokenizer)


def _preset(name: str) -> Preset:
    return Preset(
        name,
        "MiniMaxH3ModularPipeline",
        ("qwen3-vl",),
        vae=VAES,
        vision=True,
        text_parts=text_parts,
        check_text_encoder=check_vision_tower,
    )


FILE_PRESETS = {
    variant: _preset(name)
    for variant, name in (
        ("tiny-minimax-h3", "tiny-minimax-h3"),
        ("tiny-minimax-h3-pruned", "tiny-minimax-h3"),
        ("minimax-h3", "random:minimax-h3"),
        ("minimax-h3-pruned", "random:minimax-h3"),
    )
}
"""The presets H3's single files run on (`FileSpec.presets`): the released and the pruned DiT
take the same parts."""


def pruned_class() -> type:
    from .pruned import MiniMaxH3PrunedTransformer3DModel

    return MiniMaxH3PrunedTransformer3DModel
