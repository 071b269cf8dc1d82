"""Qwen-Image-Edit and Edit-2509 (image edit; no step cache)."""

from __future__ import annotations

from ....contract import IMAGE_EDIT
from ....request import IMAGE_PREP_COMFYUI, REFERENCE_INDEX, REFERENCE_TIMESTEP_ZERO
from ....sampling.names import SAMPLERS
from ...family_spec import FamilySpec
from ...file_spec import FileSpec
from ..qwen_image.adapter import PACKED_PIXELS
from ..qwen_image.memory import dit_forward  # Qwen-Image's DiT, with references
from ..qwen_image.tiny import EDIT_PRESETS as TINY_PRESETS
from .adapter import QwenImageEdit
from .single_file import FILE_PRESETS
from .tiny_job import TINY_JOBS

SPEC = FamilySpec(
    "qwen_image_edit",
    adapters=(
        QwenImageEdit(
            "qwen-image-edit",
            IMAGE_EDIT,
            ("QwenImageEditPlusPipeline", "QwenImageEditPipeline"),
            frozenset({"text_encoder", "tokenizer", "processor"}),
            step_cache=False,
            samplers=SAMPLERS,  # the pipeline's loop calls its scheduler as Qwen-Image's does
            plain_cfg=True,  # the same rescale to the conditional norm as Qwen-Image's
            cfg_norm_pixels=PACKED_PIXELS,
            image_preps=(IMAGE_PREP_COMFYUI,),  # comfyui_prep.py
            reference_methods=(REFERENCE_INDEX, REFERENCE_TIMESTEP_ZERO),
        ),
    ),
    transformer_classes=("QwenImageTransformer2DModel",),
    dit_forward=dit_forward,
    vae_frame_axis=True,
    tiny_presets=TINY_PRESETS,
    files=FileSpec(
        presets=FILE_PRESETS,
    ),
    tiny_jobs=TINY_JOBS,
)
