"""MiniMax H3 (text-to-audio-video, guidance-distilled)."""

from __future__ import annotations

from ....contract import TEXT_TO_VIDEO
from ....request import IMAGE_PREP_COMFYUI
from ...family_spec import FamilySpec
from ...file_spec import FileSpec
from . import files
from .adapter import MiniMaxH3
from .memory import dit_forward
from .single_file import (
    DIT_CLASS,
    MINIMAX_H3,
    PRUNED_CLASS,
    detect_audio_vae,
    detect_dit,
    detect_video_vae,
)
from .tiny import PRESETS as TINY_PRESETS
from .tiny_job import TINY_JOBS

_TEXT = frozenset({"text_encoder", "tokenizer", "processor"})
SPEC = FamilySpec(
    "minimax_h3",
    adapters=(
        MiniMaxH3(
            "minimax-h3-t2va",
            TEXT_TO_VIDEO,
            ("MiniMaxH3ModularPipeline",),
            _TEXT,
            step_cache=False,
            # as ComfyUI runs them on H3: on the video levels, the audio carried onto them
            # (`sampling.py`); the job's steps are then the levels' steps
            samplers=("euler", "res_multistep"),
            # the first frame as ComfyUI's MiniMaxH3ImageToVideo presents, encodes and
            # noises it (the i2v template's job)
            image_preps=(IMAGE_PREP_COMFYUI,),  # comfyui_prep.py
        ),
    ),
    transformer_classes=(DIT_CLASS, PRUNED_CLASS),
    # the pipeline from ComfyUI's files: files.py (the DiT's rows, the two VAEs, Qwen3-VL)
    files=FileSpec(
        detect_dit=detect_dit,
        detection_order=90,
        family=MINIMAX_H3,
        # before the other VAEs: the video VAE's encoder has the LDM VAE's `encoder.down.N`
        detect_parts=((62, detect_video_vae), (63, detect_audio_vae)),
        dit_row_map=files.dit_row_map,
        dropped_keys=files.DROPPED_KEYS,
        vae_latent_channels=files.vae_latent_channels,
        presets=files.FILE_PRESETS,
        parts=files.file_parts,
        extras=files.file_extras,
        extra_components=files.EXTRA_COMPONENTS,
        build_extra=files.build_extra,
        build_vae=files.build_vae,
        model_classes={PRUNED_CLASS: files.pruned_class},
    ),
    dit_forward=dit_forward,
    dry_run_one_block=True,
    vae_dry_frames=3,  # its decode's chunks: nothing under 3 latent frames
    tiny_presets=TINY_PRESETS,
    tiny_jobs=TINY_JOBS,
    # the ref2va partition (a second 33B DiT): its reference jobs are refused (NOTES.md)
    folder_skip=frozenset({"transformer_ref"}),
    lora_misfit_hint=(
        "a LoRA trained on H3's pruned-AdaLN DiT (ComfyUI's `*_pruned_*` files; the "
        "templates' turbo LoRAs) has AdaLN projections of the curve's width (8): serve the "
        "pruned DiT file for it"
    ),
)
