"""The family's DiT in the memory plan: its dry run on the meta device."""

from __future__ import annotations

from typing import Any

import torch


def dit_forward(sizes: Any, shape: Any, sequence_degree: int) -> Any:
    """Qwen-Image's DiT (and Qwen-Image-Edit's) at this rank's share of the output's tokens, then
    the edit's reference images' tokens."""
    dit, config = sizes.dit, sizes.dit.config
    local = sizes.share(shape, sequence_degree)
    batch, rows, cols = local.batch, local.rows, local.cols
    meta, step = local.meta, local.step()
    references = sizes.reference_grids(shape, sequence_degree)
    grids = [(rows // 2, cols // 2), *references]  # the output's tokens, then the edit's
    tokens = sum(r * c for r, c in grids)
    return dit(
        hidden_states=torch.empty((batch, tokens, config["in_channels"]), **meta),
        encoder_hidden_states=torch.empty(
            (batch, sizes.text_tokens, config["joint_attention_dim"]), **meta
        ),
        timestep=step,
        img_shapes=[[(1, *grid) for grid in grids]] * batch,
        return_dict=False,
    )
