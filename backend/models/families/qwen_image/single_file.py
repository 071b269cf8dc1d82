"""Qwen-Image's DiT (and the edit models') in a single file: `detect.py` reads it."""

from __future__ import annotations

from ...single_file.detection import Detection
from ...single_file.header import FileHeader
from ...single_file.vocabulary import Preset
from .detect import qwen_image_dit


def detect_dit(header: FileHeader, prefix: str) -> Detection | None:
    """A Qwen-Image (or -Edit) DiT under `prefix`; None when the file has none."""
    return qwen_image_dit(header, prefix)


QWEN_IMAGE_VAE = "the Qwen-Image VAE (qwen_image_vae: the Wan 2.1 VAE's key names)"
# Qwen-Image: the Qwen2.5-VL language model alone (text-to-image never runs its vision
# tower; the pipeline reads the last hidden states, which the text model gives as well)
FILE_PRESETS = {
    "tiny-qwen-image": Preset(
        "tiny-qwen-image", "QwenImagePipeline", ("qwen2.5-vl",), vae=QWEN_IMAGE_VAE
    ),
    "qwen-image": Preset(
        "random:qwen-image", "QwenImagePipeline", ("qwen2.5-vl",), vae=QWEN_IMAGE_VAE
    ),
}
"""The presets Qwen-Image's single files run on (`FileSpec.presets`)."""
