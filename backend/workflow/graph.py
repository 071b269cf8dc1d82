"""A ComfyUI workflow file as one graph: nodes with their inputs by name, each input a value
or a link to another node's output.

Two formats: the API format (what "Export (API)" saves and `POST /prompt` takes: node id ->
`{class_type, inputs}`, a link written `[node id, output index]`), and the UI format (what
the menu's Save writes: `nodes` with positional `widgets_values` and `inputs` naming their
link, and `links` as `[id, from node, from slot, to node, to slot, type]`). The UI format is
read the way ComfyUI's frontend turns it into the API format: muted nodes (mode 2) and notes
are left out, reroutes pass their link through, a primitive's value is the widget value of the
node it feeds, and a bypassed node (mode 4) is kept, marked, for the mapping to pass through.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .nodes import REFUSED, SPECS, UI_ONLY, widget_inputs

MUTED, BYPASSED = 2, 4
"""The UI format's node modes that change what runs (0 is "always")."""


class WorkflowError(ValueError):
    """A workflow paradit cannot map faithfully; the message names the node (one line)."""

    def __init__(self, node: Node | None, message: str):
        where = f"node {node.id} ({node.type}): " if node is not None else ""
        super().__init__(" ".join(f"{where}{message}".split()))
        self.node = node


@dataclass(frozen=True)
class Link:
    """An input fed by another node's output."""

    node: str
    output: int


@dataclass(frozen=True, eq=False)
class Node:
    """One node of the graph (compared by identity: a graph holds each node once)."""

    id: str
    type: str
    inputs: Mapping[str, Any] = field(default_factory=dict)
    """Input name -> a widget value or a `Link`."""
    title: str = ""
    bypassed: bool = False


@dataclass(frozen=True)
class Graph:
    nodes: Mapping[str, Node]
    format: str
    """"api" or "ui"."""
    path: Path
    sha256: str

    def node(self, node_id: str, wanted_by: Node) -> Node:
        try:
            return self.nodes[node_id]
        except KeyError:
            message = f"an input links to node {node_id}, which is not in the workflow"
            raise WorkflowError(wanted_by, message) from None


def load_graph(path: str | Path) -> Graph:
    """Read a workflow file in either format; WorkflowError when it is neither."""
    path = Path(path)
    if not path.is_file():
        raise WorkflowError(None, f"{path}: no such file")
    raw = path.read_bytes()
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise WorkflowError(None, f"{path}: not a JSON file ({exc})") from None
    sha256 = hashlib.sha256(raw).hexdigest()
    if isinstance(data, dict) and isinstance(data.get("prompt"), dict):
        data = data["prompt"]  # a /prompt request body
    if isinstance(data, dict) and isinstance(data.get("nodes"), list):
        return Graph(_ui_nodes(data), "ui", path, sha256)
    if (
        isinstance(data, dict)
        and data
        and all(isinstance(v, dict) and "class_type" in v for v in data.values())
    ):
        return Graph(_api_nodes(data), "api", path, sha256)
    raise WorkflowError(
        None,
        f"{path}: not a ComfyUI workflow (neither the API format, node id -> "
        "{class_type, inputs}, nor the UI format with nodes and links)",
    )


def _api_nodes(data: dict[str, Any]) -> dict[str, Node]:
    nodes = {}
    for node_id, item in data.items():
        inputs = {}
        for name, value in (item.get("inputs") or {}).items():
            is_link = (
                isinstance(value, list)
                and len(value) == 2
                and isinstance(value[0], (str, int))
                and isinstance(value[1], int)
                and str(value[0]) in data
            )
            inputs[name] = Link(str(value[0]), value[1]) if is_link else value
        title = (item.get("_meta") or {}).get("title", "")
        nodes[str(node_id)] = Node(str(node_id), str(item["class_type"]), inputs, title)
    return nodes


def _ui_links(data: dict[str, Any]) -> dict[int, tuple[str, int]]:
    """Link id -> (origin node id, origin slot), from either way the UI format writes links."""
    links = {}
    for link in data.get("links") or ():
        if isinstance(link, dict):
            links[link["id"]] = (str(link["origin_id"]), int(link["origin_slot"]))
        else:
            links[link[0]] = (str(link[1]), int(link[2]))
    return links


def _ui_nodes(data: dict[str, Any]) -> dict[str, Node]:
    raw = {str(n["id"]): n for n in data["nodes"]}
    links = _ui_links(data)

    def origin(link_id: int, wanted_by: Node) -> tuple[str, int] | None:
        """The output a link comes from, through reroutes; None from a primitive."""
        seen = set()
        while True:
            if link_id not in links:
                raise WorkflowError(wanted_by, f"link {link_id} is not in the workflow's links")
            node_id, slot = links[link_id]
            source = raw.get(node_id)
            kind = source.get("type") if source else None
            if kind == "PrimitiveNode":
                return None
            if kind != "Reroute":
                return node_id, slot
            if node_id in seen:
                raise WorkflowError(wanted_by, "a loop of reroutes")
            seen.add(node_id)
            feeds = [i.get("link") for i in source.get("inputs") or () if i.get("link") is not None]
            if not feeds:
                raise WorkflowError(wanted_by, f"reroute {node_id} has no input")
            link_id = feeds[0]

    kept = {
        node_id: item
        for node_id, item in raw.items()
        if str(item.get("type", "")) not in UI_ONLY and item.get("mode", 0) != MUTED
    }
    refuse_unmapped([Node(node_id, str(item.get("type", ""))) for node_id, item in kept.items()])
    nodes = {}
    for node_id, item in kept.items():
        kind = str(item.get("type", ""))
        bare = Node(node_id, kind)
        spec = SPECS[kind]
        values = item.get("widgets_values") or []
        if isinstance(values, dict):
            inputs: dict[str, Any] = {k: v for k, v in values.items() if k in spec.widgets}
        else:
            try:
                inputs = widget_inputs(spec, values)
            except ValueError as exc:
                raise WorkflowError(bare, str(exc)) from None
        for entry in item.get("inputs") or ():
            if entry.get("link") is None:
                continue
            source = origin(entry["link"], bare)
            if source is not None:  # a primitive leaves the widget's own value
                inputs[entry["name"]] = Link(*source)
        title = item.get("title") or ""
        nodes[node_id] = Node(node_id, kind, inputs, title, item.get("mode", 0) == BYPASSED)
    return nodes


def refuse_unmapped(nodes: list[Node]) -> None:
    """WorkflowError for the first node paradit knows it cannot run (nodes.REFUSED, with
    its reason), else for the first node it does not map at all."""
    unmapped = [node for node in nodes if node.type not in SPECS]
    for node in unmapped:
        if node.type in REFUSED:
            raise WorkflowError(node, REFUSED[node.type])
    if unmapped:
        raise unknown_node(unmapped[0])


def unknown_node(node: Node) -> WorkflowError:
    if len(node.type) == 36 and node.type.count("-") == 4:
        return WorkflowError(
            node,
            "a subgraph: paradit reads core nodes only; unpack it (right-click, Unpack "
            "Subgraph) and save again, or export as API format",
        )
    return WorkflowError(
        node,
        "not a node paradit maps (a custom node, or a core node with no paradit "
        f"equivalent); paradit maps: {', '.join(sorted(SPECS))}",
    )
