"""Event handlers whose parameters come from a table (request fields, serve settings).

Gradio names an event's API parameters after its function's parameters, and passes a
`gr.Request` to the one annotated so. A handler written as `fn(*values)` gets the names of
the table's rows through `__signature__`, so `gradio_client` callers pass them by name.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import gradio as gr

REQUEST = "request"


def with_parameters(
    fn: Callable[..., Any], names: Sequence[str], *, request: bool = False
) -> Callable[..., Any]:
    """`fn` (which takes `*values`, then the gr.Request when `request`) as a function of the
    parameters `names`, each optional (default None), in that order."""
    if REQUEST in names:
        raise ValueError(f"{REQUEST!r} is the name Gradio's request takes; rename the field")
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    params = [inspect.Parameter(name, kind, default=None) for name in names]
    annotations: dict[str, Any] = {}
    if request:
        params.append(inspect.Parameter(REQUEST, kind, default=None, annotation=gr.Request))
        annotations[REQUEST] = gr.Request | None
    fn.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    fn.__annotations__ = annotations
    return fn
