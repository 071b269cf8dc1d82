"""Flux.2 [klein] 4B and 9B (text-to-image, edits with reference images; no step cache), and
FLUX.2 [klein] 9B KV (its edits' references cached: `Flux2KleinKVPipeline`)."""

from __future__ import annotations

from ....contract import TEXT_TO_IMAGE
from ...family_spec import FamilySpec
from ...file_spec import FileSpec
from ..flux2.memory import dit_forward  # the Flux.2 DiT's
from .adapter import Flux2Klein, Flux2KleinKV
from .memory import cached_references
from .parallel import flux2_cp_plan
from .single_file import FILE_PRESETS
from .tiny import PIPELINE_CONFIG as TINY_PIPELINE_CONFIG
from .tiny import PRESETS as TINY_PRESETS
from .tiny_job import TINY_JOBS

SPEC = FamilySpec(
    "flux2_klein",
    adapters=(
        Flux2Klein(
            "flux2-klein",
            TEXT_TO_IMAGE,
            ("Flux2KleinPipeline",),
            frozenset({"text_encoder", "tokenizer"}),
            step_cache=False,
            own_levels=("Flux2Scheduler",),
            reference_latents=True,  # the Flux2Pipeline's reference preparation, copied
        ),
        Flux2KleinKV(
            "flux2-klein-kv",
            TEXT_TO_IMAGE,
            ("Flux2KleinKVPipeline",),
            frozenset({"text_encoder", "tokenizer"}),
            step_cache=False,
            own_levels=("Flux2Scheduler",),
            # Klein's reference preparation, but its references attend only to themselves at
            # the first step, which neither ComfyUI's `index` method nor its FluxKVCache does
            # (NOTES.md): a workflow's ReferenceLatent on a KV file is refused
            reference_latents=False,
        ),
    ),
    transformer_classes=("Flux2Transformer2DModel",),
    dit_forward=dit_forward,
    dry_run_one_block=True,
    # the KV pipeline's references' keys and values, kept through every step
    held_across_steps={"Flux2KleinKVPipeline": cached_references},
    # the KV pipeline's cached references under Ulysses; diffusers' own plan otherwise
    cp_plans={"Flux2Transformer2DModel": flux2_cp_plan},
    tiny_presets=TINY_PRESETS,
    tiny_pipeline_config=TINY_PIPELINE_CONFIG,
    files=FileSpec(
        presets=FILE_PRESETS,
    ),
    tiny_jobs=TINY_JOBS,
)
