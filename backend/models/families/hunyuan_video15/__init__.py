"""HunyuanVideo 1.5 (text- and image-to-video)."""

from __future__ import annotations

from ....contract import IMAGE_TO_VIDEO, TEXT_TO_VIDEO
from ....request import IMAGE_PREP_COMFYUI
from ....sampling.names import SAMPLERS
from ...family_spec import BlockLayout, FamilySpec
from ...file_spec import FileSpec
from .adapter import HunyuanVideo15, HunyuanVideo15ImageToVideo
from .detect import hunyuan15_vae
from .memory import dit_forward
from .parallel import prepare_hunyuan_video15
from .single_file import (
    FILE_PRESETS,
    detect_diffusers_dit,
    detect_dit,
    dit_row_map,
    file_scheduler,
    text_widths,
    vae_key_names,
)
from .tiny import PRESETS as TINY_PRESETS
from .tiny_job import TINY_JOBS
from .vae import enable_tiles

_TEXT = frozenset({"text_encoder", "tokenizer", "text_encoder_2", "tokenizer_2"})
SPEC = FamilySpec(
    "hunyuan_video15",
    adapters=(
        HunyuanVideo15(
            "hunyuanvideo1.5-t2v",
            TEXT_TO_VIDEO,
            ("HunyuanVideo15Pipeline",),
            _TEXT,
            samplers=SAMPLERS,
        ),
        HunyuanVideo15ImageToVideo(
            "hunyuanvideo1.5-i2v",
            IMAGE_TO_VIDEO,
            ("HunyuanVideo15ImageToVideoPipeline",),
            _TEXT | {"image_encoder"},
            samplers=SAMPLERS,
            image_preps=(IMAGE_PREP_COMFYUI,),  # comfyui_prep.py
        ),
    ),
    transformer_classes=("HunyuanVideo15Transformer3DModel",),
    files=FileSpec(
        detect_dit=detect_dit,
        detect_diffusers_dit=detect_diffusers_dit,
        detection_order=60,
        vae_key_names=vae_key_names,
        scheduler=file_scheduler,
        text_widths=text_widths,
        image_encoder_kind="siglip",
        family="hunyuanvideo1.5",
        dit_row_map=dit_row_map,
        all_in_one=True,
        detect_parts=((90, hunyuan15_vae),),
        presets=FILE_PRESETS,
    ),
    dit_forward=dit_forward,
    cp_plans={"HunyuanVideo15Transformer3DModel": prepare_hunyuan_video15},
    block_layouts={
        # (hidden_states, encoder_hidden_states) = block(hidden_states, encoder_hidden_states, ...)
        "HunyuanVideo15TransformerBlock": BlockLayout(),
    },
    tiny_presets=TINY_PRESETS,
    vae_tiling={"AutoencoderKLHunyuanVideo15": enable_tiles},
    vae_split={"AutoencoderKLHunyuanVideo15": ("HunyuanVideo15AttnBlock",)},
    tiny_jobs=TINY_JOBS,
)
