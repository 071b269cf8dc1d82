"""The OpenAI-style endpoints, driven by the `openai` Python client: a tiny-wan video and a
tiny-flux image end to end, cancel by DELETE, and field mapping errors; then the HTTP layer
alone on a stand-in service (the real request rules and job book, jobs finished at once or
never run): `n` of a multipart edit, a null seed with `n`, absurd `seconds`, and `/health`
while 100 image requests wait.

Cost: about 3 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import asyncio
import base64
import re
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from conftest import REFERENCE_FLAGS
from fastapi.testclient import TestClient

from paradit.backend.contract import IMAGE_EDIT, MAX_SEED, TEXT_TO_IMAGE, Limits
from paradit.backend.request import JobRequest
from paradit.backend.serving.http import HttpServer, create_app
from paradit.backend.serving.jobs import Job, JobBook
from paradit.backend.serving.openai_api import frames_for, job_body, parse_size

EXTRA = {"seed": 3, "num_inference_steps": 2, "guidance_scale": 1.0}


@pytest.fixture(scope="module")
def wan(backends):
    return backends.get("tiny-wan", 1, *REFERENCE_FLAGS)


def _openai(client) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{client.url}/v1", api_key="unused", max_retries=0)


def _settled(api: openai.OpenAI, video_id: str, timeout_s: float = 120):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        video = api.videos.retrieve(video_id)
        if video.status in ("completed", "failed"):
            return video
        time.sleep(0.1)
    raise AssertionError(f"video {video_id} did not finish in {timeout_s} s")


def test_video_end_to_end(wan):
    api = _openai(wan)
    video = api.videos.create(prompt="a fox", size="32x32", seconds="0.25", extra_body=EXTRA)
    assert video.status in ("queued", "in_progress") and video.size == "32x32"
    done = _settled(api, video.id)
    assert done.status == "completed" and done.progress == 100 and done.error is None
    assert done.seconds == "0.25"  # 5 frames at 16 fps: (5 - 1) / 16
    job = wan.job(video.id)  # the same job on paradit's own API
    request = job["request"]
    assert (request["width"], request["height"], request["num_frames"]) == (32, 32, 5)
    assert (request["seed"], request["num_inference_steps"], request["guidance_scale"]) == (
        3,
        2,
        1.0,
    )
    content = api.videos.download_content(video.id).read()
    assert content == wan.video(video.id) and content[4:8] == b"ftyp"


def test_video_delete_cancels_and_bad_fields_are_refused(wan):
    api = _openai(wan)
    slow = api.videos.create(
        prompt="slow", size="32x32", extra_body={**EXTRA, "num_inference_steps": 200}
    )
    deleted = api.videos.delete(slow.id)
    assert deleted.deleted is True and deleted.id == slow.id
    done = _settled(api, slow.id)
    assert done.status == "failed" and done.error.code == "cancelled"
    assert wan.job(slow.id)["status"] == "cancelled"
    with pytest.raises(openai.UnprocessableEntityError, match="size must be WIDTHxHEIGHT"):
        api.videos.create(prompt="x", size="big")
    with pytest.raises(openai.UnprocessableEntityError, match="LoRA 'a': no such LoRA"):
        api.videos.create(prompt="x", extra_body={"loras": [{"name": "a", "strength": 1.0}]})
    with pytest.raises(openai.UnprocessableEntityError, match="must be at most 255 bytes"):
        api.videos.create(prompt="x", extra_body={"loras": [{"name": "a" * 300}]})
    with pytest.raises(openai.NotFoundError):
        api.videos.retrieve("nope")


def test_image_end_to_end_as_b64_and_url(backends):
    flux = backends.get("tiny-flux", 1, *REFERENCE_FLAGS)
    api = _openai(flux)
    reply = api.images.generate(
        model="tiny-flux", prompt="a red cube", size="32x32", extra_body=EXTRA, n=2
    )
    assert len(reply.data) == 2
    newest = flux.jobs()[:2]  # newest first: the second image's job, then the first's
    first, second = newest[1], newest[0]
    assert (first["request"]["seed"], second["request"]["seed"]) == (3, 4)
    assert base64.b64decode(reply.data[0].b64_json) == flux.frame(first["id"], 0)
    assert base64.b64decode(reply.data[1].b64_json) == flux.frame(second["id"], 0)
    by_url = api.images.generate(
        prompt="a red cube", size="32x32", response_format="url", extra_body=EXTRA
    )
    png = httpx.get(by_url.data[0].url, timeout=30).content
    assert png == base64.b64decode(reply.data[0].b64_json)  # same request and seed


@pytest.mark.fast
def test_field_mapping():
    limits = Limits("text-to-video", 16, 16, 256, 4, 33, fps=16)
    assert parse_size("832x480") == (832, 480)
    assert [frames_for(s, limits) for s in ("0.25", 1, "2")] == [5, 17, 33]
    body = job_body({"prompt": "x", "size": "64x32", "seconds": "1", "seed": 5}, limits, video=True)
    assert body == {"width": 64, "height": 32, "num_frames": 17, "prompt": "x", "seed": 5}
    # paradit's own fields win over the mapped ones
    assert job_body({"size": "64x32", "width": 16}, limits, video=True)["width"] == 16
    with pytest.raises(ValueError, match=r"unknown fields \['quality'\]"):
        job_body({"prompt": "x", "quality": "hd"}, limits, video=False)
    for seconds in ("inf", "1e400", float("inf"), "-inf", "nan", 0):
        with pytest.raises(ValueError, match="seconds must be a finite number > 0"):
            frames_for(seconds, limits)


# -- the HTTP layer alone (no process group) ---------------------------------------------------

EDIT = Limits(
    task=IMAGE_EDIT, size_multiple=16, min_size=16, max_size=256, frame_multiple=0,
    max_frames=1, needs_image=True, accepts_image=True,
)  # fmt: skip
TEXT = Limits(task=TEXT_TO_IMAGE, size_multiple=16, min_size=16, max_size=256, frame_multiple=0,
              max_frames=1)  # fmt: skip
VIDEO = Limits("text-to-video", 16, 16, 256, 4, 33, fps=16)


class StandInService:
    """What `create_app` uses of `Service`, without a process group: the real request rules
    and job book. `run`: each job "runs" at once, its image.png holding `seed <seed>`;
    otherwise jobs stay queued (a paused queue)."""

    def __init__(self, limits: Limits, out: Path, run: bool = True, max_queue: int = 10):
        self.limits, self.out, self.run = limits, out, run
        self.book = JobBook(max_queue=max_queue, keep=1000)

    def health(self) -> tuple[bool, dict[str, Any]]:
        return True, {"status": "ok"}

    def submit(self, body: Any) -> Job:
        request = JobRequest.from_body(body, self.limits)
        job = self.book.submit(Job(request=request, out_dir=self.out))
        job.out_dir = self.out / job.id
        if self.run:
            assert self.book.next(timeout_s=1) is job
            job.out_dir.mkdir(parents=True)
            (job.out_dir / "image.png").write_text(f"seed {request.seed}")
            job.num_frames = 1
            self.book.finish(job, "succeeded")
        return job

    def cancel(self, job_id: str) -> Job | None:
        return self.book.cancel(job_id)

    def queued(self) -> list[Job]:
        return [job for job in self.book.recent() if job.status == "queued"]


def _seeds(reply: dict[str, Any]) -> list[str]:
    return [base64.b64decode(item["b64_json"]).decode() for item in reply["data"]]


@pytest.mark.fast
def test_images_edit_with_n_from_the_openai_clients_form(tmp_path):
    """The `openai` client sends an edit as a multipart form, where `n` is text."""
    from PIL import Image

    png = tmp_path / "in.png"
    Image.new("RGB", (32, 32), "red").save(png)
    service = StandInService(EDIT, tmp_path)
    http = TestClient(create_app(service), base_url="http://testserver")
    api = openai.OpenAI(base_url="http://testserver/v1", api_key="x", http_client=http)
    with png.open("rb") as image:
        reply = api.images.edit(image=image, prompt="make it blue", n=2, extra_body={"seed": 4})
    assert [base64.b64decode(d.b64_json).decode() for d in reply.data] == ["seed 4", "seed 5"]
    form = {"prompt": "x", "n": "two"}
    files = {"image": ("in.png", png.read_bytes(), "image/png")}
    refused = http.post("/v1/images/edits", data=form, files=files)
    assert refused.status_code == 422 and "n must be a whole number, got 'two'" in refused.text


@pytest.mark.fast
def test_a_null_seed_with_n_takes_the_default_seed_and_each_refusal_queues_nothing(tmp_path):
    service = StandInService(TEXT, tmp_path)
    api = TestClient(create_app(service))
    reply = api.post("/v1/images/generations", json={"prompt": "x", "seed": None, "n": 3})
    assert reply.status_code == 200, reply.text
    assert _seeds(reply.json()) == ["seed 0", "seed 1", "seed 2"]  # the table's default, 0
    count = len(service.book.recent())
    for body, message in (
        ({"seed": MAX_SEED, "n": 2}, rf"seed \+ n - 1 must be at most {MAX_SEED}"),
        ({"seed": "abc", "n": 2}, "seed must be a whole number"),
        ({"seed": -1, "n": 2}, "seed must be between 0"),
        ({"n": 5}, "n must be between 1 and 4"),
    ):
        refused = api.post("/v1/images/generations", json={"prompt": "x", **body})
        assert refused.status_code == 422, refused.text
        assert re.search(message, refused.json()["error"]["message"]), (body, refused.text)
    assert len(service.book.recent()) == count  # nothing queued, nothing left behind
    video = TestClient(create_app(StandInService(VIDEO, tmp_path)))
    for seconds in ("inf", "1e400"):
        refused = video.post("/v1/videos", json={"prompt": "x", "seconds": seconds})
        assert refused.status_code == 422 and "finite number" in refused.text, refused.text


def test_health_answers_within_a_second_while_100_image_requests_wait(tmp_path):
    """Each waiting image request awaits its job on the event loop: none holds one of the
    server's worker threads (40), which `/health` and every synchronous route need."""
    service = StandInService(TEXT, tmp_path, run=False, max_queue=200)  # a paused queue
    server = HttpServer(create_app(service), "127.0.0.1", 0).start()

    async def scenario() -> tuple[float, list[int]]:
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
        async with httpx.AsyncClient(base_url=server.url, limits=limits, timeout=60) as client:
            body = {"prompt": "x", "size": "32x32"}
            waiting = [
                asyncio.create_task(client.post("/v1/images/generations", json=body))
                for _ in range(100)
            ]
            deadline = time.monotonic() + 30
            while len(service.queued()) < 100 and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert len(service.queued()) == 100 and not any(t.done() for t in waiting)
            async with httpx.AsyncClient(base_url=server.url, timeout=5) as probe:
                started = time.perf_counter()
                health = await probe.get("/health")
                took = time.perf_counter() - started
                assert health.status_code == 200
                assert (await probe.get("/v1/jobs")).status_code == 200  # a synchronous route
            for job in service.queued():
                service.cancel(job.id)
            replies = await asyncio.gather(*waiting)
            return took, [reply.status_code for reply in replies]

    try:
        took, codes = asyncio.run(scenario())
    finally:
        server.stop()
    assert took < 1.0, took
    assert codes == [409] * 100  # each answered once its job was cancelled
