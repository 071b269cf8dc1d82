"""Flux.2 Klein in single files: its DiT is recognised by Flux.2's spec (`../flux2/`); the
presets its files run on are here."""

from __future__ import annotations

from ...single_file.vocabulary import Preset
from ..flux2.single_file import FLUX2_VAE

_QWEN3_LM = {"Qwen3Model": "Qwen3ForCausalLM"}  # the pipeline takes Qwen3 as a causal LM
FILE_PRESETS = {
    variant: Preset(
        name, "Flux2KleinPipeline", ("qwen3",), vae=FLUX2_VAE, encoder_classes=_QWEN3_LM
    )
    for variant, name in (
        ("tiny-flux2-klein", "tiny-flux2-klein"),
        ("flux.2-klein-4b", "random:flux.2-klein-4b"),
        ("flux.2-klein-9b", "random:flux.2-klein-9b"),
        # the undistilled models: the same shapes, named so (`../flux2/detect.klein_base`)
        ("tiny-flux2-klein-base", "tiny-flux2-klein-base"),
        ("flux.2-klein-base-4b", "random:flux.2-klein-base-4b"),
        ("flux.2-klein-base-9b", "random:flux.2-klein-base-9b"),
    )
}
# the KV model (`../flux2/detect.KLEIN_KV`: its name says kv): Klein 9B's shapes, its pipeline
FILE_PRESETS.update(
    {
        variant: Preset(
            name, "Flux2KleinKVPipeline", ("qwen3",), vae=FLUX2_VAE, encoder_classes=_QWEN3_LM
        )
        for variant, name in (
            ("tiny-flux2-klein-kv", "tiny-flux2-klein-kv"),
            ("flux.2-klein-9b-kv", "random:flux.2-klein-9b-kv"),
        )
    }
)
"""The presets Klein's single files run on (`FileSpec.presets`; its DiT is recognised
by Flux.2's spec, the -base variants by the file's name)."""
