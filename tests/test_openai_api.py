"""The OpenAI-style endpoints, driven by the `openai` Python client: a tiny-wan video and a
tiny-flux image end to end, cancel by DELETE, and field mapping errors.

Cost: about 3 s (in the suite's two-worker run on 2 cores).
"""

from __future__ import annotations

import base64
import time

import httpx
import openai
import pytest

from paradit.backend.contract import Limits
from paradit.backend.serving.openai_api import frames_for, job_body, parse_size

EXTRA = {"seed": 3, "num_inference_steps": 2, "guidance_scale": 1.0}


@pytest.fixture(scope="module")
def wan(backends):
    return backends.get("tiny-wan", 1)


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
    with pytest.raises(openai.NotFoundError):
        api.videos.retrieve("nope")


def test_image_end_to_end_as_b64_and_url(backends):
    flux = backends.get("tiny-flux", 1)
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
