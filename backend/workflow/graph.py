"""A ComfyUI workflow file as one graph: nodes with their inputs by name, each input a value
or a link to another node's output.

Two formats: the API format (what "Export (API)" saves and `POST /prompt` takes: node id ->
`{class_type, inputs}`, a link written `[node id, output index]`), and the UI format (what
the menu's Save writes: `nodes` with positional `widgets_values` and `inputs` naming their
link, and `links` as `[id, from node, from slot, to node, to slot, type]`). The UI format is
read the way ComfyUI's frontend turns it into the API format: subgraphs (a node whose type is
a subgraph's id in `definitions.subgraphs`) are unpacked, their nodes named by their path
(`128:81`, as ComfyUI's executor names them) and their inputs followed to the outer node's
links or, for a promoted widget, left with the inner widget's value; muted nodes (mode 2) and
notes are left out; reroutes pass their link through; a legacy primitive's value is its
widget's; a bypassed node (mode 4) passes to each output the input of the same type (the one
at the same index first), and drops the link when it has none, as the frontend does.
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
        where = f"{node.where} ({node.type}): " if node is not None else ""
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
    problem: str = ""
    """Why its saved widget values cannot be read (refused if the output needs the node)."""

    @property
    def where(self) -> str:
        """`node 9`, or inside subgraphs the path to it: `subgraph 128 > node 81`."""
        *outer, own = self.id.split(":")
        return " > ".join([*(f"subgraph {s}" for s in outer), f"node {own}"])


@dataclass(frozen=True)
class Graph:
    nodes: Mapping[str, Node]
    format: str
    """"api" or "ui"."""
    path: Path | None
    """The file it was read from (None: a request body)."""
    sha256: str

    @property
    def source(self) -> str:
        """Where it came from, for job.json and messages."""
        return str(self.path.absolute()) if self.path is not None else "request body"

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
    return graph_of(data, hashlib.sha256(raw).hexdigest(), path)


def graph_of(data: Any, sha256: str, path: Path | None = None) -> Graph:
    """A workflow already parsed from JSON (a file's, or a request body's); WorkflowError when
    it is in neither format."""
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
        f"{path or 'the body'}: not a ComfyUI workflow (neither the API format, node id -> "
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


def _ui_links(links: list | None) -> dict[int, tuple[str, int, str]]:
    """Link id -> (origin node id, origin slot, type), from either way the UI format writes
    links (lists at the top level, objects inside a subgraph's definition)."""
    out = {}
    for link in links or ():
        if isinstance(link, dict):
            out[link["id"]] = (str(link["origin_id"]), int(link["origin_slot"]), link.get("type"))
        else:
            out[link[0]] = (str(link[1]), int(link[2]), link[5] if len(link) > 5 else None)
    return out


@dataclass(frozen=True)
class _Scope:
    """One graph of the UI format: the top level, or one instance of a subgraph (its nodes'
    ids prefixed with the instance's path, as ComfyUI's executor names them: `128:81`)."""

    nodes: Mapping[str, dict]
    links: Mapping[int, tuple[str, int, str]]
    prefix: str
    parent: _Scope | None = None
    instance: dict | None = None
    """The subgraph node of `parent` this scope is an instance of."""
    definition: dict | None = None

    def key(self, node_id: str) -> str:
        return f"{self.prefix}{node_id}"


class _UiReader:
    """The UI format flattened the way ComfyUI's frontend turns it into the prompt it queues:
    every subgraph instance's nodes at their path, links followed through subgraph inputs and
    outputs, reroutes and bypassed nodes; muted nodes, notes and bypassed nodes left out."""

    def __init__(self, data: dict[str, Any]):
        definitions = (data.get("definitions") or {}).get("subgraphs") or ()
        self.subgraphs = {str(d["id"]): d for d in definitions}
        self.nodes: dict[str, Node] = {}

    def read(self, data: dict[str, Any]) -> dict[str, Node]:
        self._scope(data, "", None, None, depth=0)
        return self.nodes

    def _scope(self, data: dict, prefix: str, parent: _Scope | None, instance: dict | None,
               depth: int) -> None:  # fmt: skip
        if depth > 16:
            raise WorkflowError(None, f"subgraphs nested deeper than 16 at {prefix}")
        scope = _Scope(
            {str(n["id"]): n for n in data.get("nodes") or ()},
            _ui_links(data.get("links")),
            prefix,
            parent,
            instance,
            data if instance is not None else None,
        )
        for node_id, item in scope.nodes.items():
            kind = str(item.get("type", ""))
            mode = item.get("mode", 0)
            if kind in UI_ONLY or mode in (MUTED, BYPASSED):
                continue
            if kind in self.subgraphs:
                inner = f"{scope.key(node_id)}:"
                self._scope(self.subgraphs[kind], inner, scope, item, depth + 1)
                continue
            self.nodes[scope.key(node_id)] = self._node(scope, node_id, item)

    def _node(self, scope: _Scope, node_id: str, item: dict) -> Node:
        kind = str(item.get("type", ""))
        bare = Node(scope.key(node_id), kind)
        inputs: dict[str, Any] = {}
        spec = SPECS.get(kind)
        values = item.get("widgets_values") or []
        problem = ""
        if spec is not None:
            if isinstance(values, dict):
                dynamic = tuple(f"{name}." for name in spec.dynamic)
                inputs = {
                    k: v for k, v in values.items() if k in spec.widgets or k.startswith(dynamic)
                }
            else:
                try:
                    inputs = widget_inputs(spec, values)
                except ValueError as exc:
                    problem = str(exc)
        for entry in item.get("inputs") or ():
            if entry.get("link") is None:
                continue
            source = self._origin(scope, entry["link"], bare)
            if isinstance(source, Link):
                inputs[entry["name"]] = source
            elif source is not _DROPPED:
                inputs[entry["name"]] = source.value
            elif "widget" not in entry:
                inputs.pop(entry["name"], None)
        return Node(bare.id, kind, inputs, item.get("title") or "", problem)

    def _origin(self, scope: _Scope, link_id: int, wanted_by: Node) -> Link | _Value | object:
        """Where a link's value comes from: a node's output (`Link`), a value (a primitive's,
        or a subgraph node's widget), or `_DROPPED` (a bypassed node with nothing to pass, a
        muted node, an unlinked subgraph input: the input is left as if unconnected)."""
        for _ in range(10_000):
            if link_id not in scope.links:
                raise WorkflowError(wanted_by, f"link {link_id} is not in the workflow's links")
            origin, slot, _ = scope.links[link_id]
            if origin == SUBGRAPH_INPUT:
                found = self._subgraph_input(scope, slot, wanted_by)
                if not isinstance(found, tuple):
                    return found
                scope, link_id = found
                continue
            item = scope.nodes.get(origin)
            if item is None:
                raise WorkflowError(wanted_by, f"an input links to node {scope.key(origin)}, "
                                    "which is not in the workflow")  # fmt: skip
            kind, mode = str(item.get("type", "")), item.get("mode", 0)
            if mode == MUTED:
                return _DROPPED
            if kind == "PrimitiveNode":  # the legacy primitive: its widget's value
                values = item.get("widgets_values") or [None]
                return _Value(values[0])
            if kind == "Reroute" or mode == BYPASSED:
                index = 0 if kind == "Reroute" else _bypass_input(item, slot)
                inputs = item.get("inputs") or ()
                if index < 0 or index >= len(inputs) or inputs[index].get("link") is None:
                    return _DROPPED
                link_id = inputs[index]["link"]
                continue
            if kind in self.subgraphs:  # into the instance, to the link its output takes
                definition = self.subgraphs[kind]
                inner = _Scope(
                    {str(n["id"]): n for n in definition.get("nodes") or ()},
                    _ui_links(definition.get("links")),
                    f"{scope.key(origin)}:",
                    scope,
                    item,
                    definition,
                )
                outputs = definition.get("outputs") or ()
                ids = outputs[slot].get("linkIds") if slot < len(outputs) else None
                if not ids:
                    return _DROPPED
                scope, link_id = inner, ids[0]
                continue
            return Link(scope.key(origin), slot)
        raise WorkflowError(wanted_by, "its links loop (through reroutes or bypassed nodes)")

    def _subgraph_input(self, scope: _Scope, slot: int, wanted_by: Node):
        """A subgraph input: the outer node's input of the same name (linked: follow it in the
        outer graph; a widget value saved on the outer node: that value); else dropped, which
        leaves the inner widget its own value (a promoted widget saves its value there)."""
        definition, outer = scope.definition or {}, scope.instance or {}
        declared = definition.get("inputs") or ()
        if slot >= len(declared):
            raise WorkflowError(wanted_by, f"subgraph input {slot} is not declared")
        name = declared[slot].get("name")
        entries = outer.get("inputs") or ()
        entry = next((e for e in entries if e.get("name") == name), None)
        if entry is not None and entry.get("link") is not None:
            return scope.parent, entry["link"]
        values = outer.get("widgets_values")
        proxied = (outer.get("properties") or {}).get("proxyWidgets")
        if isinstance(values, list) and values and not proxied:
            # saved on the subgraph node, one value per widget input of the definition
            promoted = _widget_inputs(definition, scope)
            if len(values) != len(promoted):
                outer_node = Node(scope.prefix.rstrip(":"), str(outer.get("type", "")))
                raise WorkflowError(
                    outer_node,
                    f"{len(values)} widget values saved for {len(promoted)} promoted widgets",
                )
            if slot in promoted:
                return _Value(values[promoted.index(slot)])
        return _DROPPED


def _widget_inputs(definition: dict, scope: _Scope) -> list[int]:
    """The indices of a subgraph's inputs that feed an inner widget (promoted widgets), in
    order: the values an older subgraph node saves on itself are theirs."""
    targets = {}  # link id -> (target node id, target slot)
    for link in definition.get("links") or ():
        if isinstance(link, dict):
            targets[link["id"]] = (str(link["target_id"]), int(link["target_slot"]))
        else:
            targets[link[0]] = (str(link[3]), int(link[4]))
    promoted = []
    for index, declared in enumerate(definition.get("inputs") or ()):
        for link_id in declared.get("linkIds") or ():
            node_id, slot = targets.get(link_id, ("", -1))
            entries = (scope.nodes.get(node_id) or {}).get("inputs") or ()
            if 0 <= slot < len(entries) and entries[slot].get("widget"):
                promoted.append(index)
                break
    return promoted


SUBGRAPH_INPUT = "-10"
"""The id a subgraph's definition gives its input node (its links from the instance's inputs)."""


@dataclass(frozen=True)
class _Value:
    value: Any


_DROPPED = object()


def _bypass_input(item: dict, slot: int) -> int:
    """The input a bypassed node passes to its output `slot`, as ComfyUI's frontend picks it:
    the input at the same index when its type matches the output's, else the first input of
    that type; -1 for none (the link is dropped)."""
    outputs, inputs = item.get("outputs") or (), item.get("inputs") or ()
    kind = outputs[slot].get("type") if slot < len(outputs) else None
    if slot < len(inputs) and inputs[slot].get("type") == kind:
        return slot
    return next((i for i, entry in enumerate(inputs) if entry.get("type") == kind), -1)


def _ui_nodes(data: dict[str, Any]) -> dict[str, Node]:
    return _UiReader(data).read(data)


def unknown_node(node: Node) -> WorkflowError:
    """The refusal of a node type paradit does not map (its reason when nodes.REFUSED has
    one)."""
    if node.type in REFUSED:
        return WorkflowError(node, REFUSED[node.type])
    if len(node.type) == 36 and node.type.count("-") == 4:
        return WorkflowError(
            node, "a subgraph whose definition is not in the workflow's definitions.subgraphs"
        )
    return WorkflowError(
        node,
        "not a node paradit maps (a custom node, or a core node with no paradit "
        f"equivalent); paradit maps: {', '.join(sorted(SPECS))}",
    )
