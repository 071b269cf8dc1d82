"""A backend described in a few lines from `GET /v1/info`: what the ParaDiTBackend node's `plan`
output and the web app's Backend tab show (model, ranks, replicas, parallel plan, and the
memory plan's decision with its reasons). Torch-free."""

from __future__ import annotations

from typing import Any


def backend_summary(info: dict[str, Any]) -> str:
    """Model, ranks, replicas, parallel plan and the memory plan with its reasons."""
    from ..memory.planner import render

    lines = [
        f"model: {info.get('model')} ({info.get('task')})",
        f"ranks: {info.get('world_size')} x {info.get('device')}; replicas: "
        f"{len(info.get('replicas') or [None])}; plan: {plan_text(info.get('plan', {}))}",
    ]
    files = info.get("model_files")
    if files:  # a single-file model: what each file was recognised as
        described = ", ".join(
            f"{slot} {f['file']} ({f['format']})" for slot, f in files["files"].items()
        )
        lines.append(f"files: {files['variant']}: {described}")
    memory = info.get("memory")
    if memory:
        lines += ["memory plan:", render(memory)]
    return "\n".join(lines)


def plan_text(plan: dict[str, Any]) -> str:
    """The parallel degrees above 1 and the modes, e.g. "ulysses 2; modes: ulysses"."""
    degrees = (
        ", ".join(
            f"{name} {plan[f'{name}_degree']}"
            for name in ("cfg", "ulysses", "ring")
            if plan.get(f"{name}_degree", 1) > 1
        )
        or "single rank"
    )
    return f"{degrees}; modes: {'+'.join(plan.get('modes', [])) or 'none'}"
