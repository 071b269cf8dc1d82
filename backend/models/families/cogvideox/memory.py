"""The family's DiT in the memory plan: its dry run on the meta device."""

from __future__ import annotations

import math
from typing import Any

import torch


def dit_forward(sizes: Any, shape: Any, sequence_degree: int) -> Any:
    """CogVideoX's DiT at this rank's share of the job's tokens (1.5: frames padded to its temporal
    patch)."""
    dit, config = sizes.dit, sizes.dit.config
    local = sizes.share(shape, sequence_degree)
    batch, rows, cols, frames = local.batch, local.rows, local.cols, local.frames
    meta, step = local.meta, local.step()
    patch_t = config.get("patch_size_t") or 1
    frames = math.ceil(frames / patch_t) * patch_t
    return dit(
        hidden_states=torch.empty((batch, frames, config["in_channels"], rows, cols), **meta),
        encoder_hidden_states=torch.empty(
            (batch, sizes.text_tokens, config["text_embed_dim"]), **meta
        ),
        timestep=step,
        return_dict=False,
    )
