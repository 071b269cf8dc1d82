"""Flux.2 [dev] (text-to-image, edits with reference images; no step cache)."""

from __future__ import annotations

from ....contract import TEXT_TO_IMAGE
from ...family_spec import FamilySpec
from ...file_spec import FileSpec
from ...vae_tiles import enable_square_tiles
from .adapter import Flux2
from .detect import flux2_vae
from .memory import dit_forward
from .single_file import FILE_PRESETS, detect_dit, dit_row_map, text_widths, vae_latent_channels
from .tiny import PRESETS as TINY_PRESETS
from .tiny_job import TINY_JOBS

SPEC = FamilySpec(
    "flux2",
    adapters=(
        Flux2(
            "flux2",
            TEXT_TO_IMAGE,
            ("Flux2Pipeline",),
            frozenset({"text_encoder", "tokenizer"}),
            step_cache=False,
            own_levels=("Flux2Scheduler",),
            reference_latents=True,  # ComfyUI's ReferenceLatent is the pipeline's reference
        ),
    ),
    transformer_classes=("Flux2Transformer2DModel",),
    files=FileSpec(
        detect_dit=detect_dit,
        detection_order=20,  # before Flux.1: the same double blocks
        text_widths=text_widths,
        vae_latent_channels=vae_latent_channels,
        family="flux2",
        dit_row_map=dit_row_map,
        detect_parts=((80, flux2_vae),),
        presets=FILE_PRESETS,
    ),
    dit_forward=dit_forward,
    dry_run_one_block=True,
    tiny_presets=TINY_PRESETS,
    vae_tiling={"AutoencoderKLFlux2": enable_square_tiles},  # tiles as Flux's,
    vae_split={"AutoencoderKLFlux2": ("Attention",)},
    tiny_jobs=TINY_JOBS,
)
