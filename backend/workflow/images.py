"""Input images as ComfyUI's nodes hand them on, made when a workflow's job is sent (the
request names the loaded files). Torch-free but for `nearest-exact` scaling.

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
copies pixels, so the result is 8-bit too: made by the same torch call (`nearest_exact`;
torch is imported only then).
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


def nearest_exact(pixels, width: int, height: int):
    """8-bit `pixels` (height, width, 3) scaled as ComfyUI's `common_upscale` nearest-exact:
    torch's interpolation of the loaded image (value / 255 in float32, moved to channels
    first: channels-last strides, on the CPU, as LoadImage gives it), which copies pixels,
    so the 8-bit values come back exactly. The same torch call, not a formula: its CPU
    kernel's source index floor((i + 0.5) x in / out) rounds differently from float32 and
    from exact arithmetic at some pixel edges (8 -> 836: pixel 104 reads 1, pixel 731 reads
    6), so only the call itself is the same everywhere."""
    import numpy as np
    import torch

    image = torch.from_numpy(np.array(pixels, dtype=np.float32)) / 255.0
    scaled = torch.nn.functional.interpolate(
        image[None].movedim(-1, 1), size=(height, width), mode="nearest-exact"
    )
    return (scaled[0].movedim(0, -1) * 255.0).round().to(torch.uint8).numpy()


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
        return _png(PILImage.fromarray(nearest_exact(cropped, width, height)))
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
