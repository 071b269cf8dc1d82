"""The HTTP layer alone (no process group): body checks, error shapes, the OpenAPI schema.

`create_app` runs in this process on a stand-in service that validates with the real
`JobRequest.from_body` and queues into a real `JobBook`.

Cost: about 5 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from paradit.backend.config import ServeConfig
from paradit.backend.contract import MAX_SEED, TEXT_TO_VIDEO, Limits
from paradit.backend.request import JOB_FIELDS, JobRequest
from paradit.backend.serving.http import MAX_TEXT_BODY, create_app
from paradit.backend.serving.jobs import Job, JobBook

pytestmark = pytest.mark.fast

LIMITS = Limits(
    task=TEXT_TO_VIDEO,
    size_multiple=16,
    min_size=16,
    max_size=256,
    frame_multiple=4,
    max_frames=33,
    max_image_bytes=3 * 1024,
)
MAX_BODY = LIMITS.max_image_bytes * 4 // 3 + MAX_TEXT_BODY


class StandInService:
    """What `create_app` uses of `Service`, without a process group."""

    def __init__(self, max_queue: int = 1):
        self.limits = LIMITS
        self.config = ServeConfig(model="tiny-wan")  # no --comfyui-dir: workflows refused
        self.book = JobBook(max_queue=max_queue, keep=10)
        self.broken: str | None = None
        self.received: list[Any] = []

    def health(self) -> tuple[bool, dict[str, Any]]:
        return self.broken is None, {"status": "ok" if self.broken is None else "unavailable"}

    def info(self) -> dict[str, Any]:
        return {"limits": LIMITS.to_dict()}

    def submit(self, body: Any) -> Job:
        self.received.append(body)
        request = JobRequest.from_body(body, LIMITS)
        if self.broken:
            raise RuntimeError(f"backend is not healthy: {self.broken}")
        return self.book.submit(Job(request=request, out_dir=Path("unused")))

    def cancel(self, job_id: str) -> Job | None:
        return self.book.cancel(job_id)

    def lora_names(self) -> list[str]:
        return []


@pytest.fixture
def service() -> StandInService:
    return StandInService()


@pytest.fixture
def api(service) -> TestClient:
    return TestClient(create_app(service))


def _refused(reply, status: int) -> str:
    assert reply.status_code == status, reply.text
    body = reply.json()
    assert list(body) == ["error"] and isinstance(body["error"], str)
    return body["error"]


def test_a_good_body_is_queued_with_only_the_fields_sent(api, service):
    reply = api.post("/v1/jobs", json={"prompt": "a fox", "guidance_scale": 3, "seed": 5})
    assert reply.status_code == 202
    assert reply.json() == {"id": reply.json()["id"], "status": "queued"}
    assert service.received == [{"prompt": "a fox", "guidance_scale": 3.0, "seed": 5}]
    job = api.get(f"/v1/jobs/{reply.json()['id']}").json()
    assert job["request"]["width"] == LIMITS.default_width  # the model's default filled in
    assert job["queue_position"] == 0 and job["progress"] == {"step": 0, "total": 4}
    assert api.get("/v1/jobs").json()["jobs"][0]["id"] == job["id"]
    assert api.post(f"/v1/jobs/{job['id']}/cancel").json()["status"] == "cancelled"


def test_json_is_read_whatever_the_content_type(api):
    body = json.dumps({"prompt": "sent the way curl -d sends it"}).encode()
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    assert api.post("/v1/jobs", content=body, headers=form).status_code == 202


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "prompt is required"),
        ({"prompt": 5}, "prompt must be a string, got a number"),
        ({"prompt": "x", "negative_prompt": ["a"]}, "negative_prompt must be a string, got an"),
        ({"prompt": "x", "width": True}, "width must be a whole number, got True"),
        ({"prompt": "x", "width": 64.0}, "width must be a whole number, got 64.0"),
        ({"prompt": "x", "width": "6" * 100}, "width must be a whole number, got '666"),
        ({"prompt": "x", "width": None}, "width must be a whole number, got None"),
        ({"prompt": "x", "guidance_scale": "high"}, "guidance_scale must be a number, got 'high'"),
        ({"prompt": "x", "guidance_scale": False}, "guidance_scale must be a number, got False"),
        ({"prompt": "x", "guidance_scale": -1}, "guidance_scale must be at least 0, got -1"),
        ({"prompt": "x", "num_inference_steps": 0}, "num_inference_steps must be at least 1"),
        ({"prompt": "x", "seed": -1}, f"seed must be between 0 and {MAX_SEED}, got -1"),
        ({"prompt": "x", "seed": MAX_SEED + 1}, f"seed must be between 0 and {MAX_SEED}"),
        ({"prompt": "x", "colour": "red", "b": 1}, "unknown fields ['b', 'colour']; allowed: "),
        ([1, 2], "the body must be a JSON object with the job fields"),
        # the model's own rules, from JobRequest.from_body
        ({"prompt": "  "}, "prompt must be a non-empty string"),
        ({"prompt": "x", "width": 100}, "width must be between 16 and 256 and a multiple of 16"),
        ({"prompt": "x", "num_frames": 6}, "num_frames must be 4k+1 between 1 and 33"),
        ({"prompt": "x", "num_inference_steps": 201}, "num_inference_steps must be between 1"),
        ({"prompt": "lone \ud800 surrogate"}, "prompt must be valid Unicode text"),
        ({"prompt": "x", "image": "aGk="}, "image is only accepted by image-to-video models"),
        # LIMITS has no step cache (Flux.2, Klein, Qwen-Image-Edit, Z-Image): refused at submit
        ({"prompt": "x", "cache": {"method": "first-block"}}, "this model has no step cache"),
    ],
)
def test_invalid_fields_get_422_and_one_sentence(api, service, body, message):
    reply = api.post("/v1/jobs", content=json.dumps(body).encode())
    error = _refused(reply, 422)
    assert error.startswith(message), error
    assert "\n" not in error and "Input should" not in error  # not pydantic's own list
    assert not service.book.recent()


def test_a_cache_is_queued_where_the_model_has_a_step_cache(service):
    cached = dataclasses.replace(LIMITS, step_cache=True)
    service.limits = cached
    service.submit = lambda body: service.book.submit(
        Job(request=JobRequest.from_body(body, cached), out_dir=Path("unused"))
    )
    reply = TestClient(create_app(service)).post(
        "/v1/jobs", json={"prompt": "x", "cache": {"method": "first-block", "threshold": 0.2}}
    )
    assert reply.status_code == 202, reply.text
    (job,) = service.book.recent()
    assert job.request.cache == {"method": "first-block", "threshold": 0.2}


def test_not_json_gets_400(api):
    for raw in (b"{not json", b'{"prompt": "x", "seed": 1' + b"0" * 5000 + b"}", b"[" * 100000):
        error = _refused(api.post("/v1/jobs", content=raw), 400)
        assert error == "the body must be a JSON object with the job fields"
    error = _refused(api.post("/v1/jobs", content=b"\xff\xfe"), 400)
    assert "JSON" in error


def test_too_large_bodies_get_413_announced_or_chunked(api, service):
    message = f"the body must be at most {MAX_BODY} bytes"
    big = json.dumps({"prompt": "x" * MAX_BODY}).encode()
    assert _refused(api.post("/v1/jobs", content=big), 413) == message
    chunks = (big[i : i + 4096] for i in range(0, len(big), 4096))  # no Content-Length
    assert _refused(api.post("/v1/jobs", content=chunks), 413) == message
    small = json.dumps({"prompt": "x"}).encode()
    bad_length = {"Content-Length": "12abc"}
    assert _refused(api.post("/v1/jobs", content=small, headers=bad_length), 413) == message
    assert service.received == []


def test_queue_full_gets_429_and_unhealthy_gets_503(api, service):
    assert api.post("/v1/jobs", json={"prompt": "first"}).status_code == 202
    error = _refused(api.post("/v1/jobs", json={"prompt": "second"}), 429)
    assert error == "the queue is full (1 jobs); try again later"
    service.broken = "rank 1 lost"
    error = _refused(api.post("/v1/jobs", json={"prompt": "third"}), 503)
    assert error == "backend is not healthy: rank 1 lost"


def test_unknown_jobs_routes_and_frames_keep_the_error_shape(api):
    assert _refused(api.get("/v1/jobs/nope"), 404) == "no job 'nope'"
    assert _refused(api.post("/v1/jobs/nope/cancel"), 404) == "no job 'nope'"
    assert _refused(api.get("/v1/nothing"), 404) == "Not Found"
    assert _refused(api.delete("/v1/jobs"), 405) == "Method Not Allowed"
    error = _refused(api.get("/v1/jobs/nope/frames/%C2%B2"), 400)
    assert error == "the frame index must be a whole number >= 0"


def test_openapi_schema_lists_the_job_fields():
    api = TestClient(create_app(StandInService()))
    schema = api.get("/openapi.json").json()
    post = schema["paths"]["/v1/jobs"]["post"]
    body = post["requestBody"]["content"]["application/json"]["schema"]
    assert list(body["properties"]) == list(JOB_FIELDS)
    assert body["required"] == ["prompt"] and body["additionalProperties"] is False
    seed = body["properties"]["seed"]
    assert seed["minimum"] == 0 and seed["maximum"] == pytest.approx(MAX_SEED)  # as a float
    assert body["properties"]["width"]["type"] == "integer"
    assert "default" not in body["properties"]["width"]  # the model's default, not null
    assert "202" in post["responses"] and "4XX" in post["responses"]
    assert "422" not in schema["paths"]["/v1/jobs/{job_id}"]["get"]["responses"]
    assert set(schema["paths"]) >= {"/health", "/v1/info", "/v1/jobs", "/v1/jobs/{job_id}"}
    docs = api.get("/docs")
    assert docs.status_code == 200 and "/openapi.json" in docs.text


def test_docs_and_schema_need_the_token_when_one_is_set():
    api = TestClient(create_app(StandInService(), token="s3cret"))
    for path in ("/docs", "/openapi.json", "/v1/info"):
        error = _refused(api.get(path), 401)
        assert "Authorization: Bearer" in error
        assert api.get(path, headers={"Authorization": "Bearer s3cret"}).status_code == 200
    assert api.get("/health").status_code == 200
    # refused before the body is looked at
    big = {"Content-Length": str(40 * 1024 * 1024)}
    assert _refused(api.post("/v1/jobs", content=b"{}", headers=big), 401)


@pytest.mark.fast
def test_cors_origins_may_call_it_from_a_browser_with_the_token_and_others_may_not():
    """A page from a `--cors-origin` origin (ComfyUI's, for "Queue on paradit") gets its
    preflight answered without the token and its replies marked readable; any other origin,
    and every origin without the flag, gets no CORS header."""
    comfy = "http://127.0.0.1:8188"
    config = ServeConfig(model="tiny-wan", cors_origins=(comfy,))
    api = TestClient(create_app(StandInService(), "s3cret", config.cors_origins))
    preflight = {
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type",
    }
    ok = api.options("/v1/workflows", headers={"Origin": comfy, **preflight})
    assert ok.status_code == 200 and ok.headers["access-control-allow-origin"] == comfy
    assert "authorization" in ok.headers["access-control-allow-headers"].lower()
    reply = api.get("/v1/info", headers={"Origin": comfy, "Authorization": "Bearer s3cret"})
    assert reply.status_code == 200 and reply.headers["access-control-allow-origin"] == comfy
    refused = api.get("/v1/info", headers={"Origin": comfy})  # the token is still needed
    assert refused.status_code == 401 and refused.headers["access-control-allow-origin"] == comfy
    other = api.options("/v1/workflows", headers={"Origin": "http://evil.test", **preflight})
    assert other.status_code == 400 and "access-control-allow-origin" not in other.headers
    plain = TestClient(create_app(StandInService()))
    assert (
        "access-control-allow-origin"
        not in plain.get("/v1/info", headers={"Origin": comfy}).headers
    )
    for bad in ("127.0.0.1:8188", "http://127.0.0.1:8188/", "ftp://x", "http://"):
        with pytest.raises(ValueError, match="--cors-origin"):
            ServeConfig(model="tiny-wan", cors_origins=(bad,))


OPENAI_ROUTES = {
    ("POST", "/v1/videos"),
    ("GET", "/v1/videos/{video_id}"),
    ("DELETE", "/v1/videos/{video_id}"),
    ("GET", "/v1/videos/{video_id}/content"),
    ("POST", "/v1/images/generations"),
    ("POST", "/v1/images/edits"),
}


def test_every_route_but_health_needs_the_token_the_openai_ones_too():
    """Every route the app serves, found in the app itself (a route added later is checked
    too): without the token 401 before anything else, with it anything but 401."""
    app = create_app(StandInService(), token="s3cret")
    routes = {
        (method, route.path)
        for route in app.routes
        for method in getattr(route, "methods", None) or ()
        if method != "HEAD"
    }
    assert routes >= OPENAI_ROUTES
    api = TestClient(app)
    good = {"Authorization": "Bearer s3cret"}
    for method, path in sorted(routes):
        url = path.replace("{", "").replace("}", "")  # /v1/videos/video_id, ...
        if path == "/health":
            assert api.request(method, url).status_code == 200
            continue
        body = {"n": 0}  # refused at once by the image routes, which would wait for a job
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
            reply = api.request(method, url, json=body, headers=headers)
            assert reply.status_code == 401, (method, path, headers, reply.text)
            assert "Authorization: Bearer" in reply.json()["error"]
        reply = api.request(method, url, json=body, headers=good)
        assert reply.status_code != 401, (method, path)


def test_fastapis_own_validation_errors_keep_the_shape():
    app = create_app(StandInService())

    @app.get("/typed/{count}")
    def typed(count: int) -> dict[str, int]:  # a typed parameter, as a later route may have
        return {"count": count}

    api = TestClient(app)
    assert api.get("/typed/3").json() == {"count": 3}
    error = _refused(api.get("/typed/three"), 422)
    assert error.startswith("count: ") and "integer" in error


# -- safe at the door -------------------------------------------------------------------------


def _corrupt_png() -> str:
    """A PNG whose chunks all have valid CRCs but whose pixel data does not inflate."""
    import base64
    import io
    import struct
    import zlib

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (16, 16), "red").save(buffer, format="PNG")
    raw = buffer.getvalue()
    start = raw.index(b"IDAT") - 4
    (length,) = struct.unpack(">I", raw[start : start + 4])
    garbage = bytes(range(length)) if length < 256 else b"\x00" * length
    chunk = b"IDAT" + garbage
    fixed = struct.pack(">I", length) + chunk + struct.pack(">I", zlib.crc32(chunk))
    return base64.b64encode(raw[:start] + fixed + raw[start + 12 + length :]).decode()


def test_corrupt_pixel_data_is_refused_at_submit():
    i2v = Limits(**{**LIMITS.to_dict(), "task": "image-to-video", "needs_image": True})
    with pytest.raises(ValueError, match="could not be decoded"):
        JobRequest.from_body({"prompt": "x", "image": _corrupt_png()}, i2v)


def test_huge_frame_indexes_and_dot_segments_get_json_4xx(api, service):
    job_id = api.post("/v1/jobs", json={"prompt": "x"}).json()["id"]
    huge = "9" * 30
    assert "no frame" in _refused(api.get(f"/v1/jobs/{job_id}/frames/{huge}"), 404)
    reply = api.get("/v1/jobs/..%2F", follow_redirects=False)
    assert reply.status_code == 404 and "location" not in reply.headers
    _refused(reply, 404)


def test_queue_full_says_when_to_retry(api, service):
    assert api.post("/v1/jobs", json={"prompt": "a"}).status_code == 202
    reply = api.post("/v1/jobs", json={"prompt": "b"})
    assert "try again" in _refused(reply, 429) and int(reply.headers["retry-after"]) > 0


@pytest.fixture
def served(service, monkeypatch):
    from paradit.backend.serving import http

    monkeypatch.setattr(http, "HEADER_TIMEOUT_S", 1.0)
    monkeypatch.setattr(http, "BODY_TIMEOUT_S", 1.0)
    server = http.HttpServer(create_app(service), "127.0.0.1", 0).start()
    yield server
    server.stop()


def _closed_within(sock, timeout_s: float) -> bytes:
    """What the server sent before closing the connection; fails if it stays open."""
    sock.settimeout(timeout_s)
    received = b""
    while True:
        chunk = sock.recv(4096)
        if not chunk:
            return received
        received += chunk


def test_slow_headers_and_slow_bodies_are_cut_off(served):
    import socket

    with socket.create_connection(("127.0.0.1", served.port)) as slow_headers:
        slow_headers.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # never finished
        assert _closed_within(slow_headers, 10) == b""
    with socket.create_connection(("127.0.0.1", served.port)) as slow_body:
        head = b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"
        slow_body.sendall(head)  # 99 bytes never come
        reply = _closed_within(slow_body, 10)
    assert reply.startswith(b"HTTP/1.1 408") and b"did not arrive" in reply
