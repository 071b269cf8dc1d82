"""Wan 2.1 and 2.2 (text- and image-to-video; 2.2's TI2V-5B and two-expert I2V-A14B)."""

from __future__ import annotations

from ....contract import IMAGE_TO_VIDEO, TEXT_TO_VIDEO
from ....sampling.names import SAMPLERS
from ...family_spec import FamilySpec
from ...file_spec import FileSpec
from ...vae_tiles import enable_quarter_overlap_tiles
from .adapter import WanImageToVideo, WanTextToVideo
from .memory import dit_forward
from .single_file import (
    FILE_PRESETS,
    detect_diffusers_dit,
    detect_dit,
    detect_vae,
    dit_row_map,
    vae_key_names,
)
from .tiny import PIPELINE_CONFIG as TINY_PIPELINE_CONFIG
from .tiny import PRESETS as TINY_PRESETS
from .tiny_job import TINY_JOBS
from .wan22 import specialize

_TEXT = frozenset({"text_encoder", "tokenizer"})
SPEC = FamilySpec(
    "wan",
    adapters=(
        WanTextToVideo(
            "wan-t2v",
            TEXT_TO_VIDEO,
            ("WanPipeline",),
            _TEXT,
            vae_float32=True,
            samplers=SAMPLERS,
        ),
        WanImageToVideo(
            "wan-i2v",
            IMAGE_TO_VIDEO,
            ("WanImageToVideoPipeline",),
            _TEXT | {"image_encoder"},
            vae_float32=True,
            samplers=SAMPLERS,
        ),
    ),
    transformer_classes=("WanTransformer3DModel",),
    files=FileSpec(
        detect_dit=detect_dit,
        detect_diffusers_dit=detect_diffusers_dit,
        detection_order=10,
        family="wan",
        dit_row_map=dit_row_map,
        all_in_one=True,
        detect_parts=((70, detect_vae),),
        presets=FILE_PRESETS,
        vae_key_names=vae_key_names,
    ),
    dit_forward=dit_forward,
    dry_run_one_block=True,
    specialize=specialize,
    tiny_presets=TINY_PRESETS,
    tiny_pipeline_config=TINY_PIPELINE_CONFIG,
    lora_full_diffs=True,
    vae_tiling={"AutoencoderKLWan": enable_quarter_overlap_tiles},
    vae_split={"AutoencoderKLWan": ("WanAttentionBlock",)},
    tiny_jobs=TINY_JOBS,
)
