"""A context-parallel plan for HunyuanVideo 1.5, applied from outside (diffusers declares none).

Every dual-stream block attends over the video tokens followed by one text sequence that the
transformer assembles in its forward: the valid image, glyph (ByT5) and prompt (Qwen2.5-VL)
tokens first, then the padding of each, ~2000 tokens in all. diffusers' attention processor
masks the padding with a (batch, 1, S, S) boolean mask built in every block. Split over ranks
that mask cannot follow the tokens (diffusers' Ulysses gathers only a key mask, and pads it
wrongly for uneven shards), so the plan removes what the mask is for instead:

- a forward pre-hook on the first block cuts the text sequence down to its valid tokens (the
  padding comes last in every row and is never attended to: its keys are masked, and its own
  outputs feed only its own later states, never the video's). The blocks pass the cut
  sequence on from block to block;
- `JointAttnProcessor` on every dual-stream block computes what diffusers' processor
  computes for the valid tokens (same projections, norms and rotary embedding), with no mask,
  through `dispatch_attention_fn`, so diffusers' Ulysses all-to-all gives each rank the whole
  joint sequence for its share of the heads;
- the plan splits the video tokens and the (cut) text tokens at the first block, each along
  its sequence over all sequence ranks (`tensor_split`: uneven lengths are fine), the rotary
  tables (one row per video token) as the rope module returns them, and gathers the video
  tokens after the output projection (`proj_out`). The text stream's final states are not
  used by the model, so they are never gathered;
- every rank needs a text token: a prompt with fewer valid tokens than sequence ranks (a
  few words on 8 GPUs) keeps padding tokens for the rest, and the processor hides them with
  a key mask laid out in the order Ulysses gathers the sequence (`key_mask`; already whole,
  so diffusers does not gather it). Ring attention takes no mask: such prompts are refused
  under ring degrees above 1.

A job that runs whole on a rank (no split: a CFG-parallel plan's guided jobs) runs diffusers'
processor with its mask on the whole text, as a single process does. The token refiner (text
only, before the blocks) keeps diffusers' processor and mask. Jobs are batches of one
(paradit runs one video per job); rows with different valid lengths are refused. A split
job equals a single process's within rounding (the attention runs over fewer keys, not the
same kernel call). The diffusers names used here are checked (`diffusers_internals`) when
the plan is applied.

Shapes: B batch, S sequence (video + text on this rank), H heads, D head dim.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ....diffusers_internals import require

FEATURE = "HunyuanVideo 1.5 sequence parallelism"


def hunyuan_video15_cp_plan() -> dict[str, Any]:
    """The plan, in diffusers' context-parallel plan format."""
    cp_input, cp_output = require(
        FEATURE,
        "_modeling_parallel.ContextParallelInput",
        "_modeling_parallel.ContextParallelOutput",
    )
    rotary_table = cp_input(split_dim=0, expected_dims=2, split_output=True)
    tokens = cp_input(split_dim=1, expected_dims=3, split_output=False)
    return {
        "rope": {0: rotary_table, 1: rotary_table},  # (cos, sin): a row per video token
        "transformer_blocks.0": {"hidden_states": tokens, "encoder_hidden_states": tokens},
        "proj_out": cp_output(gather_dim=1, expected_dims=3),
    }


class JointAttnProcessor:
    """HunyuanVideo 1.5's joint video+text attention for a split sequence.

    With a parallel config (the sequence split: `_parallel_config`, set by the
    sequence-parallel setup) it attends over the valid tokens only, which `cut_text` (the
    first block's forward pre-hook) left, with no mask, through `dispatch_attention_fn`:
    what `HunyuanVideo15AttnProcessor2_0` computes for them, as Ulysses/ring attention.
    Without one (a job that runs whole) it is diffusers' processor, mask and all, and
    `cut_text` leaves the text as it is: such a job is a single process's, bit for bit.
    """

    _attention_backend = None
    _parallel_config = None
    _key_mask: torch.Tensor | None = None
    """This forward's key mask, in the order Ulysses gathers the sequence (None: all valid)."""

    def __init__(self) -> None:
        dispatch, rotate, whole_processor, _call = require(
            FEATURE,
            "attention_dispatch.dispatch_attention_fn",
            "embeddings.apply_rotary_emb",
            "transformer_hunyuan_video15.HunyuanVideo15AttnProcessor2_0",
            "transformer_hunyuan_video15.HunyuanVideo15AttnProcessor2_0.__call__",
        )
        self._dispatch: Callable[..., torch.Tensor] = dispatch
        self._rotate: Callable[..., torch.Tensor] = rotate
        self._whole = whole_processor()

    def cut_text(self, _block: torch.nn.Module, args: tuple, kwargs: dict) -> tuple | None:
        """Forward pre-hook of the first block: the text sequence without its padding, when
        the sequence is split.

        The block is called as (hidden_states, encoder_hidden_states, temb, attention_mask,
        freqs_cis); the mask's valid tokens come first in every row (the transformer orders
        them so). The later blocks get the whole mask again: `__call__` does not read it.
        Every sequence rank needs a text token: a prompt with fewer valid tokens than ranks
        keeps as many padding tokens as are missing, and `key_mask` hides them.
        """
        self._key_mask = None
        if self._parallel_config is None:
            return None
        args = list(args)
        video_BNC, text_BLC, mask_BL = args[0], args[1], args[3]
        valid = mask_BL.bool().sum(dim=1)
        if valid.numel() > 1 and not bool((valid == valid[0]).all()):
            raise ValueError(
                "HunyuanVideo 1.5 sequence parallel runs batches whose rows have the same "
                f"number of text tokens; got {valid.tolist()}"
            )
        count = int(valid[0])
        config = self._parallel_config.context_parallel_config
        degree = config.ulysses_degree * config.ring_degree
        keep = max(count, degree)
        if keep > count:
            if config.ring_degree > 1:
                raise ValueError(
                    f"the prompt has {count} text tokens, fewer than the {degree} sequence "
                    "ranks: use Ulysses alone (--ring-degree 1) for prompts this short"
                )
            self._key_mask = key_mask(video_BNC.size(1), count, keep, degree, video_BNC.device)
        args[1], args[3] = text_BLC[:, :keep], mask_BL[:, :keep]
        return tuple(args), kwargs

    def __call__(
        self,
        attn: Any,
        hidden_states: torch.Tensor,
        encoder_hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        image_rotary_emb: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if self._parallel_config is None:
            self._whole._attention_backend = self._attention_backend
            return self._whole(
                attn, hidden_states, encoder_hidden_states, attention_mask, image_rotary_emb
            )
        return self.attend(
            attn,
            hidden_states,
            encoder_hidden_states,
            image_rotary_emb,
            self._parallel_config,
            self._key_mask,
        )

    def attend(
        self,
        attn: Any,
        hidden_states: torch.Tensor,
        encoder_hidden_states: torch.Tensor,
        image_rotary_emb: tuple[torch.Tensor, torch.Tensor] | None,
        parallel_config: Any,
        key_mask: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The joint attention over this rank's video and (cut) text tokens, through the
        dispatch with `parallel_config` (None: on these tokens alone, as the memory plan's
        dry run measures a rank's share)."""
        video_len = hidden_states.size(1)
        q_BSHD = attn.norm_q(attn.to_q(hidden_states).unflatten(2, (attn.heads, -1)))
        k_BSHD = attn.norm_k(attn.to_k(hidden_states).unflatten(2, (attn.heads, -1)))
        v_BSHD = attn.to_v(hidden_states).unflatten(2, (attn.heads, -1))
        if image_rotary_emb is not None:  # on the video tokens only
            q_BSHD = self._rotate(q_BSHD, image_rotary_emb, sequence_dim=1)
            k_BSHD = self._rotate(k_BSHD, image_rotary_emb, sequence_dim=1)
        text_q = attn.add_q_proj(encoder_hidden_states).unflatten(2, (attn.heads, -1))
        text_k = attn.add_k_proj(encoder_hidden_states).unflatten(2, (attn.heads, -1))
        text_v = attn.add_v_proj(encoder_hidden_states).unflatten(2, (attn.heads, -1))
        if attn.norm_added_q is not None:
            text_q = attn.norm_added_q(text_q)
        if attn.norm_added_k is not None:
            text_k = attn.norm_added_k(text_k)
        out_BSHD = self._dispatch(
            torch.cat([q_BSHD, text_q], dim=1),
            torch.cat([k_BSHD, text_k], dim=1),
            torch.cat([v_BSHD, text_v], dim=1),
            dropout_p=0.0,
            is_causal=False,
            attn_mask=key_mask,
            backend=self._attention_backend,
            parallel_config=parallel_config,
        )
        out_BSC = out_BSHD.flatten(2, 3).to(q_BSHD.dtype)
        video_BSC, text_BSC = out_BSC[:, :video_len], out_BSC[:, video_len:]
        video_BSC = attn.to_out[1](attn.to_out[0](video_BSC))
        return video_BSC, attn.to_add_out(text_BSC)


def key_mask(video: int, count: int, keep: int, degree: int, device: torch.device) -> torch.Tensor:
    """(1, 1, 1, video + keep): which keys of the whole sequence are real, in the order the
    Ulysses all-to-all gathers it (rank by rank, each rank's video tokens then its text
    tokens, both split as `tensor_split` splits them); the text tokens from `count` on are
    padding."""
    positions = torch.arange(video + keep, device=device)
    video_parts = positions[:video].tensor_split(degree)
    text_parts = positions[video:].tensor_split(degree)
    order = torch.cat([part for pair in zip(video_parts, text_parts, strict=True) for part in pair])
    return (order < video + count).view(1, 1, 1, -1)


def prepare_hunyuan_video15(transformer: torch.nn.Module) -> dict[str, Any]:
    """Install `JointAttnProcessor` on the dual-stream blocks and its text cut on the
    first; return the plan to apply."""
    plan = hunyuan_video15_cp_plan()
    blocks = transformer.transformer_blocks
    processor = JointAttnProcessor()
    for block in blocks:
        block.attn.set_processor(processor)
    blocks[0].register_forward_pre_hook(processor.cut_text, with_kwargs=True)
    return plan
