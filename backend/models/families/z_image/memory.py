"""The family's DiT in the memory plan: its dry run on the meta device."""

from __future__ import annotations

from typing import Any

import torch


def dit_forward(sizes: Any, shape: Any, sequence_degree: int) -> Any:
    """Z-Image's DiT: its refiners run over the whole image on every rank (the sequence is split
    only for the main layers, `parallel.py`), so the peak is at the whole image."""
    dit, config = sizes.dit, sizes.dit.config
    local = sizes.share(shape, sequence_degree)
    batch = local.batch
    meta, step = local.meta, local.step()
    full = (shape.height // sizes.spatial, shape.width // sizes.spatial)
    image = torch.empty((config["in_channels"], 1, *full), **meta)
    text = torch.empty((sizes.text_tokens, config["cap_feat_dim"]), **meta)
    return dit([image] * batch, step, [text] * batch, return_dict=False)
