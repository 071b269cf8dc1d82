"""Qwen-Image's DiT (and the edit models') in a single file: `single_file/detect_flux2.py`
reads it."""

from __future__ import annotations

from ...single_file.detect_flux2 import qwen_image_dit
from ...single_file.detection import Detection
from ...single_file.header import FileHeader


def detect_dit(header: FileHeader, prefix: str) -> Detection | None:
    """A Qwen-Image (or -Edit) DiT under `prefix`; None when the file has none."""
    return qwen_image_dit(header, prefix)
