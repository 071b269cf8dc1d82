"""ComfyUI's Qwen3-VL vision patches worked by hand, element by element, for the tests that
check a family's ComfyUI-prepared vision input against them (Qwen-Image 2.1's, MiniMax H3's)."""

from __future__ import annotations

import torch


def patches_by_hand(image: torch.Tensor) -> torch.Tensor:
    """The patches of a normalised (3, H, W) image whose sides are multiples of 32: patch k of
    the (H / 32) x (W / 32) blocks of 2x2 16-pixel patches, in block order and within a block
    row by row, holds channel, frame (the image twice), row and column of its 16x16 pixels in
    that order."""
    out = []
    for block_r in range(image.shape[1] // 32):
        for block_c in range(image.shape[2] // 32):
            for r in range(2):
                for c in range(2):
                    y, x = (block_r * 2 + r) * 16, (block_c * 2 + c) * 16
                    patch = image[:, y : y + 16, x : x + 16]
                    out.append(torch.stack([patch, patch], dim=1).reshape(-1))
    return torch.stack(out)
