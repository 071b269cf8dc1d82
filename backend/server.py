"""The HTTP API on rank 0 (FastAPI, served by uvicorn in a thread). JSON in, JSON out."""

from __future__ import annotations

import hmac
import json
import logging
import socket
import threading
import time
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from .jobs import FINAL, Job, QueueFull
from .outputs import FRAMES_DIR, LATENTS_FILE, frame_name
from .service import Service

log = logging.getLogger(__name__)

MAX_TEXT_BODY = 256 * 1024


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _job_view(service: Service, job: Job) -> dict[str, Any]:
    view = job.to_dict()
    view["queue_position"] = service.book.position(job)
    return view


def create_app(service: Service, token: str | None = None) -> FastAPI:
    app = FastAPI(title="paradit", docs_url=None, redoc_url=None, openapi_url=None)
    max_body = service.runtime.limits.max_image_bytes * 4 // 3 + MAX_TEXT_BODY

    @app.middleware("http")
    async def authorize(request: Request, call_next):
        if token and request.url.path != "/health":
            given = request.headers.get("authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                return error(401, "missing or wrong token: send 'Authorization: Bearer <token>'")
        return await call_next(request)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException):
        return error(exc.status_code, str(exc.detail))

    def find(job_id: str) -> Job | JSONResponse:
        job = service.book.get(job_id)
        return job if job is not None else error(404, f"no job {job_id!r}")

    @app.get("/health")
    def health():
        ok, detail = service.health()
        return JSONResponse(detail, status_code=200 if ok else 503)

    @app.get("/v1/info")
    def info():
        return service.info()

    @app.post("/v1/jobs")
    async def submit(request: Request):
        too_big = error(413, f"the body must be at most {max_body} bytes")
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > max_body):
            return too_big
        raw = bytearray()
        async for chunk in request.stream():  # bounded even without a Content-Length
            raw += chunk
            if len(raw) > max_body:
                return too_big
        try:
            body = json.loads(raw or b"null")
        except (ValueError, RecursionError):  # bad JSON, bad UTF-8, absurd numbers or nesting
            return error(400, "the body must be a JSON object with the job fields")
        try:
            # Image decoding and the health check block: keep them off the event loop.
            job = await run_in_threadpool(service.submit, body)
        except ValueError as exc:
            return error(422, str(exc))
        except QueueFull as exc:
            return error(429, str(exc))
        except RuntimeError as exc:
            return error(503, str(exc))
        return JSONResponse({"id": job.id, "status": job.status}, status_code=202)

    @app.get("/v1/jobs")
    def jobs():
        return {"jobs": [_job_view(service, job) for job in service.book.recent()]}

    @app.get("/v1/jobs/{job_id}")
    def job(job_id: str):
        found = find(job_id)
        return found if isinstance(found, JSONResponse) else _job_view(service, found)

    @app.post("/v1/jobs/{job_id}/cancel")
    def cancel(job_id: str):
        found = service.cancel(job_id)
        if found is None:
            return error(404, f"no job {job_id!r}")
        return _job_view(service, found)

    def finished_file(job_id: str, name: str, media: str):
        found = find(job_id)
        if isinstance(found, JSONResponse):
            return found
        if found.status != "succeeded":
            state = found.status if found.status in FINAL else f"{found.status}, not finished"
            return error(409, f"job {job_id} has no outputs: it is {state}")
        path = found.out_dir / name
        if not path.is_file():
            return error(404, f"job {job_id} has no {name}")
        return FileResponse(path, media_type=media)

    @app.get("/v1/jobs/{job_id}/video")
    def video(job_id: str):
        return finished_file(job_id, "video.mp4", "video/mp4")

    @app.get("/v1/jobs/{job_id}/image")
    def image(job_id: str):
        return finished_file(job_id, "image.png", "image/png")

    @app.get("/v1/jobs/{job_id}/record")
    def record(job_id: str):
        return finished_file(job_id, "job.json", "application/json")

    @app.get("/v1/jobs/{job_id}/latents")
    def latents(job_id: str):
        """The job's final latents as .npy (float32), when the backend runs --save-latents."""
        found = service.book.get(job_id)
        if found is not None and found.status == "succeeded" and LATENTS_FILE not in found.files:
            return error(404, f"job {job_id} has no latents: start the backend with --save-latents")
        return finished_file(job_id, LATENTS_FILE, "application/octet-stream")

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
        return finished_file(job_id, f"{FRAMES_DIR}/{frame_name(int(index))}", "image/png")

    return app


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
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
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
