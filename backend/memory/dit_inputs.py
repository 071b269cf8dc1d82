"""What every DiT's memory dry run starts from: one rank's share of a job's latent grid, and
meta tensors to build its inputs with. The dry runs themselves are the families'
(`FamilySpec.dit_forward`, in `models/families/<family>/memory.py`); `sizes.py` runs them."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from .settings import JobShape


@dataclass(frozen=True)
class Share:
    """One rank's share of a job's latents, as the DiT's patches split them."""

    batch: int
    rows: int
    """This rank's rows of latent pixels: its share of the rows of 2x2 patches, times 2."""
    cols: int
    frames: int
    """Latent frames."""
    dtype: torch.dtype

    @property
    def meta(self) -> dict[str, Any]:
        """Keyword arguments of `torch.empty` for a meta tensor in the DiT's dtype."""
        return {"device": "meta", "dtype": self.dtype}

    def step(self) -> torch.Tensor:
        """A meta timestep per batch row."""
        return torch.empty((self.batch,), device="meta")


def share(sizes: Any, shape: JobShape, sequence_degree: int) -> Share:
    """This rank's share of `shape`'s latents for the DiT of `sizes` (a `sizes.ModelSizes`)."""
    rows = max(2, math.ceil(shape.height // sizes.spatial / sequence_degree / 2) * 2)
    return Share(
        batch=shape.batch,
        rows=rows,
        cols=shape.width // sizes.spatial,
        frames=sizes.latent_frames(shape.frames),
        dtype=sizes.dtype,
    )
