"""Text and image encoder kinds, one module each (`kind.EncoderKind`: recognition, pipeline
slot, tokenizer lookup, the tiny presets' tokenizers), listed once in `KINDS`. Adding a kind
(Qwen3-VL, Gemma 4) is one module here and its line below; the single-file drivers, the
tokenizer lookup and the `random:` presets read the list, and a family names the kinds its
files take (`Preset.encoders`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .byt5 import BYT5
from .clip import CLIP
from .gemma3 import GEMMA3
from .gemma4 import GEMMA4
from .kind import EncoderKind
from .mistral3 import MISTRAL
from .qwen3 import QWEN3
from .qwen3_vl import QWEN3_VL
from .qwen25_vl import QWEN25_VL
from .qwen35 import QWEN35
from .siglip import SIGLIP
from .t5 import T5, UMT5

__all__ = ["KINDS", "EncoderKind", "encoder_kind", "recognitions", "slots"]

KINDS: tuple[EncoderKind, ...] = (
    T5,
    UMT5,
    CLIP,
    BYT5,
    QWEN3,
    QWEN25_VL,
    QWEN3_VL,
    QWEN35,
    MISTRAL,
    GEMMA3,
    GEMMA4,
    SIGLIP,
)
"""Every encoder kind paradit reads: one line per kind."""


def encoder_kind(name: str) -> EncoderKind | None:
    """The kind `Detection.family` names, or None for none (a VAE's or a DiT's family)."""
    return next((kind for kind in KINDS if kind.name == name), None)


def slots() -> dict[str, str]:
    """Text encoder kind -> the pipeline slot its file fills."""
    return {kind.name: kind.slot for kind in KINDS if kind.slot}


def recognitions() -> list[tuple[int, Callable[[Any], Any]]]:
    """Every kind's recognitions, each with its place in the order."""
    return [found for kind in KINDS for found in kind.recognitions]
