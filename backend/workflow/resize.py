"""ComfyUI's `ResizeImageMaskNode` on a loaded image, mapped at import and made when the job
is sent (torch and PIL imported then; the module itself is torch-free).

As read in ComfyUI's `comfy_extras/nodes_images.py` (`scale_dimensions`,
`scale_longer_dimension`) and `comfy/utils.py` (`common_upscale`, `lanczos`):

- `scale dimensions` to width x height (0 for one side: the other's scale, rounded, at least
  1; both 0: the image as it is), centre-cut to that aspect first where crop is `center`
  (round((old - old x new_aspect / old_aspect) / 2) rows or columns off each side);
- `scale longer dimension` to longer_size on the longer side, the other round(side x
  longer_size / longer side) (a square: both);
- `lanczos` runs PIL's Lanczos on the float image turned to 8 bits (x 255, clipped,
  truncated: LoadImage's k / 255 gives k back) and divides by 255 again; `area`, `bilinear`,
  `nearest-exact` run torch's `interpolate` in float32 (align_corners false, no
  antialiasing). `bicubic` (it overshoots 0..1, and what the 8-bit step then makes of a
  negative value is the machine's) and the other resize types are refused.

The image goes on as a float image, which only `LTXVPreprocess` reads here: it turns it into 8
bits by x 255 and truncation before its H.264 frame, so the sent PNG holds those bytes
(`resized_pixels.resized_png`) and the backend's truncation gives them back.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .graph import Node, WorkflowError
from .values import Image, Resize

FLOAT_METHODS = ("nearest-exact", "bilinear", "area")
"""torch's interpolation in float, as `common_upscale` runs it (no value outside 0..1)."""
METHODS = (*FLOAT_METHODS, "lanczos")
TYPES = ("scale dimensions", "scale longer dimension")


def resize_image_mask(m: Any, node: Node) -> tuple[Any, ...]:
    image = m.input(node, "input", Image)
    kind = m.widget(node, "resize_type", str)
    method = m.widget(node, "scale_method", str)
    if kind not in TYPES:
        raise WorkflowError(node, f"resize_type {kind!r}: paradit maps {', '.join(TYPES)}")
    if method not in METHODS:
        raise WorkflowError(
            node,
            f"scale_method {method!r}: paradit makes {', '.join(METHODS)} as ComfyUI does "
            "(bicubic overshoots 0..1, where the 8-bit step that follows is the machine's)",
        )
    if image.scale is not None or image.crf is not None:
        raise WorkflowError(node, "an image already scaled or compressed: resize the loaded one")
    width, height = image.size()
    crop = False
    if kind == "scale dimensions":
        new_w = m.widget(node, "resize_type.width", int)
        new_h = m.widget(node, "resize_type.height", int)
        cut = m.widget(node, "resize_type.crop", str)
        if cut not in ("disabled", "center"):
            raise WorkflowError(node, f"crop {cut!r}: disabled or center")
        if new_w == 0 and new_h == 0:
            m.say(node, f"{width}x{height}: width and height 0, the image as it is")
            return (image,)
        if new_w == 0:
            new_w = max(1, round(width * new_h / height))
        elif new_h == 0:
            new_h = max(1, round(height * new_w / width))
        crop = cut == "center"
    else:
        size = m.widget(node, "resize_type.longer_size", int)
        new_w, new_h = size, size
        if height > width:
            new_w = round(width / height * size)
        elif width > height:
            new_h = round(height / width * size)
    if new_w < 1 or new_h < 1:
        raise WorkflowError(node, f"{new_w}x{new_h}: no pixels left")
    cut_line = ", centre-cut" if crop and (new_w / new_h != width / height) else ""
    m.say(node, f"{width}x{height} -> {new_w}x{new_h} by {method}{cut_line} (made when sent)")
    step = Resize(new_w, new_h, method, crop, node)
    return (dataclasses.replace(image, resizes=(*image.resizes, step)),)
