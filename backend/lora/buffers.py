"""Memory a rank reuses from one LoRA job to the next.

A job's LoRAs need, on each rank, a copy of the weight rows they change (to put them back
after the job) and a scratch tensor for one layer's change at a time. Fresh memory for every
job costs more than the copies themselves: the allocator maps new pages for each large tensor
and the kernel zeroes them on first touch (measured on this project's CPU machine: saving a
1 GB DiT's rows took 2.2 s into fresh memory, a fraction of that into memory used before). So
the rows go into one host buffer that grows to the largest set a job has needed and is kept,
and the host scratch is kept per dtype (a GPU's is given back after each job); `nbytes` says
how much is held (`GET /v1/info`).
"""

from __future__ import annotations

import torch

ALIGN = 64
"""Byte alignment of each saved tensor in the host buffer (any dtype can view it)."""


def _aligned(nbytes: int) -> int:
    return (nbytes + ALIGN - 1) // ALIGN * ALIGN


class RankBuffers:
    """The host buffer for saved rows and the scratch tensors, kept between jobs."""

    def __init__(self) -> None:
        self._rows = torch.empty(0, dtype=torch.uint8)
        self._scratch: dict[tuple[torch.device, torch.dtype], torch.Tensor] = {}

    def rows_for(self, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        """Host tensors shaped and typed as `tensors`, one each, in the kept buffer (grown when
        too small: pinned when any of them is on a GPU, for faster copies)."""
        sizes = [_aligned(t.numel() * t.element_size()) for t in tensors]
        if self._rows.numel() < sum(sizes):
            pin = any(t.device.type == "cuda" for t in tensors)
            self._rows = torch.empty(0, dtype=torch.uint8)  # free the old one first
            self._rows = torch.empty(sum(sizes), dtype=torch.uint8, pin_memory=pin)
        slots, offset = [], 0
        for tensor, size in zip(tensors, sizes, strict=True):
            raw = self._rows[offset : offset + tensor.numel() * tensor.element_size()]
            slots.append(raw.view(tensor.dtype).view(tensor.shape))
            offset += size
        return slots

    def scratch(self, like: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """A tensor shaped as `like`, on its device, of `dtype` (its contents are garbage)."""
        key = (like.device, dtype)
        buffer = self._scratch.get(key)
        if buffer is None or buffer.numel() < like.numel():
            self._scratch.pop(key, None)
            buffer = torch.empty(like.numel(), dtype=dtype, device=like.device)
            self._scratch[key] = buffer
        return buffer[: like.numel()].view(like.shape)

    def release_device_scratch(self) -> None:
        """Give back the scratch on GPUs after a job (their caching allocator reuses memory
        cheaply, and device memory is what the memory plan budgets); host scratch stays."""
        for key in [k for k in self._scratch if k[0].type != "cpu"]:
            del self._scratch[key]

    @property
    def nbytes(self) -> int:
        scratch = sum(b.numel() * b.element_size() for b in list(self._scratch.values()))
        return self._rows.numel() + scratch
