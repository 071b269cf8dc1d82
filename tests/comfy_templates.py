"""ComfyUI's official templates as the tests read them: the folder of the installed
`comfyui-workflow-templates-json` package (never committed here) and a widget's value as a
template file saves it."""

from __future__ import annotations

import json
from pathlib import Path

import comfyui_workflow_templates_json

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
