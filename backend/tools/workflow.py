"""`paradit workflow import FILE` and `paradit workflow run FILE --out DIR`: a ComfyUI workflow
as a paradit job (backend/workflow maps it), printed or run; the run's job.json names the
workflow file and its sha256."""

from __future__ import annotations

import argparse
import json
import logging
import shlex
from pathlib import Path
from typing import Any

from ..workflow import WorkflowPlan, check_files, load_graph, map_workflow
from ..workflow.files import ComfyFolders
from ..workflow.graph import WorkflowError

log = logging.getLogger("paradit")

FILE_FLAGS = ("model", "text_encoders", "vaes", "image_encoders")
"""Serve settings the workflow's loader nodes give (a flag for them is refused)."""


def plan_of(path: str, comfyui_dir: str | None) -> tuple[WorkflowPlan, str]:
    """The workflow's plan, its files checked as `paradit serve` checks them, and the model's
    variant; WorkflowError (a ValueError: exit 2) naming the node that cannot be mapped."""
    graph = load_graph(path)
    folders = ComfyFolders.find(comfyui_dir, graph.path)
    plan = map_workflow(graph, folders)
    return plan, check_files(plan, graph)


def render(plan: WorkflowPlan, variant: str) -> str:
    """The text `workflow import` prints: the file, a line per node, the request, the serve
    command."""
    w = plan.workflow
    lines = [
        f"workflow: {w['file']} ({w['format'].upper()} format, sha256 {w['sha256'][:16]}...)",
        f"models:   {w['comfyui_models']}",
        f"model:    {variant}",
    ]
    width = max(len(f"node {i} {t}") for i, t, _ in plan.lines)
    for node_id, kind, text in plan.lines:
        lines.append(f"{f'node {node_id} {kind}':<{width}}  {text}")
    lines.append("request: " + json.dumps(plan.request, sort_keys=True))
    lines.append("serve:   paradit serve " + shlex.join(plan.serve_argv()))
    return "\n".join(lines)


def cmd_import(args: argparse.Namespace) -> int:
    plan, variant = plan_of(args.file, args.comfyui_dir)
    if args.json:
        print(json.dumps({**plan.to_dict(), "variant": variant}, indent=2))
    else:
        print(render(plan, variant))
    return 0


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
    args.lora_dirs = list(args.lora_dirs or ()) + list(plan.serve["lora_dirs"])


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


def cmd_run(args: argparse.Namespace) -> int:
    from .cli import ProgressLog, backend_client

    plan, variant = plan_of(args.file, args.comfyui_dir)
    for node_id, kind, text in plan.lines:
        log.info("node %s %s: %s", node_id, kind, text)
    run_overrides(args, plan)
    with backend_client(args) as client:
        if getattr(args, "server", None):
            check_server(client.info(), plan, args.server)
        job = client.generate(plan.body(), args.out, on_progress=ProgressLog())
    record_path = Path(args.out) / "job.json"
    record = json.loads(record_path.read_text())
    record["workflow"] = {**plan.workflow, "variant": variant}
    record_path.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    log.info("wrote %s (%d frames) from %s", args.out, job["num_frames"], args.file)
    return 0


__all__ = ["WorkflowError", "cmd_import", "cmd_run", "plan_of", "render"]
