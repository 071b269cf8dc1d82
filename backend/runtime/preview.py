"""Live previews: a cheap picture of the latents at every step, made on rank 0.

Decoding with the VAE at every step would cost as much as a denoising step, so previews use
a linear map from latent channels to RGB instead. The map is fitted once, when the model
loads, to the model's own VAE: rank 0 decodes a small random latent and solves a least
squares problem from each latent pixel's channels to the colour of the 8x8 pixels it
decodes to. Colours and shapes are approximate, as in other tools' latent previews.
"""

from __future__ import annotations

import io
import logging
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ..models.families import Family
from ..request import JobRequest

log = logging.getLogger(__name__)

FIT_SIZE = 24
"""Side of the random latent decoded for the fit (576 samples for ~17 unknowns)."""
MAX_SIDE = 512


class Previewer:
    """Latents -> PNG through a fitted (channels + 1) x 3 linear map."""

    def __init__(self, family: Family, pipe: Any, weights: torch.Tensor):
        self.family, self.pipe, self.weights = family, pipe, weights

    @classmethod
    def fit(cls, family: Family, pipe: Any, fitted: torch.Tensor | None = None) -> Previewer | None:
        """Fit the map to this pipeline's VAE (`fitted`: the map fitted to the same VAE
        already, by the runtime a rebuild replaces); None (previews off) if the model
        resists."""
        try:
            return cls(family, pipe, fitted if fitted is not None else _fit(family, pipe))
        except Exception as exc:  # previews are a convenience: never fail a load for them
            log.warning("previews are off: %s: %s", type(exc).__name__, exc)
            return None

    def png(self, latents: torch.Tensor, request: JobRequest) -> bytes:
        grid = self.family.preview_grid(self.pipe, latents, request).float().cpu()
        channels, height, width = grid.shape
        features = torch.cat([grid.reshape(channels, -1).T, torch.ones(height * width, 1)], 1)
        rgb = (features @ self.weights).T.reshape(3, height, width).clamp(-1, 1)
        pixels = ((rgb + 1) * 127.5).round().to(torch.uint8).permute(1, 2, 0).numpy()
        return _encode_png(pixels, scale=max(1, min(8, MAX_SIDE // max(height, width))))


@torch.no_grad()
def _fit(family: Family, pipe: Any) -> torch.Tensor:
    vae = pipe.vae
    generator = torch.Generator().manual_seed(0)
    channels = family.latent_channels(pipe)
    latent = torch.randn(1, channels, FIT_SIZE, FIT_SIZE, generator=generator)
    image = family.decode_for_fit(pipe, latent.to(vae.device, vae.dtype)).float().cpu()
    factor = image.shape[-1] // FIT_SIZE
    targets = F.avg_pool2d(image[None], factor)[0].reshape(3, -1).T  # (pixels, 3)
    features = torch.cat([latent[0].reshape(channels, -1).T, torch.ones(FIT_SIZE**2, 1)], 1)
    return torch.linalg.lstsq(features, targets).solution  # (channels + 1, 3)


def _encode_png(pixels: np.ndarray, scale: int) -> bytes:
    from PIL import Image

    image = Image.fromarray(np.ascontiguousarray(pixels), mode="RGB")
    if scale > 1:
        image = image.resize((image.width * scale, image.height * scale), Image.NEAREST)
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()
