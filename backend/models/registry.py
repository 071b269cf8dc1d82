"""Which family adapter runs a loaded pipeline.

Before loading, the pipeline class name is all there is (`families.family_for`: which
encoders to skip); once loaded, the pipeline's settings can say more: a Wan pipeline with
`expand_timesteps` is Wan 2.2 TI2V-5B, an image-to-video one with two experts I2V-A14B
(`wan22.py`).
"""

from __future__ import annotations

from typing import Any

from .families import Family, family_for
from .wan22 import specialize


def family_of(pipe: Any) -> Family:
    """The adapter for a loaded pipeline; ValueError for unsupported ones."""
    return specialize(family_for(type(pipe).__name__), pipe)
