"""The vocabulary a family folder's single-file code speaks, apart from the drivers that use
it (load.py, build.py, components.py): a recognised file (`Part`), the settings a header cannot
hold (`Preset`), the pipeline slots each encoder kind fills, and `FileTools`, the functions of
the drivers a family's hook calls, handed to it as an argument (so a family folder imports
only this and the leaf modules beside it, never the drivers that read the family specs)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..encoders import slots
from .detection import Detection
from .header import FileHeader
from .quant import quantization


class FileRefused(ValueError):
    """A file paradit does not run, refused by what its keys show; `path` is the file, so a
    workflow's import names the loader node that gives it."""

    def __init__(self, path: str, message: str):
        super().__init__(message)
        self.path = path


@dataclass(frozen=True)
class Part:
    """One file and what it was recognised as."""

    header: FileHeader
    detection: Detection

    def summary(self) -> dict[str, Any]:
        return {
            "file": self.header.name,
            "role": self.detection.role,
            "variant": self.detection.label,
            "format": quantization(self.header),
            "why": "; ".join(self.detection.reasons),
        }


@dataclass(frozen=True)
class FileTools:
    """The drivers' functions a family's single-file hook calls (`FamilySpec` file hooks,
    `Preset.text_parts`), handed to it by the driver that calls the hook."""

    recognise: Callable[[str], Part]
    """A path -> its header read and recognised (`detect.recognise`)."""
    detect: Callable[[FileHeader], Detection]
    """A header -> what it holds (`detect.detect`)."""
    read_whole: Callable[..., dict[str, Any]]
    """`(part, dtype, prefix="")` -> every weight of a small file (`components.read_whole`)."""
    preset_parts: Callable[[str, set[str]], Any]
    """`(preset name, components)` -> the preset's pipeline holding them, its VAE on the meta
    device (`components.preset_parts`)."""
    tokenizer: Callable[[Part, str, str], Any]
    """`(text encoder part, preset name, slot)` -> its tokenizer (`components.tokenizer`)."""


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
    settings: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """Pipeline settings over the preset's (the tiny Krea 2's tapped layers: the pipeline's
    default taps are the real encoder's)."""
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
ENCODER_SLOTS: dict[str, str] = slots()
"""Text encoder kind -> the pipeline slot its file fills (`encoders.KINDS`)."""
TOKENIZER_SLOTS = {"text_encoder": "tokenizer", "text_encoder_2": "tokenizer_2"}
PIPELINE_SETTINGS = ("boundary_ratio", "expand_timesteps", "is_distilled")
