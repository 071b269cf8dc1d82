"""Qwen-Image 2.1 (text-to-image, and image edit with input images)."""

from __future__ import annotations

from ....contract import TEXT_TO_IMAGE
from ....request import IMAGE_PREP_COMFYUI, IMAGE_PREP_COMFYUI_VISION
from ....sampling.names import SAMPLERS
from ...family_spec import BlockLayout, FamilySpec
from ...file_spec import FileSpec
from ...vae_tiles import enable_quarter_overlap_tiles
from .adapter import QwenImage21
from .memory import cached_prefix, dit_forward
from .parallel import qwen_image21_cp_plan
from .single_file import (
    FILE_PRESETS,
    QWEN_IMAGE21,
    detect_dit,
    detect_vae,
    dit_row_map,
    text_widths,
    vae_key_names,
)
from .tiny import PRESETS as TINY_PRESETS
from .tiny_job import TINY_JOBS

SPEC = FamilySpec(
    "qwen_image21",
    adapters=(
        QwenImage21(
            "qwen_image21",
            TEXT_TO_IMAGE,
            ("QwenImage21Pipeline",),
            # the processor stays on every rank: the pipeline reads its chat template when built
            frozenset({"text_encoder"}),
            # the first step's blocks run the text and the image, the later ones the image
            # alone against the cached prefix: a step cache's residuals change shape
            step_cache=False,
            samplers=SAMPLERS,
            # an edit's references as ComfyUI's TextEncodeQwenImage21 presents them
            image_preps=(IMAGE_PREP_COMFYUI, IMAGE_PREP_COMFYUI_VISION),  # comfyui_prep.py
        ),
    ),
    transformer_classes=("QwenImage21Transformer2DModel",),
    cp_plans={"QwenImage21Transformer2DModel": qwen_image21_cp_plan},
    # its blocks return the joint sequence alone
    block_layouts={"QwenImage21TransformerBlock": BlockLayout(second=None)},
    files=FileSpec(
        detect_dit=detect_dit,
        detection_order=85,
        family=QWEN_IMAGE21,
        dit_row_map=dit_row_map,
        text_widths=text_widths,
        detect_parts=((65, detect_vae),),
        vae_key_names=vae_key_names,
        presets=FILE_PRESETS,
    ),
    dit_forward=dit_forward,
    dry_run_one_block=True,
    # the prompt prefix's keys and values, cached from the first step to the last
    held_across_steps={"QwenImage21Pipeline": cached_prefix},
    vae_frame_axis=True,
    # the Wan 2.2 VAE's tiles (a quarter of overlap): `enable_tiling`'s default stride of 192
    # with smaller tiles would leave gaps (an edit's tiled reference encode lost its columns)
    vae_tiling={"AutoencoderKLQwenImage21": enable_quarter_overlap_tiles},
    tiny_presets=TINY_PRESETS,
    tiny_jobs=TINY_JOBS,
)
