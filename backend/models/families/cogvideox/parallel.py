"""A context-parallel plan for CogVideoX, applied from outside (diffusers declares none).

CogVideoX attends over one joint sequence, the text tokens followed by the video tokens. The
transformer splits them apart again after the patch embedding and hands both streams to every
block, which concatenates them for attention and the feed-forward. The plan:

- split both streams at the first block's inputs, each along its sequence dimension and each
  over all sequence ranks (`tensor_split`: uneven lengths are fine, e.g. 226 text tokens on 4
  ranks are 57/57/56/56). A rank then holds [its text tokens, its video tokens]; every op but
  attention is per token, so the blocks need nothing else;
- split the rotary tables (one row per video token) the same way at the transformer's input,
  so each rank rotates exactly its own video tokens;
- attention through `dispatch_attention_fn`: diffusers' Ulysses all-to-all gives each rank the
  whole joint sequence for its share of the heads (all ranks' text and video tokens, grouped
  by rank: attention does not care about key order) and brings the outputs back;
- gather the video tokens after the output projection (`proj_out`); the text stream's final
  states are not used by the model, so they are never gathered.

diffusers' `CogVideoXAttnProcessor2_0` calls `F.scaled_dot_product_attention` itself, so the
plan replaces it with `JointAttnProcessor`, which computes the same (same projections, norms
and rotary embedding, in (batch, sequence, heads, head_dim) layout) and attends through
`dispatch_attention_fn`. The model's code is unchanged. The diffusers names used here are
checked (`diffusers_internals`) when the plan is applied.

Shapes: B batch, S sequence (text + video on this rank), H heads, D head dim.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ....diffusers_internals import require

FEATURE = "CogVideoX sequence parallelism"


def cogvideox_cp_plan() -> dict[str, Any]:
    """The plan, in diffusers' context-parallel plan format."""
    cp_input, cp_output = require(
        FEATURE,
        "_modeling_parallel.ContextParallelInput",
        "_modeling_parallel.ContextParallelOutput",
    )
    rotary_table = cp_input(split_dim=0, expected_dims=2, split_output=False)
    tokens = cp_input(split_dim=1, expected_dims=3, split_output=False)
    return {
        "": {"image_rotary_emb": [rotary_table, rotary_table]},  # (cos, sin): a row per token
        "transformer_blocks.0": {"hidden_states": tokens, "encoder_hidden_states": tokens},
        "proj_out": cp_output(gather_dim=1, expected_dims=3),
    }


class JointAttnProcessor:
    """CogVideoX's joint text+video attention through `dispatch_attention_fn`.

    Computes what `CogVideoXAttnProcessor2_0` computes; `_parallel_config` (set by the
    sequence-parallel setup) makes the dispatch run Ulysses/ring attention.
    """

    _attention_backend = None
    _parallel_config = None

    def __init__(self) -> None:
        dispatch, rotate = require(
            FEATURE, "attention_dispatch.dispatch_attention_fn", "embeddings.apply_rotary_emb"
        )
        self._dispatch: Callable[..., torch.Tensor] = dispatch
        self._rotate: Callable[..., torch.Tensor] = rotate

    def __call__(
        self,
        attn: Any,
        hidden_states: torch.Tensor,
        encoder_hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        image_rotary_emb: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if attention_mask is not None:
            raise ValueError("CogVideoX's joint attention takes no mask")
        text_len = encoder_hidden_states.size(1)
        joint_BSC = torch.cat([encoder_hidden_states, hidden_states], dim=1)
        q_BSHD = attn.to_q(joint_BSC).unflatten(2, (attn.heads, -1))
        k_BSHD = attn.to_k(joint_BSC).unflatten(2, (attn.heads, -1))
        v_BSHD = attn.to_v(joint_BSC).unflatten(2, (attn.heads, -1))
        if attn.norm_q is not None:
            q_BSHD = attn.norm_q(q_BSHD)
        if attn.norm_k is not None:
            k_BSHD = attn.norm_k(k_BSHD)
        if image_rotary_emb is not None:  # on the video tokens only
            q_BSHD = self._rotate_video(q_BSHD, text_len, image_rotary_emb)
            if not attn.is_cross_attention:
                k_BSHD = self._rotate_video(k_BSHD, text_len, image_rotary_emb)
        out_BSHD = self._dispatch(
            q_BSHD,
            k_BSHD,
            v_BSHD,
            backend=self._attention_backend,
            parallel_config=self._parallel_config,
        )
        out_BSC = attn.to_out[1](attn.to_out[0](out_BSHD.flatten(2, 3).type_as(q_BSHD)))
        text_BSC, video_BSC = out_BSC.split([text_len, out_BSC.size(1) - text_len], dim=1)
        return video_BSC, text_BSC

    def _rotate_video(self, x_BSHD: torch.Tensor, text_len: int, table: tuple) -> torch.Tensor:
        video = self._rotate(x_BSHD[:, text_len:], table, sequence_dim=1)
        return torch.cat([x_BSHD[:, :text_len], video], dim=1)


def use_joint_attention(transformer: torch.nn.Module) -> None:
    """Install `JointAttnProcessor` on every attention layer (sequence parallelism and the
    attention kernels other than SDPA reach it through the dispatch)."""
    if any(getattr(m, "fused_projections", False) for m in transformer.modules()):
        raise ValueError("CogVideoX's attention dispatch needs unfused q/k/v projections")
    transformer.set_attn_processor(JointAttnProcessor())


def prepare_cogvideox(transformer: torch.nn.Module) -> dict[str, Any]:
    """Install `JointAttnProcessor` on every attention layer; return the plan to apply."""
    plan = cogvideox_cp_plan()
    use_joint_attention(transformer)
    return plan
