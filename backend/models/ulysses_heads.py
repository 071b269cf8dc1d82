"""Ulysses with the heads split, not the runs: the exchange a family's own attention processor
makes when its attention must see whole sequences (runs at global token positions, a cache of
a prefix's keys and values), written once for the family plans that do so
(`families/flux2_klein/parallel.py`, `families/qwen_image21/parallel.py`).

The processor projects its rank's tokens, (B, S local, H, D); `HeadExchange.gather` gives every
rank the whole sequence for its share of the heads, (B, S whole, H local, D), by diffusers'
Ulysses-anything all-to-all (any token count on any rank, heads padded where the rank count
does not divide them); `HeadExchange.scatter` brings an output back to the rank's tokens and
every head. `ulysses_group` reads the group from the processor's parallel config and refuses
ring attention (a run's keys would be spread over the ring).

It is model code (a family's processor, which `backend/parallel/` applies), so it lives beside
the models, which may not import `backend/parallel/`. The diffusers names it uses are
`EXCHANGE_NAMES`, for the plan's `diffusers_internals.require`.

Tensor names carry their layout: B batch, S tokens, H heads, D head dims.
"""

from __future__ import annotations

from typing import Any

import torch

EXCHANGE_NAMES = (
    "attention_dispatch.all_to_all_single_any_qkv_async",
    "attention_dispatch.all_to_all_single_any_o_async",
    "attention_dispatch.ulysses_anything_metadata",
)
"""The diffusers names `HeadExchange` calls (a plan checks them with `require`)."""


def ulysses_group(processor: Any, attention: str) -> Any | None:
    """The Ulysses group `processor`'s parallel config splits the heads over; None when the
    job runs whole (no parallel config: world size 1, or a layout of one rank). `attention`
    names the attention that needs whole sequences, for the refusal of ring attention."""
    config = processor._parallel_config
    cp = None if config is None else config.context_parallel_config
    if cp is None or cp._world_size == 1:
        return None
    if cp.ring_degree > 1:
        raise ValueError(f"{attention} runs Ulysses, not ring: use --ring-degree 1")
    return cp._ulysses_mesh.get_group()


def diffusers_processor(processor_class: type, backend: Any) -> Any:
    """diffusers' own processor `processor_class`, dispatching to `backend`: what a family's
    Ulysses processor runs when the job runs whole."""
    inner = processor_class()
    inner._attention_backend = backend
    return inner


class HeadExchange:
    """Tensors (B, S local, H, D) exchanged to (B, S whole, H local, D) and back over `group`,
    each way back with the metadata of the tensor it came from."""

    def __init__(self, group: Any):
        from diffusers.models.attention_dispatch import (
            all_to_all_single_any_o_async,
            all_to_all_single_any_qkv_async,
            ulysses_anything_metadata,
        )

        self.group = group
        self.to_heads = all_to_all_single_any_qkv_async
        self.to_tokens = all_to_all_single_any_o_async
        self.metadata_of = ulysses_anything_metadata

    def gather(self, *tensors_BSHD: torch.Tensor) -> list[torch.Tensor]:
        """Each tensor's whole sequence for this rank's share of the heads (the all-to-alls
        all started before the first is waited on)."""
        waits = [self.to_heads(t, self.group, **self.metadata_of(t)) for t in tensors_BSHD]
        return [wait() for wait in waits]

    def scatter(self, out_BSHD: torch.Tensor, like_BSHD: torch.Tensor) -> torch.Tensor:
        """`out_BSHD` (whole sequence, a share of the heads) back to the rank's tokens and
        every head, shaped like `like_BSHD` (the local tensor it was gathered from)."""
        return self.to_tokens(out_BSHD, self.group, **self.metadata_of(like_BSHD))()
