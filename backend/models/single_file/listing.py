"""`paradit models DIR`: what a ComfyUI models folder holds, each file with what it was
recognised as and why (headers only: a folder of 14B checkpoints is listed in a second)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..encoders import encoder_kind
from ..loading import index_file
from .detect import detect
from .given import MODEL_SUFFIXES
from .header import read_header
from .quant import quantization
from .spec import FILES

COMFY_FOLDERS = (
    "diffusion_models",
    "unet",
    "text_encoders",
    "clip",
    "vae",
    "checkpoints",
    "loras",
    "clip_vision",
    "CogVideo",
)
"""ComfyUI's model subfolders that can hold what paradit runs (folder_paths' names)."""


@dataclass(frozen=True)
class Entry:
    """One file (or diffusers folder) found."""

    path: str
    """Relative to the listed folder."""
    role: str
    variant: str
    format: str
    why: str
    refused: str = ""
    """Why paradit runs no such file wherever it is given (an encoder kind it recognises only
    to refuse: `EncoderKind.refused`); "" for a file it reads."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "role": self.role,
            "variant": self.variant,
            "format": self.format,
            "why": self.why,
            "refused": self.refused,
        }


def list_models(root: str | Path) -> list[Entry]:
    """Every checkpoint under `root`'s ComfyUI subfolders (or under `root` itself when it has
    none of them), recognised from its header; unreadable files say why."""
    root = Path(root)
    if not root.is_dir():
        raise ValueError(f"{root}: no such folder")
    folders = [root / name for name in COMFY_FOLDERS if (root / name).is_dir()] or [root]
    entries: list[Entry] = []
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            relative = str(path.relative_to(root))
            index = index_file(path) if path.is_dir() else None
            if index is not None:
                entries.append(
                    Entry(relative, "pipeline", "", "diffusers folder", Path(index).name)
                )
            elif path.is_file() and path.suffix.lower() in MODEL_SUFFIXES:
                entries.append(_entry(path, relative))
    return entries


def _entry(path: Path, relative: str) -> Entry:
    try:
        header = read_header(path)
    except ValueError as exc:
        return Entry(relative, "unreadable", "", "", str(exc))
    found = detect(header)
    if found.role == "unknown":  # a family's parts by their key names (LTX-2's split files)
        for spec in FILES:
            described = None if spec.describe_parts is None else spec.describe_parts(header)
            if described is not None:
                variant, why = described
                return Entry(relative, "part", variant, quantization(header), why)
    kind = encoder_kind(found.family or "")
    refused = "" if kind is None else kind.refused
    why = "; ".join(found.reasons)
    return Entry(relative, found.role, found.label, quantization(header), why, refused)


def render(entries: list[Entry]) -> str:
    """A plain table: path, role, variant, format (and "refused" for a file paradit refuses:
    the reason is in `--json`'s `refused`), then why on the next line."""
    if not entries:
        return "no checkpoints found"
    width = max(len(e.path) for e in entries)
    lines = []
    for e in entries:
        row = f"{e.path:<{width}}  {e.role:<12} {e.variant or '-':<20} {e.format}"
        lines.append(f"{row}  refused" if e.refused else row)
        lines.append(f"{'':<{width}}  why: {e.why}")
    return "\n".join(lines)
