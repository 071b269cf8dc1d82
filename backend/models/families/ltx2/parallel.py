"""A context-parallel plan for LTX-2's audio-video DiT, in place of diffusers' own.

diffusers declares a plan for `LTX2VideoTransformer3DModel` that splits the video tokens and
the text tokens (and the text mask) and sends every attention through Ulysses. It fails on
any prompt: the text cross-attention's mask is laid out per head for the whole text (the
processor shapes it (batch, heads, 1, text)), and Ulysses hands each rank a share of the heads
and a gathered text; the audio stream, never split, would be gathered N times over.

Ours splits only the video tokens, and only the attention that needs every video token runs
across ranks:

- video self-attention (`attn1`): Ulysses through diffusers' dispatch, as any plan;
- video queries against whole keys (the text, `attn2` with its mask; the audio,
  `audio_to_video_attn`): each rank attends with its own queries, nothing crosses
  (`LocalAttnProcessor`);
- the audio stream stays whole on every rank (at 25 latent frames a second it is ~2% of the
  tokens of a 768x512 video): its self-attention and its text attention run locally;
- audio queries against the video (`video_to_audio_attn`): the video keys' inputs (the
  normalised, modulated video tokens) and their rotary table are gathered along the sequence
  first, then the attention runs locally (`GatheredVideoKeysProcessor`). Every rank then holds
  the same audio states, as the scheduler's audio step on every rank needs.

The rotary tables of the video tokens (`rope` for self-attention, `cross_attn_rope` for the
audio-video attention) are split as the rope modules return them; the video tokens are
gathered after `proj_out`. Image-to-video gives the DiT a timestep per video token (0 on the
conditioning frame's): split with the tokens, as the modulations it gives are per token (a
text-to-video job's one timestep per row stays whole; diffusers logs once that it did not
split it). `tensor_split` shards: any token count on any rank count (gloo's
uneven gather is `patches.install_uneven_gather`). A split job equals a single process's
within rounding (attention over fewer keys per kernel call).

LTX-2.3 (the same classes, other settings) changes what the plan splits in one place: its
rotary tables are per head (`rope_type="split"`: (batch, heads, tokens, width / 2), the
tokens on dim 2, where LTX-2.0's interleaved tables are (batch, tokens, width), dim 1), so
the plan splits and the gather joins them on the axis the model's layout puts the tokens on.
Its other additions need nothing: the per-head gates (`to_gate_logits`) are computed from
each query token and applied to its own output, so a rank gates its own tokens; the prompt
AdaLN and the cross-attention modulation come from the row's noise level (`sigma`, one per
row, cut with the batch by CFG parallel) and modulate the whole text, which every rank holds;
the per-stream text projections run in the connectors, before the DiT. Its attention
processors are the perturbable ones (`perturbed_attn`, for spatio-temporal guidance, a job's
`guidance_terms`): the local processors wrap whichever class the block uses and pass the
perturbation arguments on.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from ....diffusers_internals import require

FEATURE = "LTX-2 sequence parallelism"
LOCAL_ATTENTIONS = ("attn2", "audio_attn1", "audio_attn2", "audio_to_video_attn")
"""Per block: the attentions whose keys are whole on every rank."""


ROTARY_TOKEN_DIMS = {"interleaved": (1, 3), "split": (2, 4)}
"""Rotary layout -> (the tokens' dim, the table's dims): interleaved (B, S, D), LTX-2.0's;
split (B, heads, S, D / 2), LTX-2.3's."""


def rotary_token_dim(rope_type: str) -> int:
    """The dim of a rotary table of `rope_type` that holds the tokens."""
    if rope_type not in ROTARY_TOKEN_DIMS:
        raise ValueError(
            f"paradit splits LTX-2's sequence with rotary tables of the layouts "
            f"{sorted(ROTARY_TOKEN_DIMS)}; this model's are {rope_type!r}: use "
            f"--ulysses-degree 1 --ring-degree 1"
        )
    return ROTARY_TOKEN_DIMS[rope_type][0]


def ltx2_cp_plan(rope_type: str = "interleaved") -> dict[str, Any]:
    """The plan, in diffusers' context-parallel plan format, for rotary tables of
    `rope_type`."""
    cp_input, cp_output = require(
        FEATURE,
        "_modeling_parallel.ContextParallelInput",
        "_modeling_parallel.ContextParallelOutput",
    )
    token_dim = rotary_token_dim(rope_type)
    dims = ROTARY_TOKEN_DIMS[rope_type][1]
    rotary_table = cp_input(split_dim=token_dim, expected_dims=dims, split_output=True)
    return {
        "": {
            "hidden_states": cp_input(split_dim=1, expected_dims=3, split_output=False),
            # image-to-video: (B, S), one per video token; text-to-video's (B,) stays whole
            "timestep": cp_input(split_dim=1, expected_dims=2, split_output=False),
        },
        "rope": {0: rotary_table, 1: rotary_table},
        "cross_attn_rope": {0: rotary_table, 1: rotary_table},
        "proj_out": cp_output(gather_dim=1, expected_dims=3),
    }


def prepare_ltx2(transformer: torch.nn.Module) -> dict[str, Any]:
    """Swap in the processors above on every block; the plan."""
    rope_type = transformer.config.rope_type
    token_dim = rotary_token_dim(rope_type)
    for block in transformer.transformer_blocks:
        for name in LOCAL_ATTENTIONS:
            attention = getattr(block, name)
            attention.set_processor(LocalAttnProcessor(type(attention.processor)))
        attention = block.video_to_audio_attn
        attention.set_processor(GatheredVideoKeysProcessor(type(attention.processor), token_dim))
    return ltx2_cp_plan(rope_type)


class LocalAttnProcessor:
    """diffusers' LTX-2 processor (`inner`: the block's class, LTX-2.3's perturbable one or
    LTX-2.0's) that never gets a parallel config: the attention runs on this rank's queries
    against whole keys, whatever sequence layout the job uses."""

    _attention_backend = None

    def __init__(self, inner: type) -> None:
        self._inner = inner()
        self._perturbable = "perturbation_mask" in inspect.signature(inner.__call__).parameters

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
        query_rotary_emb: tuple[torch.Tensor, torch.Tensor] | None = None,
        key_rotary_emb: tuple[torch.Tensor, torch.Tensor] | None = None,
        perturbation_mask: torch.Tensor | None = None,
        all_perturbed: bool | None = None,
    ) -> torch.Tensor:
        self._inner._attention_backend = self._attention_backend
        perturbation = (
            {"perturbation_mask": perturbation_mask, "all_perturbed": all_perturbed}
            if self._perturbable
            else {}
        )
        return self._inner(
            attn, hidden_states, encoder_hidden_states, attention_mask, query_rotary_emb,
            key_rotary_emb, **perturbation,
        )  # fmt: skip


class GatheredVideoKeysProcessor(LocalAttnProcessor):
    """Audio queries against the video: with the sequence split (a parallel config set), the
    video tokens and their rotary table are gathered first; then diffusers' processor runs
    locally, on the same whole inputs on every rank."""

    def __init__(self, inner: type, token_dim: int) -> None:
        super().__init__(inner)
        self._config: Any = None
        self._token_dim = token_dim

    @property
    def _parallel_config(self) -> Any:
        return self._config

    @_parallel_config.setter
    def _parallel_config(self, config: Any) -> None:
        self._config = config

    def __call__(
        self,
        attn: Any,
        hidden_states: torch.Tensor,
        encoder_hidden_states: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        query_rotary_emb: tuple[torch.Tensor, torch.Tensor] | None = None,
        key_rotary_emb: tuple[torch.Tensor, torch.Tensor] | None = None,
        perturbation_mask: torch.Tensor | None = None,
        all_perturbed: bool | None = None,
    ) -> torch.Tensor:
        config = self._config
        if config is not None and encoder_hidden_states is not None:
            gather = _video_gather(config)
            encoder_hidden_states = gather(encoder_hidden_states, 1)
            if key_rotary_emb is not None:
                key_rotary_emb = (
                    gather(key_rotary_emb[0], self._token_dim),
                    gather(key_rotary_emb[1], self._token_dim),
                )
        return super().__call__(
            attn, hidden_states, encoder_hidden_states, attention_mask, query_rotary_emb,
            key_rotary_emb, perturbation_mask, all_perturbed,
        )  # fmt: skip


def _video_gather(config: Any):
    """Along the sequence (the tokens' dim), over the ranks that split it, as the plan split
    it."""
    (sharder,) = require(FEATURE, "context_parallel.PartitionAnythingSharder")
    mesh = config.context_parallel_config._flattened_mesh

    def gather(tensor: torch.Tensor, dim: int) -> torch.Tensor:
        return sharder.unshard_anything(tensor, dim, mesh)

    return gather
