"""Built-in tiny model presets: real diffusers pipelines with seeded random weights.

Every preset is built offline in well under a second. Each component is built from its own
fixed seed with an explicit generator, so the same preset gives bit-identical weights on every
machine, whatever other components are built, and the caller's global RNG state is untouched.

Every family declares its tiny presets (`FamilySpec.tiny_presets`, built in its folder's
`tiny.py`; its NOTES.md describes them). Pixel sizes must be multiples of 16 for all presets.
The byte-level tokenizers give every byte its own token, so any unicode text tokenizes.

diffusers and transformers are imported only when a preset is built (they take seconds); the
names (`PRESET_NAMES`, `is_preset`) are `preset_names.py`'s, torch-free. `random:<model>`
presets (the real architectures with seeded random weights) live in `random_presets.py`; the
functions here take both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from .families import SPECS  # the families declare their tiny presets
from .preset_names import PRESET_NAMES, RANDOM_PRESET_NAMES, is_random_preset
from .random_presets import (
    assemble_pipeline,
    build_random_preset,
    random_preset_components,
    random_preset_pipeline_class,
    wanted_components,
)
from .tiny_parts import Builders

if TYPE_CHECKING:
    from diffusers import DiffusionPipeline


def preset_components(name: str) -> frozenset[str]:
    """The component names of preset `name`."""
    if is_random_preset(name):
        return random_preset_components(name)
    return frozenset(_preset(name)[1])


def build_preset(
    name: str,
    *,
    components: frozenset[str] | None = None,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str = "cpu",
) -> DiffusionPipeline:
    """Build preset `name`; only the named `components` (default: all), the rest are None.

    Random presets are built directly in `dtype` on `device` ("meta": no memory); tiny ones
    in float32 on the CPU (the caller moves them).
    """
    if is_random_preset(name):
        return build_random_preset(name, components=components, dtype=dtype, device=device)
    pipeline_class_name, builders = _preset(name)
    wanted = wanted_components(name, builders.keys(), components)
    parts = {
        component: (build() if component in wanted else None)
        for component, build in builders.items()
    }
    return assemble_pipeline(pipeline_class_name, parts, _pipeline_config(name))


def _preset(name: str) -> tuple[str, Builders]:
    for spec in SPECS:
        if name in spec.tiny_presets:
            return spec.tiny_presets[name]
    choices = ", ".join((*PRESET_NAMES, *RANDOM_PRESET_NAMES))
    raise ValueError(f"unknown preset {name!r}: choose one of {choices}")


def _pipeline_config(name: str) -> dict[str, Any]:
    """The tiny preset's pipeline settings, as the real repo's model_index.json has them."""
    return next(
        (
            dict(spec.tiny_pipeline_config[name])
            for spec in SPECS
            if name in spec.tiny_pipeline_config
        ),
        {},
    )


def preset_pipeline_class(name: str) -> str:
    """The diffusers pipeline class name of preset `name`, without building it."""
    if is_random_preset(name):
        return random_preset_pipeline_class(name)
    return _preset(name)[0]
