"""Draw a shipped workflow's thumbnail for ComfyUI's template browser from its UI form.

    python docs/workflow_thumbnail.py workflows/ui/NAME.json example_workflows/NAME.jpg

A schematic of the canvas (no ComfyUI needed): each node where the UI form puts it, with its
title, its input and output slots, its widgets and their saved values, and the links between
slots, on ComfyUI's dark background. The older thumbnails are screenshots of a real ComfyUI
with the UI form loaded; this draws the same layout where no ComfyUI is at hand.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from paradit.nodes.params import (
    BACKEND_NODE_ID,
    BACKEND_PARAMS,
    LORA_NODE_ID,
    LORA_PARAMS,
    TASK_NODES,
)

WIDTH = 640
MARGIN = 20
ROW = 20
TITLE = 24
BACKGROUND, NODE, BAR, TEXT, DIM, WIRE = (
    "#202020",
    "#353535",
    "#2a2a2a",
    "#dddddd",
    "#999999",
    "#7fa7d6",
)
CORE_WIDGETS = {
    "LoadImage": ["image"],
    "SaveVideo": ["filename_prefix", "format", "codec"],
    "SaveImage": ["filename_prefix"],
    "SaveAudio": ["filename_prefix"],
    "PreviewAny": [],
}


def widget_names(node_type: str) -> list[str]:
    """The names of a node's `widgets_values`, in order (a seed's control value after it)."""
    if node_type in CORE_WIDGETS:
        return CORE_WIDGETS[node_type]
    params = BACKEND_PARAMS
    if node_type == LORA_NODE_ID:
        params = LORA_PARAMS
    elif node_type != BACKEND_NODE_ID:
        params = next(node for node in TASK_NODES if node.node_id == node_type).params
    names = []
    for param in params:
        names.append(param.name)
        if param.control_after_generate:
            names.append("control after generate")
    return names


def draw(ui: dict) -> Image.Image:
    nodes = ui["nodes"]
    left = min(node["pos"][0] for node in nodes)
    top = min(node["pos"][1] for node in nodes)
    right = max(node["pos"][0] + node["size"][0] for node in nodes)
    bottom = max(node["pos"][1] + node["size"][1] for node in nodes)
    scale = (WIDTH - 2 * MARGIN) / (right - left)
    height = int((bottom - top) * scale) + 2 * MARGIN
    image = Image.new("RGB", (WIDTH, height), BACKGROUND)
    canvas = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=max(8, int(12 * scale / 0.55)))
    small = ImageFont.load_default(size=max(7, int(10 * scale / 0.55)))

    def box(node: dict) -> tuple[float, float, float, float]:
        x = MARGIN + (node["pos"][0] - left) * scale
        y = MARGIN + (node["pos"][1] - top) * scale
        return x, y, x + node["size"][0] * scale, y + node["size"][1] * scale

    slots: dict[tuple[int, str, int], tuple[float, float]] = {}
    for node in nodes:
        x0, y0, x1, y1 = box(node)
        canvas.rounded_rectangle((x0, y0, x1, y1), 6, fill=NODE)
        canvas.rounded_rectangle((x0, y0, x1, y0 + TITLE * scale), 6, fill=BAR)
        canvas.text((x0 + 8, y0 + 4 * scale), node.get("title", node["type"]), TEXT, font)
        y = y0 + (TITLE + 6) * scale
        rows = max(len(node["inputs"]), len(node["outputs"]))
        for index in range(rows):
            if index < len(node["inputs"]):
                slots[(node["id"], "in", index)] = (x0, y + 6 * scale)
                canvas.ellipse((x0 + 4, y + 3, x0 + 10, y + 9), fill=WIRE)
                canvas.text((x0 + 14, y), node["inputs"][index]["name"], DIM, small)
            if index < len(node["outputs"]):
                slots[(node["id"], "out", index)] = (x1, y + 6 * scale)
                name = node["outputs"][index]["name"]
                width = canvas.textlength(name, small)
                canvas.ellipse((x1 - 10, y + 3, x1 - 4, y + 9), fill=WIRE)
                canvas.text((x1 - 14 - width, y), name, DIM, small)
            y += ROW * scale
        for name, value in zip(widget_names(node["type"]), node["widgets_values"], strict=False):
            if y > y1 - ROW * scale:
                break
            text = f"{name}: {value}"
            while canvas.textlength(text, small) > x1 - x0 - 16 and len(text) > 4:
                text = text[:-2]
            canvas.rounded_rectangle((x0 + 6, y, x1 - 6, y + (ROW - 4) * scale), 4, fill=BAR)
            canvas.text((x0 + 10, y + 1), text, TEXT, small)
            y += ROW * scale
    for _link, src, src_slot, dst, dst_slot, _type in ui["links"]:
        start, end = slots[(src, "out", src_slot)], slots[(dst, "in", dst_slot)]
        middle = (start[0] + end[0]) / 2
        canvas.line([start, (middle, start[1]), (middle, end[1]), end], WIRE, 2)
    return image


def main(source: str, target: str) -> None:
    draw(json.loads(Path(source).read_text())).save(target, "JPEG", quality=90)


if __name__ == "__main__":
    main(*sys.argv[1:])
