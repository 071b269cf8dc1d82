"""ResolutionSelector's arithmetic (`workflow/sizes.py`) against values worked out by hand from
the node's published definition (ComfyUI's `comfy_extras/nodes_resolution.py`: the side of
an aspect ratio's rectangle of `megapixels` x 1024² pixels, rounded to the nearest multiple;
below `minimum`, the smallest whole multiple of the ratio with both sides at least it).

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import pytest

from paradit.backend.workflow.sizes import selected_resolution

pytestmark = pytest.mark.fast


@pytest.mark.parametrize(
    ("ratio", "megapixels", "multiple", "expected"),
    [
        # sqrt(1024^2) = 1024 a unit: 1024 x 1024 (Z-Image's template)
        ("1:1 (Square)", 1.0, 8, (1024, 1024)),
        # unit sqrt(1024^2 / 144) = 85.333: 16u = 1365.33 -> 170.67 eights -> 171 -> 1368;
        # 9u = 768 exactly
        ("16:9 (Widescreen)", 1.0, 8, (1368, 768)),
        # unit sqrt(1024^2 / 6) = 418.04: 3u = 1254.1 -> 156.76 -> 157 -> 1256; 2u = 836.08 ->
        # 104.51 -> 105 -> 840
        ("3:2 (Photo)", 1.0, 8, (1256, 840)),
        # portrait: the sides swap
        ("2:3 (Portrait Photo)", 1.0, 8, (840, 1256)),
        # unit sqrt(2 * 1024^2 / 189) = 105.33: 21u = 2212.0 -> 34.56 sixty-fours -> 35 -> 2240;
        # 9u = 947.99 -> 14.81 -> 15 -> 960
        ("21:9 (Ultrawide)", 2.0, 64, (2240, 960)),
        # 0.5 MP square: 724.08 -> 90.51 eights -> 91 -> 728
        ("1:1 (Square)", 0.5, 8, (728, 728)),
    ],
)
def test_resolution_selector_matches_its_formula(ratio, megapixels, multiple, expected):
    assert selected_resolution(ratio, megapixels, multiple) == expected


def test_resolution_selector_minimum_takes_the_smallest_whole_multiple():
    # 0.1 MP at 16:9: 432 x 240 (unit 26.98: 431.7 -> 54 eights; 242.8 -> 30 eights), below
    # a minimum of 512: k a multiple of lcm(8 / gcd(16, 8), 8 / gcd(9, 8)) = lcm(1, 8) = 8 and
    # at least ceil(512 / 9) = 57: k = 64, 1024 x 576
    assert selected_resolution("16:9 (Widescreen)", 0.1, 8) == (432, 240)
    assert selected_resolution("16:9 (Widescreen)", 0.1, 8, 512) == (1024, 576)


def test_resolution_selector_refuses_a_ratio_it_does_not_list():
    with pytest.raises(ValueError, match="not one of ResolutionSelector's"):
        selected_resolution("5:4", 1.0)
