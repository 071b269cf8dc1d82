"""One text or image encoder kind (`EncoderKind`): how its file is recognised, the pipeline slot
it fills, where its tokenizer is found offline, and the tiny presets' tokenizers of it. Each
kind is one module beside this one; `encoders/__init__.py` lists them once (`KINDS`). Torch-free.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

SLOTS = ("text_encoder", "text_encoder_2")
"""The pipeline slots a text encoder fills."""


@dataclass(frozen=True)
class EncoderKind:
    """A text or image encoder kind, as `Detection.family` names it ("qwen3", "clip", ...)."""

    name: str
    title: str = ""
    """How the messages name it ("SigLIP"); "" for its name in capitals."""
    recognitions: tuple[tuple[int, Callable[[Any], Any]], ...] = ()
    """The recognitions of its files (`header` -> a `Detection`, else None), each with its place
    among every part recognition (the families' VAEs' too), tried lowest first: where two could
    match the same file, the stricter goes first (Gemma 3 before Qwen3: both have per-head q/k
    norms). None for a kind no file is recognised as (ByT5: HunyuanVideo 1.5's T5 file,
    tokenized as bytes; UMT5: T5's recognition tells it)."""
    slot: str = ""
    """The pipeline slot its text encoder file fills ("text_encoder", "text_encoder_2"); ""
    for an image encoder or a tokenizer-only kind."""
    tokenizer_class: str = ""
    """The transformers class its tokenizer is read with (what the pipelines take); "" when
    no tokenizer is looked up for it."""
    tokenizer_files: tuple[tuple[str, ...], ...] = ()
    """A folder holds its tokenizer when it has every file of one of these sets (transformers 5
    builds an empty tokenizer, without an error, from a folder that lacks them)."""
    comfy_tokenizer: Path | None = None
    """Where a ComfyUI install ships its tokenizer (relative to the install); None: not read."""
    hub_tokenizers: tuple[tuple[str, str], ...] = ()
    """(repo id, subfolder) of the Hugging Face hub cache's folders that hold its tokenizer,
    in the order tried (offline: nothing is downloaded)."""
    chat_template: Callable[[Any], None] | None = None
    """Sets the chat template a tokenizer found for it needs (Qwen3's; Qwen's where the folder
    carries none); None: as found."""
    tiny_vocab: int = 0
    """The vocabulary of the tiny presets' reduced encoder of this kind, whose tokenizer is the
    preset's own (besides the byte vocabulary every kind's tiny encoder may have); 0: none."""
    sentencepiece_bpe: bool = False
    """A file's own `spiece_model` is a BPE model with byte fallback (Gemma 3's), not a T5
    Unigram model (UMT5's)."""
    image_processor: tuple[str, Callable[[int], Any]] | None = None
    """An image encoder's processor: (the pipeline slot it fills, `(image size)` -> it); None
    for a text encoder."""
    tiny_tokenizers: Mapping[str, Callable[[int], Any]] = field(default_factory=dict)
    """The `random:` presets' tokenizer entries of this kind: JSON key -> `(max_length)` -> the
    tokenizer (`random_presets.py`)."""
    folder_processors: Mapping[str, Callable[[str], Any]] = field(default_factory=dict)
    """Processor class names a diffusers folder's index may give its processor of this kind
    -> `(the component's folder)` -> the processor paradit reads from it, for processors
    transformers would read with what paradit does not install (Qwen3-VL's video processor
    needs torchvision); the folder loader (`loading.py`) reads these components so."""

    refused: str = ""
    """Why paradit runs no file of this kind (a file recognised as it is refused with this,
    wherever it is given); "" for a kind it reads."""

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("an encoder kind has a name")
        if not self.title:
            object.__setattr__(self, "title", self.name.upper())
        if self.slot and self.slot not in SLOTS:
            raise ValueError(f"{self.name}: an encoder's slot is one of {SLOTS}, got {self.slot!r}")
        if bool(self.tokenizer_class) != bool(self.tokenizer_files):
            raise ValueError(
                f"{self.name}: a tokenizer looked up offline has its class and the files that "
                f"show a folder holds it, got {self.tokenizer_class!r} and {self.tokenizer_files}"
            )
        if self.refused and (self.slot or self.tokenizer_class or self.image_processor):
            raise ValueError(
                f"{self.name}: a kind paradit refuses fills no slot and has no tokenizer or "
                "processor"
            )
        if self.hub_tokenizers and not self.tokenizer_class:
            raise ValueError(f"{self.name}: hub folders of a tokenizer without its class")
        object.__setattr__(self, "tiny_tokenizers", MappingProxyType(dict(self.tiny_tokenizers)))
        object.__setattr__(
            self, "folder_processors", MappingProxyType(dict(self.folder_processors))
        )
