"""A context-parallel plan for Qwen-Image 2.1, applied from outside (diffusers declares none).

Qwen-Image 2.1 runs its `transformer_blocks` over one joint sequence: the prompt's tokens (with
the condition images' tokens in the slots the encoder reserved), then the target image's. Its
attention is block-causal: causal over the text, bidirectional inside each image block;
diffusers' processor computes it as one attention per run of the prefix (a text run against
the keys up to its end, with a causal triangle over its own; an image block against the keys
up to its end) and one for the target image against every key. Under `use_kv_cache` the first
step stores every block's prefix keys and values; the later steps run the target image's
tokens alone against the stored prefix.

Those runs are positions in the whole sequence, so the heads are split, not the runs:

- the joint sequence is split at the first block's input (`hidden_states`, along the tokens,
  `tensor_split`: any length on any rank count), and each block's per-token inputs with it
  (`rotary_emb`, one row per token; `target_token_mask`, which modulation row a token takes);
- `UlyssesQwenImage21Processor` projects, normalises and rotates its rank's tokens, then one
  all-to-all per query, key and value gives every rank the whole sequence for its share of
  the heads (diffusers' Ulysses-anything exchange: any token count, heads padded where the
  rank count does not divide them; `../../ulysses_heads.py`, shared). The runs, the padding
  mask (`key_valid`, whole on every rank) and the prefix cache then work on whole sequences
  as at world size 1: each rank stores and reads the prefix keys and values of its own heads.
  One all-to-all brings the output back to the rank's tokens and every head;
- the tokens are gathered at the last block's output, before the model's final norm (which
  reads the whole `target_token_mask`).

Ring attention is refused (a run's keys would be spread over the ring). The model's code is
unchanged. The diffusers names used here are checked (`diffusers_internals`) when the plan is
applied. With CFG parallel the pipeline cuts the image's tokens out of the first call's output
before the second call, and the output is longer than the input at the prefix-filling step
(the whole joint sequence): `shaped_like_input` makes the model return input-shaped outputs
(the image's tokens last), so that the CFG exchange fills what the pipeline kept.
"""

from __future__ import annotations

from typing import Any

import torch

from ....diffusers_internals import require
from ...ulysses_heads import EXCHANGE_NAMES, HeadExchange, diffusers_processor, ulysses_group

FEATURE = "Qwen-Image 2.1 sequence parallelism"


ATTENTION = "Qwen-Image 2.1's block-causal attention"


class UlyssesQwenImage21Processor:
    """diffusers' Qwen-Image 2.1 processor (`QwenImage21AttnProcessor`) with the heads split
    across the Ulysses group around its block-causal runs and prefix cache; without a parallel
    config (world size 1, a job run whole) it is diffusers' processor as it is."""

    _attention_backend = None
    _parallel_config = None

    def __call__(
        self,
        attn: Any,
        hidden_states: torch.Tensor,
        attention_mask: Any | None = None,
        rotary_emb: torch.Tensor | None = None,
        layer_cache: Any | None = None,
        kv_cache_mode: str | None = None,
        cache_write_slice: slice | None = None,
        segments: list[tuple[int, int, bool]] | None = None,
        key_valid: torch.Tensor | None = None,
    ) -> torch.Tensor:
        from diffusers.models.transformers import transformer_qwenimage21 as qi21

        group = ulysses_group(self, ATTENTION)
        if group is None:
            inner = diffusers_processor(qi21.QwenImage21AttnProcessor, self._attention_backend)
            return inner(
                attn, hidden_states, attention_mask, rotary_emb, layer_cache, kv_cache_mode,
                cache_write_slice, segments, key_valid,
            )  # fmt: skip
        head_dim = attn.inner_dim // attn.heads
        query, key, value = (
            proj(hidden_states).unflatten(-1, (-1, head_dim))
            for proj in (attn.to_q, attn.to_k, attn.to_v)
        )
        query = attn.norm_q(query).to(value.dtype)
        key = attn.norm_k(key).to(value.dtype)
        if rotary_emb is not None:
            query = qi21.apply_rotary_emb_qwen(query, rotary_emb, use_real=False)
            key = qi21.apply_rotary_emb_qwen(key, rotary_emb, use_real=False)
        heads = HeadExchange(group)
        local_q = query
        query, key, value = heads.gather(query, key, value)  # (B, S whole, H / ranks, D)
        out = _attend(query, key, value, layer_cache, kv_cache_mode, cache_write_slice, segments,
                      key_valid, self._attention_backend)  # fmt: skip
        out = heads.scatter(out, local_q)  # (B, S local, H, D)
        out = out.flatten(2, 3).type_as(query)
        return attn.to_out[1](attn.to_out[0](out))


def _attend(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    layer_cache: Any | None,
    kv_cache_mode: str | None,
    cache_write_slice: slice | None,
    segments: list[tuple[int, int, bool]] | None,
    key_valid: torch.Tensor | None,
    backend: Any,
) -> torch.Tensor:
    """diffusers' prefix cache and block-causal runs on whole sequences of a share of the
    heads: what `QwenImage21AttnProcessor` does after its projections, in its order."""
    from diffusers.models.attention_dispatch import dispatch_attention_fn

    if layer_cache is not None:
        if kv_cache_mode == "extract" and cache_write_slice is not None:
            layer_cache.store(
                key[:, cache_write_slice].clone(), value[:, cache_write_slice].clone()
            )
        elif kv_cache_mode == "cached":
            cached_k, cached_v = layer_cache.get()
            key = torch.cat([cached_k, key], dim=1)
            value = torch.cat([cached_v, value], dim=1)
    if segments is None:  # the cached steps: the image against the prefix and itself
        mask = None if key_valid is None else key_valid[:, None, None, :]
        return dispatch_attention_fn(
            query, key, value, attn_mask=mask, dropout_p=0.0, backend=backend
        )
    prefix_len = segments[-1][1] if segments else 0
    outputs = []
    for start, end, is_text in segments:
        mask = None
        if is_text:
            length = end - start
            mask = torch.cat(
                [
                    torch.ones(length, start, dtype=torch.bool, device=query.device),
                    torch.tril(torch.ones(length, length, dtype=torch.bool, device=query.device)),
                ],
                dim=1,
            )[None, None]
        if key_valid is not None:
            valid = key_valid[:, None, None, :end]
            mask = valid if mask is None else (mask & valid)
        outputs.append(
            dispatch_attention_fn(
                query[:, start:end], key[:, :end], value[:, :end], attn_mask=mask, dropout_p=0.0
            )
        )
    outputs.append(
        dispatch_attention_fn(
            query[:, prefix_len:],
            key,
            value,
            attn_mask=None if key_valid is None else key_valid[:, None, None, :],
            dropout_p=0.0,
        )
    )
    return torch.cat(outputs, dim=1)


def shaped_like_input(transformer: torch.nn.Module) -> None:
    """Make `transformer`'s output shaped like its `hidden_states` input: the last tokens of
    the output (the target image's, which the pipeline keeps), zero-padded in front when the
    output is shorter (the cached steps of an edit). Installed once."""
    if getattr(transformer, "_paradit_shaped_like_input", False):
        return
    forward = transformer.forward

    def shaped(*args: Any, **kwargs: Any) -> Any:
        output = forward(*args, **kwargs)
        hidden = kwargs.get("hidden_states", args[0] if args else None)
        sample = output[0] if isinstance(output, tuple) else output.sample
        length = hidden.shape[1]
        if sample.shape[1] >= length:
            sample = sample[:, sample.shape[1] - length :]
        else:
            pad = sample.new_zeros(sample.shape[0], length - sample.shape[1], *sample.shape[2:])
            sample = torch.cat([pad, sample], dim=1)
        if isinstance(output, tuple):
            return (sample, *output[1:])
        output.sample = sample
        return output

    transformer.forward = shaped
    transformer._paradit_shaped_like_input = True


def qwen_image21_cp_plan(transformer: torch.nn.Module) -> dict[str, Any]:
    """Swap in the Ulysses processor on every block, make the output input-shaped; the plan
    for `transformer` (every block's per-token inputs, its last block named by the count), in
    diffusers' context-parallel plan format."""
    cp_input, cp_output, *_ = require(
        FEATURE,
        "_modeling_parallel.ContextParallelInput",
        "_modeling_parallel.ContextParallelOutput",
        *EXCHANGE_NAMES,
        "transformer_qwenimage21.apply_rotary_emb_qwen",
        "transformer_qwenimage21.QwenImage21AttnProcessor.__call__",
    )
    blocks = transformer.transformer_blocks
    if not len(blocks):
        raise ValueError("Qwen-Image 2.1 sequence parallelism needs at least one transformer block")
    for block in blocks:
        block.attn.set_processor(UlyssesQwenImage21Processor())
    shaped_like_input(transformer)
    last = len(blocks) - 1
    return {
        "transformer_blocks.*": {
            "rotary_emb": cp_input(split_dim=0, expected_dims=2, split_output=False),  # (S, D/2)
            "target_token_mask": cp_input(split_dim=0, expected_dims=1, split_output=False),
        },
        "transformer_blocks.0": {
            "hidden_states": cp_input(split_dim=1, expected_dims=3, split_output=False)
        },
        f"transformer_blocks.{last}": cp_output(gather_dim=1, expected_dims=3),
    }
