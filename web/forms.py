"""What the form offers and sends: size presets from a model's limits, and the job body.

Pure functions over `GET /v1/info`'s `limits`; the backend validates every request again.
"""

from __future__ import annotations

import math
import secrets
from typing import Any

from ..backend.client import encode_image

CUSTOM = "custom"
RANDOM_SEED_BOUND = 2**32
"""Random seeds are drawn below this (it stays exact in a browser's float64 numbers)."""

_RATIOS = (
    ("Square 1:1", 1, 1),
    ("Landscape 16:9", 16, 9),
    ("Portrait 9:16", 9, 16),
    ("Landscape 4:3", 4, 3),
    ("Portrait 3:4", 3, 4),
)


def _snap(value: float, limits: dict[str, Any]) -> int:
    multiple = limits["size_multiple"]
    snapped = max(1, round(value / multiple)) * multiple
    return min(max(snapped, limits["min_size"]), limits["max_size"])


def size_presets(limits: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, "WxH") choices: the model's default size, then common aspect ratios at the same
    pixel count (snapped to the size multiple), then "Custom"."""
    width, height = limits["default_width"], limits["default_height"]
    if limits.get("fixed_width"):  # e.g. CogVideoX 1.0 image-to-video: 720x480 only
        return [(f"The only size ({width}×{height})", f"{width}x{height}"), ("Custom", CUSTOM)]
    choices = [(f"Default ({width}×{height})", f"{width}x{height}")]
    area = width * height
    for label, ratio_w, ratio_h in _RATIOS:
        w = _snap(math.sqrt(area * ratio_w / ratio_h), limits)
        h = _snap(math.sqrt(area * ratio_h / ratio_w), limits)
        if f"{w}x{h}" not in (value for _, value in choices):
            choices.append((f"{label} ({w}×{h})", f"{w}x{h}"))
    return [*choices, ("Custom", CUSTOM)]


def parse_size(value: str) -> tuple[int, int]:
    """A preset value such as "832x480" as (width, height)."""
    try:
        width, height = (int(part) for part in value.split("x"))
    except ValueError:
        raise ValueError(f"a size preset must look like 832x480, got {value!r}") from None
    return width, height


def mode_note(model: str, task: str) -> str:
    """Markdown that says which mode this backend serves and how to get the others."""
    others = {
        "text-to-video": "a Wan or CogVideoX text-to-video model (e.g. `--model tiny-wan`)",
        "image-to-video": "a Wan or CogVideoX image-to-video model (e.g. `--model tiny-wan-i2v`)",
        "text-to-image": "a Flux model (e.g. `--model tiny-flux`)",
    }
    lines = [f"This backend serves **{model}**, a **{task}** model; the other modes are off."]
    lines += [
        f"- {mode}: start a backend with {how}" for mode, how in others.items() if mode != task
    ]
    return "\n".join(lines)


def whole(name: str, value: Any) -> int:
    """A form number as an int; ValueError unless it is a whole number."""
    if isinstance(value, bool) or value is None:
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(f"{name} must be a whole number, got {value}")
        return int(value)
    if not isinstance(value, int):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    return value


def pick_seed(seed: Any, randomize: bool) -> int:
    """The seed to use: a fresh random one when asked or when the box holds -1 or nothing."""
    if randomize or seed is None or whole("seed", seed) < 0:
        return secrets.randbelow(RANDOM_SEED_BOUND)
    return whole("seed", seed)


def job_body(
    *,
    prompt: str,
    negative_prompt: str | None,
    width: Any,
    height: Any,
    num_frames: Any,
    num_inference_steps: Any,
    guidance_scale: Any,
    seed: Any,
    image: str | None,
    limits: dict[str, Any],
) -> dict[str, Any]:
    """The `POST /v1/jobs` body for form values; ValueError for what the form can tell early.

    `image` is a path to an uploaded file. A seed of -1 (or none) picks a random one.
    """
    if limits.get("needs_image") and not image:
        raise ValueError("image-to-video needs a start image: upload a PNG or JPEG")
    if guidance_scale is None or isinstance(guidance_scale, bool):
        raise ValueError(f"guidance_scale must be a number, got {guidance_scale!r}")
    body: dict[str, Any] = {
        "prompt": prompt or "",
        "negative_prompt": negative_prompt or "",
        "width": whole("width", width),
        "height": whole("height", height),
        "num_frames": whole("num_frames", num_frames),
        "num_inference_steps": whole("num_inference_steps", num_inference_steps),
        "guidance_scale": float(guidance_scale),
        "seed": pick_seed(seed, randomize=False),
    }
    if image:
        body["image"] = encode_image(image)
    return body
