"""Z-Image (Turbo) (text-to-image; no step cache)."""

from __future__ import annotations

from ....contract import TEXT_TO_IMAGE
from ....sampling.names import SAMPLERS
from ...family_spec import FamilySpec
from ...file_spec import FileSpec
from .adapter import ZImage
from .memory import dit_forward
from .parallel import z_image_cp_plan
from .single_file import DROPPED, FILE_PRESETS, detect_dit, dit_row_map, vae_latent_channels
from .tiny import PRESETS as TINY_PRESETS
from .tiny_job import TINY_JOBS

SPEC = FamilySpec(
    "z_image",
    adapters=(
        ZImage(
            "z-image",
            TEXT_TO_IMAGE,
            ("ZImagePipeline",),
            frozenset({"text_encoder", "tokenizer"}),
            batched_cfg=True,
            step_cache=False,
            samplers=SAMPLERS,
        ),
    ),
    transformer_classes=("ZImageTransformer2DModel",),
    files=FileSpec(
        detect_dit=detect_dit,
        detection_order=50,
        vae_latent_channels=vae_latent_channels,
        vae_family="flux",
        family="z-image",
        dit_row_map=dit_row_map,
        dropped_keys=DROPPED,
        presets=FILE_PRESETS,
    ),
    dit_forward=dit_forward,
    cp_plans={"ZImageTransformer2DModel": z_image_cp_plan},
    tiny_presets=TINY_PRESETS,
    tiny_jobs=TINY_JOBS,
)
