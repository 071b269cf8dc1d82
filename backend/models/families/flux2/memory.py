"""The family's DiT in the memory plan: its dry run on the meta device."""

from __future__ import annotations

from typing import Any

import torch


def dit_forward(sizes: Any, shape: Any, sequence_degree: int) -> Any:
    """The Flux.2 DiT (dev and Klein) at this rank's share of the output's tokens and of the
    reference images' tokens (an edit's)."""
    dit, config = sizes.dit, sizes.dit.config
    local = sizes.share(shape, sequence_degree)
    batch, rows, cols = local.batch, local.rows, local.cols
    meta, step = local.meta, local.step()
    references = sizes.reference_grids(shape, sequence_degree)
    tokens = (rows // 2) * (cols // 2) + sum(r * c for r, c in references)
    return dit(
        hidden_states=torch.empty((batch, tokens, config["in_channels"]), **meta),
        encoder_hidden_states=torch.empty(
            (batch, sizes.text_tokens, config["joint_attention_dim"]), **meta
        ),
        timestep=step,
        img_ids=torch.empty((batch, tokens, 4), device="meta"),
        txt_ids=torch.empty((batch, sizes.text_tokens, 4), device="meta"),
        guidance=step if config.get("guidance_embeds") else None,
        return_dict=False,
    )
