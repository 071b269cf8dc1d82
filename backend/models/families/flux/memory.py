"""The family's DiT in the memory plan: its dry run on the meta device."""

from __future__ import annotations

from typing import Any

import torch


def dit_forward(sizes: Any, shape: Any, sequence_degree: int) -> Any:
    """Flux.1's DiT at this rank's share of the job's tokens."""
    dit, config = sizes.dit, sizes.dit.config
    local = sizes.share(shape, sequence_degree)
    batch, rows, cols = local.batch, local.rows, local.cols
    meta, step = local.meta, local.step()
    tokens = (rows // 2) * (cols // 2)
    return dit(
        hidden_states=torch.empty((batch, tokens, config["in_channels"]), **meta),
        encoder_hidden_states=torch.empty(
            (batch, sizes.text_tokens, config["joint_attention_dim"]), **meta
        ),
        pooled_projections=torch.empty((batch, config["pooled_projection_dim"]), **meta),
        timestep=step,
        img_ids=torch.empty((tokens, 3), device="meta"),
        txt_ids=torch.empty((sizes.text_tokens, 3), device="meta"),
        guidance=step if config.get("guidance_embeds") else None,
        return_dict=False,
    )
