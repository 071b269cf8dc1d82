"""What each ParaDiT node asks for, as plain data (no ComfyUI import).

The ComfyUI adapter (`comfy_v3.py`) turns these into V3 widgets; the tests use them to check
that every workflow file gives each node the right widgets in the right order.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..backend.contract import IMAGE_TO_VIDEO, TEXT_TO_IMAGE, TEXT_TO_VIDEO

# Seeds stay exact in the browser (JavaScript numbers) and inside the backend's limit.
MAX_SEED = 2**53 - 1

KNOWN_HUB_MODELS: tuple[str, ...] = (
    "Wan-AI/Wan2.1-T2V-1.3B-Diffusers",
    "Wan-AI/Wan2.1-T2V-14B-Diffusers",
    "Wan-AI/Wan2.1-I2V-14B-480P-Diffusers",
    "Wan-AI/Wan2.1-I2V-14B-720P-Diffusers",
    "black-forest-labs/FLUX.1-dev",
    "black-forest-labs/FLUX.1-schnell",
    "THUDM/CogVideoX-2b",
    "THUDM/CogVideoX-5b",
    "THUDM/CogVideoX-5b-I2V",
    "THUDM/CogVideoX1.5-5B",
    "THUDM/CogVideoX1.5-5B-I2V",
)
"""Hugging Face repo ids offered in the model list (downloaded by the backend on first use)."""

DEVICES: tuple[str, ...] = ("auto", "cuda", "cpu")


@dataclass(frozen=True)
class Param:
    """One widget of a node: its name, kind and bounds."""

    name: str
    kind: str
    """"int", "float", "string", "text" (multi-line string) or "combo"."""
    default: object
    tooltip: str = ""
    low: float | None = None
    high: float | None = None
    step: float | None = None
    control_after_generate: bool = False
    """A seed: ComfyUI adds a "control after generate" widget right after it."""

    def widget_values(self, value: object, control: str = "randomize") -> list[object]:
        """The value(s) this widget saves in a UI-format workflow's `widgets_values`."""
        return [value, control] if self.control_after_generate else [value]


BACKEND_PARAMS: tuple[Param, ...] = (
    Param(
        "model",
        "combo",
        KNOWN_HUB_MODELS[0],
        "A built-in preset, a diffusers folder under ComfyUI's models/diffusers, or a "
        "Hugging Face repo id.",
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


_SIZE = "Pixels; a multiple of the model's size step (16)."
_GUIDANCE = "Guidance scale (CFG; for Flux dev the distilled guidance)."
_SEED = "Same model + same request + same seed = same output."


def _job_params(width: int, height: int, frames: int | None, steps: int, guidance: float):
    frame_params = (
        (
            Param(
                "frames",
                "int",
                frames,
                "Frame count, 4k+1 (Wan: up to 81; CogVideoX: 49, CogVideoX 1.5: 81 or 161).",
                1,
                257,
                4,
            ),
        )
        if frames is not None
        else ()
    )
    return (
        Param("prompt", "text", "", "What to generate."),
        Param("negative_prompt", "text", "", "What to steer away from (needs guidance > 1)."),
        Param("width", "int", width, _SIZE, 16, 2048, 16),
        Param("height", "int", height, _SIZE, 16, 2048, 16),
        *frame_params,
        Param("steps", "int", steps, "Denoising steps.", 1, 200, 1),
        Param("guidance", "float", guidance, _GUIDANCE, 0.0, 30.0, 0.1),
        Param("seed", "int", 0, _SEED, 0, MAX_SEED, 1, control_after_generate=True),
    )


@dataclass(frozen=True)
class TaskNode:
    """A generation node: its id, the backend task it needs and its widgets."""

    node_id: str
    display_name: str
    task: str
    params: tuple[Param, ...]
    needs_image: bool = False

    @property
    def makes_video(self) -> bool:
        return any(p.name == "frames" for p in self.params)


TEXT_TO_VIDEO = TaskNode(
    "ParaDiTTextToVideo",
    "ParaDiT Text to Video",
    TEXT_TO_VIDEO,
    _job_params(832, 480, 81, 30, 5.0),
)
IMAGE_TO_VIDEO = TaskNode(
    "ParaDiTImageToVideo",
    "ParaDiT Image to Video",
    IMAGE_TO_VIDEO,
    _job_params(832, 480, 81, 30, 5.0),
    needs_image=True,
)
TEXT_TO_IMAGE = TaskNode(
    "ParaDiTTextToImage",
    "ParaDiT Text to Image",
    TEXT_TO_IMAGE,
    _job_params(1024, 1024, None, 28, 3.5),
)
TASK_NODES: tuple[TaskNode, ...] = (TEXT_TO_VIDEO, IMAGE_TO_VIDEO, TEXT_TO_IMAGE)

BACKEND_NODE_ID = "ParaDiTBackend"
BACKEND_TYPE = "PARADIT_BACKEND"
