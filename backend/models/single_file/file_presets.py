"""The presets single files map onto: what a file header cannot say, per recognised architecture.

Every family declares its own (`FamilySpec.file_presets`, in its folder's `single_file.py`): a
recognised variant (`Detection.variant`) -> its `Preset`: the tiny or `random:` preset whose
scheduler, VAE config and pipeline settings apply, the pipeline class, the text encoders and
VAE the family needs (named as a user knows them, for the messages), its image encoder.
`PRESETS` (and `ENCODER_CLASSES`, `PAIR_BOUNDARY`) read them from the specs. The tables below
say which pipeline slot each encoder kind fills and which pipeline settings come from the
preset.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Preset:
    """Where the settings a header cannot hold come from, per recognised architecture."""

    name: str
    """A preset name (tiny or random:) whose scheduler, VAE config and pipeline settings apply;
    empty when the architecture runs only as a pair of experts (Wan 2.2 I2V A14B)."""
    pipeline: str
    encoders: tuple[str, ...]
    """The encoder kinds the family needs, in component order ("umt5"; "clip", "t5")."""
    pair_preset: str = ""
    """The preset for two experts (Wan 2.2 A14B)."""
    vae: str = ""
    """The VAE the family needs, as a user knows it (ComfyUI's file name)."""
    image_encoder: str = ""
    """The CLIP image encoder the family needs (Wan 2.1 image-to-video), "" for none."""
    vision: bool = False
    """Qwen-Image-Edit: the Qwen2.5-VL text encoder is built with its vision tower, and a
    processor hands it the input images (`text_parts`)."""
    scheduler: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """Scheduler settings over the preset's, for a model that differs from it only there
    (a tiny LTX-2 file named distilled: its distilled schedule)."""
    pair_boundary: float | None = None
    """The two experts' switch (`boundary_ratio`) where the pair preset's own does not apply
    (the tiny Wan pair); None: the pair preset's."""
    encoder_classes: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """The text encoder class the pipeline takes where it differs from the file's plain model
    (Flux.2 Klein: Qwen3 as a causal LM)."""
    tokenizer_kinds: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Encoder kind -> the tokenizer it takes where not its own (HunyuanVideo 1.5's T5 is
    ByT5, tokenized as bytes)."""
    text_parts: Callable[..., dict[str, Any]] | None = None
    """`(part, preset name, dtype, skip)` -> the text side's components, for an encoder built
    with more than a tokenizer (Qwen-Image-Edit: text encoder, tokenizer and processor)."""
    check_text_encoder: Callable[[Any, Any], None] | None = None
    """`(text encoder part, DiT detection)` -> None, or ValueError for an encoder file that
    lacks what the model reads (Qwen-Image-Edit: the vision tower)."""

    def __post_init__(self) -> None:
        if not (self.name or self.pair_preset):
            raise ValueError(f"a {self.pipeline} preset needs a name or a pair preset")


CLIP_VISION_H = {  # laion's ViT-H/14 vision tower, as Wan-AI/Wan2.1-I2V-14B-*-Diffusers ship it
    "hidden_size": 1280,
    "intermediate_size": 5120,
    "num_hidden_layers": 32,
    "num_attention_heads": 16,
    "image_size": 224,
    "patch_size": 14,
    "hidden_act": "gelu",
}
"""What `paradit plan` counts for Wan 2.1 I2V's image encoder (the file is not given there)."""


class _FromSpecs(Mapping[str, Any]):
    """A read-only table gathered from the family specs when first read (the specs import
    the single-file code, so it cannot read them as it is imported)."""

    def __init__(self, gather: Callable[[], dict[str, Any]]) -> None:
        self._gather = gather
        self._table: dict[str, Any] | None = None

    def _read(self) -> dict[str, Any]:
        if self._table is None:
            self._table = self._gather()
        return self._table

    def __getitem__(self, key: str) -> Any:
        return self._read()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._read())

    def __len__(self) -> int:
        return len(self._read())


def _presets() -> dict[str, Preset]:
    from ..families import SPECS

    return {variant: preset for spec in SPECS for variant, preset in spec.file_presets.items()}


PRESETS: Mapping[str, Preset] = _FromSpecs(_presets)
"""Recognised variant -> its `Preset`, every family's (`FamilySpec.file_presets`)."""
ENCODER_CLASSES: Mapping[str, Mapping[str, str]] = _FromSpecs(
    lambda: {p.pipeline: p.encoder_classes for p in PRESETS.values() if p.encoder_classes}
)
"""Pipeline class -> {the file's encoder class: the class the pipeline takes}."""
PAIR_BOUNDARY: Mapping[str, float] = _FromSpecs(
    lambda: {p.pair_preset: p.pair_boundary for p in PRESETS.values() if p.pair_boundary}
)
"""Pair preset -> its experts' switch, where the preset's own does not apply."""
ENCODER_SLOTS = {
    "clip": "text_encoder",
    "t5": "text_encoder_2",
    "umt5": "text_encoder",
    "qwen3": "text_encoder",
    "qwen2.5-vl": "text_encoder",
    "mistral3": "text_encoder",
    "gemma3": "text_encoder",
}
TOKENIZER_SLOTS = {"text_encoder": "tokenizer", "text_encoder_2": "tokenizer_2"}
PIPELINE_SETTINGS = ("boundary_ratio", "expand_timesteps", "is_distilled")
