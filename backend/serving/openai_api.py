"""OpenAI-style endpoints beside paradit's own, on the same queue, token and limits.

`POST /v1/videos` (then `GET /v1/videos/{id}`, `GET /v1/videos/{id}/content`,
`DELETE /v1/videos/{id}`), `POST /v1/images/generations` and `POST /v1/images/edits`, as the
`openai` Python client calls them (SGLang, vLLM-Omni, FastVideo and LightX2V serve the
same). Their fields map to the request table's: `size` "WxH" to width and height, `seconds`
to num_frames (at the model's frame rate, rounded to its frame rule), `input_reference` to
image; an edit's `image` (one
file, or several as `image[]`) to `image` and `images`. paradit's own fields (seed,
num_inference_steps, guidance_scale, negative_prompt, loras, cache, ...) go in as extra body
fields and win over the mapped ones; `model` is the client's label only (the backend serves
one model). Every job is a paradit job: `GET /v1/jobs/{id}` shows it too.

The image routes answer when their jobs are done: they await them on the event loop, never
in a worker thread, so any number of waiting requests leaves `/health` and every other route
answering (the server's thread pool is small and shared by every synchronous route).
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse
from starlette.concurrency import run_in_threadpool

from ..contract import (
    CANCELLED,
    FAILED,
    FINAL_STATES,
    MAX_SEED,
    QUEUED,
    RUNNING,
    SUCCEEDED,
    Limits,
)
from ..request import field_names, find_field
from .jobs import Job
from .replies import submit_or_reply

VIDEO_STATES = {QUEUED: "queued", RUNNING: "in_progress", SUCCEEDED: "completed"}
"""paradit's job states as OpenAI's video states (failed and cancelled: "failed")."""
OPENAI_FIELDS = ("model", "size", "seconds", "input_reference", "n", "response_format")
OPENAI_INTS = ("n",)
"""OpenAI fields that are whole numbers (a multipart form sends them as text)."""
MAX_IMAGES = 4
IMAGE_WAIT_S = 3600.0
WAIT_POLL_S = 0.05
"""How often a waiting image request looks at its jobs (on the event loop, no thread)."""


ERROR_TYPES = {400: "invalid_request_error", 404: "not_found_error", 409: "invalid_request_error"}


def _error(status: int, message: str) -> JSONResponse:
    """OpenAI's error shape (its clients read `error.message`); the sentence is paradit's."""
    kind = ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "server_error")
    return JSONResponse(
        {"error": {"message": message, "type": kind, "code": status}}, status_code=status
    )


def parse_size(text: Any) -> tuple[int, int]:
    """OpenAI's `size` "WxH" (e.g. "1280x720") as (width, height)."""
    width, sep, height = str(text).lower().partition("x")
    if not (sep and width.isdigit() and height.isdigit()):
        raise ValueError(f"size must be WIDTHxHEIGHT in pixels (e.g. 832x480), got {text!r}")
    return int(width), int(height)


def frames_for(seconds: Any, limits: Limits) -> int:
    """OpenAI's `seconds` as a frame count the model takes: seconds x fps, to k*multiple+1."""
    try:
        value = float(seconds)
    except (TypeError, ValueError):
        raise ValueError(f"seconds must be a number, got {seconds!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"seconds must be a finite number > 0, got {seconds!r}")
    multiple = limits.frame_multiple or 1
    return max(1, round(value * limits.fps / multiple)) * multiple + 1


def _form_value(name: str, value: Any) -> Any:
    """A multipart form field (text) as the request field's JSON value (or the OpenAI
    field's: `n`)."""
    if not isinstance(value, str) or name not in (*field_names(), *OPENAI_INTS):
        return value
    kind = "int" if name in OPENAI_INTS else find_field(name).kind
    try:
        if kind == "int":
            return int(value)
        if kind == "float":
            return float(value)
        if kind == "json":
            return json.loads(value)
    except ValueError:
        what = {"int": "a whole number", "float": "a number"}.get(kind, "JSON")
        raise ValueError(f"{name} must be {what}, got {value!r}") from None
    return value


def _scalar(text: str) -> Any:
    """A nested form value: a number when it reads as one (forms carry only text)."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _nest(body: dict[str, Any], key: str, value: str) -> None:
    """The `openai` client's form encoding of nested extra fields: `loras[][name]` (a list of
    objects; a repeated key starts the next one), `cache[method]` (an object), `a[]` (a list)."""
    name, _, rest = key.partition("[")
    parts = rest.rstrip("]").split("][")
    if parts == [""]:
        body.setdefault(name, []).append(_scalar(value))
    elif parts[0] == "" and len(parts) == 2:
        items = body.setdefault(name, [])
        if not items or parts[1] in items[-1]:
            items.append({})
        items[-1][parts[1]] = _scalar(value)
    elif len(parts) == 1:
        body.setdefault(name, {})[parts[0]] = _scalar(value)
    else:
        raise ValueError(f"{key}: nested form fields go at most two levels deep; send JSON")


async def read_body(request: Request) -> dict[str, Any]:
    """The body as a dict: JSON, or the multipart form the `openai` client sends for videos
    (an uploaded `input_reference` becomes a base64 image)."""
    if request.headers.get("content-type", "").startswith("multipart/form-data"):
        form = await request.form()
        body: dict[str, Any] = {}
        for key, value in form.multi_items():
            if hasattr(value, "read"):  # an uploaded file; `image[]`: one of several
                data = base64.b64encode(await value.read()).decode()
                if key.endswith("[]"):
                    body.setdefault(key[:-2], []).append(data)
                else:
                    body[key] = data
            elif "[" in key:
                _nest(body, key, value)
            else:
                body[key] = _form_value(key, value)  # ValueError: 422
        return body
    raw = await request.body()
    try:
        body = json.loads(raw or b"null")
    except (ValueError, RecursionError):
        raise BadBody("the body must be a JSON object") from None
    if not isinstance(body, dict):
        raise BadBody("the body must be a JSON object")
    return body


class BadBody(ValueError):
    """The body is not JSON or a form (400)."""


def job_body(
    body: dict[str, Any], limits: Limits, *, video: bool, edit: bool = False
) -> dict[str, Any]:
    """An OpenAI-style body as a `POST /v1/jobs` body (ValueError for what cannot map);
    `edit`: `POST /v1/images/edits`, whose `image` may be a list (the first is the image to
    edit, the others go to `images`)."""
    if edit:
        if body.get("mask") is not None:
            raise ValueError("mask is not supported: paradit's edit models take an instruction")
        body = {key: value for key, value in body.items() if key != "mask"}
        given = body.get("image")
        if isinstance(given, list):
            body["image"] = given[0] if given else None
            if len(given) > 1:
                body["images"] = [*given[1:], *(body.get("images") or [])]
    unknown = sorted(set(body) - set(OPENAI_FIELDS) - set(field_names()))
    if unknown:
        allowed = [*OPENAI_FIELDS, *field_names()]
        raise ValueError(f"unknown fields {unknown}; allowed: {allowed}")
    mapped: dict[str, Any] = {}
    if body.get("size") not in (None, "auto"):
        mapped["width"], mapped["height"] = parse_size(body["size"])
    if video and body.get("seconds") is not None:
        mapped["num_frames"] = frames_for(body["seconds"], limits)
    if body.get("input_reference"):
        mapped["image"] = body["input_reference"]
    own = {name: value for name, value in body.items() if name in field_names()}
    return {**mapped, **own}


def video_object(job: Job, model: str, limits: Limits) -> dict[str, Any]:
    """A job as OpenAI's Video object."""
    request = job.request
    frames = request.num_frames or 1
    failed = job.status in (FAILED, CANCELLED)
    error = None
    if failed:
        code = "cancelled" if job.status == CANCELLED else "generation_failed"
        error = {"code": code, "message": job.error or job.status}
    return {
        "id": job.id,
        "object": "video",
        "model": model,
        "status": "failed" if failed else VIDEO_STATES[job.status],
        "progress": 100 if job.status == SUCCEEDED else int(100 * job.step / max(1, job.total)),
        "created_at": int(job.created),
        "completed_at": int(job.finished) if job.finished else None,
        "expires_at": None,
        "prompt": request.prompt,
        "seconds": f"{(frames - 1) / limits.fps:g}",
        "size": f"{request.width}x{request.height}",
        "error": error,
        "remixed_from_video_id": None,
    }


def add_openai_routes(app: FastAPI, service: Any) -> None:
    """The OpenAI-style routes on `app`, over `service` (the same `submit` and book)."""

    def submit(body: dict[str, Any]) -> Job | JSONResponse:
        return submit_or_reply(service, body, _error)

    def model_name(body: dict[str, Any]) -> str:
        return str(body.get("model") or service.config.model)

    def find(video_id: str) -> Job | JSONResponse:
        job = service.book.get(video_id)
        return job if job is not None else _error(404, f"no video {video_id!r}")

    @app.post("/v1/videos")
    async def create_video(request: Request):
        """Queue a video job (OpenAI-style); poll `GET /v1/videos/{id}`."""
        try:
            body = await read_body(request)
            mapped = job_body(body, service.limits, video=True)
        except ValueError as exc:
            return _error(400 if isinstance(exc, BadBody) else 422, str(exc))
        job = await run_in_threadpool(submit, mapped)
        if isinstance(job, JSONResponse):
            return job
        return video_object(job, model_name(body), service.limits)

    @app.get("/v1/videos/{video_id}")
    def get_video(video_id: str):
        job = find(video_id)
        if isinstance(job, JSONResponse):
            return job
        return video_object(job, service.config.model, service.limits)

    @app.get("/v1/videos/{video_id}/content")
    def video_content(video_id: str, variant: str = "video"):
        """The finished video's mp4 (variant "video"), or its first frame ("thumbnail")."""
        job = find(video_id)
        if isinstance(job, JSONResponse):
            return job
        if job.status != SUCCEEDED:
            return _error(409, f"video {video_id} is {job.status}, not completed")
        names = {
            "video": ("video.mp4", "video/mp4"),
            "thumbnail": ("frames/000000.png", "image/png"),
        }
        if variant not in names:
            return _error(422, f"variant must be one of {sorted(names)}, got {variant!r}")
        name, media = names[variant]
        path = job.out_dir / name
        if job.num_frames == 1 and variant == "video":
            path, media = job.out_dir / "image.png", "image/png"
        if not path.is_file():
            return _error(404, f"video {video_id} has no {variant}")
        return FileResponse(path, media_type=media)

    @app.delete("/v1/videos/{video_id}")
    def delete_video(video_id: str):
        """Cancel a queued or running video; a finished one keeps its files (deleted: false)."""
        job = find(video_id)
        if isinstance(job, JSONResponse):
            return job
        cancelled = job.status not in FINAL_STATES and service.cancel(video_id) is not None
        return {"id": video_id, "object": "video.deleted", "deleted": cancelled}

    @app.post("/v1/images/generations")
    async def generate_images(request: Request):
        """Make `n` images (seeds seed, seed+1, ...) and answer when they are done: each as
        `b64_json` (default) or as a `url` of `GET /v1/jobs/{id}/image`."""
        return await make_images(request, edit=False)

    @app.post("/v1/images/edits")
    async def edit_images(request: Request):
        """Edit `image` (a file, or several as `image[]`; JSON: base64, or a list of them) by
        the prompt, as `/v1/images/generations` answers; `mask` is refused."""
        return await make_images(request, edit=True)

    async def make_images(request: Request, *, edit: bool):
        try:
            body = await read_body(request)
        except ValueError as exc:
            return _error(400 if isinstance(exc, BadBody) else 422, str(exc))
        count = 1 if body.get("n") is None else body["n"]
        fmt = body.get("response_format") or "b64_json"
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_IMAGES:
            return _error(422, f"n must be between 1 and {MAX_IMAGES}, got {count!r}")
        if fmt not in ("b64_json", "url"):
            return _error(422, f"response_format must be b64_json or url, got {fmt!r}")
        try:
            mapped = job_body(body, service.limits, video=False, edit=edit)
        except ValueError as exc:
            return _error(422, str(exc))
        if edit and mapped.get("image") is None:
            return _error(422, "image is required: the image to edit (a file or base64)")
        seed = mapped.get("seed")
        if isinstance(seed, int) and not isinstance(seed, bool) and seed + count - 1 > MAX_SEED:
            return _error(
                422, f"seed + n - 1 must be at most {MAX_SEED} (image i takes seed + i), got {seed}"
            )
        jobs: list[Job] = []
        for index in range(count):
            # image i takes the first job's seed + i: its seed as checked (null: the default)
            body_i = {**mapped, "seed": jobs[0].request.seed + index} if index else mapped
            job = await run_in_threadpool(submit, body_i)
            if isinstance(job, JSONResponse):
                for queued in jobs:
                    service.cancel(queued.id)
                return job
            jobs.append(job)
        await wait_final(jobs)
        data = []
        for job in jobs:
            if job.status != SUCCEEDED:
                return _error(
                    500 if job.status == FAILED else 409, f"job {job.id} {job.status}: {job.error}"
                )
            png = job.out_dir / ("image.png" if job.num_frames == 1 else "frames/000000.png")
            if fmt == "url":
                data.append(
                    {"url": f"{str(request.base_url).rstrip('/')}/v1/jobs/{job.id}/frames/0"}
                )
            else:
                data.append({"b64_json": base64.b64encode(png.read_bytes()).decode()})
        return {"created": int(jobs[0].created), "data": data}


async def wait_final(jobs: list[Job], timeout_s: float = IMAGE_WAIT_S) -> None:
    """Until every job is finished (or `timeout_s` passes), on the event loop: a waiting
    request holds no thread."""
    deadline = time.monotonic() + timeout_s
    while any(job.status not in FINAL_STATES for job in jobs) and time.monotonic() < deadline:
        await asyncio.sleep(WAIT_POLL_S)
