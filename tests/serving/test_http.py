"""The HTTP API against real 2-rank CPU backends: jobs, cancel, bad input, idle (a lost rank's
job, /health and refused jobs: tests/faults/test_faults.py).

Cost: about 16 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator

import pytest
from conftest import run_job, wait_for

from paradit.backend.client.http import BackendError, Client, JobFailed
from paradit.backend.request import JOB_FIELDS

LONG_JOB = {
    "prompt": "a long one",
    "width": 256,
    "height": 256,
    "num_frames": 17,
    "num_inference_steps": 200,
    "seed": 1,
}


def _post_raw(url: str, data: bytes, headers: dict | None = None) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=data, method="POST", headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _announce_huge_body(url: str) -> int:
    """Send only the headers of a 40 MB body: the server must refuse before reading it."""
    import http.client
    from urllib.parse import urlparse

    parts = urlparse(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    conn.putrequest("POST", "/v1/jobs")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Content-Length", str(40 * 1024 * 1024))
    conn.endheaders()
    status = conn.getresponse().status
    conn.close()
    return status


def _image(png: bytes):
    from PIL import Image

    return Image.open(io.BytesIO(png))


def _png(width: int, height: int, colour: tuple[int, int, int] = (200, 30, 30)) -> str:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


def test_job_cancel_bad_requests_then_serves_again(backends):
    client = backends.get("tiny-wan", 2)
    assert client.health()["status"] == "ok"
    info = client.info()
    assert info["world_size"] == 2 and info["plan"]["cfg_degree"] == 2
    assert [r["rank"] for r in info["ranks"]] == [0, 1]

    job, frames = run_job(client, {"prompt": "a fox", "seed": 1})
    assert job["status"] == "succeeded" and len(frames) == 5
    assert job["progress"] == {"step": 4, "total": 4}
    assert client.video(job["id"])[4:8] == b"ftyp"
    assert job["preview_step"] == 4  # the last step is always previewed
    preview = _image(client.preview(job["id"]))
    assert preview.size == (64, 64) and preview.mode == "RGB"
    record = client.record(job["id"])
    assert record["seed"] == 1 and record["plan"]["world_size"] == 2
    assert record["timings"]["mean_step_s"] > 0 and record["versions"]["torch"]

    # cancel mid-run: every rank stops at the same step and the group stays usable
    job_id = client.submit(LONG_JOB)
    wait_for(lambda: client.job(job_id)["progress"]["step"] >= 1, what="first step")
    assert _image(client.preview(job_id)).size == (256, 256)  # a live preview while it runs
    client.cancel(job_id)
    with pytest.raises(JobFailed, match="cancelled"):
        client.wait(job_id, timeout_s=60)
    cancelled = client.job(job_id)
    assert cancelled["status"] == "cancelled"
    assert 1 <= cancelled["progress"]["step"] < LONG_JOB["num_inference_steps"]

    # a queued job can be cancelled before it starts
    first, second = client.submit(LONG_JOB), client.submit({"prompt": "queued"})
    assert client.cancel(second)["status"] == "cancelled"
    client.cancel(first)
    with pytest.raises(JobFailed):
        client.wait(first, timeout_s=60)

    bad = [
        ({}, "prompt"),
        ({"prompt": ""}, "prompt"),
        ({"prompt": "x", "width": 100}, "multiple of 16"),
        ({"prompt": "x", "height": 8}, "between"),
        ({"prompt": "x", "num_frames": 6}, "4k+1"),
        ({"prompt": "x", "num_inference_steps": 0}, "num_inference_steps"),
        ({"prompt": "x", "guidance_scale": "high"}, "guidance_scale"),
        ({"prompt": "x", "seed": -1}, "seed"),
        ({"prompt": "x", "image": _png(8, 8)}, "image-to-video"),
        ({"prompt": "x", "colour": "red"}, "unknown fields"),
        ({"prompt": "x" * 5000}, "at most"),
        ([1, 2], "JSON object"),
        ({"prompt": "lone \ud800 surrogate"}, "valid Unicode"),
        ({"prompt": "x", "width": 2048, "height": 2048, "num_frames": 257}, "latent tokens"),
    ]
    for body, needle in bad:
        with pytest.raises(BackendError) as err:
            client.submit(body)
        assert err.value.status == 422, body
        assert needle in str(err.value), (body, str(err.value))
    for raw in (
        b"{not json",
        b'{"prompt": "x", "seed": 1' + b"0" * 5000 + b"}",
        b"[" * 100000,
        b"\xff\xfe",
    ):
        status, reply = _post_raw(client.url + "/v1/jobs", raw)
        assert status == 400 and "JSON" in reply["error"], raw[:20]
    assert _announce_huge_body(client.url) == 413
    with pytest.raises(BackendError) as err:
        client.job("nope")
    assert err.value.status == 404
    with pytest.raises(BackendError) as err:
        client.frame(job["id"], 99)
    assert err.value.status == 404
    with pytest.raises(BackendError) as err:
        client.latents(job["id"])  # only kept with --save-latents
    assert err.value.status == 404 and "--save-latents" in str(err.value)
    with pytest.raises(BackendError) as err:
        client._request("GET", f"/v1/jobs/{job['id']}/frames/%C2%B2")  # a superscript two
    assert err.value.status == 400

    # the server still serves, with the same result as before
    again, frames_again = run_job(client, {"prompt": "a fox", "seed": 1})
    assert frames_again == frames
    assert client.jobs()[0]["id"] == again["id"]  # newest first


def test_idle_far_longer_than_the_collective_timeout(backends):
    client = backends.get("tiny-wan", 2, "--timeout", "2")
    run_job(client, {"prompt": "before"})
    time.sleep(7)  # more than three collective timeouts with nothing to do
    assert client.health()["status"] == "ok"
    job, frames = run_job(client, {"prompt": "after", "seed": 2})
    assert job["status"] == "succeeded" and len(frames) == 5


@pytest.fixture
def served_with_token(tmp_path, backends) -> Iterator[Client]:
    """`paradit serve --token s3cret` on tiny-flux (a LocalBackend never passes a token on),
    forked from the worker's zygote (its own session, as a started one)."""
    flags = "--model tiny-flux --world-size 1 --device cpu --threads 1 --port 0 --token s3cret"
    argv = ["serve", *flags.split(), "--output-dir", str(tmp_path / "out")]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    read_end, write_end = os.pipe()
    with open(os.devnull, "wb") as devnull:
        try:
            proc = backends.zygote().spawn(argv, env, os.getcwd(), write_end, devnull.fileno())
        finally:
            os.close(write_end)
    stdout = open(read_end, encoding="utf-8", errors="replace")  # noqa: SIM115
    try:
        line = stdout.readline()  # the ready line, or "" if it exited first
        match = re.search(r"\bready\b.*?(http://\S+)", line)
        assert match, f"no ready line: {line!r}"
        yield Client(match.group(1))
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        stdout.close()


def test_token_is_required_when_set(served_with_token):
    client = served_with_token
    assert Client(client.url).health()["status"] == "ok"  # health stays open
    with pytest.raises(BackendError) as err:
        Client(client.url).info()
    assert err.value.status == 401
    authed = Client(client.url, token="s3cret")
    for path in ("/openapi.json", "/docs"):  # the schema and its docs page are behind it too
        with pytest.raises(BackendError) as err:
            Client(client.url)._request("GET", path)
        assert err.value.status == 401
    schema = json.loads(authed._request("GET", "/openapi.json"))
    body = schema["paths"]["/v1/jobs"]["post"]["requestBody"]["content"]["application/json"]
    assert list(body["schema"]["properties"]) == list(JOB_FIELDS)
    assert b"swagger" in authed._request("GET", "/docs").lower()
    job, frames = run_job(authed, {"prompt": "an image"})
    assert job["num_frames"] == 1 and frames[0][:4] == b"\x89PNG"
    assert _image(authed.preview(job["id"])).size == (64, 64)  # Flux latents are packed
    # the OpenAI-style routes, as the `openai` client calls them, with its api_key as token
    import openai

    def api(key: str) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{client.url}/v1", api_key=key, max_retries=0)

    extra = {"num_inference_steps": 2, "seed": 3}
    image = api("s3cret").images.generate(prompt="a cube", size="32x32", extra_body=extra)
    assert base64.b64decode(image.data[0].b64_json)[:4] == b"\x89PNG"
    video = api("s3cret").videos.create(prompt="a cube", size="32x32", extra_body=extra)
    assert api("s3cret").videos.retrieve(video.id).id == video.id
    for call in (
        lambda wrong: wrong.images.generate(prompt="x", size="32x32", extra_body=extra),
        lambda wrong: wrong.images.edit(image=b"x", prompt="x"),
        lambda wrong: wrong.videos.create(prompt="x"),
        lambda wrong: wrong.videos.retrieve(video.id),
        lambda wrong: wrong.videos.download_content(video.id),
        lambda wrong: wrong.videos.delete(video.id),
    ):
        with pytest.raises(openai.AuthenticationError) as refused:  # 401
            call(api("wrong"))
        assert "missing or wrong token" in refused.value.response.text
    assert len(authed.jobs()) == 3  # the refused calls queued nothing


def test_image_to_video(backends, references):
    client = backends.get("tiny-wan-i2v", 2)
    assert client.info()["limits"]["needs_image"] is True
    with pytest.raises(BackendError, match="image is required"):
        client.submit({"prompt": "x"})
    with pytest.raises(BackendError, match="could not be decoded"):
        client.submit({"prompt": "x", "image": base64.b64encode(b"not a png").decode()})
    first = {"prompt": "the ball rolls", "image": _png(40, 24, (20, 90, 200)), "seed": 4}
    body = {"prompt": "the ball rolls", "image": _png(40, 24), "seed": 4}
    run_job(client, first)  # an earlier job's image must not leak into the next
    job, frames = run_job(client, body)
    assert job["status"] == "succeeded" and len(frames) == 5
    assert references.frames("tiny-wan-i2v", body) == frames
