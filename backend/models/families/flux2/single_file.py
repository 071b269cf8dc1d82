"""Flux.2's DiT (dev and Klein) in a single file: `detect.py` reads it."""

from __future__ import annotations

from collections.abc import Mapping

from ...single_file.detection import Detection
from ...single_file.header import FileHeader
from ...single_file.rows import RowMap, trace_converter
from ...single_file.vocabulary import Preset
from .detect import flux2_dit, flux2_layout


def detect_dit(header: FileHeader, prefix: str) -> Detection | None:
    """A Flux.2 DiT (dev, or Klein without guidance embedding) under `prefix`; None when the
    file has none."""
    if layout := flux2_layout(header.tensors, prefix):
        return flux2_dit(header, prefix, layout)
    return None


def _flux2_converter():
    from diffusers.loaders.single_file_utils import (
        convert_flux2_transformer_checkpoint_to_diffusers,
    )

    return convert_flux2_transformer_checkpoint_to_diffusers


def dit_row_map(keys: Mapping[str, tuple[int, ...]], config: Mapping) -> RowMap:
    """BFL's key names -> diffusers', as a row map: diffusers' converter on row traces."""
    return trace_converter(_flux2_converter(), keys)


def text_widths(config: Mapping) -> tuple[tuple[str, int, str], ...]:
    """Three of the encoder's hidden states, stacked per token, are the DiT's text input."""
    return (("text_encoder", config["joint_attention_dim"] // 3, "text embeddings"),)


def vae_latent_channels(config: Mapping) -> int:
    """2x2 patches of the latent's channels are the DiT's input."""
    return config["in_channels"] // 4


FLUX2_VAE = "the Flux.2 VAE (32 latent channels, in diffusers' names)"
# FLUX.2-dev: Mistral Small 3.1's language model alone (the pipeline reads its hidden states
# 10, 20 and 30, which the text model gives as the full Mistral3ForConditionalGeneration does)
FILE_PRESETS = {
    "tiny-flux2": Preset("tiny-flux2", "Flux2Pipeline", ("mistral3",), vae=FLUX2_VAE),
    "flux.2-dev": Preset("random:flux.2-dev", "Flux2Pipeline", ("mistral3",), vae=FLUX2_VAE),
}
"""The presets Flux.2-dev's single files run on (`FileSpec.presets`)."""
