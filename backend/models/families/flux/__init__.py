"""Flux.1 (text-to-image)."""

from __future__ import annotations

from ....contract import TEXT_TO_IMAGE
from ....sampling.names import SAMPLERS
from ...family_spec import FamilySpec
from ...file_spec import FileSpec
from ...vae_tiles import enable_square_tiles
from .adapter import Flux
from .memory import dit_forward
from .single_file import (
    FILE_PRESETS,
    detect_diffusers_dit,
    detect_dit,
    detect_vae,
    dit_row_map,
    text_widths,
)
from .tiny import PRESETS as TINY_PRESETS
from .tiny_job import TINY_JOBS

SPEC = FamilySpec(
    "flux",
    adapters=(
        Flux(
            "flux",
            TEXT_TO_IMAGE,
            ("FluxPipeline",),
            frozenset({"text_encoder", "text_encoder_2", "tokenizer", "tokenizer_2"}),
            samplers=SAMPLERS,
            second_prompt=True,
        ),
    ),
    transformer_classes=("FluxTransformer2DModel",),
    files=FileSpec(
        detect_dit=detect_dit,
        detect_diffusers_dit=detect_diffusers_dit,
        detection_order=30,
        text_widths=text_widths,
        family="flux",
        dit_row_map=dit_row_map,
        all_in_one=True,
        detect_parts=((110, detect_vae),),
        presets=FILE_PRESETS,
        runs_all_in_one=True,
    ),
    dit_forward=dit_forward,
    dry_run_one_block=True,
    tiny_presets=TINY_PRESETS,
    vae_tiling={"AutoencoderKL": enable_square_tiles},
    vae_split={"AutoencoderKL": ("Attention",)},
    tiny_jobs=TINY_JOBS,
)
