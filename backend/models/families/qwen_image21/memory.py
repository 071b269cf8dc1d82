"""The family's DiT in the memory plan: its dry run on the meta device."""

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
