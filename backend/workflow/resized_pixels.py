"""The resizes `resize.py` maps (ComfyUI's `ResizeImageMaskNode`, its `common_upscale`), made
on the image when the job is sent: torch and PIL imported then. Each step is a `values.Resize`
(read by its fields: width, height, method, crop)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any


def centre_cut(width: int, height: int, new_w: int, new_h: int) -> tuple[int, int]:
    """(x, y): the columns and rows `common_upscale`'s centre crop takes off each side."""
    old_aspect, new_aspect = width / height, new_w / new_h
    if old_aspect > new_aspect:
        return round((width - width * (new_aspect / old_aspect)) / 2), 0
    if old_aspect < new_aspect:
        return 0, round((height - height * (old_aspect / new_aspect)) / 2)
    return 0, 0


def resized(pixels: Any, step: Any) -> Any:
    """One resize of a float image (1, 3, height, width) in 0..1, as `common_upscale`."""
    import numpy as np
    import torch
    from PIL import Image as PILImage

    if step.crop:
        height, width = pixels.shape[-2:]
        x, y = centre_cut(width, height, step.width, step.height)
        pixels = pixels.narrow(-2, y, height - 2 * y).narrow(-1, x, width - 2 * x)
    if step.method != "lanczos":
        size = (step.height, step.width)
        return torch.nn.functional.interpolate(pixels, size=size, mode=step.method)
    as_bytes = np.clip(255.0 * pixels[0].movedim(0, -1).numpy(), 0, 255).astype(np.uint8)
    scaled = PILImage.fromarray(as_bytes).resize(
        (step.width, step.height), resample=PILImage.Resampling.LANCZOS
    )
    return torch.from_numpy(np.array(scaled).astype(np.float32) / 255.0).movedim(-1, 0)[None]


def resized_png(path: Path, steps: tuple[Any, ...]) -> bytes:
    """The image at `path` as LoadImage gives it (EXIF-turned, RGB, k / 255 in float32),
    through `steps`, turned into 8 bits as LTXVPreprocess turns it (x 255, truncated), as PNG
    bytes."""
    import numpy as np
    import torch
    from PIL import Image as PILImage
    from PIL import ImageOps

    with PILImage.open(path) as opened:
        loaded = ImageOps.exif_transpose(opened).convert("RGB")
    pixels = torch.from_numpy(np.array(loaded).astype(np.float32) / 255.0).movedim(-1, 0)[None]
    for step in steps:
        pixels = resized(pixels, step)
    as_bytes = (pixels[0].movedim(0, -1) * 255.0).to(torch.uint8).numpy()
    out = io.BytesIO()
    PILImage.fromarray(as_bytes).save(out, format="PNG")
    return out.getvalue()
