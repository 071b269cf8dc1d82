"""ComfyUI's official templates as the tests read them (the `comfyui-workflow-templates-json`
package, where it is installed): a widget value off a template's JSON, a ComfyUI folder of
placeholder files under the names a template gives, a flow model's level under a static
shift, a workflow's refusal naming the node, a template run through `workflow run --server`
beside the server's own run of its plan. Shared by tests/workflow/test_templates*.py and
tests/template_jobs.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import comfyui_workflow_templates_json
import pytest
from conftest import Backends, run_job
from PIL import Image

from paradit.backend.client import Client
from paradit.backend.tools.workflow import plan_of
from paradit.backend.workflow.values import WorkflowPlan

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


class TemplateRun(NamedTuple):
    """What `workflow_run` gives the test to compare."""

    server: Client
    """The backend of the plan's files (`paradit serve` as the plan's flags start it)."""
    out: Path
    """The folder `workflow run --out` wrote (job.json, image.png or frames/, audio.wav)."""
    record: dict
    """Its job.json."""
    job: dict | None
    """The server's own run of the plan's body (None where `served` is off)."""
    frames: list[bytes]
    """That run's frames' PNG bytes (none where `served` is off)."""


def workflow_run(
    paradit_warm: Callable,
    backends: Backends,
    plan: WorkflowPlan,
    workflow: Path,
    comfy: Path,
    out: Path,
    served: bool = True,
) -> TemplateRun:
    """`paradit workflow run workflow --out out --comfyui-dir comfy --server` (as `cli.main`,
    `paradit_warm`) on a backend of `plan`'s files on one rank, checked to exit 0; then,
    unless `served` is off, the plan's body run on that backend itself (`run_job`), the job
    the tests compare the written files with."""
    server = backends.get(plan.serve["model"], 1, *plan.serve_argv()[2:])
    result = paradit_warm(
        "workflow", "run", str(workflow), "--out", str(out), "--comfyui-dir", str(comfy),
        "--server", server.url,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    record = json.loads((out / "job.json").read_text())
    job, frames = run_job(server, plan.body()) if served else (None, [])
    return TemplateRun(server, out, record, job, frames)
