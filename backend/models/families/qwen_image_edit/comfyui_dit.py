"""What a job whose input images ComfyUI's way prepared (`image_prep` comfyui) changes on
diffusers' Qwen-Image DiT for its time: the references' token grids and the rotary positions
ComfyUI's Qwen DiT (`comfy/ldm/qwen_image/model.py`) gives the tokens.

Both DiTs put each image's tokens around its centre, image k (the output 0, the references
1, 2, ...) at frame position k, and the text after the images, all three axes at one
position. They differ in three places:
- ComfyUI pads a reference's odd latent side to the 2x2 token (`comfyui_prep.pad_even`), so
  its token grid is ceil(side / 2): the pipeline's grids (from sides of 32 pixels) are
  replaced by those (`img_shapes`; an even count is the same in both, an odd one never is);
- along a side of an odd number n of tokens ComfyUI's positions run -(n-1)/2 .. (n-1)/2,
  diffusers' -(n+1)/2 .. (n-3)/2 (its table for n+1 would give ComfyUI's as its last n);
- ComfyUI's text starts at max(rows // 2, columns // 2) of the output alone, diffusers' at
  the largest of every image's (the references' too).

All of it happens inside the rotary module's own forward, before diffusers' context-parallel
plan splits its output, so every plan sees the same table.
"""

from __future__ import annotations

from typing import Any

import torch


class ComfyDiT:
    """The changes on `transformer` (a `QwenImageTransformer2DModel`) for one job; `remove()`
    takes them all off. `references`: each reference's (frames, rows, columns) of tokens."""

    def __init__(self, transformer: torch.nn.Module, references: list[tuple[int, int, int]]):
        self.rope = transformer.pos_embed
        self._video = self.rope._compute_video_freqs
        self._device = self.rope._get_device_freqs
        self._text_shift = 0
        self._in_video = False
        self._hooks = [
            transformer.register_forward_pre_hook(_reference_grids(references), with_kwargs=True),
            self.rope.register_forward_pre_hook(self._record),
        ]
        self.rope._compute_video_freqs = self._video_freqs
        self.rope._get_device_freqs = self._device_freqs

    def remove(self) -> None:
        for hook in self._hooks:
            hook.remove()
        del self.rope._compute_video_freqs, self.rope._get_device_freqs

    def _record(self, _module: Any, args: tuple) -> None:
        """The call's images: how far diffusers' text start lies beyond ComfyUI's."""
        shapes = args[0]
        if isinstance(shapes, list):
            shapes = shapes[0]  # the batch's first (all equal)
        if not isinstance(shapes, list):
            shapes = [shapes]
        every = max(max(rows // 2, cols // 2) for _, rows, cols in shapes)
        _, rows, cols = shapes[0]
        self._text_shift = every - max(rows // 2, cols // 2)

    def _video_freqs(
        self, frame: int, height: int, width: int, idx: int = 0, device: Any = None
    ) -> torch.Tensor:
        """An image's table with ComfyUI's positions: an odd side's from the next even one."""
        odd_h, odd_w = height % 2, width % 2
        self._in_video = True
        try:
            freqs = self._video(frame, height + odd_h, width + odd_w, idx, device)
        finally:
            self._in_video = False
        if not (odd_h or odd_w):
            return freqs
        grid = freqs.view(frame, height + odd_h, width + odd_w, -1)[:, odd_h:, odd_w:]
        return grid.reshape(frame * height * width, -1).contiguous()

    def _device_freqs(self, device: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """The tables; for the text the positive one moved on by the shift, so that diffusers'
        text start reads ComfyUI's rows."""
        positive, negative = self._device(device)
        if self._in_video or not self._text_shift:
            return positive, negative
        return torch.cat([positive[: self._text_shift], positive]), negative


def _reference_grids(references: list[tuple[int, int, int]]):
    """A forward pre-hook giving the DiT the references' token grids after the output's."""

    def hook(_module: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        if "img_shapes" in kwargs:
            kwargs["img_shapes"] = [[own[0], *references] for own in kwargs["img_shapes"]]
        return args, kwargs

    return hook
