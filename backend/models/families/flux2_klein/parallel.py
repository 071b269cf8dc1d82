"""A context-parallel plan for FLUX.2 [klein] KV (`Flux2KleinKVPipeline`), applied from outside.

`Flux2KleinKVPipeline` swaps the Flux.2 DiT's attention processors for its KV-cache ones
(`Flux2KVAttnProcessor` in the double-stream blocks, `Flux2KVParallelSelfAttnProcessor` in the
single-stream ones). At the first step of an edit the image stream is `[references, noise]`:
the references are modulated at timestep zero (a per-token modulation), attend only to
themselves, and every block stores their keys and values (after RoPE); the later steps run
the noise alone, the stored keys and values put back between the text and the noise. Those
processors slice the joint sequence at the text's and the references' global token counts and
attend without the parallel config, so diffusers' own `_cp_plan` (the sequence split at the
model's input) cannot serve them: a rank's slice holds neither count.

So the heads are split, not the runs (as `../qwen_image21/parallel.py` does for Qwen-Image
2.1's prefix cache):

- each block's streams are split along the tokens at the first block of each list (the double
  blocks' text and image streams, the single blocks' joint sequence: `tensor_split`, any
  length on any rank count) and gathered at the last block of each list; the per-token
  modulation of the first step (`temb_mod_img`, `temb_mod`: 3 dimensions only then) is split
  with them (at the later steps it is (B, C), which diffusers' hook leaves whole, logging
  once per process that it did), the whole-sequence RoPE table is not split;
- `UlyssesKVProcessor` and `UlyssesKVSingleProcessor` project and normalise their rank's
  tokens, then one all-to-all per query, key and value (per stream in a double block) gives
  every rank the whole sequence for its share of the heads (diffusers' Ulysses-anything
  exchange: any token count, heads padded where the rank count does not divide them; the
  exchange and the refusal of ring are `../../ulysses_heads.py`'s, shared). RoPE,
  the references' self-attention, the cache's store and its reuse then run on whole sequences
  as at world size 1, by diffusers' own `_flux2_kv_causal_attention`: the cached references'
  keys and values are whole on every rank (its share of the heads). One all-to-all per stream
  brings the output back to the rank's tokens and every head.

Without the KV processors (Flux.2 [dev], FLUX.2 [klein]) the DiT keeps diffusers' own plan.
Ring attention is refused. The diffusers names used here are checked (`diffusers_internals`)
when the plan is applied.

Tensor names carry their layout where it helps: B batch, S tokens (local: the rank's share),
H heads (local: the rank's share after the exchange), D head dims.
"""

from __future__ import annotations

from typing import Any

import torch

from ....diffusers_internals import require
from ...ulysses_heads import EXCHANGE_NAMES, HeadExchange, diffusers_processor, ulysses_group

FEATURE = "FLUX.2 [klein] KV sequence parallelism"


ATTENTION = "FLUX.2 [klein] KV's cached reference attention"


def _attend(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    num_txt_tokens: int,
    num_ref_tokens: int,
    kv_cache: Any | None,
    kv_cache_mode: str | None,
    attention_mask: Any | None,
    backend: Any,
) -> torch.Tensor:
    """diffusers' KV processors after RoPE, on whole sequences of a share of the heads: the
    references' keys and values stored at the first step, their self-attention then, the
    stored ones put back at the later steps; plain attention without a cache."""
    from diffusers.models.attention_dispatch import dispatch_attention_fn
    from diffusers.models.transformers.transformer_flux2 import _flux2_kv_causal_attention

    if kv_cache_mode == "extract" and kv_cache is not None and num_ref_tokens > 0:
        ref = slice(num_txt_tokens, num_txt_tokens + num_ref_tokens)
        kv_cache.store(key[:, ref].clone(), value[:, ref].clone())
    if kv_cache_mode == "extract" and num_ref_tokens > 0:
        return _flux2_kv_causal_attention(
            query, key, value, num_txt_tokens, num_ref_tokens, backend=backend
        )
    if kv_cache_mode == "cached" and kv_cache is not None:
        return _flux2_kv_causal_attention(
            query, key, value, num_txt_tokens, 0, kv_cache=kv_cache, backend=backend
        )
    return dispatch_attention_fn(query, key, value, attn_mask=attention_mask, backend=backend)


class UlyssesKVProcessor:
    """diffusers' `Flux2KVAttnProcessor` (a double-stream block) with the heads split across
    the Ulysses group around the references' runs and cache; without a parallel config it is
    diffusers' processor as it is."""

    _attention_backend = None
    _parallel_config = None

    def __call__(
        self,
        attn: Any,
        hidden_states: torch.Tensor,
        encoder_hidden_states: torch.Tensor | None = None,
        attention_mask: Any | None = None,
        image_rotary_emb: Any | None = None,
        kv_cache: Any | None = None,
        kv_cache_mode: str | None = None,
        num_ref_tokens: int = 0,
    ) -> Any:
        from diffusers.models.embeddings import apply_rotary_emb
        from diffusers.models.transformers import transformer_flux2 as flux2

        group = ulysses_group(self, ATTENTION)
        if group is None:
            inner = diffusers_processor(flux2.Flux2KVAttnProcessor, self._attention_backend)
            return inner(
                attn, hidden_states, encoder_hidden_states, attention_mask, image_rotary_emb,
                kv_cache, kv_cache_mode, num_ref_tokens,
            )  # fmt: skip
        if encoder_hidden_states is None:
            raise ValueError("a FLUX.2 double-stream block attends over the text and the image")
        img_q, img_k, img_v, txt_q, txt_k, txt_v = (
            t.unflatten(-1, (-1, attn.head_dim))
            for t in flux2._get_qkv_projections(attn, hidden_states, encoder_hidden_states)
        )
        img_q, img_k = attn.norm_q(img_q), attn.norm_k(img_k)
        txt_q, txt_k = attn.norm_added_q(txt_q), attn.norm_added_k(txt_k)
        streams = HeadExchange(group)
        whole = streams.gather(txt_q, txt_k, txt_v, img_q, img_k, img_v)
        num_txt_tokens = whole[0].shape[1]  # the whole text's
        query, key, value = (torch.cat([whole[i], whole[i + 3]], dim=1) for i in range(3))
        if image_rotary_emb is not None:  # the whole sequence's table, on the whole sequence
            query = apply_rotary_emb(query, image_rotary_emb, sequence_dim=1)
            key = apply_rotary_emb(key, image_rotary_emb, sequence_dim=1)
        out = _attend(query, key, value, num_txt_tokens, num_ref_tokens, kv_cache,
                      kv_cache_mode, attention_mask, self._attention_backend)  # fmt: skip
        out = out.to(query.dtype)
        txt_out = streams.scatter(out[:, :num_txt_tokens], txt_q)
        img_out = streams.scatter(out[:, num_txt_tokens:], img_q)
        txt_out, img_out = txt_out.flatten(2, 3), img_out.flatten(2, 3)
        img_out = attn.to_out[1](attn.to_out[0](img_out))
        return img_out, attn.to_add_out(txt_out)


class UlyssesKVSingleProcessor:
    """diffusers' `Flux2KVParallelSelfAttnProcessor` (a single-stream block) with the heads
    split across the Ulysses group; without a parallel config it is diffusers' processor."""

    _attention_backend = None
    _parallel_config = None

    def __call__(
        self,
        attn: Any,
        hidden_states: torch.Tensor,
        attention_mask: Any | None = None,
        image_rotary_emb: Any | None = None,
        kv_cache: Any | None = None,
        kv_cache_mode: str | None = None,
        num_txt_tokens: int = 0,
        num_ref_tokens: int = 0,
    ) -> torch.Tensor:
        from diffusers.models.embeddings import apply_rotary_emb
        from diffusers.models.transformers import transformer_flux2 as flux2

        group = ulysses_group(self, ATTENTION)
        if group is None:
            inner = diffusers_processor(
                flux2.Flux2KVParallelSelfAttnProcessor, self._attention_backend
            )
            return inner(
                attn, hidden_states, attention_mask, image_rotary_emb, kv_cache, kv_cache_mode,
                num_txt_tokens, num_ref_tokens,
            )  # fmt: skip
        projected = attn.to_qkv_mlp_proj(hidden_states)
        qkv_dim = 3 * attn.inner_dim
        mlp_dim = attn.mlp_hidden_dim * attn.mlp_mult_factor
        local_qkv = projected.shape[-1] * qkv_dim // (qkv_dim + mlp_dim)
        qkv, mlp = torch.split(projected, [local_qkv, projected.shape[-1] - local_qkv], dim=-1)
        query, key, value = (t.unflatten(-1, (-1, attn.head_dim)) for t in qkv.chunk(3, dim=-1))
        query, key = attn.norm_q(query), attn.norm_k(key)
        streams = HeadExchange(group)
        local_q = query
        query, key, value = streams.gather(query, key, value)
        if image_rotary_emb is not None:
            query = apply_rotary_emb(query, image_rotary_emb, sequence_dim=1)
            key = apply_rotary_emb(key, image_rotary_emb, sequence_dim=1)
        # the model passes the text's count only with a cache mode; a plain call has no runs
        out = _attend(query, key, value, num_txt_tokens, num_ref_tokens, kv_cache,
                      kv_cache_mode, attention_mask, self._attention_backend)  # fmt: skip
        out = streams.scatter(out.to(query.dtype), local_q).flatten(2, 3)
        return attn.to_out(torch.cat([out, attn.mlp_act_fn(mlp)], dim=-1))


def uses_kv_processors(transformer: torch.nn.Module) -> bool:
    """Whether the DiT runs `Flux2KleinKVPipeline`'s KV processors (the pipeline sets them)."""
    from diffusers.models.transformers import transformer_flux2 as flux2

    blocks = transformer.transformer_blocks
    return bool(len(blocks)) and isinstance(blocks[0].attn.processor, flux2.Flux2KVAttnProcessor)


def flux2_cp_plan(transformer: torch.nn.Module) -> dict[str, Any]:
    """The Flux.2 DiT's context-parallel plan: diffusers' own, unless the DiT runs the KV
    pipeline's processors; then ours (module docstring): the Ulysses processors swapped in on
    every block, the plan in diffusers' context-parallel plan format."""
    if not uses_kv_processors(transformer):
        return transformer._cp_plan
    cp_input, cp_output, *_ = require(
        FEATURE,
        "_modeling_parallel.ContextParallelInput",
        "_modeling_parallel.ContextParallelOutput",
        *EXCHANGE_NAMES,
        "attention_dispatch.dispatch_attention_fn",
        "transformer_flux2._flux2_kv_causal_attention",
        "transformer_flux2._get_qkv_projections",
        "embeddings.apply_rotary_emb",
        "transformer_flux2.Flux2KVAttnProcessor.__call__",
        "transformer_flux2.Flux2KVParallelSelfAttnProcessor.__call__",
    )
    double, single = transformer.transformer_blocks, transformer.single_transformer_blocks
    if len(double) < 2 or len(single) < 2:
        raise ValueError(
            f"{FEATURE} splits at a block list's first block and gathers at its last: it "
            f"needs at least 2 of each, got {len(double)} double and {len(single)} single"
        )
    for block in double:
        block.attn.set_processor(UlyssesKVProcessor())
    for block in single:
        block.attn.set_processor(UlyssesKVSingleProcessor())

    def tokens() -> Any:  # (B, S, C), split along S
        return cp_input(split_dim=1, expected_dims=3, split_output=False)

    def gathered() -> Any:
        return cp_output(gather_dim=1, expected_dims=3)

    return {
        "transformer_blocks.0": {"hidden_states": tokens(), "encoder_hidden_states": tokens()},
        # the first step's per-token modulation of [references, noise]; (B, C) otherwise
        "transformer_blocks.*": {"temb_mod_img": tokens()},
        f"transformer_blocks.{len(double) - 1}": [gathered(), gathered()],
        "single_transformer_blocks.0": {"hidden_states": tokens()},
        "single_transformer_blocks.*": {"temb_mod": tokens()},
        f"single_transformer_blocks.{len(single) - 1}": gathered(),
    }
