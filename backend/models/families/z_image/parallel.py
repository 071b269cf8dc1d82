"""A context-parallel plan for Z-Image, applied from outside (diffusers declares none).

Z-Image refines the image tokens and the text tokens apart first (`noise_refiner` and
`context_refiner`, 2 layers each), then runs its main `layers` over one joint sequence: the
image tokens followed by the text tokens, each part padded to a multiple of 32; a batch whose
sequences differ in length is padded and gets a key mask. Its attention processor already
attends through `dispatch_attention_fn`, so a plan is all the model needs:

- the refiners run whole on every rank (4 of Z-Image-Turbo's 34 layers, each over one part):
  their attentions get no parallel config (`LocalZImageProcessor`; the sequence layouts set
  every processor's config, and a refiner's whole part handed to Ulysses would be gathered
  from every rank, each rank's tokens repeated once per rank: the same result within
  rounding at ranks times the cost);
- the joint sequence is split at the first main layer's input (`x`, along the tokens) over all
  sequence ranks (`tensor_split`: any length, e.g. 96 tokens on 3 ranks or 4096 + 128 on 8);
- the rotary table (`freqs_cis`, one row per token) is split the same way at every main
  layer's input: the model computes it for the whole sequence and hands it to each layer;
- the key mask (`attn_mask`, batch x tokens, present only for a batch of unequal sequences)
  stays whole: after Ulysses' all-to-all each rank attends over the whole sequence;
- the tokens are gathered after the final layer (`all_final_layer.<patch>`), before the model
  cuts the image tokens out and unpatchifies them.

The model's code is unchanged. The diffusers names used here are checked
(`diffusers_internals`) when the plan is applied.
"""

from __future__ import annotations

from typing import Any

import torch

from ....diffusers_internals import require

FEATURE = "Z-Image sequence parallelism"
REFINERS = ("noise_refiner", "context_refiner", "siglip_refiner")
"""The layer lists that run over one part whole, before the joint sequence (`siglip_refiner`:
the Omni variant's, None elsewhere)."""


def _processor_class() -> type:
    from diffusers.models.transformers.transformer_z_image import ZSingleStreamAttnProcessor

    return ZSingleStreamAttnProcessor


class LocalZImageProcessor:
    """diffusers' Z-Image processor that never gets a parallel config: a refiner's attention
    runs whole on every rank, whatever sequence layout the job uses."""

    _attention_backend = None

    def __init__(self) -> None:
        self._inner = _processor_class()()

    @property
    def _parallel_config(self) -> None:
        return None

    @_parallel_config.setter
    def _parallel_config(self, _config: Any) -> None:
        """The sequence layouts set every processor's config; this one stays local."""

    def __call__(
        self,
        attn: Any,
        hidden_states: torch.Tensor,
        encoder_hidden_states: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        freqs_cis: torch.Tensor | None = None,
    ) -> torch.Tensor:
        self._inner._attention_backend = self._attention_backend
        return self._inner(attn, hidden_states, encoder_hidden_states, attention_mask, freqs_cis)


def z_image_cp_plan(transformer: torch.nn.Module) -> dict[str, Any]:
    """Swap in the local processor on the refiners; the plan for `transformer` (its final
    layers are named by patch size), in diffusers' context-parallel plan format."""
    cp_input, cp_output = require(
        FEATURE,
        "_modeling_parallel.ContextParallelInput",
        "_modeling_parallel.ContextParallelOutput",
    )
    if not len(transformer.layers):
        raise ValueError("Z-Image sequence parallelism needs at least one main layer")
    for name in REFINERS:
        for layer in getattr(transformer, name, None) or ():
            layer.attention.set_processor(LocalZImageProcessor())
    tokens = cp_input(split_dim=1, expected_dims=3, split_output=False)
    plan: dict[str, Any] = {
        "layers.0": {"x": tokens},
        "layers.*": {"freqs_cis": tokens},  # (batch, tokens, head_dim / 2), complex
    }
    for name in transformer.all_final_layer:
        plan[f"all_final_layer.{name}"] = cp_output(gather_dim=1, expected_dims=3)
    return plan
