"""Model families, one folder each: what paradit needs to know about each family of diffusers
pipelines (limits, which components only the encoding rank needs, how to encode a request,
which arguments the pipeline gets on every rank, how to decode in tiles, its sequence-parallel
plan and step-cache block layout), declared by the folder's `SPEC` (`family_spec.FamilySpec`).

`SPECS` is the registration list: one line per family. Generic code loops over it (the
lookups below, `cp_plan_for`, `block_layout_for`); `README.md` here is the checklist for adding
a family.

Before loading, the pipeline class name is all there is (`family_for`: which encoders to
skip); once loaded, the pipeline's settings can say more (`family_of`: Wan 2.2 TI2V-5B and
I2V-A14B, `wan/wan22.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..family_spec import BlockLayout, FamilySpec
from .base import (
    Family,
    SecondStage,
    Tensors,
    TiledDecode,
    Upsampler,
    request_image,
    video_kwargs,
)
from .cogvideox import SPEC as COGVIDEOX
from .flux import SPEC as FLUX
from .flux2 import SPEC as FLUX2
from .flux2_klein import SPEC as FLUX2_KLEIN
from .hunyuan_video15 import SPEC as HUNYUAN_VIDEO15
from .krea2 import SPEC as KREA2
from .ltx2 import SPEC as LTX2
from .minimax_h3 import SPEC as MINIMAX_H3
from .qwen_image import SPEC as QWEN_IMAGE
from .qwen_image21 import SPEC as QWEN_IMAGE21
from .qwen_image_edit import SPEC as QWEN_IMAGE_EDIT
from .wan import SPEC as WAN
from .z_image import SPEC as Z_IMAGE

__all__ = [
    "FAMILIES",
    "SPECS",
    "Family",
    "FamilySpec",
    "SecondStage",
    "Upsampler",
    "attention_dispatch_for",
    "Tensors",
    "TiledDecode",
    "block_layout_for",
    "cp_plan_for",
    "enable_tiles",
    "family_for",
    "family_of",
    "held_across_steps_for",
    "request_image",
    "spec_for_dit",
    "spec_of",
    "video_kwargs",
]

SPECS: tuple[FamilySpec, ...] = (
    WAN,
    FLUX,
    QWEN_IMAGE,
    QWEN_IMAGE_EDIT,
    FLUX2,
    FLUX2_KLEIN,
    Z_IMAGE,
    COGVIDEOX,
    HUNYUAN_VIDEO15,
    LTX2,
    MINIMAX_H3,
    KREA2,
    QWEN_IMAGE21,
)
"""Every family paradit serves: one line per family (its folder's `SPEC`)."""

FAMILIES: tuple[Family, ...] = tuple(adapter for spec in SPECS for adapter in spec.adapters)
"""Every pipeline adapter, in the specs' order."""


def family_for(pipeline_class: str) -> Family:
    """The adapter for a diffusers pipeline class name; ValueError for unsupported ones.

    A loaded pipeline's settings may pick a more specific family: `family_of`.
    """
    for family in FAMILIES:
        if pipeline_class in family.pipeline_classes:
            return family
    supported = sorted(c for f in FAMILIES for c in f.pipeline_classes)
    raise ValueError(f"unsupported pipeline {pipeline_class!r}; supported: {supported}")


def spec_of(family: Family) -> FamilySpec:
    """The spec that declares `family` (an adapter of `FAMILIES` or one its spec specializes)."""
    name = family_for(family.pipeline_classes[0]).name
    return next(spec for spec in SPECS if name in {a.name for a in spec.adapters})


def family_of(pipe: Any) -> Family:
    """The adapter for a loaded pipeline; ValueError for unsupported ones."""
    family = family_for(type(pipe).__name__)
    specialize = spec_of(family).specialize
    return family if specialize is None else specialize(family, pipe)


def cp_plan_for(transformer_class: str) -> Callable[[Any], dict[str, Any]] | None:
    """The function that prepares a DiT of `transformer_class` for sequence parallelism and
    returns its context-parallel plan, where a family supplies one (diffusers' own
    `_cp_plan` serves the others); None when none does."""
    for spec in SPECS:
        if transformer_class in spec.cp_plans:
            return spec.cp_plans[transformer_class]
    return None


def spec_for_dit(transformer_class: str) -> FamilySpec | None:
    """The first spec whose pipelines hold a DiT of `transformer_class` (families that share
    a DiT class share its dry run); None when no family does."""
    return next((spec for spec in SPECS if transformer_class in spec.transformer_classes), None)


def attention_dispatch_for(transformer_class: str) -> Callable[[Any], None] | None:
    """The function that makes a DiT of `transformer_class` attend through diffusers'
    dispatch, where its family supplies one (`FamilySpec.attention_dispatch`); None when its
    processors dispatch already."""
    for spec in SPECS:
        if transformer_class in spec.attention_dispatch:
            return spec.attention_dispatch[transformer_class]
    return None


def enable_tiles(vae: Any, height: int, width: int) -> None:
    """Tiling on, with tiles of `height` x `width` sample pixels, as the family whose VAE it is
    declares (`FamilySpec.vae_tiling`: Wan and Qwen-Image a quarter of overlap, as 256 every
    192; `AutoencoderKL`, Flux's, square tiles of a size they step through evenly,
    `vae_tiles.enable_square_tiles`; ValueError for sizes a VAE cannot take); the VAE's own
    default share of overlap otherwise (CogVideoX: its own factors)."""
    if height <= 0 or width <= 0:
        raise ValueError(f"tile size must be positive, got {height}x{width}")
    kind = type(vae).__name__
    for spec in SPECS:
        if kind in spec.vae_tiling:
            spec.vae_tiling[kind](vae, height, width)
            return
    vae.enable_tiling(tile_sample_min_height=height, tile_sample_min_width=width)


def vae_split_of(vae: Any) -> tuple[str, ...] | None:
    """The decoder's whole-frame module classes of a VAE whose decode splits exactly into
    row bands (`FamilySpec.vae_split`); None for a VAE that does not split (or no VAE)."""
    kind = type(vae).__name__
    return next((spec.vae_split[kind] for spec in SPECS if kind in spec.vae_split), None)


def held_across_steps_for(pipeline_class: str) -> Callable[[Any, Any, int], int] | None:
    """What a pipeline of `pipeline_class` keeps on a rank across its steps beside a
    forward's activations, as its family counts it (`FamilySpec.held_across_steps`); None
    when it keeps nothing the DiT's dry run does not hold."""
    return next(
        (
            spec.held_across_steps[pipeline_class]
            for spec in SPECS
            if pipeline_class in spec.held_across_steps
        ),
        None,
    )


def block_layout_for(block_class: str) -> BlockLayout | None:
    """A transformer block's layout for diffusers' step-cache hooks, where a family declares
    one (diffusers' registry lists the others)."""
    for spec in SPECS:
        if block_class in spec.block_layouts:
            return spec.block_layouts[block_class]
    return None
