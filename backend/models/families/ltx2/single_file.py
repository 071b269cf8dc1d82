"""LTX-2's DiT in a single file (with whatever else the checkpoint holds):
`detect.py` reads it."""

from __future__ import annotations

from collections.abc import Mapping

from ...single_file.detection import Detection
from ...single_file.header import FileHeader
from ...single_file.rows import RowMap, trace_converter
from ...single_file.vocabulary import Preset
from . import files as ltx2
from .adapter import DISTILLED_SCHEDULER
from .detect import DIFFUSERS_MARKER, MARKER, ltx2_dit


def detect_dit(header: FileHeader, prefix: str) -> Detection | None:
    """An LTX-2 DiT in Lightricks' key names under `prefix`; None when the file has none."""
    if f"{prefix}{MARKER}" in header.tensors:
        return ltx2_dit(header, prefix, "original")
    return None


def detect_diffusers_dit(header: FileHeader) -> Detection | None:
    """An LTX-2 DiT in diffusers' key names; None when the file has none."""
    if DIFFUSERS_MARKER in header.tensors:
        return ltx2_dit(header, "", "diffusers")
    return None


def dit_row_map(keys: Mapping[str, tuple[int, ...]], config: Mapping) -> RowMap:
    """The original key names -> diffusers', as a row map: `files.py`'s converter
    on row traces of the DiT's keys (the connectors beside it are another component's)."""
    return trace_converter(ltx2.dit_converter(), ltx2.dit_keys(keys))


def dit_file_keys(keys: Mapping[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """The DiT's keys of an LTX-2 checkpoint (not the text connectors beside it)."""
    return ltx2.dit_keys(keys)


def text_widths(config: Mapping) -> tuple[tuple[str, int, str], ...]:
    """Gemma's hidden states, through the connectors."""
    return (("text_encoder", config["caption_channels"], "text embeddings"),)


def vae_key_names(state: dict, detection: Detection) -> dict:
    """Lightricks' video VAE key names -> diffusers'."""
    return ltx2.vae_names(state)


_LTX2_VAE = "the LTX-2 video VAE (in the checkpoint, under vae.)"
_LTX23_VAE = "the LTX-2.3 video VAE (in the checkpoint, under vae.)"
# LTX-2: the checkpoint holds the DiT, connectors, video and audio VAEs and vocoder; Gemma 3's
# text model is the text encoder (the pipeline reads every hidden state it gives)
FILE_PRESETS = {
    "tiny-ltx2": Preset("tiny-ltx2", "LTX2Pipeline", ("gemma3",), vae=_LTX2_VAE),
    "ltx-2": Preset("random:ltx-2", "LTX2Pipeline", ("gemma3",), vae=_LTX2_VAE),
    # the distilled model: the same shapes and parts, its own schedule (adapter.py)
    "tiny-ltx2-distilled": Preset(
        "tiny-ltx2", "LTX2Pipeline", ("gemma3",), vae=_LTX2_VAE, scheduler=DISTILLED_SCHEDULER
    ),
    "ltx-2-distilled": Preset("random:ltx-2-distilled", "LTX2Pipeline", ("gemma3",), vae=_LTX2_VAE),
    # LTX-2.3: the same parts, 2.3's (per-stream text projections, the four-level video VAE,
    # the vocoder with bandwidth extension); Gemma 3 12B the text encoder
    "tiny-ltx2.3": Preset("tiny-ltx2.3", "LTX2Pipeline", ("gemma3",), vae=_LTX23_VAE),
    "ltx-2.3": Preset("random:ltx2.3-22b", "LTX2Pipeline", ("gemma3",), vae=_LTX23_VAE),
    # LTX-2.5: 2.3's parts; Gemma 4 12B (gemma4-12b-ltx-v1) the text encoder
    "tiny-ltx2.5": Preset("tiny-ltx2.5", "LTX2Pipeline", ("gemma4",), vae=_LTX23_VAE),
    "ltx-2.5": Preset("random:ltx2.5-22b", "LTX2Pipeline", ("gemma4",), vae=_LTX23_VAE),
    # their distilled files (ltx-2.3-22b-distilled, ltx-2.5-22b-distilled-transformer): the
    # same shapes and parts, LTX-2's distilled schedule (the one Lightricks' pipelines and
    # ComfyUI's 2.3/2.5 templates run: adapter.distilled_sigmas)
    **{
        f"{name}-distilled": Preset(
            preset, "LTX2Pipeline", (encoder,), vae=_LTX23_VAE, scheduler=DISTILLED_SCHEDULER
        )
        for name, preset, encoder in (
            ("tiny-ltx2.3", "tiny-ltx2.3", "gemma3"),
            ("ltx-2.3", "random:ltx2.3-22b", "gemma3"),
            ("tiny-ltx2.5", "tiny-ltx2.5", "gemma4"),
            ("ltx-2.5", "random:ltx2.5-22b", "gemma4"),
        )
    },
}
"""The presets LTX-2's single files run on (`FileSpec.presets`)."""
