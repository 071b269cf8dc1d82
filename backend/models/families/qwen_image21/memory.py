"""The family's DiT in the memory plan: its dry run on the meta device, and the prompt
prefix's keys and values the pipeline caches through the steps (`use_kv_cache`)."""

from __future__ import annotations

import math
from typing import Any

import torch


def dit_forward(sizes: Any, shape: Any, sequence_degree: int) -> Any:
    """Qwen-Image 2.1's blocks at this rank's share of the joint sequence at the
    prefix-filling step (the text and the image: the largest; later steps run the image
    alone). The model's own forward reads its token layout off the data (which tokens are
    the image's), which the meta device has not, so the dry run calls what it calls: the
    shared modulation, every block (their runs: the text, then the image), the output."""
    dit, config = sizes.dit, sizes.dit.config
    local = sizes.share(shape, sequence_degree)
    batch, meta = local.batch, local.meta
    text = math.ceil(sizes.text_tokens / sequence_degree)
    tokens = text + local.rows * local.cols  # one token per latent pixel
    width = config["num_attention_heads"] * config["attention_head_dim"]
    hidden = torch.empty((batch, tokens, width), **meta)
    timestep = torch.empty((batch + 1,), **meta)  # the step's and t = 0 (the text's)
    temb = dit.time_text_embed(timestep, hidden)
    modulation = dit.modulation(temb)
    rotary = torch.empty(
        (tokens, config["attention_head_dim"] // 2), device="meta", dtype=torch.complex64
    )
    image = torch.ones((tokens,), device="meta", dtype=torch.bool)
    for block in dit.transformer_blocks:
        hidden = block(
            hidden_states=hidden,
            modulation=modulation,
            rotary_emb=rotary,
            target_token_mask=image,
            segments=[(0, text, True)],
        )
    return dit.proj_out(dit.norm_out(hidden, temb, image))


def cached_prefix(sizes: Any, shape: Any, sequence_degree: int, branches: int = 1) -> int:
    """The bytes of the prefix's keys and values `QwenImage21Pipeline` keeps on one rank from
    the first step to the last (`use_kv_cache`, diffusers' `QwenImage21KVCache`: a key and a
    value of the text's and the condition images' tokens per block, in the compute dtype): 2
    x blocks x batch x prefix tokens x heads x head dims x the dtype's bytes, per CFG branch
    the rank runs in turn (`branches`: each keeps its own cache). The prefix: the plan's
    assumed text length (`sizes.text_tokens`) and an edit's references, one token per latent
    pixel. Under Ulysses every rank holds the whole prefix for its share of the heads
    (`parallel.py`; the heads padded up to a multiple of the rank count)."""
    config = sizes.dit.config
    references = sum(
        (height // sizes.spatial) * (width // sizes.spatial) for width, height in shape.references
    )
    tokens = sizes.text_tokens + references
    heads = math.ceil(config["num_attention_heads"] / max(1, sequence_degree))
    width = heads * config["attention_head_dim"]
    element = torch.tensor([], dtype=sizes.dtype).element_size()
    blocks = config["num_layers"]
    return 2 * blocks * branches * shape.batch * tokens * width * element
