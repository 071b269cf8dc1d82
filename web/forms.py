"""What the form offers and sends: its fields, bounds and size presets, and the job body.

The fields are the request table's (`backend/request.py`, `REQUEST_FIELDS`): those marked
`form` for the loaded model's task are shown, and the body carries every field given. Pure
functions over `GET /v1/info`'s `limits`; the backend validates every request again.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass
from typing import Any

from ..backend.cache import METHODS as CACHE_METHODS
from ..backend.cache import CacheSettings
from ..backend.client import encode_image
from ..backend.request import RequestField, is_unset, lora_item, recipe_wins, request_fields

CUSTOM = "custom"
FROM_IMAGE = "from-image"
"""The size choice of edit models that leaves width and height out: the backend sizes the
output from the first image (`Limits.edit_pixels`)."""
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
    if limits.get("edit_pixels"):  # an edit model: first (the default) when it needs an image
        side = math.isqrt(limits["edit_pixels"])
        from_image = (f"From the image (its aspect at {side}×{side} pixels)", FROM_IMAGE)
        choices.insert(0 if limits.get("needs_image") else 1, from_image)
    area = width * height
    for label, ratio_w, ratio_h in _RATIOS:
        w = _snap(math.sqrt(area * ratio_w / ratio_h), limits)
        h = _snap(math.sqrt(area * ratio_h / ratio_w), limits)
        if f"{w}x{h}" not in (value for _, value in choices):
            choices.append((f"{label} ({w}×{h})", f"{w}x{h}"))
    return [*choices, ("Custom", CUSTOM)]


def parse_size(value: str) -> tuple[int | None, int | None]:
    """A preset value such as "832x480" as (width, height); FROM_IMAGE: (None, None), so the
    body leaves both out."""
    if value == FROM_IMAGE:
        return None, None
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
        "edit": "an image-edit model (e.g. `--model tiny-qwen-image-edit`; Flux.2 edits "
        "with reference images too)",
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


def form_fields(task: str, limits: dict[str, Any] | None = None) -> tuple[RequestField, ...]:
    """The request fields the form shows for a model of `task` (marked `form`, read by it),
    and the input image when the model's `limits` take one without needing it (text- and
    image-to-video in one model: Wan 2.2 TI2V-5B; Flux.2's reference images), with the
    further images when the model takes several (`max_images`)."""
    optional = {"image"} if limits and limits.get("accepts_image") else set()
    if optional and limits.get("max_images", 1) > 1:
        optional.add("images")
    return tuple(
        f
        for f in request_fields()
        if f.form
        and (task in f.tasks or f.kind in optional)
        and (not f.needs or (limits or {}).get(f.needs))
    )


def field_choices(f: RequestField, limits: dict[str, Any]) -> list[str]:
    """A text field's options for the loaded model: the table's, narrowed to the model's list
    where the model has one (`limits.samplers`, `limits.schedulers`)."""
    allowed = limits.get({"sampler": "samplers", "scheduler": "schedulers"}.get(f.name, ""))
    if not allowed:
        return list(f.choices)
    return [c for c in f.choices if c == f.widget_unset or c in allowed]


def image_label(task: str) -> str:
    """What the form calls the request's `image` for a model of `task`."""
    return {"edit": "Image to edit", "text-to-image": "Reference image"}.get(task, "Start image")


def label(f: RequestField) -> str:
    """A field's label: its widget's short name (as the nodes show it), else its own."""
    return (f.widget or f.name).replace("_", " ").capitalize()


MODEL_RULE_BOUNDS = {
    # The model's own rules (request.py's `_side` and `_frames`) as (low, high, step) keys of
    # `limits`: the boxes offer only values the rule takes.
    "width": ("min_size", "max_size", "size_multiple"),
    "height": ("min_size", "max_size", "size_multiple"),
    "num_frames": ("", "max_frames", "frame_multiple"),
}
SIZE_FIELDS = ("width", "height")
"""Shown side by side under the size presets."""


@dataclass(frozen=True)
class NumberInput:
    """A number field's box for the loaded model: its default, bounds and step."""

    default: float
    low: float | None
    high: float | None
    step: float


def number_input(f: RequestField, limits: dict[str, Any]) -> NumberInput:
    """The table's bounds, the model's default and bound (`model_default`, `model_high`), and
    the model's rule where it sets the step (MODEL_RULE_BOUNDS)."""
    default = limits[f.model_default] if f.model_default else f.default
    low, high = f.low, limits[f.model_high] if f.model_high else f.high
    step = f.step or (1 if f.kind == "int" else 0.01)
    if f.name in MODEL_RULE_BOUNDS:
        low_key, high_key, step_key = MODEL_RULE_BOUNDS[f.name]
        low = limits[low_key] if low_key else low
        high, step = limits[high_key], limits[step_key] or 1
    return NumberInput(default, low, high, step)


def _number(f: RequestField, value: Any) -> float:
    if f.kind == "int":
        return whole(f.name, value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{f.name} must be a number, got {value!r}")
    return float(value)


def job_body(*, limits: dict[str, Any], **values: Any) -> dict[str, Any]:
    """The `POST /v1/jobs` body for the generate event's values (by field name, every field of
    the request table); ValueError for what the form can tell early.

    Text left empty is sent as ""; a number, image or JSON value left out (None) is left out,
    so the backend uses the model's default. An image is a path to an uploaded file. A seed
    of -1 (or none) picks a random one.
    """
    body: dict[str, Any] = {}
    for f in request_fields():
        value = values.get(f.name)
        if f.widget_unset is not None and is_unset(f.name, value):
            continue  # left at the model's default
        if f.name == "image" and limits.get("needs_image") and not value:
            what = "an image to edit" if limits.get("task") == "edit" else "a start image"
            raise ValueError(f"this {limits.get('task')} model needs {what}: upload a PNG or JPEG")
        if f.kind == "text" and not (value or f.form):
            continue  # a text the form has no input for (the task) goes only when given
        if f.kind == "text":
            body[f.name] = value or ""
        elif f.random:
            body[f.name] = pick_seed(value, randomize=False)
        elif value is None:
            continue
        elif f.kind == "image":
            body[f.name] = encode_image(value)
        elif f.kind == "images":  # uploaded files' paths
            if value:
                body[f.name] = [encode_image(path) for path in value]
        elif f.kind == "json":
            body[f.name] = value
        else:
            body[f.name] = _number(f, value)
    return recipe_wins(body)


LORAS = "loras"
"""The request field the LoRA picker fills (the form shows it when the backend has LoRAs)."""


def add_lora(current: Any, name: str | None, strength: float | None, expert: str) -> list:
    """The `loras` list with one more pick at the end (ValueError for an empty pick)."""
    items = list(current) if isinstance(current, list) else []
    return [*items, lora_item(name or "", 1.0 if strength is None else strength, expert)]


CACHE = "cache"
"""The request field the step-cache picker fills."""
CACHE_OFF = "off"


def cache_value(method: str | None, threshold: float | None) -> dict[str, Any] | None:
    """The `cache` field for the form's step-cache pick: None when off, else {method,
    threshold} (the method's default threshold when none is given); ValueError with the rule."""
    if not method or method == CACHE_OFF:
        return None
    if method not in CACHE_METHODS:
        raise ValueError(f"cache method must be one of {sorted(CACHE_METHODS)}, got {method!r}")
    value = CACHE_METHODS[method] if threshold is None else float(threshold)
    return CacheSettings(method, value).to_dict()
