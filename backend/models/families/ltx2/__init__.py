"""LTX-2 (text- and image-to-video with audio)."""

from __future__ import annotations

from ....contract import IMAGE_TO_VIDEO, TEXT_TO_VIDEO
from ....sampling.names import SAMPLERS
from ...family_spec import BlockLayout, FamilySpec
from ...file_spec import FileSpec
from .adapter import DISTILLED_SCHEDULER, FPS, LTX2, LTX2ImageToVideo
from .detect import ltx2_vae
from .diffusion_vae import build_vae
from .files import EXTRA_COMPONENTS, build_extra, describe_parts, file_extras, file_parts
from .guidance import PLAIN_CFG
from .memory import diffusion_decode, forward, gathered
from .parallel import prepare_ltx2
from .single_file import (
    FILE_PRESETS,
    detect_diffusers_dit,
    detect_dit,
    dit_file_keys,
    dit_row_map,
    text_widths,
    vae_key_names,
)
from .tiny import PRESETS as TINY_PRESETS
from .tiny_job import TINY_JOBS
from .vae import enable_tiles

__all__ = ["DISTILLED_SCHEDULER", "FPS", "PLAIN_CFG", "SPEC"]

_TEXT = frozenset({"text_encoder", "tokenizer"})
SPEC = FamilySpec(
    "ltx2",
    adapters=(
        LTX2(
            "ltx2-t2v",
            TEXT_TO_VIDEO,
            ("LTX2Pipeline",),
            _TEXT,
            batched_cfg=True,
            samplers=SAMPLERS,
        ),
        LTX2ImageToVideo(
            "ltx2-i2v",
            IMAGE_TO_VIDEO,
            ("LTX2ImageToVideoPipeline",),
            _TEXT,
            batched_cfg=True,
            samplers=SAMPLERS,
        ),
    ),
    transformer_classes=("LTX2VideoTransformer3DModel",),
    files=FileSpec(
        detect_dit=detect_dit,
        detect_diffusers_dit=detect_diffusers_dit,
        detection_order=70,
        vae_key_names=vae_key_names,
        text_widths=text_widths,
        family="ltx2",
        dit_row_map=dit_row_map,
        dit_keys=dit_file_keys,
        detect_parts=((100, ltx2_vae),),
        presets=FILE_PRESETS,
        runs_all_in_one=True,
        parts=file_parts,
        extras=file_extras,
        extra_components=EXTRA_COMPONENTS,
        build_extra=build_extra,
        build_vae=build_vae,
        describe_parts=describe_parts,
    ),
    dit_forward=forward,
    gathered=gathered,
    vae_decoder=diffusion_decode,
    cp_plans={"LTX2VideoTransformer3DModel": prepare_ltx2},
    block_layouts={
        # (hidden_states, audio_hidden_states) = block(hidden_states, audio_hidden_states, ...)
        "LTX2VideoTransformerBlock": BlockLayout(second_input="audio_hidden_states"),
    },
    tiny_presets=TINY_PRESETS,
    vae_tiling={"AutoencoderKLLTX2Video": enable_tiles},
    vae_split={"AutoencoderKLLTX2Video": ()},
    tiny_jobs=TINY_JOBS,
)
