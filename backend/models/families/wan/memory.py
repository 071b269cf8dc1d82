"""The family's DiT in the memory plan: its dry run on the meta device."""

from __future__ import annotations

from typing import Any

import torch


def dit_forward(sizes: Any, shape: Any, sequence_degree: int) -> Any:
    """Wan's DiT at this rank's share of the job's tokens (image-to-video: with CLIP's 257 image
    tokens)."""
    dit, config = sizes.dit, sizes.dit.config
    local = sizes.share(shape, sequence_degree)
    batch, rows, cols, frames = local.batch, local.rows, local.cols, local.frames
    meta, step = local.meta, local.step()
    kwargs = {}
    if config.get("image_dim"):
        kwargs["encoder_hidden_states_image"] = torch.empty(
            (batch, 257, config["image_dim"]), **meta
        )
    return dit(
        torch.empty((batch, config["in_channels"], frames, rows, cols), **meta),
        step,
        torch.empty((batch, sizes.text_tokens, config["text_dim"]), **meta),
        return_dict=False,
        **kwargs,
    )
