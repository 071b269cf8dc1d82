"""The HTTP API's documents as Pydantic models: the `POST /v1/jobs` body and the replies.

`job_body_model()` (built from the request table, `request.py`) checks what holds for every
model — the field names, their JSON types (a bool is not
a number, a number is not a string) and the bounds that do not depend on the model — and is
the body's OpenAPI schema. What depends on the loaded model (sizes, frames, latent tokens,
prompt length, steps and guidance maxima, the image) is checked next, by
`JobRequest.from_body(body, limits)`. `describe` turns pydantic's error list into the one
sentence that every 4xx reply carries.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from ..contract import JOB_STATES
from ..request import RequestField, field_names, request_fields

_MODEL_DEFAULT = "Default: the model's own (`limits` in GET /v1/info)."
_TYPES: dict[str, Any] = {
    "text": str | None,
    "int": int,
    "float": float,
    "image": str | None,
    "images": list[str] | None,
    "json": list[dict[str, Any]] | list[float] | dict[str, Any] | None,
}


def _no_default(schema: dict[str, Any]) -> None:
    """Leave `default` out of a field's schema: the real default is the loaded model's."""
    schema.pop("default", None)


def _body_field(f: RequestField) -> tuple[Any, Any]:
    """A request field as a pydantic field: its JSON type, fixed bounds and help."""
    bounds: dict[str, Any] = {}
    if f.number:
        bounds = {"ge": f.low, "le": f.high}
        if f.kind == "float":
            bounds["allow_inf_nan"] = False
    if f.required:
        return str if f.kind == "text" else _TYPES[f.kind], Field(description=f.help, **bounds)
    if f.model_default:
        description = f"{f.help} {_MODEL_DEFAULT}"
        return _TYPES[f.kind], Field(
            None, description=description, json_schema_extra=_no_default, **bounds
        )
    if f.number and f.default is None:  # an optional number: null or left out, the model's
        return _TYPES[f.kind] | None, Field(None, description=f.help, **bounds)
    return _TYPES[f.kind], Field(f.default, description=f.help, **bounds)


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, title="JobBody")

    def fields(self) -> dict[str, Any]:
        """The fields the client sent, for `JobRequest.from_body` (it fills in the rest)."""
        return self.model_dump(exclude_unset=True)


@cache
def _body_model(table: tuple[RequestField, ...]) -> type[_Body]:
    fields = {f.name: _body_field(f) for f in table}
    model = create_model("JobBody", __base__=_Body, **fields)
    model.__doc__ = "One generation request: every field but `prompt` may be left out."
    return model


def job_body_model() -> type[_Body]:
    """The `POST /v1/jobs` body as a pydantic model, built from the request table: what
    holds for every model (names, JSON types, fixed bounds); `JobRequest.from_body` checks
    the rest against the loaded model's limits."""
    return _body_model(request_fields())


def job_body_schema() -> dict[str, Any]:
    return job_body_model().model_json_schema()


class JobCreated(BaseModel):
    id: str
    status: Literal[JOB_STATES]


class Progress(BaseModel):
    step: int
    total: int


class JobView(BaseModel):
    """A job as `GET /v1/jobs/{id}` shows it."""

    model_config = ConfigDict(extra="allow")

    id: str
    status: Literal[JOB_STATES]
    progress: Progress
    preview_step: int = Field(description="The denoising step the latest preview shows.")
    error: str | None = Field(description="Why the job failed.")
    created: float
    started: float | None
    finished: float | None
    request: dict[str, Any] = Field(description="The validated request (the image elided).")
    num_frames: int
    files: list[str]
    timings: dict[str, Any]
    queue_position: int | None = Field(description="0-based place in the queue while queued.")


class JobList(BaseModel):
    jobs: list[JobView] = Field(description="Recent jobs, newest first.")


class ErrorReply(BaseModel):
    """What every 4xx reply holds."""

    error: str = Field(description="What is wrong and what is allowed.")


def _json_type(value: Any) -> str:
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string"}
    names.update({list: "an array", dict: "an object", type(None): "null"})
    return names.get(type(value), type(value).__name__)


def _show(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _bounds(name: str, ctx: dict[str, Any]) -> str:
    """A field's allowed range, from JobBody's schema (both ends when it has both)."""
    field = job_body_schema()["properties"].get(name, {})
    low, high = field.get("minimum", ctx.get("ge")), field.get("maximum", ctx.get("le"))
    if low is not None and high is not None:
        return f"between {low} and {high}"
    return f"at least {low}" if low is not None else f"at most {high}"


def _sentence(error: dict[str, Any]) -> str:
    loc = [part for part in error.get("loc", ()) if part not in ("body", "path", "query")]
    if not loc:
        return "the body must be a JSON object with the job fields"
    name = ".".join(str(part) for part in loc)
    kind, value, ctx = error["type"], error.get("input"), error.get("ctx") or {}
    if kind == "missing":
        return f"{name} is required"
    if kind == "string_type":
        return f"{name} must be a string, got {_json_type(value)}"
    if kind == "int_type":
        return f"{name} must be a whole number, got {_show(value)}"
    if kind == "float_type":
        return f"{name} must be a number, got {_show(value)}"
    if kind == "finite_number":
        return f"{name} must be a finite number"
    if kind in ("greater_than_equal", "less_than_equal"):
        return f"{name} must be {_bounds(name, ctx)}, got {_show(value)}"
    return f"{name}: {error['msg']}"


def describe(errors: Sequence[dict[str, Any]]) -> str:
    """One readable sentence for pydantic's errors: unknown fields first, then each problem."""
    unknown = sorted(str(e["loc"][-1]) for e in errors if e["type"] == "extra_forbidden")
    if unknown:
        return f"unknown fields {unknown}; allowed: {list(field_names())}"
    sentences = list(dict.fromkeys(_sentence(error) for error in errors))
    return "; ".join(sentences) if sentences else "the request is not valid"
