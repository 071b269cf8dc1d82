"""Krea 2 (text-to-image)."""

from __future__ import annotations

from ....contract import TEXT_TO_IMAGE
from ....sampling.names import SAMPLERS
from ...family_spec import BlockLayout, FamilySpec
from ...file_spec import FileSpec
from ...vae_tiles import enable_quarter_overlap_tiles
from .adapter import Krea2
from .memory import dit_forward
from .parallel import krea2_cp_plan
from .single_file import FILE_PRESETS, KREA2, detect_dit, dit_row_map, dit_shapes, text_widths
from .tiny import PIPELINE_CONFIG as TINY_PIPELINE_CONFIG
from .tiny import PRESETS as TINY_PRESETS
from .tiny_job import TINY_JOBS

SPEC = FamilySpec(
    "krea2",
    adapters=(
        Krea2(
            "krea2",
            TEXT_TO_IMAGE,
            ("Krea2Pipeline",),
            frozenset({"text_encoder", "tokenizer"}),
            samplers=SAMPLERS,
        ),
    ),
    transformer_classes=("Krea2Transformer2DModel",),
    cp_plans={"Krea2Transformer2DModel": krea2_cp_plan},
    # its blocks return the joint sequence alone (diffusers' cache registry lacks the class)
    block_layouts={"Krea2TransformerBlock": BlockLayout(second=None)},
    files=FileSpec(
        detect_dit=detect_dit,
        detection_order=80,
        family=KREA2,
        dit_row_map=dit_row_map,
        dit_shapes=dit_shapes,
        text_widths=text_widths,
        vae_family="wan",  # the Qwen-Image VAE: the Wan 2.1 VAE's key names
        presets=FILE_PRESETS,
    ),
    dit_forward=dit_forward,
    vae_frame_axis=True,
    tiny_presets=TINY_PRESETS,
    tiny_pipeline_config=TINY_PIPELINE_CONFIG,
    vae_tiling={"AutoencoderKLQwenImage": enable_quarter_overlap_tiles},
    vae_split={"AutoencoderKLQwenImage": ("QwenImageAttentionBlock",)},
    tiny_jobs=TINY_JOBS,
)
