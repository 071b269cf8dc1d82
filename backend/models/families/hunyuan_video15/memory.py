"""HunyuanVideo 1.5's DiT in the memory plan: its dry run on the meta device."""

from __future__ import annotations

import math
from typing import Any

import torch

from .parallel import JointAttnProcessor


def dit_forward(sizes: Any, shape: Any, sequence_degree: int) -> Any:
    """One dual-stream block of HunyuanVideo 1.5 at this rank's share of the video tokens
    (patch 1 over the latents) and the whole text (~2000 tokens). The transformer's own
    forward cannot run on meta (it picks the valid text tokens by their mask's values); its
    blocks are where the peak is. On one rank diffusers' processor builds a (batch, 1, S, S)
    boolean mask in every block, counted here; a split sequence runs paradit's processor
    (`parallel.py`), which needs none, on the rank's share (its
    text counted whole: the valid tokens of a prompt are at most that many)."""
    dit, config = sizes.dit, sizes.dit.config
    rows = math.ceil(shape.height // sizes.spatial / sequence_degree)
    tokens = sizes.latent_frames(shape.frames) * rows * (shape.width // sizes.spatial)
    inner = config["num_attention_heads"] * config["attention_head_dim"]
    meta = {"device": "meta", "dtype": sizes.dtype}
    rope = torch.empty((tokens, config["attention_head_dim"]), device="meta")
    block = dit.transformer_blocks[0]
    whole = block.attn.processor
    if sequence_degree > 1:
        block.attn.processor = _share_of_split_sequence()
    try:
        return block(
            torch.empty((shape.batch, tokens, inner), **meta),
            torch.empty((shape.batch, sizes.text_tokens, inner), **meta),
            torch.empty((shape.batch, inner), **meta),
            torch.empty((shape.batch, sizes.text_tokens), device="meta", dtype=torch.bool),
            (rope, rope),
        )
    finally:
        block.attn.processor = whole


def _share_of_split_sequence() -> Any:
    """HunyuanVideo 1.5's split-sequence attention on one rank's tokens, without the
    all-to-all (the dry run has no group)."""

    class ShareOfSplit(JointAttnProcessor):
        def __call__(
            self,
            attn: Any,
            hidden_states: torch.Tensor,
            encoder_hidden_states: torch.Tensor,
            attention_mask: torch.Tensor | None = None,
            image_rotary_emb: tuple[torch.Tensor, torch.Tensor] | None = None,
        ) -> tuple[torch.Tensor, torch.Tensor]:
            return self.attend(
                attn, hidden_states, encoder_hidden_states, image_rotary_emb, None, None
            )

    return ShareOfSplit()
