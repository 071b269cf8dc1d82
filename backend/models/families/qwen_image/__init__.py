"""Qwen-Image (text-to-image)."""

from __future__ import annotations

from ....contract import TEXT_TO_IMAGE
from ....sampling.names import SAMPLERS
from ...family_spec import FamilySpec
from ...file_spec import FileSpec
from ...vae_tiles import enable_quarter_overlap_tiles
from .adapter import PACKED_PIXELS, QwenImage
from .memory import dit_forward
from .single_file import FILE_PRESETS, detect_dit
from .tiny import PRESETS as TINY_PRESETS
from .tiny_job import TINY_JOBS

SPEC = FamilySpec(
    "qwen_image",
    adapters=(
        QwenImage(
            "qwen-image",
            TEXT_TO_IMAGE,
            ("QwenImagePipeline",),
            frozenset({"text_encoder", "tokenizer"}),
            samplers=SAMPLERS,
            plain_cfg=True,
            cfg_norm_pixels=PACKED_PIXELS,
        ),
    ),
    transformer_classes=("QwenImageTransformer2DModel",),
    files=FileSpec(
        detect_dit=detect_dit,
        detection_order=40,
        vae_family="wan",
        family="qwen-image",
        presets=FILE_PRESETS,
    ),
    dit_forward=dit_forward,
    vae_frame_axis=True,
    tiny_presets=TINY_PRESETS,
    vae_tiling={"AutoencoderKLQwenImage": enable_quarter_overlap_tiles},
    vae_split={"AutoencoderKLQwenImage": ("QwenImageAttentionBlock",)},
    tiny_jobs=TINY_JOBS,
)
