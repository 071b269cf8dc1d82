"""The request's fields, declared once, and `JobRequest`, one validated request.

`REQUEST_FIELDS` is the table: each `RequestField` gives a field of `POST /v1/jobs` its JSON
kind, bounds, default, help, the tasks that use it and how each frontend shows it (its CLI
flag, its ComfyUI widget, whether the web form has it). Everything else is derived from it at
the time it is used: the HTTP schema (`serving/schema.py`), `JobRequest` and `job.json`, the
job flags of `generate`/`batch`/`verify` (`tools/cli.py`), the generation nodes' widgets
(`nodes/params.py`), the Gradio form (`web/ui.py`) and docs/api.md's field table (`docs_table`).
Adding a field is one declaration here; tests/serving/test_fields.py fails when a frontend drifts.

Torch-free: the frontends import it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from . import guidance_terms
from .cache import CacheSettings
from .contract import (
    IMAGE_EDIT,
    IMAGE_TASK_OF,
    IMAGE_TASKS,
    IMAGE_TO_VIDEO,
    MAX_SEED,
    TASKS,
    TEXT_TO_VIDEO,
    Limits,
    decode_image_png,
    edit_size,
    image_size,
    model_tasks,
    task_name,
)
from .decode_tiles import DecodeTiles
from .sampling import names as sampling_names
from .sampling import recipes, rules
from .upscale import UpscaleSettings, total_steps

IMAGE_PREP_PIPELINE, IMAGE_PREP_COMFYUI = "pipeline", "comfyui"
IMAGE_PREP_COMFYUI_VISION = "comfyui-vision"
"""The images resized as the pipeline resizes them, the vision tower's input within ComfyUI's
pixel bounds (Qwen-Image 2.1's references from TextEncodeQwenImage21 at a resolution above 0)."""
IMAGE_PREPS = (IMAGE_PREP_PIPELINE, IMAGE_PREP_COMFYUI, IMAGE_PREP_COMFYUI_VISION)
"""The ways a job's input images may be prepared (`image_prep`)."""
REFERENCE_MODEL, REFERENCE_INDEX, REFERENCE_TIMESTEP_ZERO = "model", "index", "index_timestep_zero"
REFERENCE_METHODS = (REFERENCE_MODEL, REFERENCE_INDEX, REFERENCE_TIMESTEP_ZERO)
"""How an edit's DiT conditions its reference tokens (`reference_method`)."""

KINDS = ("text", "int", "float", "image", "images", "json")
"""text: a string; int/float: a number; image: a base64 PNG/JPEG; images: a list of them;
json: a list or object."""


@dataclass(frozen=True)
class RequestField:
    """One field of a request, and how every frontend shows it."""

    name: str
    """The JSON name (POST /v1/jobs, JobRequest's attribute, job.json's `request`)."""
    kind: str
    """One of KINDS."""
    help: str
    default: Any = None
    """The value when the request leaves the field out and no model says otherwise."""
    model_default: str = ""
    """The `Limits` attribute holding the loaded model's default (e.g. "default_width")."""
    low: float | None = None
    high: float | None = None
    """Bounds that hold for every model (checked by the HTTP schema too)."""
    model_high: str = ""
    """The `Limits` attribute bounding the field from above for the loaded model."""
    required: bool = False
    tasks: tuple[str, ...] = TASKS
    """The tasks whose models read the field (the node and form of other tasks leave it out)."""
    rule: Callable[[Any, Limits], Any] | None = None
    """The model's own rule beyond kind and bounds: returns the value to keep, or raises
    ValueError saying what is allowed."""
    unsupported: str = ""
    """When set, a request that gives the field is refused with this reason (declared for
    frontends and clients, not yet run by the backend)."""
    cli: str = ""
    """The job flag of `generate`/`batch`/`verify` ("" when the command takes it otherwise)."""
    cli_type: Callable[[str], Any] | None = None
    """How a flag's text becomes the JSON value (default: the kind's), e.g. NAME[:STRENGTH]."""
    cli_repeat: bool = False
    """The flag may be given several times; the JSON value is the list of them."""
    cli_metavar: str | None = None
    cli_rest: str = ""
    """The flag may be given several times: the first value is this field, the later ones
    (a list) the field named here (`--image A --image B`: `image` A, `images` [B])."""
    widget: str = ""
    """The generation nodes' widget name ("" when the nodes have no widget for it)."""
    widget_range: tuple[float, float] | None = None
    """The bounds a widget offers before any model is known (default: low and high)."""
    widget_required: bool = False
    """The nodes' first widgets are required; later ones are optional inputs appended after
    them, so saved workflows (positional `widgets_values`) and API prompts keep loading."""
    step: float | None = None
    """The widget's and slider's step."""
    random: bool = False
    """A seed: the node offers "control after generate", the web form "randomize"."""
    form: bool = True
    """The web form has an input for it."""
    choices: tuple[str, ...] = ()
    """A text field's allowed names (the node's combo, the form's dropdown); the model's rule
    may allow fewer."""
    widget_unset: Any = None
    """The widget's value that leaves the field out of the request (the model's default),
    e.g. 0 for `shift`; None when every widget value is sent."""
    form_group: str = ""
    """The web form's accordion that holds the field ("" for the main form)."""
    needs: str = ""
    """The `Limits` attribute that must be set for the field to apply (the web form shows the
    field only then): "samplers", "two_experts"."""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"{self.name}: kind must be one of {KINDS}, got {self.kind!r}")
        unknown = set(self.tasks) - set(TASKS)
        if unknown:
            raise ValueError(f"{self.name}: tasks must be among {TASKS}, got {sorted(unknown)}")
        if self.cli and not self.cli.startswith("--"):
            raise ValueError(f"{self.name}: a CLI flag starts with --, got {self.cli!r}")

    @property
    def metavar(self) -> str:
        """What the flag's help shows for its value."""
        return self.cli_metavar or self.cli.removeprefix("--").upper()

    @property
    def number(self) -> bool:
        return self.kind in ("int", "float")

    def default_for(self, limits: Limits | None) -> Any:
        if limits is not None and self.model_default:
            return getattr(limits, self.model_default)
        return self.default

    def high_for(self, limits: Limits | None) -> float | None:
        if limits is not None and self.model_high:
            return getattr(limits, self.model_high)
        return self.high

    def check(self, value: Any, limits: Limits) -> Any:
        """The value of this field in a body, checked against `limits` (ValueError if not)."""
        if self.kind == "text":
            value = _text(self.name, value, limits.max_prompt_chars)
        elif self.kind == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{self.name} must be a whole number, got {value!r}")
        elif self.kind == "float":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"{self.name} must be a number, got {value!r}")
            value = float(value)
        if self.number:
            low, high = self.low, self.high_for(limits)
            outside = (low is not None and value < low) or (high is not None and value > high)
            if outside or not math.isfinite(value):
                if self.rule is not None and _within(value, low, self.high):
                    self.rule(value, limits)  # the model's own rule says what it takes
                raise ValueError(f"{self.name} must be {_range(low, high)}, got {value}")
        return value if self.rule is None else self.rule(value, limits)


def _within(value: float, low: float | None, high: float | None) -> bool:
    """A finite value inside the bounds every model has (outside only a model's own)."""
    above = low is None or value >= low
    return math.isfinite(value) and above and (high is None or value <= high)


def _range(low: float | None, high: float | None) -> str:
    if low is not None and high is not None:
        return f"between {low} and {high}"
    return f"at least {low}" if low is not None else f"at most {high}"


def _text(name: str, value: Any, max_chars: int) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, got {type(value).__name__}")
    if len(value) > max_chars:
        raise ValueError(f"{name} must be at most {max_chars} characters, got {len(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{name} must be valid Unicode text (no lone surrogates)") from None
    return value


# -- the model's rules ------------------------------------------------------------------------


def _prompt(value: str, _limits: Limits) -> str:
    if not value.strip():
        raise ValueError("prompt must be a non-empty string")
    return value


def _prompt_2(value: str, limits: Limits) -> str:
    if value and not limits.second_prompt:
        raise ValueError(
            "prompt_2: this model has no second text encoder with a prompt of its own "
            "(limits.second_prompt is false): leave prompt_2 out"
        )
    return value


def _side(name: str) -> Callable[[int, Limits], int]:
    def rule(value: int, limits: Limits) -> int:
        if not limits.min_size <= value <= limits.max_size or value % limits.size_multiple:
            raise ValueError(
                f"{name} must be between {limits.min_size} and {limits.max_size} and a "
                f"multiple of {limits.size_multiple}, got {value}"
            )
        return value

    return rule


def _frames(value: int, limits: Limits) -> int:
    if limits.frame_multiple == 0:
        if value != 1:
            raise ValueError(limits.frames_rule() + f", got {value!r}")
        return 1
    if not 1 <= value <= limits.max_frames:
        raise ValueError(
            f"num_frames must be between 1 and {limits.max_frames} and of the form "
            f"{limits.frame_multiple}k+1, got {value}"
        )
    if (value - 1) % limits.frame_multiple:
        raise ValueError(limits.frames_rule() + f", got {value}")
    return value


def _steps(value: int, limits: Limits) -> int:
    if limits.sigmas and value != len(limits.sigmas):
        count = len(limits.sigmas)
        raise ValueError(
            f"num_inference_steps must be {count} for this model: it runs its own {count}-step "
            f"sigma schedule (limits.sigmas; no other step count), got {value}"
        )
    if value < limits.min_steps:
        raise ValueError(
            f"num_inference_steps must be at least {limits.min_steps} for this model, got {value}"
        )
    return value


def _image(value: Any, limits: Limits) -> str:
    if not (limits.needs_image or limits.accepts_image):
        raise ValueError(
            f"image is only accepted by image-to-video models and image-edit models "
            f"(this model: {limits.task})"
        )
    decode_image_png(value, limits)
    return value


def _last_image(value: Any, limits: Limits) -> str:
    if not limits.last_frame:
        raise ValueError(
            "last_image (the frame the video ends on) is only accepted by models that take "
            "first and last frames (GET /v1/info limits.last_frame: LTX-2, MiniMax H3)"
        )
    decode_image_png(value, limits, "last_image")
    return value


def _fps(value: float, limits: Limits) -> float:
    """A job's frame rate: within the model's `fps_range`, or the model's own rate."""
    if limits.fps_range:
        low, high = limits.fps_range
        if not low <= value <= high:
            raise ValueError(
                f"fps must be between {low:g} and {high:g} for this model, got {value:g}"
            )
    elif value != limits.fps:
        raise ValueError(
            f"fps: this model runs at {limits.fps} fps only (limits.fps_range is empty), "
            f"got {value:g}: leave fps out"
        )
    return value


def _check_last_image(values: dict[str, Any], limits: Limits) -> None:
    """A last frame comes with a first (`image`) unless the model takes it alone
    (`limits.last_frame_alone`), and with one stage (for now)."""
    if values.get("last_image") is None:
        return
    if values.get("image") is None and not limits.last_frame_alone:
        raise ValueError(
            "last_image needs image (the first frame) on this model "
            "(limits.last_frame_alone is false): send both"
        )
    if values.get("upscale") is not None:
        raise ValueError(
            "last_image is not run with upscale yet (stage 2 would need the keyframe "
            "re-encoded at its size): leave one of them out"
        )


def _image_strength(value: float, limits: Limits) -> float:
    if not limits.image_strength:
        raise ValueError(
            "image_strength: this model takes its start image at full strength only "
            "(limits.image_strength is false): leave image_strength out"
        )
    return value


def _decode_tiles(value: Any, limits: Limits) -> dict[str, int]:
    if not limits.comfy_decode_tiles:
        raise ValueError(
            "decode_tiles: this model's decode does not depend on ComfyUI's tiles "
            "(limits.comfy_decode_tiles is false): leave decode_tiles out"
        )
    return DecodeTiles.from_json(value).to_json()


def _check_image_strength(values: dict[str, Any]) -> None:
    """`image_strength` goes with a start image and without keyframes."""
    if values.get("image_strength") is None:
        return
    if values.get("image") is None:
        raise ValueError("image_strength needs an image (the start image it weighs)")
    if values.get("last_image") is not None:
        raise ValueError(
            "image_strength is not run with last_image yet (the keyframes are written at "
            "full strength): leave one of them out"
        )


def _image_crf(value: int, limits: Limits) -> int:
    if limits.image_crf is None:
        raise ValueError(
            "image_crf: this model takes its images as sent, not re-compressed "
            "(limits.image_crf is null): leave image_crf out"
        )
    return value


def _check_image_crf(values: dict[str, Any], limits: Limits) -> None:
    """`image_crf` goes with an image; a job with one on a model that re-compresses its
    images gets the model's CRF, so every rank and job.json hold the number."""
    has_image = values.get("image") is not None or values.get("last_image") is not None
    if values.get("image_crf") is not None and not has_image:
        raise ValueError("image_crf needs an image (image or last_image) to re-compress")
    if values.get("image_crf") is None and has_image and limits.image_crf is not None:
        values["image_crf"] = limits.image_crf


def _audio_latent_frames(value: int, limits: Limits) -> int:
    """The audio latent's length a job asks for: a model with an audio track
    (`limits.audio_latents_per_second`), at most the audio of its longest video at its own
    frame rate, rounded up."""
    rate = limits.audio_latents_per_second
    if not rate:
        raise ValueError(
            "audio_latent_frames: this model has no audio track whose length a job sets "
            "(limits.audio_latents_per_second is 0): leave audio_latent_frames out"
        )
    most = math.ceil(limits.max_frames / limits.fps * rate)
    if value > most:
        raise ValueError(
            f"audio_latent_frames must be between 1 and {most} (the audio of "
            f"{limits.max_frames} frames at {limits.fps} fps, {rate:g} latent frames a "
            f"second), got {value}"
        )
    return value


def _check_audio_length(values: dict[str, Any]) -> None:
    """An audio latent of the job's own length is not run with keyframe conditions yet."""
    if values.get("audio_latent_frames") is not None and values.get("last_image") is not None:
        raise ValueError(
            "audio_latent_frames is not run with last_image yet (the condition pipeline "
            "re-noises given audio latents to its first level): leave one of them out"
        )


def _task(value: Any, limits: Limits) -> str | None:
    """The task a request names: one the model serves ("" or None: the model's own, or its
    image task when the request has an image)."""
    if value in (None, ""):
        return None
    served = model_tasks(limits.task, limits.accepts_image)
    if value not in served:
        raise ValueError(f"task must be one this model serves ({', '.join(served)}), got {value!r}")
    return value


def _check_task(values: dict[str, Any], limits: Limits) -> None:
    """A named task and the request's image agree: the image tasks take one, the text ones
    none. Without a name the image decides (as for a model that serves both)."""
    task, has_image = values.get("task"), values.get("image") is not None
    if task in IMAGE_TASKS and not has_image:
        raise ValueError(f"image is required for {task_name(task)}: send a base64 PNG or JPEG")
    if task is not None and task not in IMAGE_TASKS and has_image:
        raise ValueError(
            f"task {task} takes no image: leave the image out, or ask for {IMAGE_TASK_OF[task]}"
        )


def _images(value: Any, limits: Limits) -> list[str] | None:
    """More input images after `image` (an edit's references), each checked as `image` is."""
    if value is None or value == []:
        return None
    if not isinstance(value, list):
        raise ValueError("images must be a list of base64 PNG or JPEG strings")
    if limits.max_images < 2:
        raise ValueError(
            f"images (more input images) is only accepted by image-edit models that take "
            f"several (this model takes at most {limits.max_images} image)"
        )
    if 1 + len(value) > limits.max_images:
        raise ValueError(
            f"this model takes at most {limits.max_images} input images (image plus images), "
            f"got {1 + len(value)}"
        )
    for index, item in enumerate(value):
        decode_image_png(item, limits, f"images[{index}]")
    return value


# -- the command line's formats for list and object fields ---------------------------------------


MAX_LORAS = 16
MAX_STRENGTH = 100.0
LORA_STRENGTHS = ("strength", "high", "low")
"""`strength` for every DiT; Wan 2.2's two experts may take `high` (the high-noise
`transformer`) and `low` (the low-noise `transformer_2`) instead."""


def _loras(value: Any, _limits: Limits) -> list[dict[str, Any]] | None:
    """`[{name, strength}]` (or `{name, high, low}`), in order: each item with its name and
    its strengths as numbers (a strength left out is 1.0; `high`/`low` left out take
    `strength`)."""
    if value is None or value == []:
        return None
    if not isinstance(value, list):
        raise ValueError("loras must be a list of {name, strength} objects")
    if len(value) > MAX_LORAS:
        raise ValueError(f"loras takes at most {MAX_LORAS} LoRAs, got {len(value)}")
    return [_lora_item(i, item) for i, item in enumerate(value)]


def _lora_item(index: int, item: Any) -> dict[str, Any]:
    where = f"loras[{index}]"
    if not isinstance(item, dict):
        raise ValueError(f"{where} must be an object {{name, strength}}, got {item!r}")
    unknown = sorted(set(item) - {"name", *LORA_STRENGTHS})
    if unknown:
        raise ValueError(f"{where}: unknown keys {unknown}; allowed: name, strength, high, low")
    name = item.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"{where}.name must be a LoRA name as GET /v1/loras lists it")
    out: dict[str, Any] = {"name": name}
    for key in LORA_STRENGTHS:
        if key not in item:
            continue
        given = item[key]
        ok = isinstance(given, (int, float)) and not isinstance(given, bool)
        if not ok or not math.isfinite(given) or abs(given) > MAX_STRENGTH:
            raise ValueError(
                f"{where}.{key} must be a number between -{MAX_STRENGTH:g} and "
                f"{MAX_STRENGTH:g}, got {given!r}"
            )
        out[key] = float(given)
    strength = out.get("strength", 1.0)
    if "high" in out or "low" in out:
        out.setdefault("high", strength)
        out.setdefault("low", strength)
        out.pop("strength", None)
    else:
        out["strength"] = strength
    return out


def lora_strengths(item: dict[str, Any]) -> dict[str, float]:
    """A validated LoRA item's strength per DiT component."""
    if "high" in item:
        return {"transformer": item["high"], "transformer_2": item["low"]}
    return {"transformer": item["strength"], "transformer_2": item["strength"]}


LORA_EXPERTS = ("both", "high", "low")
"""What a frontend's LoRA picker offers: both experts, or one of Wan 2.2's two."""


def lora_item(name: str, strength: float, expert: str = "both") -> dict[str, Any]:
    """A frontend's LoRA pick (ComfyUI node, web form) as one `loras` item; `expert` "high"
    or "low" gives the other expert strength 0 (a Wan 2.2 LoRA pair: one pick each)."""
    if expert not in LORA_EXPERTS:
        raise ValueError(f"expert must be one of {LORA_EXPERTS}, got {expert!r}")
    name = (name or "").replace("\\", "/")  # ComfyUI lists Windows paths with backslashes
    if not name:
        raise ValueError("choose a LoRA (the backend's --lora-dir has none)")
    if expert == "both":
        return {"name": name, "strength": float(strength)}
    high, low = (strength, 0.0) if expert == "high" else (0.0, strength)
    return {"name": name, "high": float(high), "low": float(low)}


def parse_lora(text: str) -> dict[str, Any]:
    """`--lora NAME[:STRENGTH]` as `{name, strength}` (strength 1.0 when left out);
    `NAME:HIGH,LOW` gives Wan 2.2's two experts a strength each."""
    usage = f"--lora must be NAME[:STRENGTH] or NAME:HIGH,LOW, got {text!r}"
    name, sep, strength = text.rpartition(":") if ":" in text else (text, "", "")
    if not name:
        raise ValueError(usage)
    try:
        values = [float(part) for part in strength.split(",")] if sep else [1.0]
    except ValueError:
        raise ValueError(usage) from None
    if len(values) == 2:
        return {"name": name, "high": values[0], "low": values[1]}
    if len(values) != 1:
        raise ValueError(usage)
    return {"name": name, "strength": values[0]}


def parse_cache(text: str) -> dict[str, Any]:
    """`--cache METHOD[:THRESHOLD]` as `{method[, threshold]}`."""
    method, sep, threshold = text.partition(":")
    if not method:
        raise ValueError(f"--cache must be METHOD[:THRESHOLD], got {text!r}")
    try:
        return {"method": method, **({"threshold": float(threshold)} if sep else {})}
    except ValueError:
        raise ValueError(f"--cache must be METHOD[:THRESHOLD], got {text!r}") from None


def _cache(value: Any, limits: Limits) -> dict[str, Any] | None:
    """A request's `cache`, checked and with its defaults filled in (None: no cache); a
    model without a step cache (`Limits.step_cache`) takes none."""
    settings = CacheSettings.parse(value)
    if settings is None:
        return None
    if not limits.step_cache:
        raise ValueError(NO_STEP_CACHE)
    return settings.to_dict()


NO_STEP_CACHE = "this model has no step cache: leave `cache` out"


def parse_upscale(text: str) -> dict[str, Any]:
    """`--upscale FACTOR` as `{factor}`, or `--upscale JSON` as the object it gives
    (`{"sigmas": [0.9, 0.5], "loras": [...]}`)."""
    import json

    usage = "--upscale must be a factor (2) or a JSON object {factor, sigmas, ...}"
    if text.strip().isdigit():
        return {"factor": int(text)}
    try:
        value = json.loads(text)
    except ValueError:
        raise ValueError(f"{usage}, got {text!r}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{usage}, got {text!r}")
    return value


def _upscale(value: Any, limits: Limits) -> dict[str, Any] | None:
    """A request's `upscale`, checked against the model and its upscaler, its defaults
    filled in (None: one stage); its `loras` as the job's `loras` are checked."""
    settings = UpscaleSettings.parse(value, limits)
    if settings is None:
        return None
    try:
        loras = _loras(list(settings.loras), limits) or []
    except ValueError as exc:
        raise ValueError(f"upscale.{exc}") from None
    return {**settings.to_dict(), "loras": loras}


def _check_upscale(values: dict[str, Any], limits: Limits) -> None:
    """A two-stage job's rules across fields: its final size divides into stage 1's, and
    the step cache is not offered with it (yet)."""
    upscale = values.get("upscale")
    if upscale is None:
        return
    UpscaleSettings.parse(upscale).stage_one_size(values["width"], values["height"], limits)
    if values.get("cache") is not None:
        raise ValueError(
            "cache is not run with upscale yet (each stage would need its own cache "
            "decisions): leave one of them out"
        )


def _check_guidance_terms(values: dict[str, Any], limits: Limits) -> None:
    """A follower's 0 (`guidance_terms.check_followers`); guidance terms that add DiT calls
    are not offered with the step cache (yet)."""
    guidance_terms.check_followers(values, limits)
    extra = guidance_terms.extra_passes(values.get("guidance_terms"), limits.guidance_terms)
    if extra and values.get("cache") is not None:
        raise ValueError(
            f"cache is not run with guidance terms that add DiT calls ({', '.join(extra)}) "
            "yet (each call would need its own cache decisions): leave one of them out"
        )


def read_image(path: str) -> str:
    """`--image PATH` as the base64 the request carries."""
    import base64
    from pathlib import Path

    if not Path(path).is_file():
        raise ValueError(f"no such file: {path}")
    return base64.b64encode(Path(path).read_bytes()).decode("ascii")


_SIZE_HELP = "Pixels: a multiple of the model's size step, within its min and max size."

REQUEST_FIELDS: tuple[RequestField, ...] = (
    RequestField(
        "prompt",
        "text",
        "What to generate; not empty.",
        "",
        required=True,
        rule=_prompt,
        widget="prompt",
        widget_required=True,
    ),
    RequestField(
        "negative_prompt",
        "text",
        "What to steer away from (used when guidance_scale > 1).",
        "",
        cli="--negative",
        widget="negative_prompt",
        widget_required=True,
    ),
    RequestField(
        "prompt_2",
        "text",
        "The second text encoder's own prompt (Flux.1: T5's, `prompt` then going to CLIP-L "
        "alone, as ComfyUI's CLIPTextEncodeFlux clip_l and t5xxl); empty: `prompt` for both. "
        "The models whose limits.second_prompt is true.",
        "",
        rule=lambda value, limits: _prompt_2(value, limits),
        cli="--prompt-2",
        tasks=("text-to-image",),
        form=False,
        needs="second_prompt",
    ),
    RequestField(
        "width",
        "int",
        _SIZE_HELP,
        64,
        "default_width",
        low=1,
        rule=_side("width"),
        cli="--width",
        widget="width",
        step=16,
        widget_range=(16, 2048),
        widget_required=True,
    ),
    RequestField(
        "height",
        "int",
        _SIZE_HELP,
        64,
        "default_height",
        low=1,
        rule=_side("height"),
        cli="--height",
        widget="height",
        step=16,
        widget_range=(16, 2048),
        widget_required=True,
    ),
    RequestField(
        "num_frames",
        "int",
        "Frames: the model's frame_multiple * k + 1, at most its max_frames (1 for image models).",
        5,
        "default_frames",
        low=1,
        rule=_frames,
        tasks=(TEXT_TO_VIDEO, IMAGE_TO_VIDEO),
        cli="--frames",
        widget="frames",
        step=4,
        widget_range=(1, 257),
        widget_required=True,
    ),
    RequestField(
        "num_inference_steps",
        "int",
        "Denoising steps, at most the model's max_steps (at least its min_steps: Qwen-Image "
        "2); a model with its own sigma schedule takes exactly its length (LTX-2 distilled: 8).",
        4,
        "default_steps",
        low=1,
        model_high="max_steps",
        rule=_steps,
        cli="--steps",
        widget="steps",
        step=1,
        widget_range=(1, 200),
        widget_required=True,
    ),
    RequestField(
        "guidance_scale",
        "float",
        "Classifier-free guidance (Flux dev: the distilled guidance), at most the model's "
        "max_guidance; above 1 runs the negative branch.",
        5.0,
        "default_guidance",
        low=0,
        model_high="max_guidance",
        cli="--guidance",
        widget="guidance",
        step=0.1,
        widget_range=(0, 30),
        widget_required=True,
    ),
    RequestField(
        "seed",
        "int",
        "Same model + same request + same seed = same output.",
        0,
        low=0,
        high=MAX_SEED,
        cli="--seed",
        widget="seed",
        step=1,
        widget_range=(0, 2**53 - 1),
        widget_required=True,
        random=True,
    ),
    RequestField(
        "image",
        "image",
        "Image-to-video models (then required) and text-and-image-to-video ones (optional): "
        "the start image; image-edit models (then required) and text-to-image models that "
        "edit (Flux.2, optional): the image to edit. A base64 PNG or JPEG (a data: URL works "
        "too); the command line takes a file.",
        rule=_image,
        tasks=(IMAGE_TO_VIDEO, IMAGE_EDIT),
        cli="--image",
        cli_type=read_image,
        cli_metavar="PATH",
        cli_rest="images",
    ),
    RequestField(
        "fps",
        "float",
        "The video's frame rate (video.mp4's; LTX-2: its positional embeddings and audio "
        "length follow it): within the model's limits.fps_range; default: the model's "
        "limits.fps. A model without a range takes only its own.",
        None,
        low=0,
        high=1000,
        rule=_fps,
        tasks=(TEXT_TO_VIDEO, IMAGE_TO_VIDEO),
        cli="--fps",
        form=False,
    ),
    RequestField(
        "audio_latent_frames",
        "int",
        "The audio track's latent frames (models with one: GET /v1/info "
        "limits.audio_latents_per_second, LTX-2's 25 a second), where the job's audio is to "
        "last otherwise than its video: ComfyUI's LTXVEmptyLatentAudio makes "
        "ceil(frames / fps x 25), LTX2Pipeline round(...). Left out: the pipeline's count for "
        "the video's frames at the job's fps. Its noise is the job generator's next draw "
        "(diffusers' audio_latents re-noised at noise_scale 1). Not with last_image.",
        None,
        low=1,
        rule=_audio_latent_frames,
        tasks=(TEXT_TO_VIDEO, IMAGE_TO_VIDEO),
        cli="--audio-latent-frames",
        cli_metavar="N",
        form=False,
        needs="audio_latents_per_second",
    ),
    RequestField(
        "task",
        "text",
        "The task the job asks for, one of the model's (GET /v1/info `tasks`): `edit` on an "
        "image-edit model or on a text-to-image model that edits (Flux.2), `image-to-video` on "
        "a text-and-image-to-video model (Wan 2.2 TI2V-5B, LTX-2). Left out: the model's own "
        "task, or its image task when the request has an image.",
        rule=_task,
        cli="--task",
        form=False,
    ),
    RequestField(
        "images",
        "images",
        "Image-edit models that take several input images (Qwen-Image-Edit-2509, Flux.2): "
        "the references after `image`, a list of base64 PNGs or JPEGs, at most the model's "
        "max_images minus one; the command line repeats --image.",
        rule=_images,
        tasks=(IMAGE_EDIT,),
    ),
    RequestField(
        "last_image",
        "image",
        "Models that take first and last frames (GET /v1/info `limits.last_frame`: LTX-2, "
        "MiniMax H3): the frame the video ends on, with `image` (the first), or alone where "
        "`limits.last_frame_alone` (MiniMax H3). A base64 PNG or JPEG; the command line takes "
        "a file.",
        rule=_last_image,
        tasks=(TEXT_TO_VIDEO, IMAGE_TO_VIDEO),
        cli="--last-image",
        cli_type=read_image,
        cli_metavar="PATH",
        needs="last_frame",
    ),
    RequestField(
        "loras",
        "json",
        "LoRAs to apply, in order: [{name, strength}] (names as GET /v1/loras lists them; "
        "strength 1.0 when left out; Wan 2.2's two experts: {name, high, low}, on the command "
        "line NAME:HIGH,LOW).",
        rule=_loras,
        cli="--lora",
        cli_type=parse_lora,
        cli_repeat=True,
        cli_metavar="NAME[:STRENGTH]",
        form=False,
    ),
    RequestField(
        "cache",
        "json",
        "Step caching: {method, threshold}. method first-block (First-Block-Cache): a step's "
        "remaining blocks are skipped while the first block's output changed by at most "
        "threshold (0 < threshold <= 1, default 0.05) since the last computed step; every "
        "rank takes the same decision, the conditional branch decides for both.",
        rule=_cache,
        cli="--cache",
        cli_type=parse_cache,
        cli_metavar="METHOD[:THRESHOLD]",
        form=False,
    ),
    # -- sampling (backend/sampling; docs/sampling.md): appended, so the nodes' saved widget
    # values keep their places
    RequestField(
        "sampler",
        "text",
        "The sampler, with ComfyUI's name: euler, uni_pc (UniPC bh1, ComfyUI's), uni_pc_bh2, "
        "dpmpp_2m, lcm, res_multistep, euler_ancestral, gradient_estimation; default: the "
        "model's own scheduler (GET /v1/info limits.samplers lists what the model runs).",
        sampling_names.DEFAULT,
        rule=rules.sampler_rule,
        cli="--sampler",
        widget="sampler_name",
        choices=(sampling_names.DEFAULT, *sampling_names.SAMPLERS),
        widget_unset=sampling_names.DEFAULT,
        form_group="Sampling",
        needs="samplers",
    ),
    RequestField(
        "scheduler",
        "text",
        "How the noise levels are spaced, with ComfyUI's name: simple, normal, beta, "
        "sgm_uniform; default: the model's own (simple when a sampler is named).",
        sampling_names.DEFAULT,
        rule=rules.scheduler_rule,
        cli="--scheduler",
        widget="scheduler",
        choices=(sampling_names.DEFAULT, *sampling_names.SCHEDULERS),
        widget_unset=sampling_names.DEFAULT,
        form_group="Sampling",
        needs="samplers",
    ),
    RequestField(
        "shift",
        "float",
        "The flow shift (static, as ComfyUI's ModelSamplingSD3 sets it), above 0; replaces "
        "the model's own (its limits.default_shift). The node's 0: the model's.",
        None,
        low=0,
        high=100,
        rule=rules.shift_rule,
        cli="--shift",
        widget="shift",
        step=0.01,
        widget_range=(0, 100),
        widget_unset=0.0,
        form_group="Sampling",
        needs="samplers",
    ),
    RequestField(
        "flow_levels",
        "int",
        "The table of noise levels the scheduler picks from, as ComfyUI's model sampling "
        "holds it: 1000 (ModelSamplingSD3 / AuraFlow, the default) or 10000 "
        "(ModelSamplingFlux: Flux.1's, Qwen-Image's, Qwen-Image 2.1's and Krea 2's own "
        "sampling). The same curve; at step counts that do not divide 1000, and for the "
        "normal, sgm_uniform and beta schedulers, the levels differ. Not with sigmas.",
        None,
        rule=rules.flow_levels_rule,
        cli="--flow-levels",
        cli_metavar="N",
        form=False,
        form_group="Sampling",
        needs="samplers",
    ),
    RequestField(
        "sigmas",
        "json",
        "Explicit noise levels from 1 down to 0, strictly decreasing (ComfyUI's "
        "ManualSigmas): they fix the step count; on the command line a,b,...,0.",
        rule=lambda value, limits: rules.sigmas_rule(value, limits),
        cli="--sigmas",
        cli_type=lambda text: parse_sigmas(text),
        cli_metavar="A,B,...,0",
        form=False,
        needs="samplers",
    ),
    RequestField(
        "guidance_scale_low",
        "float",
        "Wan 2.2 A14B: the low-noise expert's guidance (guidance_scale is the high-noise "
        "one's); default: guidance_scale. The node's -1: that default.",
        None,
        low=0,
        model_high="max_guidance",
        rule=rules.two_experts_rule("guidance_scale_low"),
        cli="--guidance-low",
        widget="cfg_low",
        step=0.1,
        widget_range=(-1, 30),
        widget_unset=-1.0,
        form_group="Sampling",
        needs="two_experts",
    ),
    RequestField(
        "switch_step",
        "int",
        "Wan 2.2 A14B: the first step of the low-noise expert (ComfyUI's KSamplerAdvanced "
        "split), 0 to the step count; default: the model's boundary decides. The node's -1: "
        "that default.",
        None,
        low=0,
        model_high="max_steps",
        rule=rules.two_experts_rule("switch_step"),
        cli="--switch-step",
        widget="switch_step",
        step=1,
        widget_range=(-1, 200),
        widget_unset=-1,
        form_group="Sampling",
        needs="two_experts",
    ),
    RequestField(
        "recipe",
        "text",
        "A named set of the fields above, steps and guidance (`paradit recipes` lists them); "
        "the fields a request gives itself win.",
        "",
        rule=lambda value, _limits: _recipe(value),
        cli="--recipe",
        widget="recipe",
        choices=(recipes.NO_RECIPE, *recipes.recipe_names()),
        widget_unset=recipes.NO_RECIPE,
        form_group="Sampling",
        needs="samplers",
    ),
    RequestField(
        "cfg_mode",
        "text",
        "How the two CFG branches combine: model (the model's own pipeline's way; Qwen-Image "
        "rescales the guided prediction to the conditional one's norm), plain (uncond + "
        "guidance_scale x (cond - uncond), as ComfyUI's samplers; the models whose "
        "limits.plain_cfg is true, without `cache`) or norm (plain, then ComfyUI's CFGNorm: "
        "the guided denoised image scaled down at each latent pixel to the conditional one's "
        "norm over its channels, never up, times cfg_norm; the models whose "
        "limits.cfg_norm_pixels is above 0).",
        sampling_names.CFG_MODEL,
        rule=lambda value, limits: _cfg_mode(value, limits),
        cli="--cfg-mode",
        choices=sampling_names.CFG_MODES,
        form=False,
        needs="plain_cfg",
    ),
    RequestField(
        "cfg_norm",
        "float",
        "cfg_mode norm: CFGNorm's strength, the factor on the normed denoised image "
        "(ComfyUI's widget: 0 to 100, default 1).",
        1.0,
        low=0,
        high=100,
        cli="--cfg-norm",
        form=False,
        needs="cfg_norm_pixels",
    ),
    RequestField(
        "image_prep",
        "text",
        "How the input images are resized and encoded: pipeline (the model's diffusers "
        "pipeline's way) or comfyui (as ComfyUI's nodes do: Qwen-Image-Edit-Plus's "
        "TextEncodeQwenImageEditPlus references at about 1024x1024 pixels in sides of 8 by "
        "area averaging, the vision tower's input at about 384x384 then bilinear to sides of "
        "28; the first model's TextEncodeQwenImageEdit one image at about 1024x1024 in whole "
        "pixels for both; HunyuanVideo 1.5 image-to-video's start image centre-cropped to the "
        "video's aspect and scaled bilinearly in float for the VAE, SigLIP given the image's "
        "centre square scaled bicubically with antialias; LTX-2's start image as its "
        "image-to-video templates prepare it: compressed once as one H.264 frame at the size "
        "sent (LTXVPreprocess), then scaled in float with torch's bilinear, centre-cut, to "
        "each stage's size (LTXVImgToVideoInplace); Qwen-Image 2.1's edit references as "
        "TextEncodeQwenImage21 at resolution 0 presents them: each at its own size in sides of "
        "32 (Lanczos), whatever the output's, its vision input within ComfyUI's pixel bounds; "
        "MiniMax H3's first frame as MiniMaxH3ImageToVideo presents it to Qwen3-VL (bilinear "
        "in float within ComfyUI's pixel bounds, mean and std 0.5), encodes it (the "
        "posterior's mean) and noises it (a CPU generator at the seed, per keyframe); "
        "the models whose limits.image_preps names it) or comfyui-vision (the pipeline's own "
        "resizing, the vision tower's input within ComfyUI's pixel bounds, 3136 to 12845056, "
        "a reference outside them refused: Qwen-Image 2.1's edit references as "
        "TextEncodeQwenImage21 at a resolution above 0 presents them).",
        IMAGE_PREP_PIPELINE,
        rule=lambda value, limits: _image_prep(value, limits),
        cli="--image-prep",
        choices=IMAGE_PREPS,
        tasks=(IMAGE_EDIT, IMAGE_TO_VIDEO),
        form=False,
        needs="image_preps",
    ),
    RequestField(
        "reference_method",
        "text",
        "How the edit's DiT sees its reference tokens: model (as its config says), index "
        "(each reference at its own frame index, at the step's noise level) or "
        "index_timestep_zero (the same, modulated as at noise level 0: ComfyUI's "
        "FluxKontextMultiReferenceLatentMethod, diffusers' zero_cond_t, Qwen-Image-Edit-2511's "
        "way); the models whose limits.reference_methods names it.",
        REFERENCE_MODEL,
        rule=lambda value, limits: _reference_method(value, limits),
        cli="--reference-method",
        choices=REFERENCE_METHODS,
        tasks=(IMAGE_EDIT,),
        form=False,
        needs="reference_methods",
    ),
    RequestField(
        "upscale",
        "json",
        "A two-stage job (LTX-2; the backend started with --upscaler FILE): {factor, sigmas, "
        "sampler, guidance_scale, loras}. Stage 1 runs at width/factor x height/factor with "
        "the job's steps, guidance and LoRAs; the latent upscaler multiplies it by factor "
        "(default: the upscaler's, 2); stage 2 re-noises it to sigmas[0] and denoises it at "
        "width x height over sigmas (strictly decreasing in (0, 1]; default diffusers' "
        "STAGE_2_DISTILLED_SIGMA_VALUES 0.909375, 0.725, 0.421875) with its sampler (default "
        "the model's), guidance_scale (default 1) and loras (like `loras`; default none). On "
        "the command line a factor (2) or the object as JSON.",
        rule=_upscale,
        cli="--upscale",
        cli_type=parse_upscale,
        cli_metavar="FACTOR|JSON",
        form=False,
        needs="two_stage",
    ),
    RequestField(
        "guidance_terms",
        "json",
        "The pipeline's guidance terms beside guidance_scale (GET /v1/info "
        "limits.guidance_terms names a model's, with their defaults: off). LTX-2: {stg_scale, "
        "audio_stg_scale, spatio_temporal_guidance_blocks, modality_scale, "
        "audio_modality_scale, guidance_rescale, audio_guidance_rescale, "
        "audio_guidance_scale} as diffusers' LTX2Pipeline takes them; an audio term left out "
        "takes its video term's value. Each of STG and modality guidance costs one more DiT "
        "call per step. Without `cache`; on the command line the object as JSON.",
        rule=guidance_terms.check,
        cli="--guidance-terms",
        cli_type=guidance_terms.parse_cli,
        cli_metavar="JSON",
        form=False,
        needs="guidance_terms",
    ),
    RequestField(
        "image_strength",
        "float",
        "The start image's strength (GET /v1/info limits.image_strength: LTX-2), sampled as "
        "ComfyUI's LTXVImgToVideoInplace: the image's latent frame under a noise mask "
        "m = 1 - strength (the model given m x the sampler's state + (1 - m) x the image's "
        "latent, at m x each step's noise level; its x0 there blended likewise; the sampler "
        "steps its own state). Left out: 1, the image kept clean. Only with an image, not with "
        "last_image; of a two-stage job, stage 1's (stage 2 writes the image at 1).",
        None,
        low=0,
        high=1,
        rule=lambda value, limits: _image_strength(value, limits),
        tasks=(TEXT_TO_VIDEO, IMAGE_TO_VIDEO),
        cli="--image-strength",
        cli_metavar="STRENGTH",
        form=False,
        needs="image_strength",
    ),
    RequestField(
        "decode_tiles",
        "json",
        "Decode in ComfyUI's VAEDecodeTiled tiles (GET /v1/info limits.comfy_decode_tiles: "
        "LTX-2.5's diffusion video decoder): the node's {tile_size, overlap, temporal_size, "
        "temporal_overlap} (pixels, frames). Each tile is decoded alone with its own seed-0 "
        "noise, the tiles dealt to the ranks and feathered together on rank 0 as ComfyUI's "
        "comfy/utils.py tiled_scale_multidim does; latents within one tile decode whole. Left "
        "out: one whole decode, which ComfyUI's tiled one beyond one tile does not equal. A "
        "workflow's VAEDecodeTiled on that VAE sets it; on the command line the object as JSON.",
        None,
        rule=lambda value, limits: _decode_tiles(value, limits),
        tasks=(TEXT_TO_VIDEO, IMAGE_TO_VIDEO),
        cli="--decode-tiles",
        cli_type=json.loads,
        cli_metavar="JSON",
        form=False,
        needs="comfy_decode_tiles",
    ),
    RequestField(
        "image_crf",
        "int",
        "The H.264 CRF a model trained on compressed start images re-compresses the job's "
        "image and last_image at before they condition it (GET /v1/info limits.image_crf, "
        "its default: LTX-2 and 2.3 33, LTX-2.5 18, as diffusers' pipelines and Lightricks' "
        "training); 0: the images as sent. One frame through libx264 (preset veryfast, "
        "yuv420p, on one thread: the same bytes on every machine); 51 is x264's highest. "
        "Only with an image; job.json records the value used.",
        None,
        low=0,
        high=51,
        rule=lambda value, limits: _image_crf(value, limits),
        tasks=(TEXT_TO_VIDEO, IMAGE_TO_VIDEO),
        cli="--image-crf",
        cli_metavar="CRF",
        form=False,
        needs="image_crf",
    ),
)


def _image_prep(value: str, limits: Limits) -> str:
    if value not in IMAGE_PREPS:
        raise ValueError(f"image_prep must be one of {list(IMAGE_PREPS)}, got {value!r}")
    if value != IMAGE_PREP_PIPELINE and value not in limits.image_preps:
        raise ValueError(
            f"image_prep {value}: this model prepares its input images only as its pipeline "
            f"does (limits.image_preps: {list(limits.image_preps)}): leave image_prep out"
        )
    return value


def _reference_method(value: str, limits: Limits) -> str:
    if value not in REFERENCE_METHODS:
        raise ValueError(
            f"reference_method must be one of {list(REFERENCE_METHODS)}, got {value!r}"
        )
    if value != REFERENCE_MODEL and value not in limits.reference_methods:
        raise ValueError(
            f"reference_method {value}: this model's DiT has no such choice "
            f"(limits.reference_methods: {list(limits.reference_methods)}): leave it out"
        )
    return value


def _cfg_mode(value: str, limits: Limits) -> str:
    if value not in sampling_names.CFG_MODES:
        raise ValueError(f"cfg_mode must be one of {list(sampling_names.CFG_MODES)}, got {value!r}")
    if value == sampling_names.CFG_PLAIN and not limits.plain_cfg:
        raise ValueError(
            "cfg_mode plain: this model's pipeline combines its CFG branches plainly already "
            "or cannot be switched (limits.plain_cfg is false): leave cfg_mode out"
        )
    if value == sampling_names.CFG_NORM and not limits.cfg_norm_pixels:
        raise ValueError(
            "cfg_mode norm: this model's guided prediction cannot be switched to CFGNorm's "
            "(limits.cfg_norm_pixels is 0): leave cfg_mode out"
        )
    return value


def _recipe(value: str) -> str:
    if value in ("", recipes.NO_RECIPE):
        return ""
    return recipes.find_recipe(value).name


def parse_sigmas(text: str) -> list[float]:
    """`--sigmas a,b,...,0` as the list of levels."""
    try:
        return [float(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"--sigmas must be numbers separated by commas, got {text!r}") from None


def is_unset(name: str, value: Any) -> bool:
    """A frontend's input left at the model's default: the request leaves field `name` out."""
    f = find_field(name)
    return value is None or (f.widget_unset is not None and value in (f.widget_unset, ""))


def recipe_wins(body: dict[str, Any]) -> dict[str, Any]:
    """A node's or the web form's body with a recipe: the fields whose inputs cannot be left
    empty (steps, guidance) give way to the recipe's; inputs that can (the sampling ones)
    still win when set."""
    name = body.get("recipe")
    if name in (None, "", recipes.NO_RECIPE):
        return body
    sets = recipes.find_recipe(name).fields
    return {
        key: value
        for key, value in body.items()
        if key not in sets or find_field(key).widget_unset is not None
    }


def request_fields() -> tuple[RequestField, ...]:
    """The table as it is now (read at each use, so every frontend sees the same table)."""
    return REQUEST_FIELDS


def field_names() -> tuple[str, ...]:
    return tuple(f.name for f in request_fields())


def find_field(name: str) -> RequestField:
    for f in request_fields():
        if f.name == name:
            return f
    raise KeyError(name)


class JobRequest:
    """One validated generation request (the body of `POST /v1/jobs`), read-only.

    Each field of the table is an attribute (`request.width`); `to_dict` is what job.json
    and `GET /v1/jobs/{id}` show.
    """

    __slots__ = ("_values",)

    def __init__(self, **values: Any):
        names = field_names()
        unknown = sorted(set(values) - set(names))
        if unknown:
            raise TypeError(f"JobRequest has no fields {unknown}")
        filled = {f.name: values.get(f.name, f.default) for f in request_fields()}
        object.__setattr__(self, "_values", filled)

    def __getattr__(self, name: str) -> Any:
        try:
            return object.__getattribute__(self, "_values")[name]
        except KeyError:
            raise AttributeError(f"JobRequest has no field {name!r}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a JobRequest is read-only: use replace()")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JobRequest) and self._values == other._values

    def __hash__(self) -> int:
        return hash(repr(self.to_dict(with_image=False)))

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self.to_dict(with_image=False).items())
        return f"JobRequest({shown})"

    def replace(self, **changes: Any) -> JobRequest:
        return JobRequest(**{**self._values, **changes})

    @classmethod
    def from_body(cls, body: Any, limits: Limits) -> JobRequest:
        """Validate a JSON body against `limits`; raise ValueError saying what is allowed."""
        if not isinstance(body, dict):
            raise ValueError("the body must be a JSON object")
        table = request_fields()
        unknown = sorted(set(body) - {f.name for f in table})
        if unknown:
            raise ValueError(f"unknown fields {unknown}; allowed: {[f.name for f in table]}")
        if body.get("images") and body.get("image") is None:
            raise ValueError(
                "images holds the input images after the first: send the first as image"
            )
        filled = recipes.with_recipe(body)
        recipe = body.get("recipe")
        by_recipe = {  # the fields the recipe filled in, for the messages that refuse them
            name: recipe
            for name, value in filled.items()
            if body.get(name) is None and value is not None and recipe
        }
        body = filled
        values: dict[str, Any] = {}
        for f in table:
            given = body.get(f.name)
            if f.unsupported and given not in (None, [], {}):
                raise ValueError(f.unsupported)
            if given is None and f.kind == "image":
                if limits.needs_image and f.name == "image":
                    raise ValueError(
                        f"image is required for {task_name(limits.task)}: send a base64 PNG or JPEG"
                    )
                values[f.name] = None
            elif given is None and (f.unsupported or f.kind in ("json", "images")):
                values[f.name] = None
            elif f.name == "num_frames" and given is None and limits.frame_multiple == 0:
                values[f.name] = 1
            elif given is None and f.number and f.default is None and not f.model_default:
                values[f.name] = None  # an optional number: the model decides
            else:
                value = f.default_for(limits) if given is None else given
                values[f.name] = _checked(f, value, limits, by_recipe.get(f.name))
        _check_task(values, limits)
        _check_last_image(values, limits)
        _check_audio_length(values)
        _check_image_strength(values)
        _check_image_crf(values, limits)
        rules.check_across(values, body, limits)
        _check_upscale(values, limits)
        _check_guidance_terms(values, limits)
        if values.get("image") is not None and limits.edit_pixels:
            _edit_default_size(body, values, limits)
        request = cls(**values)
        request.check_shape(limits)
        return request

    def check_shape(self, limits: Limits) -> None:
        """The rules across fields: the model's fixed size and its latent-token range."""
        if limits.fixed_width and (self.width, self.height) != (
            limits.fixed_width,
            limits.fixed_height,
        ):
            raise ValueError(f"{limits.size_rule()}, got {self.width}x{self.height}")
        tokens = limits.tokens(self.width, self.height, self.num_frames)
        if not limits.min_tokens <= tokens <= limits.max_tokens:
            raise ValueError(
                f"width x height x frames gives {tokens} latent tokens; this backend takes "
                f"{limits.min_tokens} to {limits.max_tokens}"
            )

    @property
    def total_steps(self) -> int:
        """Denoising steps over all the job's stages (its progress's total)."""
        return total_steps(self.num_inference_steps, self.upscale)

    @property
    def uses_cfg(self) -> bool:
        """Classifier-free guidance needs a second (unconditional) branch."""
        return self.guidance_scale > 1.0

    def to_dict(self, *, with_image: bool = True) -> dict[str, Any]:
        data = dict(self._values)
        if not with_image:
            for f in request_fields():
                if f.kind == "image" and data.get(f.name) is not None:
                    data[f.name] = f"<{len(data[f.name])} base64 chars>"
                if f.kind == "images" and data.get(f.name) is not None:
                    data[f.name] = [f"<{len(item)} base64 chars>" for item in data[f.name]]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobRequest:
        """Rebuild a request that was already validated (control-plane messages)."""
        return cls(**{name: data[name] for name in field_names() if name in data})


def _checked(f: RequestField, value: Any, limits: Limits, recipe: str | None) -> Any:
    """`f.check`, saying so when the value came from the request's recipe."""
    try:
        return f.check(value, limits)
    except ValueError as exc:
        if recipe is None:
            raise
        raise ValueError(f"{exc} (set by recipe {recipe})") from None


def _edit_default_size(body: dict[str, Any], values: dict[str, Any], limits: Limits) -> None:
    """An edit without width and height: the first image's aspect at the model's pixel budget
    (`Limits.edit_pixels`). A side given alone keeps the model's default for the other."""
    if body.get("width") is not None or body.get("height") is not None:
        return
    width, height = edit_size(*image_size(values["image"], limits), limits)
    values["width"] = find_field("width").check(width, limits)
    values["height"] = find_field("height").check(height, limits)


def docs_table() -> str:
    """docs/api.md's table of the request fields (tests/serving/test_fields.py checks it is
    there)."""
    rows = [
        "| field | type | default | command line | ComfyUI widget | tasks | what it is |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for f in request_fields():
        default = "required" if f.required else "the model's" if f.model_default else f.default
        flag = f"`{f.cli} {f.metavar}`" if f.cli else "argument"
        if f.cli_repeat or f.cli_rest:
            flag += " (repeatable)"
        rest_of = [g for g in request_fields() if g.cli_rest == f.name]
        if rest_of:
            flag = f"`{rest_of[0].cli} {rest_of[0].metavar}` after the first"
        tasks = "all" if set(f.tasks) == set(TASKS) else ", ".join(f.tasks)
        help_text = f.help + (f" Refused for now: {f.unsupported}." if f.unsupported else "")
        rows.append(
            f"| `{f.name}` | {f.kind} | {'' if default is None else default} | {flag} | "
            f"{f.widget or '-'} | {tasks} | {help_text} |"
        )
    return "\n".join(rows)


JOB_FIELDS = field_names()
"""The request's field names (as declared at import; `field_names()` reads the table now)."""
