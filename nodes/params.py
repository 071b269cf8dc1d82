"""What each ParaDiT node asks for, as plain data (no ComfyUI import).

The generation nodes' widgets are the request table's fields that have a widget
(`backend/request.py`); the backend node's are its own (model, GPUs, device, URL) followed by
the serve settings a frontend sets (`backend/config.py`, `frontend_settings`). The ComfyUI
adapter (`comfy_v3.py`) turns these into V3 widgets; the tests use them to check that every
workflow file gives each node the right widgets in the right order.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ..backend import contract
from ..backend.cache import METHODS as CACHE_METHODS
from ..backend.config import frontend_settings
from ..backend.request import LORA_EXPERTS, RequestField, request_fields

# Seeds stay exact in the browser (JavaScript numbers) and inside the backend's limit.
MAX_SEED = 2**53 - 1

KNOWN_HUB_MODELS: tuple[str, ...] = (
    "Wan-AI/Wan2.1-T2V-1.3B-Diffusers",
    "Wan-AI/Wan2.1-T2V-14B-Diffusers",
    "Wan-AI/Wan2.1-I2V-14B-480P-Diffusers",
    "Wan-AI/Wan2.1-I2V-14B-720P-Diffusers",
    "Wan-AI/Wan2.2-T2V-A14B-Diffusers",
    "Wan-AI/Wan2.2-TI2V-5B-Diffusers",
    "Wan-AI/Wan2.2-I2V-A14B-Diffusers",
    "black-forest-labs/FLUX.1-dev",
    "black-forest-labs/FLUX.1-schnell",
    "black-forest-labs/FLUX.2-dev",
    "black-forest-labs/FLUX.2-klein-4B",
    "Qwen/Qwen-Image",
    "Tongyi-MAI/Z-Image-Turbo",
    "Qwen/Qwen-Image-Edit-2509",
    "THUDM/CogVideoX-2b",
    "THUDM/CogVideoX-5b",
    "THUDM/CogVideoX-5b-I2V",
    "THUDM/CogVideoX1.5-5B",
    "THUDM/CogVideoX1.5-5B-I2V",
    "hunyuanvideo-community/HunyuanVideo-1.5-Diffusers-480p_t2v",
    "hunyuanvideo-community/HunyuanVideo-1.5-Diffusers-480p_i2v",
    "Lightricks/LTX-2",
)
"""Hugging Face repo ids offered in the model list (downloaded by the backend on first use)."""

DEVICES: tuple[str, ...] = ("auto", "cuda", "cpu")


@dataclass(frozen=True)
class Param:
    """One widget of a node: its name, kind and bounds."""

    name: str
    kind: str
    """"int", "float", "string", "text" (multi-line string), "combo" or "boolean"."""
    default: object
    tooltip: str = ""
    low: float | None = None
    high: float | None = None
    step: float | None = None
    control_after_generate: bool = False
    """A seed: ComfyUI adds a "control after generate" widget right after it."""
    optional: bool = False
    """Added after the first release: optional, so older workflows still load."""
    choices: tuple[str, ...] = ()
    """A combo's options when they are fixed."""
    field: str = ""
    """The request field or ServeConfig field the widget sets."""
    folders: tuple[str, ...] = ()
    """A file picker: the ComfyUI model folder kinds (`folder_paths` names) it lists."""

    def widget_values(self, value: object, control: str = "randomize") -> list[object]:
        """The value(s) this widget saves in a UI-format workflow's `widgets_values`."""
        return [value, control] if self.control_after_generate else [value]


BACKEND_OWN_PARAMS: tuple[Param, ...] = (
    Param(
        "model",
        "combo",
        KNOWN_HUB_MODELS[0],
        "A built-in preset, a diffusers folder under ComfyUI's models/diffusers or "
        "models/CogVideo, a model file from models/diffusion_models (unet) or "
        "models/checkpoints (then pick its text encoder(s) and VAE below; an all-in-one Flux "
        "checkpoint needs none, an LTX-2 checkpoint only its Gemma 3 text encoder), or a "
        "Hugging Face "
        "repo id.",
        folders=("diffusion_models", "checkpoints"),
    ),
    Param(
        "model_override",
        "string",
        "",
        "If set, used instead of `model`: any hub id or a path to a diffusers folder.",
    ),
    Param("gpus", "int", 1, "Number of ranks (one per GPU) the backend runs on.", 1, 64, 1),
    Param("device", "combo", "auto", "auto picks cuda when a GPU is present, else cpu."),
    Param(
        "url",
        "string",
        "",
        "URL of a running `paradit serve` (e.g. http://127.0.0.1:7870). When set, nothing is "
        "started and the fields above are ignored.",
    ),
)


def setting_params() -> tuple[Param, ...]:
    """The serve settings a node user sets (memory, replicas, plan), after the node's own."""
    own = {p.name for p in (*BACKEND_OWN_PARAMS, *FILE_PARAMS)}
    return tuple(
        Param(
            s.widget,
            s.kind,
            s.default,
            s.help,
            s.low,
            s.high,
            s.step,
            optional=True,
            choices=s.choices,
            field=s.name,
        )
        for s in frontend_settings()
        if s.widget not in own
    )


NO_FILE = "none"
"""A file picker's "no file" option."""

FILE_PARAMS: tuple[Param, ...] = (
    Param(
        "model_2",
        "combo",
        NO_FILE,
        "Wan 2.2 A14B: the low-noise expert's file (`model` is the high-noise one).",
        optional=True,
        field="model",
        folders=("diffusion_models", "checkpoints"),
    ),
    Param(
        "text_encoder",
        "combo",
        NO_FILE,
        "With a model file: its text encoder from models/text_encoders (clip): Wan "
        "umt5_xxl, Flux clip_l.",
        optional=True,
        field="text_encoders",
        folders=("text_encoders",),
    ),
    Param(
        "text_encoder_2",
        "combo",
        NO_FILE,
        "Flux: the second text encoder (t5xxl).",
        optional=True,
        field="text_encoders",
        folders=("text_encoders",),
    ),
    Param(
        "vae",
        "combo",
        NO_FILE,
        "With a model file: its VAE from models/vae (Wan 2.1 VAE; Wan 2.2 TI2V-5B: Wan 2.2 "
        "VAE; Flux ae).",
        optional=True,
        field="vaes",
        folders=("vae",),
    ),
    Param(
        "image_encoder",
        "combo",
        NO_FILE,
        "Wan 2.1 image-to-video from a model file: its CLIP vision encoder from "
        "models/clip_vision (clip_vision_h).",
        optional=True,
        field="image_encoders",
        folders=("clip_vision",),
    ),
)
"""The backend node's file pickers for a single-file model, right after its own widgets and
before the serve settings (widgets are positional in saved workflows: the settings' list may
grow at its end without moving these)."""


def backend_params() -> tuple[Param, ...]:
    return (*BACKEND_OWN_PARAMS, *FILE_PARAMS, *setting_params())


BACKEND_PARAMS = backend_params()
"""The backend node's widgets, in order."""


_KINDS = {"text": "text", "int": "int", "float": "float"}


def field_param(f: RequestField, default: Any) -> Param:
    """A request field as a generation node's widget."""
    low, high = f.widget_range or (f.low, f.high)
    if f.widget_unset is not None:
        default = f.widget_unset  # the model's default until the user picks
    return Param(
        f.widget,
        "combo" if f.choices else _KINDS[f.kind],
        default,
        f.help,
        low,
        high,
        f.step,
        control_after_generate=f.random,
        optional=not f.widget_required,
        choices=f.choices,
        field=f.name,
    )


@dataclass(frozen=True)
class TaskNode:
    """A generation node: its id, the backend task it needs and its widgets' defaults."""

    node_id: str
    display_name: str
    task: str
    defaults: dict[str, Any] = field(default_factory=dict, compare=False)
    """Request field -> the widget's default for this node (else the table's default)."""
    needs_image: bool = False
    extra_images: int = 0
    """Optional IMAGE inputs after `image` (`image_2`, `image_3`, ...): the request's `images`."""
    auto_size: bool = False
    """Width and height may be 0 (their default): the node leaves them out and the backend
    sizes the output (an edit: the first image's aspect at the model's pixel budget)."""

    @property
    def params(self) -> tuple[Param, ...]:
        """The widgets: the request fields of this node's task that have one, in table order."""
        return tuple(self._param(f) for f in request_fields() if f.widget and self.task in f.tasks)

    def _param(self, f: RequestField) -> Param:
        param = field_param(f, self.defaults.get(f.name, f.default))
        if self.auto_size and f.name in AUTO_SIZE_FIELDS:
            tooltip = f"{param.tooltip} 0: from the first image ({AUTO_SIZE_HELP})."
            return replace(param, default=0, low=0, tooltip=tooltip)
        return param

    @property
    def image_inputs(self) -> tuple[str, ...]:
        """The IMAGE inputs, in order: `image`, then the optional `image_2`, ..."""
        if not self.needs_image:
            return ()
        return ("image", *(f"image_{i}" for i in range(2, self.extra_images + 2)))

    @property
    def makes_video(self) -> bool:
        return self.task not in (contract.TEXT_TO_IMAGE, contract.IMAGE_EDIT)

    @property
    def gives_audio(self) -> bool:
        """An AUDIO output after the others: the track a model generates with the video
        (LTX-2), None from the models that make none."""
        return self.task == contract.TEXT_TO_VIDEO


AUTO_SIZE_FIELDS = ("width", "height")
AUTO_SIZE_HELP = "its aspect at the model's pixel budget, e.g. Qwen-Image-Edit's 1024x1024"


_VIDEO_DEFAULTS = {
    "width": 832,
    "height": 480,
    "num_frames": 81,
    "num_inference_steps": 30,
    "guidance_scale": 5.0,
}
TEXT_TO_VIDEO = TaskNode(
    "ParaDiTTextToVideo", "ParaDiT Text to Video", contract.TEXT_TO_VIDEO, _VIDEO_DEFAULTS
)
IMAGE_TO_VIDEO = TaskNode(
    "ParaDiTImageToVideo",
    "ParaDiT Image to Video",
    contract.IMAGE_TO_VIDEO,
    _VIDEO_DEFAULTS,
    needs_image=True,
)
TEXT_TO_IMAGE = TaskNode(
    "ParaDiTTextToImage",
    "ParaDiT Text to Image",
    contract.TEXT_TO_IMAGE,
    {"width": 1024, "height": 1024, "num_inference_steps": 28, "guidance_scale": 3.5},
)
IMAGE_EDIT = TaskNode(
    "ParaDiTImageEdit",
    "ParaDiT Image Edit",
    contract.IMAGE_EDIT,
    {"num_inference_steps": 40, "guidance_scale": 4.0},
    needs_image=True,
    extra_images=2,
    auto_size=True,
)
TASK_NODES: tuple[TaskNode, ...] = (TEXT_TO_VIDEO, IMAGE_TO_VIDEO, TEXT_TO_IMAGE, IMAGE_EDIT)

BACKEND_NODE_ID = "ParaDiTBackend"
BACKEND_TYPE = "PARADIT_BACKEND"

LORA_NODE_ID = "ParaDiTLora"
LORA_PARAMS: tuple[Param, ...] = (
    Param("lora_name", "combo", "", "A LoRA from ComfyUI's models/loras (the backend reads it)."),
    Param(
        "strength",
        "float",
        1.0,
        "How strongly the LoRA applies (negative values invert it).",
        -100.0,
        100.0,
        0.01,
    ),
    Param(
        "expert",
        "combo",
        "both",
        "Wan 2.2's two experts: both, only the high-noise one, or only the low-noise one "
        "(e.g. a 4-step distillation LoRA pair: one node each).",
        choices=LORA_EXPERTS,
    ),
)
"""The LoRA node's widgets (it is chained like ComfyUI's LoraLoaderModelOnly)."""

CACHE_NODE_ID = "ParaDiTStepCache"
CACHE_PARAMS: tuple[Param, ...] = (
    Param(
        "method",
        "combo",
        next(iter(CACHE_METHODS)),
        "first-block: diffusers' First-Block-Cache; every rank takes the same skip decision.",
        choices=tuple(CACHE_METHODS),
    ),
    Param(
        "threshold",
        "float",
        next(iter(CACHE_METHODS.values())),
        "Skip a step's remaining blocks while the first block's output changed by at most this "
        "since the last computed step (higher: faster, further from the uncached result).",
        0.01,
        1.0,
        0.01,
    ),
)
"""The step-cache node's widgets (chained like the LoRA node: backend in, backend out)."""
