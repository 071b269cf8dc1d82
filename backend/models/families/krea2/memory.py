"""The family's DiT in the memory plan: its dry run on the meta device."""

from __future__ import annotations

from typing import Any

import torch


def dit_forward(sizes: Any, shape: Any, sequence_degree: int) -> Any:
    """Krea 2's DiT at this rank's share of the joint sequence: the text fusion runs whole on
    every rank (over the tapped layers and the text tokens, `parallel.py`), the blocks over
    a share of the text and image tokens (the plan splits them at the first block)."""
    dit, config = sizes.dit, sizes.dit.config
    local = sizes.share(shape, sequence_degree)
    batch, meta = local.batch, local.meta
    rows, cols = local.rows // 2, local.cols // 2  # 2x2 patches
    text = sizes.text_tokens
    return dit(
        hidden_states=torch.empty((batch, rows * cols, config["in_channels"]), **meta),
        encoder_hidden_states=torch.empty(
            (batch, text, config["num_text_layers"], config["text_hidden_dim"]), **meta
        ),
        timestep=local.step(),
        position_ids=torch.zeros((text + rows * cols, 3), **meta),
        encoder_attention_mask=torch.ones((batch, text), device="meta", dtype=torch.bool),
        return_dict=False,
    )
