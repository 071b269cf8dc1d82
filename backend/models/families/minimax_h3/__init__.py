"""MiniMax H3 (text-to-audio-video, guidance-distilled)."""

from __future__ import annotations

from ....contract import TEXT_TO_VIDEO
from ...family_spec import FamilySpec
from ...file_spec import FileSpec
from .adapter import MiniMaxH3
from .memory import dit_forward
from .single_file import MINIMAX_H3, detect_audio_vae, detect_dit, detect_video_vae
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
        ),
    ),
    transformer_classes=("MiniMaxH3Transformer3DModel",),
    # recognised (`paradit models`), its VAE files read by `vae_files.py`; no pipeline is
    # built from its files yet (single_file.py)
    files=FileSpec(
        detect_dit=detect_dit,
        detection_order=90,
        family=MINIMAX_H3,
        # before the other VAEs: the video VAE's encoder has the LDM VAE's `encoder.down.N`
        detect_parts=((60, detect_video_vae), (61, detect_audio_vae)),
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
