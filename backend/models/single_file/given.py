"""What names a single-file model on a command line: checkpoint suffixes, the separator of two
experts' files, and the files as given (`SingleFiles`). Plain names and paths, no torch: a
`--model` value is told apart (`models.loading.ModelSource.parse`) before anything heavy is
imported; `load.resolve` reads and checks the files."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

MODEL_SUFFIXES = (".safetensors", ".sft", ".gguf")
SEPARATOR = ","
"""Wan 2.2 A14B's two experts are given as `--model HIGH,LOW`."""


def is_model_file(text: str) -> bool:
    """Whether a --model value names checkpoint files (`A.safetensors` or `HIGH,LOW`)."""
    parts = [p.strip() for p in text.split(SEPARATOR)]
    return all(p.lower().endswith(MODEL_SUFFIXES) for p in parts) and all(parts)


@dataclass(frozen=True)
class SingleFiles:
    """A single-file model as given: DiT file(s), text encoder file(s), VAE file."""

    models: tuple[str, ...]
    text_encoders: tuple[str, ...] = ()
    vaes: tuple[str, ...] = ()
    image_encoders: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not 1 <= len(self.models) <= 2:
            raise ValueError(
                "--model takes one checkpoint file, or two for Wan 2.2 A14B (HIGH,LOW), "
                f"got {len(self.models)}"
            )
        if len(self.image_encoders) > 1:
            raise ValueError(f"--image-encoder takes one file, got {len(self.image_encoders)}")

    @classmethod
    def parse(cls, model: str, text_encoders=(), vaes=(), image_encoders=()) -> SingleFiles:
        models = tuple(str(Path(p.strip()).expanduser().absolute()) for p in model.split(SEPARATOR))
        return cls(
            models,
            *(
                tuple(str(Path(p).expanduser().absolute()) for p in paths)
                for paths in (text_encoders, vaes, image_encoders)
            ),
        )
