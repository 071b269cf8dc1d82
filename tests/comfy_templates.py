"""ComfyUI's official templates as the tests read them (the `comfyui-workflow-templates-json`
package, where it is installed): a widget value off a template's JSON, a ComfyUI folder of
placeholder files under the names a template gives, a flow model's level under a static
shift, a workflow's refusal naming the node. Shared by tests/workflow/test_templates*.py and
tests/template_jobs.py."""

from __future__ import annotations

import json
from pathlib import Path

import comfyui_workflow_templates_json
import pytest
from PIL import Image

from paradit.backend.tools.workflow import plan_of

TEMPLATES = Path(comfyui_workflow_templates_json.__file__).parent / "templates"


def widget(template: str, path: str, index: int | slice):
    """A widget value as the template file saves it: node `path` (`129:93` inside subgraph
    node 129), its `widgets_values[index]` (read off the JSON here, not by the importer)."""
    data = json.loads((TEMPLATES / template).read_text())
    *outer, own = path.split(":")
    nodes = data["nodes"]
    for node_id in outer:
        kind = next(n["type"] for n in nodes if str(n["id"]) == node_id)
        sub = next(s for s in data["definitions"]["subgraphs"] if s["id"] == kind)
        nodes = sub["nodes"]
    return next(n for n in nodes if str(n["id"]) == own)["widgets_values"][index]


def placeholders(template: str, folder: Path) -> Path:
    """A ComfyUI folder with an empty file under every model name the template gives (in
    every models subfolder) and a tiny PNG under every image name."""
    data = json.loads((TEMPLATES / template).read_text())
    nodes = list(data["nodes"])
    for sub in (data.get("definitions") or {}).get("subgraphs") or ():
        nodes += sub["nodes"]
    (folder / "input").mkdir(parents=True)
    for node in nodes:
        values = node.get("widgets_values")
        for value in values if isinstance(values, list) else ():
            if isinstance(value, str) and value.endswith((".safetensors", ".gguf")):
                for kind in ("diffusion_models", "text_encoders", "vae", "loras",
                             "clip_vision", "checkpoints", "latent_upscale_models"):  # fmt: skip
                    (folder / "models" / kind).mkdir(parents=True, exist_ok=True)
                    (folder / "models" / kind / value).touch()
            elif isinstance(value, str) and value.endswith((".png", ".jpg", ".jpeg", ".webp")):
                Image.new("RGB", (32, 32)).save(folder / "input" / value, format="PNG")
    return folder


def shifted(t: float, shift: float) -> float:
    """A flow model's level at time t under a static shift: shift t / (1 + (shift - 1) t)."""
    return shift * t / (1 + (shift - 1) * t)


def refusal(workflow: Path, comfy: Path, start: str, *words: str) -> str:
    """The message `workflow` is refused with (`plan_of`, as `paradit workflow import` reads
    it, in the ComfyUI folder `comfy`), checked to start with `start` (the node's path and
    type, `subgraph 92 > node 82 (LTXVDualCFGGuider): `, perhaps the reason's first words) and
    to hold every one of `words`; a workflow that imports fails the test."""
    with pytest.raises(ValueError) as refused:
        plan_of(str(workflow), str(comfy))
    message = str(refused.value)
    assert message.startswith(start) and all(w in message for w in words), message
    return message
