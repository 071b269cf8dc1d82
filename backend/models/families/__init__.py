"""Model adapters, one module per family: what paradit needs to know about each family of
diffusers pipelines (limits, which components only the encoding rank needs, how to encode a
request, which arguments the pipeline gets on every rank, how to decode in tiles).

Before loading, the pipeline class name is all there is (`family_for`: which encoders to
skip); once loaded, the pipeline's settings can say more (`family_of`: Wan 2.2 TI2V-5B and
I2V-A14B, `wan22.py`).
"""

from __future__ import annotations

from typing import Any

from ...contract import IMAGE_EDIT, IMAGE_TO_VIDEO, TEXT_TO_IMAGE, TEXT_TO_VIDEO
from ...sampling.names import SAMPLERS
from .base import Family, Tensors, TiledDecode, request_image, video_kwargs
from .cogvideox import CogVideoX
from .flux import Flux
from .flux2 import Flux2
from .flux2_klein import Flux2Klein
from .hunyuan_video15 import HunyuanVideo15, HunyuanVideo15ImageToVideo
from .ltx2 import LTX2, LTX2ImageToVideo
from .qwen_image import QwenImage
from .qwen_image_edit import QwenImageEdit
from .wan import WanImageToVideo, WanTextToVideo
from .wan22 import specialize
from .z_image import ZImage

__all__ = [
    "FAMILIES",
    "Family",
    "Tensors",
    "TiledDecode",
    "family_for",
    "family_of",
    "request_image",
    "video_kwargs",
]

_TEXT = frozenset({"text_encoder", "tokenizer"})
FAMILIES: tuple[Family, ...] = (
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
    Flux(
        "flux",
        TEXT_TO_IMAGE,
        ("FluxPipeline",),
        frozenset({"text_encoder", "text_encoder_2", "tokenizer", "tokenizer_2"}),
        samplers=SAMPLERS,
    ),
    QwenImage(
        "qwen-image",
        TEXT_TO_IMAGE,
        ("QwenImagePipeline",),
        _TEXT,
        samplers=SAMPLERS,
    ),
    QwenImageEdit(
        "qwen-image-edit",
        IMAGE_EDIT,
        ("QwenImageEditPlusPipeline", "QwenImageEditPipeline"),
        _TEXT | {"processor"},
        step_cache=False,
    ),
    Flux2(
        "flux2",
        TEXT_TO_IMAGE,
        ("Flux2Pipeline",),
        _TEXT,
        step_cache=False,
    ),
    Flux2Klein(
        "flux2-klein",
        TEXT_TO_IMAGE,
        ("Flux2KleinPipeline",),
        _TEXT,
        step_cache=False,
    ),
    ZImage(
        "z-image",
        TEXT_TO_IMAGE,
        ("ZImagePipeline",),
        _TEXT,
        batched_cfg=True,
        samplers=SAMPLERS,
    ),
    CogVideoX(
        "cogvideox-t2v",
        TEXT_TO_VIDEO,
        ("CogVideoXPipeline",),
        _TEXT,
        batched_cfg=True,
    ),
    CogVideoX(
        "cogvideox-i2v",
        IMAGE_TO_VIDEO,
        ("CogVideoXImageToVideoPipeline",),
        _TEXT,
        batched_cfg=True,
    ),
    HunyuanVideo15(
        "hunyuanvideo1.5-t2v",
        TEXT_TO_VIDEO,
        ("HunyuanVideo15Pipeline",),
        _TEXT | {"text_encoder_2", "tokenizer_2"},
    ),
    HunyuanVideo15ImageToVideo(
        "hunyuanvideo1.5-i2v",
        IMAGE_TO_VIDEO,
        ("HunyuanVideo15ImageToVideoPipeline",),
        _TEXT | {"text_encoder_2", "tokenizer_2", "image_encoder"},
    ),
    LTX2(
        "ltx2-t2v",
        TEXT_TO_VIDEO,
        ("LTX2Pipeline",),
        _TEXT,
        batched_cfg=True,
    ),
    LTX2ImageToVideo(
        "ltx2-i2v",
        IMAGE_TO_VIDEO,
        ("LTX2ImageToVideoPipeline",),
        _TEXT,
        batched_cfg=True,
    ),
)


def family_for(pipeline_class: str) -> Family:
    """The adapter for a diffusers pipeline class name; ValueError for unsupported ones.

    A loaded pipeline's settings may pick a more specific family: `family_of`.
    """
    for family in FAMILIES:
        if pipeline_class in family.pipeline_classes:
            return family
    supported = sorted(c for f in FAMILIES for c in f.pipeline_classes)
    raise ValueError(f"unsupported pipeline {pipeline_class!r}; supported: {supported}")


def family_of(pipe: Any) -> Family:
    """The adapter for a loaded pipeline; ValueError for unsupported ones."""
    return specialize(family_for(type(pipe).__name__), pipe)
