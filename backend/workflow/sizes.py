"""Image sizes ComfyUI's utility nodes compute, in our own words from their published
definitions (ComfyUI's `comfy_extras/nodes_resolution.py`). Torch-free."""

from __future__ import annotations

import math

ASPECT_RATIOS: dict[str, tuple[int, int]] = {
    "1:1 (Square)": (1, 1),
    "3:2 (Photo)": (3, 2),
    "4:3 (Standard)": (4, 3),
    "16:9 (Widescreen)": (16, 9),
    "21:9 (Ultrawide)": (21, 9),
    "2:3 (Portrait Photo)": (2, 3),
    "3:4 (Portrait Standard)": (3, 4),
    "9:16 (Portrait Widescreen)": (9, 16),
}
"""ResolutionSelector's aspect ratios: the label it saves -> (width part, height part)."""


def selected_resolution(
    aspect_ratio: str, megapixels: float, multiple: int = 8, minimum: int = 0
) -> tuple[int, int]:
    """ResolutionSelector's (width, height): the rectangle of `aspect_ratio` holding
    `megapixels` mebipixels (1 = 1024 x 1024), each side rounded to the nearest `multiple`
    (Python's `round`, halves to even, as the node does); a side below `minimum` makes it the
    smallest whole multiple of the ratio with both sides at least `minimum` and each a
    multiple of `multiple`. ValueError for an aspect ratio the node does not list."""
    if aspect_ratio not in ASPECT_RATIOS:
        raise ValueError(
            f"aspect_ratio {aspect_ratio!r} is not one of ResolutionSelector's: "
            f"{', '.join(ASPECT_RATIOS)}"
        )
    if megapixels <= 0 or multiple < 1:
        raise ValueError("megapixels must be above 0 and multiple at least 1")
    across, down = ASPECT_RATIOS[aspect_ratio]
    unit = math.sqrt(megapixels * 1024 * 1024 / (across * down))
    width = round(across * unit / multiple) * multiple
    height = round(down * unit / multiple) * multiple
    if width >= minimum and height >= minimum:
        return width, height
    # k such that across*k and down*k are multiples of `multiple`, both at least `minimum`
    step_across = multiple // math.gcd(across, multiple)
    step_down = multiple // math.gcd(down, multiple)
    step = math.lcm(step_across, step_down)
    smallest = math.ceil(max(minimum / across, minimum / down))
    k = math.ceil(smallest / step) * step
    return across * k, down * k
