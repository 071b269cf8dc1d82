"""The HTTP API on rank 0 (FastAPI, served by uvicorn in a thread). JSON in, JSON out.

Every 4xx reply is `{"error": "<what is wrong and what is allowed>"}`. The OpenAPI schema and
its docs page are at `/openapi.json` and `/docs`, behind the token like everything but
`/health`. Pages from the `--cors-origin` origins may call it from a browser (ComfyUI's
"Queue on paradit" command); their preflight requests need no token.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import socket
import threading
import time
from pathlib import Path
from typing import Annotated, Any

import uvicorn
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import FileResponse, JSONResponse, Response
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from ... import __version__
from ..audio import AUDIO_FILE
from ..contract import FINAL_STATES
from .jobs import Job
from .openai_api import add_openai_routes
from .outputs import AUDIO_LATENTS_FILE, FRAMES_DIR, LATENTS_FILE, frame_name
from .replies import error, submit_or_reply
from .schema import (
    ErrorReply,
    JobCreated,
    JobList,
    JobView,
    describe,
    job_body_model,
    job_body_schema,
)
from .service import Service
from .workflows import dry_run_reply, plan_for_server

log = logging.getLogger(__name__)

MAX_TEXT_BODY = 256 * 1024
BODY_TIMEOUT_S = 30.0
HEADER_TIMEOUT_S = 10.0
SLOW_BODY = f"the body did not arrive within {BODY_TIMEOUT_S:.0f} s"
MAX_FRAME_INDEX = 999_999


def _job_view(service: Service, job: Job) -> dict[str, Any]:
    view = job.to_dict()
    view["queue_position"] = service.book.position(job)
    return view


class BodyLimit:
    """Refuse request bodies over `max_bytes` with 413 before anything parses them: at once
    when Content-Length announces more, else as the bytes arrive (chunked bodies); and a body
    that takes longer than BODY_TIMEOUT_S to arrive with 408."""

    def __init__(self, app: ASGIApp, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes
        self.message = f"the body must be at most {max_bytes} bytes"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = Headers(scope=scope).get("content-length")
        if length is not None and not (
            length.isascii() and length.isdigit() and int(length) <= self.max_bytes
        ):
            await error(413, self.message)(scope, receive, send)
            return
        received = 0
        deadline = time.monotonic() + BODY_TIMEOUT_S

        async def counted() -> dict[str, Any]:
            nonlocal received
            try:
                message = await asyncio.wait_for(receive(), deadline - time.monotonic())
            except (TimeoutError, ValueError):
                raise HTTPException(408, SLOW_BODY) from None
            received += len(message.get("body", b""))
            if received > self.max_bytes:
                raise HTTPException(413, self.message)  # answered by the app's handler
            return message

        await self.app(scope, counted, send)


async def json_body(request: Request) -> Any:
    """The body as JSON whatever its Content-Type (`curl -d` sends JSON as a form); 400 when
    it is not JSON."""
    raw = await request.body()
    try:
        return json.loads(raw or b"null")
    except (ValueError, RecursionError):  # bad JSON, bad UTF-8, absurd numbers or nesting
        raise HTTPException(400, "the body must be a JSON object with the job fields") from None


async def job_body(request: Request) -> Any:
    """The `POST /v1/jobs` body, checked by the request table's model (`job_body_model`):
    400 when it is not JSON, 422 when a field is wrong."""
    data = await json_body(request)
    try:
        return job_body_model().model_validate(data)
    except ValidationError as exc:
        raise HTTPException(422, describe(exc.errors())) from None


def body_openapi(schema: dict[str, Any]) -> dict[str, Any]:
    """A route that reads its body itself states the body's schema (FastAPI's recipe)."""
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def create_app(
    service: Service, token: str | None = None, cors_origins: tuple[str, ...] = ()
) -> FastAPI:
    app = FastAPI(
        title="paradit",
        version=__version__,
        docs_url="/docs",
        redoc_url=None,
        redirect_slashes=False,  # a redirect would be built from the client's Host header
        openapi_url="/openapi.json",
        responses={"4XX": {"model": ErrorReply, "description": "The request was refused"}},
    )
    max_body = service.limits.max_image_bytes * 4 // 3 + MAX_TEXT_BODY
    app.add_middleware(BodyLimit, max_bytes=max_body)  # added first: runs after `authorize`

    @app.middleware("http")
    async def authorize(request: Request, call_next):
        if token and request.url.path != "/health":
            given = request.headers.get("authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                return error(401, "missing or wrong token: send 'Authorization: Bearer <token>'")
        return await call_next(request)

    if cors_origins:  # added last: outermost, so a preflight needs no token
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(cors_origins),
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "Content-Type"],
        )

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException):
        return error(exc.status_code, str(exc.detail))

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, exc: RequestValidationError):
        return error(422, describe(exc.errors()))

    def find(job_id: str) -> Job | JSONResponse:
        job = service.book.get(job_id)
        return job if job is not None else error(404, f"no job {job_id!r}")

    @app.get("/health")
    def health():
        """200 when every rank is alive and ready, 503 otherwise."""
        ok, detail = service.health()
        return JSONResponse(detail, status_code=200 if ok else 503)

    @app.get("/v1/info")
    def info():
        """The model, world size, device, parallel plan, limits, versions and ranks."""
        return service.info()

    @app.get("/v1/loras")
    def loras():
        """The LoRAs under --lora-dir, by the names jobs give them (`loras[].name`)."""
        return {"loras": [{"name": name} for name in service.lora_names()]}

    @app.post(
        "/v1/jobs",
        status_code=202,
        response_model=JobCreated,
        openapi_extra=body_openapi(job_body_schema()),
    )
    async def submit(body: Annotated[Any, Depends(job_body)]):
        """Queue a job; 429 when the queue is full, 503 when the backend is not healthy."""
        # Image decoding and the health check block: keep them off the event loop.
        job = await run_in_threadpool(submit_or_reply, service, body.fields())
        if isinstance(job, JSONResponse):
            return job
        return JobCreated(id=job.id, status=job.status)

    @app.post("/v1/workflows", status_code=202)
    async def submit_workflow(request: Request, dry_run: bool = False):
        """Queue a ComfyUI workflow (UI or API format) as a job: 202 {id, status, request};
        `?dry_run=1`: 200 with what `paradit workflow import --json` prints; 422 naming the
        node or the file it refuses (files resolve only inside --comfyui-dir, and must be
        the ones this backend runs)."""
        data = await json_body(request)
        sha256 = hashlib.sha256(await request.body()).hexdigest()
        samplers = tuple(service.limits.samplers)
        try:
            plan, variant = await run_in_threadpool(
                plan_for_server, data, sha256, service.config.comfyui_dir, service.config,
                samplers,
            )  # fmt: skip
        except ValueError as exc:  # WorkflowError, WorkflowRefused, a file's own refusal
            return error(422, str(exc))
        if dry_run:
            return JSONResponse(dry_run_reply(plan, variant, samplers), status_code=200)
        job = await run_in_threadpool(submit_or_reply, service, plan.body())
        if isinstance(job, JSONResponse):
            return job
        return {"id": job.id, "status": job.status, "request": plan.request}

    @app.get("/v1/jobs", response_model=JobList)
    def jobs():
        """Recent jobs, newest first."""
        return {"jobs": [_job_view(service, job) for job in service.book.recent()]}

    @app.get("/v1/jobs/{job_id}", response_model=JobView)
    def job(job_id: str):
        """A job's status, progress, queue position, timings and error."""
        found = find(job_id)
        return found if isinstance(found, JSONResponse) else _job_view(service, found)

    @app.post("/v1/jobs/{job_id}/cancel", response_model=JobView)
    def cancel(job_id: str):
        """Stop the job at the next step boundary on every rank."""
        found = service.cancel(job_id)
        if found is None:
            return error(404, f"no job {job_id!r}")
        return _job_view(service, found)

    def finished_file(job_id: str, name: str, media: str):
        found = find(job_id)
        if isinstance(found, JSONResponse):
            return found
        if found.status != "succeeded":
            done = found.status in FINAL_STATES
            state = found.status if done else f"{found.status}, not finished"
            return error(409, f"job {job_id} has no outputs: it is {state}")
        folder = found.out_dir.resolve()
        path = (folder / name).resolve()
        if not path.is_relative_to(folder) or not path.is_file():  # only the job's own files
            return error(404, f"job {job_id} has no {name}")
        return FileResponse(path, media_type=media)

    @app.get("/v1/jobs/{job_id}/video")
    def video(job_id: str):
        return finished_file(job_id, "video.mp4", "video/mp4")

    @app.get("/v1/jobs/{job_id}/audio")
    def audio(job_id: str):
        """The audio track generated with the video (LTX-2), as 16-bit WAV."""
        return finished_file(job_id, AUDIO_FILE, "audio/wav")

    @app.get("/v1/jobs/{job_id}/image")
    def image(job_id: str):
        return finished_file(job_id, "image.png", "image/png")

    @app.get("/v1/jobs/{job_id}/record")
    def record(job_id: str):
        found = finished_file(job_id, "job.json", "application/json")
        if isinstance(found, FileResponse):  # read whole: it is replaced once the frames are in
            return Response(Path(found.path).read_bytes(), media_type="application/json")
        return found

    def latents_file(job_id: str, name: str, missing: str):
        found = service.book.get(job_id)
        if found is not None and found.status == "succeeded" and name not in found.files:
            return error(404, f"job {job_id} has no {missing}")
        return finished_file(job_id, name, "application/octet-stream")

    @app.get("/v1/jobs/{job_id}/latents")
    def latents(job_id: str):
        """The job's final latents as .npy (float32), when the backend runs --save-latents."""
        return latents_file(job_id, LATENTS_FILE, "latents: start the backend with --save-latents")

    @app.get("/v1/jobs/{job_id}/audio_latents")
    def audio_latents(job_id: str):
        """The job's final audio latents as .npy (float32): --save-latents on a model with an
        audio track (LTX-2, MiniMax H3)."""
        return latents_file(
            job_id,
            AUDIO_LATENTS_FILE,
            "audio latents: its model makes no audio, or the backend runs without --save-latents",
        )

    @app.get("/v1/jobs/{job_id}/preview")
    def preview(job_id: str):
        found = find(job_id)
        if isinstance(found, JSONResponse):
            return found
        png = found.preview_png
        if png is None:
            return error(404, f"job {job_id} has no preview yet")
        return Response(
            png, media_type="image/png", headers={"X-Preview-Step": str(found.preview_step)}
        )

    @app.get("/v1/jobs/{job_id}/frames/{index}")
    def frame(job_id: str, index: str):
        if not (index.isascii() and index.isdigit()):
            return error(400, "the frame index must be a whole number >= 0")
        if len(index) > len(str(MAX_FRAME_INDEX)) or int(index) > MAX_FRAME_INDEX:
            return error(404, f"job {job_id} has no frame {index[:20]}")
        found = service.book.get(job_id)
        if found is not None and found.status == "succeeded":
            png = service.writer.frame_png(found, int(index))  # not on disk yet
            if png is not None:
                return Response(png, media_type="image/png")
        return finished_file(job_id, f"{FRAMES_DIR}/{frame_name(int(index))}", "image/png")

    add_openai_routes(app, service)  # /v1/videos and /v1/images/generations
    return app


class HeaderDeadline(H11Protocol):
    """uvicorn's HTTP/1.1 protocol, closing a connection whose request headers take longer
    than HEADER_TIMEOUT_S. uvicorn times out idle keep-alive connections but waits for
    headers forever, so a slow client could hold connections open without end."""

    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm()  # the next request's headers, on a kept-alive connection

    def handle_events(self) -> None:
        super().handle_events()
        if self.cycle is not None and not self.cycle.response_complete:
            self._disarm()  # a request's headers arrived; BodyLimit bounds its body

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._header_timer = self.loop.call_later(HEADER_TIMEOUT_S, self._too_slow)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _too_slow(self) -> None:
        if (self.cycle is None or self.cycle.response_complete) and not self.transport.is_closing():
            self.transport.close()


class HttpServer:
    """uvicorn in a background thread, on a socket bound before it starts."""

    def __init__(self, app: FastAPI, host: str, port: int):
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.sock.bind((host, port))
        except OSError as exc:
            self.sock.close()
            raise ValueError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
        self.sock.listen(128)  # connections queue from now on, before uvicorn runs
        self.host, self.port = host, self.sock.getsockname()[1]
        config = uvicorn.Config(
            app, log_level="warning", access_log=False, lifespan="off", http=HeaderDeadline
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, name="http", daemon=True
        )

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self, timeout_s: float = 30.0) -> HttpServer:
        self.thread.start()
        deadline = time.monotonic() + timeout_s
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the HTTP server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()
