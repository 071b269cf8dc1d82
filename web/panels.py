"""Text for the status panel and rows for the history table (pure functions of backend JSON)."""

from __future__ import annotations

import time
from typing import Any

HISTORY_COLUMNS = [
    "job",
    "status",
    "prompt",
    "size",
    "frames",
    "steps",
    "seed",
    "created",
    "seconds",
]


def format_bytes(num: float) -> str:
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    index = 0
    while num >= 1024 and index < len(units) - 1:
        num /= 1024
        index += 1
    return f"{num:.0f} B" if index == 0 else f"{num:.1f} {units[index]}"


def header_markdown(info: dict[str, Any]) -> str:
    return (
        f"## paradit · {info['model']}\n"
        f"{info.get('task', '?')} · world size {info['world_size']} · {info['device']}"
    )


def _plan_text(plan: dict[str, Any]) -> str:
    degrees = ", ".join(
        f"{name} {plan[name]}"
        for name in ("cfg_degree", "ulysses_degree", "ring_degree")
        if name in plan
    )
    modes = ", ".join(plan.get("modes") or []) or "none (one rank does everything)"
    return f"{degrees}; modes: {modes}"


def status_markdown(info: dict[str, Any] | None, health: str) -> str:
    """The backend panel: health, model, world size, devices, plan, per-rank DiT bytes."""
    lines = [f"**Health:** {health}", ""]
    if info is None:
        return "\n".join(lines + ["The backend did not answer `GET /v1/info`."])
    devices = sorted({str(rank.get("device", "?")) for rank in info.get("ranks", [])})
    lines += [
        f"- **Model:** {info['model']} ({info.get('family', '?')}, {info.get('task', '?')})",
        f"- **World size:** {info['world_size']} · **devices:** {', '.join(devices) or '?'}",
        f"- **Parallel plan:** {_plan_text(info.get('plan') or {})}",
        f"- **Queued jobs:** {info.get('queue', '?')} · **version:** {info.get('version', '?')}",
        "",
        "| rank | pid | device | DiT parameters held |",
        "| ---: | ---: | --- | ---: |",
    ]
    for rank in info.get("ranks", []):
        lines.append(
            f"| {rank.get('rank')} | {rank.get('pid')} | {rank.get('device')} | "
            f"{format_bytes(rank.get('dit_param_bytes', 0))} |"
        )
    return "\n".join(lines)


def history_rows(jobs: list[dict[str, Any]]) -> list[list[Any]]:
    """One row per backend job (newest first), in HISTORY_COLUMNS order."""
    rows = []
    for job in jobs:
        request = job.get("request") or {}
        prompt = request.get("prompt", "")
        created = job.get("created")
        rows.append(
            [
                job["id"],
                job["status"],
                prompt if len(prompt) <= 60 else prompt[:57] + "...",
                f"{request.get('width')}×{request.get('height')}",
                request.get("num_frames"),
                request.get("num_inference_steps"),
                request.get("seed"),
                time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(created)) if created else "",
                (job.get("timings") or {}).get("total_s"),
            ]
        )
    return rows


def job_choices(jobs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(label, id) for the jobs whose outputs can be shown (succeeded ones)."""
    choices = []
    for job in jobs:
        if job["status"] == "succeeded":
            prompt = (job.get("request") or {}).get("prompt", "")
            choices.append((f"{job['id']} · {prompt[:40]}", job["id"]))
    return choices
