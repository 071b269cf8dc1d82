"""Input images as ComfyUI's nodes hand them on, made when a workflow's job is sent (the
request names the loaded files). Torch-free.

LoadImage: the file's first frame, turned by its EXIF orientation, as RGB.
FluxKontextImageScale, as its node publishes it: of the Kontext resolutions the one whose
aspect (width / height) is nearest the image's (the first on a tie), the image centre-cropped
to that aspect (offsets rounded) and resized with PIL's Lanczos on 8-bit pixels (ComfyUI's
float-to-8-bit step gives LoadImage's values back unchanged).
ImageScaleToTotalPixels (`comfy_extras/nodes_post_processing.py`, `comfy.utils.common_upscale`
with crop disabled): each side round(side x sqrt(megapixels x 1024 x 1024 / (width x
height)) / resolution_steps) x resolution_steps; with `lanczos` the whole image resized by
PIL's Lanczos on its 8-bit pixels (`comfy.utils.lanczos`), so the result is 8-bit as well;
with `nearest-exact` torch's interpolation of that name (`comfy.utils.common_upscale`), which
copies pixels: output pixel i of a side reads input pixel min(floor((i + 0.5) x in / out),
in - 1) in float32 (`nearest_exact_index`), so the result is 8-bit too.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

KONTEXT_SIZES = (
    (672, 1568), (688, 1504), (720, 1456), (752, 1392), (800, 1328), (832, 1248),
    (880, 1184), (944, 1104), (1024, 1024), (1104, 944), (1184, 880), (1248, 832),
    (1328, 800), (1392, 752), (1456, 720), (1504, 688), (1568, 672),
)  # fmt: skip
"""(width, height): the Kontext resolutions FluxKontextImageScale picks from."""


def kontext_size(width: int, height: int) -> tuple[int, int]:
    """The Kontext resolution nearest `width` x `height`'s aspect (the first on a tie)."""
    aspect = width / height
    _, w, h = min((abs(aspect - w / h), w, h) for w, h in KONTEXT_SIZES)
    return w, h


def total_pixels_size(
    width: int, height: int, megapixels: float, resolution_steps: int
) -> tuple[int, int]:
    """ImageScaleToTotalPixels' (width, height) for a `width` x `height` image."""
    scale = math.sqrt(megapixels * 1024 * 1024 / (width * height))
    step = resolution_steps
    return round(width * scale / step) * step, round(height * scale / step) * step


SCALE_METHODS = ("lanczos", "nearest-exact")
"""The scaling methods whose result is an 8-bit image, made here exactly."""


def nearest_exact_index(size_in: int, size_out: int):
    """The input pixel each output pixel of a side reads under torch's `nearest-exact` as
    ComfyUI calls it (`common_upscale` on `image.movedim(-1, 1)`, a channels-last float32
    tensor on the CPU): floor((i + 0.5) x scale) with the scale in / out and the product in
    float32, at most the last pixel. (torch's contiguous 3-D and 4-D kernels round some
    products otherwise: tests/workflow/test_templates_klein_edit.py checks this one.)"""
    import numpy as np

    scale = np.float32(size_in) / np.float32(size_out)
    centres = np.arange(size_out, dtype=np.float32) + np.float32(0.5)
    return np.minimum(np.floor(centres * scale).astype(np.int64), size_in - 1)


def loaded_png(
    path: Path,
    size: tuple[int, int] | None = None,
    *,
    crop: bool = True,
    method: str = "lanczos",
) -> bytes:
    """The image at `path` as LoadImage gives it, scaled to `size` when given (Kontext: its
    centre cropped to the size's aspect first; `crop` False: ImageScaleToTotalPixels, the
    whole image) with `method` (`SCALE_METHODS`), as PNG bytes."""
    import numpy as np
    from PIL import Image as PILImage
    from PIL import ImageOps

    with PILImage.open(path) as opened:
        loaded = ImageOps.exif_transpose(opened).convert("RGB")
    if size is None:
        return _png(loaded)
    pixels = np.asarray(loaded)
    width, height = size
    old_h, old_w = pixels.shape[:2]
    old_aspect, new_aspect = old_w / old_h, width / height
    x = y = 0
    if not crop:
        pass
    elif old_aspect > new_aspect:
        x = round((old_w - old_w * (new_aspect / old_aspect)) / 2)
    elif old_aspect < new_aspect:
        y = round((old_h - old_h * (old_aspect / new_aspect)) / 2)
    cropped = pixels[y : old_h - y, x : old_w - x]
    if method == "nearest-exact":
        rows = nearest_exact_index(cropped.shape[0], height)
        cols = nearest_exact_index(cropped.shape[1], width)
        return _png(PILImage.fromarray(cropped[rows][:, cols]))
    if method != "lanczos":
        raise ValueError(f"scaling method {method}: images.py makes {', '.join(SCALE_METHODS)}")
    # ComfyUI's float (value / 255 in float32) back to 8 bits (255 x it, clipped, truncated)
    # gives every 8-bit value back: the 8-bit crop is what its Lanczos reads
    resized = PILImage.fromarray(cropped).resize((width, height), PILImage.Resampling.LANCZOS)
    return _png(resized)


def _png(image) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def file_size(path: Path) -> tuple[int, int]:
    """The (width, height) LoadImage gives the file (turned by its EXIF orientation)."""
    from PIL import Image as PILImage
    from PIL import ImageOps

    with PILImage.open(path) as opened:
        return ImageOps.exif_transpose(opened).size
