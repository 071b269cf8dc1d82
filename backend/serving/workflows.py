"""`POST /v1/workflows`: a ComfyUI workflow sent by a client, mapped as `paradit workflow
import` maps it (backend/workflow), its files resolved only inside the server's
`--comfyui-dir` and required to be the files this backend runs, then queued as a job.

The workflow comes from a client: a file name with `..`, an absolute path or a link leading
outside the ComfyUI folder is refused (422), as is any file the backend does not run (its
DiT, text encoders, VAE and image encoder are fixed when it starts; its LoRAs must be under
one of its `--lora-dir`s).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..workflow import WorkflowError, check_files, check_sampler, graph_of, map_workflow
from ..workflow.files import ComfyFolders
from ..workflow.values import WorkflowPlan


class WorkflowRefused(ValueError):
    """The workflow cannot run on this backend (422, one line)."""


def plan_for_server(
    data: Any, sha256: str, comfyui_dir: str, config: Any, samplers: tuple[str, ...]
) -> tuple[WorkflowPlan, str]:
    """The workflow's plan and model variant, checked against this backend's files and
    samplers; WorkflowRefused (or WorkflowError, naming the node) saying why not."""
    if not comfyui_dir:
        raise WorkflowRefused(
            "this server was started without --comfyui-dir: it resolves no workflow's files"
        )
    folders = ComfyFolders.at(comfyui_dir)
    if folders is None:
        raise WorkflowRefused(f"--comfyui-dir {comfyui_dir} holds no ComfyUI models folder")
    graph = graph_of(data, sha256)
    plan = map_workflow(graph, folders.confine())
    variant = check_files(plan, graph)
    check_sampler(plan, samplers, "this server")
    _check_files_served(plan, config)
    return plan, variant


def _real(path: str) -> Path:
    return Path(path).resolve()


def _check_files_served(plan: WorkflowPlan, config: Any) -> None:
    """The workflow's files are the ones this backend loaded: its DiT(s), encoders and VAE;
    its LoRA folder one of the backend's."""
    serve = plan.serve
    wanted = [_real(p) for p in serve["model"].split(",")]
    running = [_real(p) for p in config.model.split(",")] if config.model else []
    if wanted != running:
        node = plan.loaders.get(serve["model"].split(",")[0])
        raise WorkflowError(
            node,
            f"{', '.join(p.name for p in wanted)}: this server runs {config.model} (a backend "
            "runs the model it started with; start one with the workflow's files)",
        )
    for key, flag in (
        ("text_encoders", "text_encoders"),
        ("vaes", "vaes"),
        ("image_encoders", "image_encoders"),
    ):
        given = sorted(_real(p) for p in serve[key])
        loaded = sorted(_real(p) for p in getattr(config, flag))
        if given and given != loaded:
            node = plan.loaders.get(serve[key][0])
            shown = ", ".join(p.name for p in loaded) or "none given (the model's own)"
            raise WorkflowError(
                node,
                f"{', '.join(p.name for p in given)}: this server's {flag.replace('_', ' ')} "
                f"are {shown}",
            )
    upscaler = serve.get("upscaler")
    if upscaler and (not config.upscaler or _real(upscaler) != _real(config.upscaler)):
        raise WorkflowError(
            plan.loaders.get(upscaler),
            f"{Path(upscaler).name}: this server's upscaler is "
            f"{Path(config.upscaler).name if config.upscaler else 'none (no --upscaler)'}",
        )
    served = {_real(p) for p in config.lora_dirs}
    for folder in serve["lora_dirs"]:
        if _real(folder) not in served:
            raise WorkflowRefused(
                f"the workflow's LoRAs are in {folder}, which is not one of this server's "
                "--lora-dir folders",
            )


def dry_run_reply(plan: WorkflowPlan, variant: str, samplers: tuple[str, ...]) -> dict[str, Any]:
    """What `paradit workflow import --json` prints for the plan."""
    return {**plan.to_dict(), "variant": variant, "samplers": list(samplers)}
