"""The presets single files map onto: what a file header cannot say, per recognised architecture.

Every family declares its own (`FileSpec.presets`, in its folder's `single_file.py`): a
recognised variant (`Detection.variant`) -> its `Preset` (`vocabulary.py`): the tiny or
`random:` preset whose scheduler, VAE config and pipeline settings apply, the pipeline class,
the text encoders and VAE the family needs (named as a user knows them, for the messages), its
image encoder. `PRESETS` (and `ENCODER_CLASSES`, `PAIR_BOUNDARY`) gather them from the specs.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from .spec import FILES
from .vocabulary import (
    CLIP_VISION_H,
    ENCODER_SLOTS,
    PIPELINE_SETTINGS,
    TOKENIZER_SLOTS,
    Preset,
)

__all__ = [
    "CLIP_VISION_H",
    "ENCODER_CLASSES",
    "ENCODER_SLOTS",
    "PAIR_BOUNDARY",
    "PIPELINE_SETTINGS",
    "PRESETS",
    "TOKENIZER_SLOTS",
    "Preset",
]

PRESETS: Mapping[str, Preset] = MappingProxyType(
    {variant: preset for spec in FILES for variant, preset in spec.presets.items()}
)
"""Recognised variant -> its `Preset`, every family's (`FileSpec.presets`)."""
ENCODER_CLASSES: Mapping[str, Mapping[str, str]] = MappingProxyType(
    {p.pipeline: p.encoder_classes for p in PRESETS.values() if p.encoder_classes}
)
"""Pipeline class -> {the file's encoder class: the class the pipeline takes}."""
PAIR_BOUNDARY: Mapping[str, float] = MappingProxyType(
    {p.pair_preset: p.pair_boundary for p in PRESETS.values() if p.pair_boundary}
)
"""Pair preset -> its experts' switch, where the preset's own does not apply."""
