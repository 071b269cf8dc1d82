"""Z-Image's DiT in a single file: `detect.py` reads it."""

from __future__ import annotations

from collections.abc import Mapping

from ...single_file.detection import Detection
from ...single_file.header import FileHeader
from ...single_file.rows import RowMap, trace_converter
from ...single_file.vocabulary import Preset
from .detect import DROPPED, z_image_dit, z_image_layout

__all__ = ["DROPPED", "detect_dit", "dit_row_map"]


def detect_dit(header: FileHeader, prefix: str) -> Detection | None:
    """A Z-Image DiT under `prefix`; None when the file has none."""
    if layout := z_image_layout(header.tensors, prefix):
        return z_image_dit(header, prefix, layout)
    return None


def _z_image_converter():
    from diffusers.loaders.single_file_utils import (
        convert_z_image_transformer_checkpoint_to_diffusers,
    )

    return convert_z_image_transformer_checkpoint_to_diffusers


def dit_row_map(keys: Mapping[str, tuple[int, ...]], config: Mapping) -> RowMap:
    """The original key names -> diffusers', as a row map: diffusers' converter on row traces."""
    return trace_converter(_z_image_converter(), keys)


def vae_latent_channels(config: Mapping) -> int:
    """Its in_channels are the latent's, before the 2x2 patches."""
    return config["in_channels"]


_FLUX_VAE = "the Flux VAE (ae)"
FILE_PRESETS = {
    "tiny-z-image": Preset("tiny-z-image", "ZImagePipeline", ("qwen3",), vae=_FLUX_VAE),
    "z-image-turbo": Preset("random:z-image-turbo", "ZImagePipeline", ("qwen3",), vae=_FLUX_VAE),
}
"""The presets Z-Image's single files run on (`FileSpec.presets`): Flux's VAE."""
