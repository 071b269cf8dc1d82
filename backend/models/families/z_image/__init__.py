"""Z-Image (Turbo) (text-to-image; no step cache)."""

from __future__ import annotations

from ....contract import TEXT_TO_IMAGE
from ...family_spec import FamilySpec
from .adapter import ZImage
from .memory import dit_forward
from .parallel import z_image_cp_plan

SPEC = FamilySpec(
    "z_image",
    adapters=(
        ZImage(
            "z-image",
            TEXT_TO_IMAGE,
            ("ZImagePipeline",),
            frozenset({"text_encoder", "tokenizer"}),
            batched_cfg=True,
            decodes_in_job=True,
            step_cache=False,
        ),
    ),
    transformer_classes=("ZImageTransformer2DModel",),
    dit_forward=dit_forward,
    cp_plans={"ZImageTransformer2DModel": z_image_cp_plan},
)
