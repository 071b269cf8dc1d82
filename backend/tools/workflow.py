"""What `paradit workflow import FILE` and `paradit workflow run FILE --out DIR` (tools/cli.py)
do with a ComfyUI workflow: its plan (backend/workflow maps it, its files' headers checked),
the text import prints, the backend flags a run takes from it, the check of a --server's
model, and the workflow named in the run's job.json."""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path
from typing import Any

from ..workflow import (
    WorkflowPlan,
    check_files,
    check_sampler,
    load_graph,
    map_workflow,
    model_samplers,
)
from ..workflow.files import ComfyFolders

FILE_FLAGS = ("model", "text_encoders", "vaes", "image_encoders", "upscaler")
"""Serve settings the workflow's loader nodes give (a flag for them is refused)."""


def plan_of(path: str, comfyui_dir: str | None) -> tuple[WorkflowPlan, str]:
    """The workflow's plan, its files checked as `paradit serve` checks them, and the model's
    variant; WorkflowError (a ValueError: exit 2) naming the node that cannot be mapped."""
    graph = load_graph(path)
    folders = ComfyFolders.find(comfyui_dir, graph.path)
    plan = map_workflow(graph, folders)
    return plan, check_files(plan, graph)


def render(plan: WorkflowPlan, variant: str, samplers: tuple[str, ...]) -> str:
    """The text `workflow import` prints: the file, the model and the samplers it runs, a
    line per node, the request, the serve command."""
    w = plan.workflow
    runs = ", ".join(samplers) if samplers else "none: its own scheduler only"
    lines = [
        f"workflow: {w['file']} ({w['format'].upper()} format, sha256 {w['sha256'][:16]}...)",
        f"models:   {w['comfyui_models']}",
        f"model:    {variant}",
        f"samplers: {runs}",
    ]
    if "comfyui_defaults" in w:
        lines.append(f"defaults: {w['comfyui_defaults']}")
    width = max(len(f"node {i} {t}") for i, t, _ in plan.lines)
    for node_id, kind, text in plan.lines:
        lines.append(f"{f'node {node_id} {kind}':<{width}}  {text}")
    lines.append("request: " + json.dumps(plan.request, sort_keys=True))
    for path, size in plan.images.items():
        if size is not None:
            how = "Kontext" if size.crop else "to total pixels, no crop"
            lines.append(f"sent:    {Path(path).name} scaled to {size[0]}x{size[1]} ({how})")
    for path, steps in plan.resized.items():
        made = " then ".join(f"{s.width}x{s.height} by {s.method}" for s in steps) or "as loaded"
        lines.append(f"sent:    {Path(path).name} {made}, in 8 bits as LTXVPreprocess reads it")
    lines.append("serve:   paradit serve " + shlex.join(plan.serve_argv()))
    return "\n".join(lines)


def run_overrides(args: argparse.Namespace, plan: WorkflowPlan) -> None:
    """The namespace's backend flags with the workflow's files (the user's flags for them
    refused: the workflow names its files); its LoRA folder added to any --lora-dir."""
    given = [name for name in FILE_FLAGS if getattr(args, name, None)]
    if given:
        flags = ", ".join("--" + n.removesuffix("s").replace("_", "-") for n in given)
        raise ValueError(f"{flags}: the workflow's loader nodes name its files; leave them out")
    if getattr(args, "server", None):
        return
    args.model = plan.serve["model"]
    for name in ("text_encoders", "vaes", "image_encoders"):
        setattr(args, name, list(plan.serve[name]))
    if plan.serve.get("upscaler"):  # a two-stage graph's LatentUpscaleModelLoader
        args.upscaler = plan.serve["upscaler"]
    args.lora_dirs = list(args.lora_dirs or ()) + list(plan.serve["lora_dirs"])


def check_runnable(plan: WorkflowPlan, variant: str, server: str | None, info: dict | None) -> None:
    """The model runs the workflow's sampler: the --server's (its limits), or the files' own
    family's before a backend is started for them; WorkflowError naming the sampler node."""
    if server and info is not None:
        samplers = tuple((info.get("limits") or {}).get("samplers") or ())
        check_sampler(plan, samplers, f"--server {server}")
    else:
        check_sampler(plan, model_samplers(plan), variant)


def check_server(info: dict[str, Any], plan: WorkflowPlan, url: str) -> None:
    """The backend at --server runs the workflow's DiT file(s) (by name: it may run on another
    machine); ValueError saying what it runs otherwise."""
    wanted = [Path(p).name for p in plan.serve["model"].split(",")]
    files = (info.get("model_files") or {}).get("files") or {}
    running = [files[k]["file"] for k in ("transformer", "transformer_2") if k in files]
    if running != wanted:
        raise ValueError(
            f"--server {url} runs {', '.join(running) or info.get('model')}; the workflow's "
            f"model is {', '.join(wanted)}: leave --server out to start one, or start it with "
            f"paradit serve {shlex.join(plan.serve_argv())}"
        )


def name_the_workflow(out: str | Path, plan: WorkflowPlan, variant: str) -> None:
    """Add the workflow (file, sha256, format, ComfyUI folder, variant) to a finished job's
    job.json in `out`."""
    record_path = Path(out) / "job.json"
    record = json.loads(record_path.read_text())
    record["workflow"] = {**plan.workflow, "variant": variant}
    record_path.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
