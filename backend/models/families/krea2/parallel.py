"""A context-parallel plan for Krea 2, applied from outside (diffusers declares none).

Krea 2 fuses its text first (`text_fusion`: two blocks attending across the tapped encoder
layers of each token, a projection, two blocks across the text tokens), then runs its
`transformer_blocks` over one joint sequence, the text tokens followed by the image tokens,
every attention with the text padding mask (batch, 1, 1, tokens). Its attention repeats the
12 key/value heads to the 48 query heads before `dispatch_attention_fn`, so Ulysses splits
query, key and value heads alike (any degree the 48 heads allow; `ulysses_anything` any other).

- the text fusion runs whole on every rank: its attentions get no parallel config
  (`LocalKrea2Processor`; the sequence layouts set every processor's config);
- the joint sequence is split at the first block's input (`hidden_states`, along the tokens,
  `tensor_split`: any length on any rank count);
- the rotary tables (cos, sin: one row per token) are split as `rotary_emb` returns them;
- the padding mask stays whole: after Ulysses' all-to-all each rank attends over every token
  with its share of the heads;
- the tokens are gathered at the last block's output, before the model cuts the text tokens
  off (a cut on a split sequence would cut each rank's share).

The model's code is unchanged. The diffusers names used here are checked
(`diffusers_internals`) when the plan is applied.
"""

from __future__ import annotations

from typing import Any

import torch

from ....diffusers_internals import require

FEATURE = "Krea 2 sequence parallelism"


def _processor_class() -> type:
    from diffusers.models.transformers.transformer_krea2 import Krea2AttnProcessor

    return Krea2AttnProcessor


class LocalKrea2Processor:
    """diffusers' Krea 2 processor that never gets a parallel config: the text fusion's
    attention runs whole on every rank, whatever sequence layout the job uses."""

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
        attention_mask: torch.Tensor | None = None,
        image_rotary_emb: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        self._inner._attention_backend = self._attention_backend
        return self._inner(attn, hidden_states, attention_mask, image_rotary_emb)


def krea2_cp_plan(transformer: torch.nn.Module) -> dict[str, Any]:
    """Swap in the local processor on the text fusion; the plan for `transformer` (its last
    block is named by the block count), in diffusers' context-parallel plan format."""
    cp_input, cp_output = require(
        FEATURE,
        "_modeling_parallel.ContextParallelInput",
        "_modeling_parallel.ContextParallelOutput",
    )
    num_blocks = len(transformer.transformer_blocks)
    if not num_blocks:
        raise ValueError("Krea 2 sequence parallelism needs at least one transformer block")
    fusion = transformer.text_fusion
    for block in (*fusion.layerwise_blocks, *fusion.refiner_blocks):
        block.attn.set_processor(LocalKrea2Processor())
    rotary_table = cp_input(split_dim=0, expected_dims=2, split_output=True)  # (tokens, D)
    return {
        "transformer_blocks.0": {
            "hidden_states": cp_input(split_dim=1, expected_dims=3, split_output=False)
        },
        "rotary_emb": {0: rotary_table, 1: rotary_table},
        f"transformer_blocks.{num_blocks - 1}": cp_output(gather_dim=1, expected_dims=3),
    }
