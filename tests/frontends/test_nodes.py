"""The ComfyUI node logic (nodes/pool.py, nodes/run.py) without ComfyUI, on real CPU backends.

Cost: about 6 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import io
import json
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import imageio_ffmpeg
import numpy as np
import pytest
import torch
from PIL import Image

from paradit.backend.client.http import BackendError, Client
from paradit.backend.contract import MAX_SEED as BACKEND_MAX_SEED
from paradit.nodes.params import (
    IMAGE_TO_VIDEO,
    MAX_SEED,
    TEXT_TO_IMAGE,
    TEXT_TO_VIDEO,
)
from paradit.nodes.pool import (
    BackendPool,
    BackendSettings,
    find_diffusers_folders,
    resolve_settings,
)
from paradit.nodes.run import (
    Interrupted,
    build_request,
    check_task,
    describe,
    generate,
    image_to_png,
    to_image_tensor,
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def job_values(**overrides) -> dict:
    values = {
        "prompt": "a fox in the snow",
        "negative_prompt": "",
        "width": 32,
        "height": 32,
        "frames": 5,
        "steps": 2,
        "guidance": 5.0,
        "seed": 7,
    }
    return {**values, **overrides}


# -- settings, model folders, requests ---------------------------------------------------------


@pytest.mark.fast
def test_resolve_settings_prefers_url_then_override_then_local_folder(tmp_path):
    folders = {"wan-small": str(tmp_path / "wan-small")}
    assert resolve_settings("tiny-wan", url=" http://h:1/ ") == BackendSettings(url="http://h:1")
    assert resolve_settings("tiny-wan", "org/model", 2, "cuda").model == "org/model"
    local = resolve_settings("wan-small", "", 4, "cpu", "", folders)
    assert local == BackendSettings(model=folders["wan-small"], world_size=4, device="cpu")
    assert resolve_settings("Wan-AI/x", local_folders=folders).model == "Wan-AI/x"


@pytest.mark.parametrize(
    ("kwargs", "rule"),
    [
        ({"url": "localhost:7870"}, "http://"),
        ({"model": "tiny-wan", "world_size": 0}, "world.size"),
        ({"model": "tiny-wan", "device": "tpu"}, "device"),
        ({}, "model"),
    ],
)
@pytest.mark.fast
def test_bad_settings_state_the_rule(kwargs, rule):
    with pytest.raises(ValueError, match=rule):
        BackendSettings(**kwargs)


@pytest.mark.fast
def test_find_diffusers_folders(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    for folder in (first / "wan", first / "org" / "flux", second / "wan", second / "other"):
        folder.mkdir(parents=True)
        (folder / "model_index.json").write_text("{}")
    (first / "wan" / "transformer").mkdir()
    (first / "wan" / "transformer" / "model_index.json").write_text("{}")  # a component: skipped
    (first / "empty").mkdir()
    deep = first / "1" / "2" / "3" / "deep"
    deep.mkdir(parents=True)
    (deep / "model_index.json").write_text("{}")
    modular = second / "MiniMax-H3"  # a modular pipeline's folder (MiniMax H3's)
    (modular / "transformer").mkdir(parents=True)
    (modular / "modular_model_index.json").write_text("{}")
    (modular / "transformer" / "modular_model_index.json").write_text("{}")  # skipped
    (second / "notes").mkdir()
    (second / "notes" / "model_index.txt").write_text("{}")  # no index: not listed
    found = find_diffusers_folders([first, second, tmp_path / "missing"])
    assert found == {
        "MiniMax-H3": str(modular),
        "org/flux": str(first / "org" / "flux"),
        "other": str(second / "other"),
        "wan": str(first / "wan"),
    }


@pytest.mark.fast
def test_seed_bound_fits_the_backend():
    assert MAX_SEED <= BACKEND_MAX_SEED


@pytest.mark.fast
def test_build_request_maps_widgets_to_the_job_fields():
    body = build_request(TEXT_TO_VIDEO, job_values(guidance=3))
    assert body == {
        "prompt": "a fox in the snow",
        "negative_prompt": "",
        "width": 32,
        "height": 32,
        "num_frames": 5,
        "num_inference_steps": 2,
        "guidance_scale": 3.0,
        "seed": 7,
    }
    image_body = build_request(TEXT_TO_IMAGE, {**job_values(), "frames": None} | {"frames": 1})
    assert "num_frames" not in image_body  # not a widget of image nodes: the model's own (1)
    with pytest.raises(ValueError, match="start image"):
        build_request(IMAGE_TO_VIDEO, job_values())


@pytest.mark.fast
def test_check_task_names_both_tasks():
    check_task(TEXT_TO_VIDEO, {"model": "tiny-wan", "task": "text-to-video"})
    with pytest.raises(
        ValueError,
        match="runs text-to-image, but the backend serves .tiny-wan. \\(text-to-video\\)",
    ):
        check_task(TEXT_TO_IMAGE, {"model": "tiny-wan", "task": "text-to-video"})


@pytest.mark.fast
def test_image_tensor_round_trip():
    pixels = np.random.default_rng(0).integers(0, 256, (3, 8, 12, 3), dtype=np.uint8)
    images = to_image_tensor(pixels)
    assert images.dtype == torch.float32 and images.shape == (3, 8, 12, 3)
    assert images.min() >= 0.0 and images.max() <= 1.0
    with Image.open(io.BytesIO(image_to_png(images))) as png:  # first of the batch
        assert np.array_equal(np.asarray(png), pixels[0])
    rgba = torch.cat([images[:1], torch.ones(1, 8, 12, 1)], dim=-1)
    with Image.open(io.BytesIO(image_to_png(rgba))) as png:
        assert png.mode == "RGB" and np.array_equal(np.asarray(png), pixels[0])
    with pytest.raises(ValueError, match="IMAGE tensor"):
        image_to_png(torch.zeros(8, 12))


@pytest.mark.fast
def test_describe_names_plan_and_timings():
    info = {
        "model": "m",
        "task": "text-to-video",
        "world_size": 4,
        "device": "cuda",
        "plan": {
            "cfg_degree": 2,
            "ulysses_degree": 2,
            "ring_degree": 1,
            "modes": ["cfg", "ulysses", "fsdp"],
        },
    }
    job = {
        "id": "j1",
        "num_frames": 5,
        "request": {
            "width": 64,
            "height": 32,
            "seed": 3,
            "num_inference_steps": 4,
            "guidance_scale": 5.0,
        },
        "timings": {"total_s": 1.5, "mean_step_s": 0.25, "decode_s": 0.1},
    }
    text = describe(info, job)
    assert "cfg 2, ulysses 2" in text and "cfg+ulysses+fsdp" in text and "4 x cuda" in text
    assert "64x32, 5 frame(s), 4 steps" in text and "0.250s/step" in text and "seed 3" in text


# -- the backend pool: reuse, restart, errors --------------------------------------------------


class FakeBackend:
    """Stands in for LocalBackend in the pool's bookkeeping tests."""

    started: list[FakeBackend] = []

    def __init__(self, config, *, start_timeout_s, log_file):
        self.config, self.running, self.healthy = config, True, True
        self.client = self
        FakeBackend.started.append(self)

    def alive(self) -> bool:
        return self.running

    def is_healthy(self) -> bool:
        return self.healthy

    def stop(self) -> None:
        self.running = False


@pytest.mark.fast
def test_pool_reuses_restarts_and_replaces_dead_backends(tmp_path):
    FakeBackend.started = []
    pool = BackendPool(tmp_path, starter=FakeBackend)
    wan = BackendSettings(model="tiny-wan", world_size=2, device="cpu")
    first = pool.acquire(wan)
    assert pool.acquire(wan) is first and len(FakeBackend.started) == 1
    first.running = False  # died between prompts
    second = pool.acquire(wan)
    assert second is not first and second.alive()
    second.healthy = False  # lost a rank
    third = pool.acquire(wan)
    assert third is not second and not second.alive()
    flux = pool.acquire(BackendSettings(model="tiny-flux"))
    assert not third.alive() and flux.alive() and flux.config.model == "tiny-flux"
    pool.stop()
    assert not flux.alive() and pool.local is None


@pytest.mark.fast
def test_pool_start_failure_shows_the_backend_log(tmp_path):
    def failing_starter(config, *, start_timeout_s, log_file):
        Path(log_file).write_text("loading...\nValueError: no model at /no-such-model\n")
        raise BackendError("backend exited with code 1 before ready: ")

    pool = BackendPool(tmp_path, starter=failing_starter)
    with pytest.raises(BackendError, match="(?s)before ready.*backend.log.*no model at /no-such"):
        pool.acquire(BackendSettings(model="/no-such-model", device="cpu"))
    assert pool.local is None


def test_pool_keeps_a_real_backend_while_inputs_are_unchanged(tmp_path, warm_local_backends):
    pool = BackendPool(
        tmp_path, threads_per_rank=1, start_timeout_s=300, starter=warm_local_backends
    )
    try:
        cpu = BackendSettings(model="tiny-wan", world_size=1, device="cpu")
        handle = pool.handle(cpu)
        first = pool.local
        assert handle.client().info()["model"] == "tiny-wan"
        assert pool.handle(cpu).client() is first.client and pool.local is first
        auto = BackendSettings(model="tiny-wan", world_size=1, device="auto")
        pool.handle(auto)
        assert pool.local is not first and pool.local.alive()
        assert first.proc.poll() is not None, "the old backend must be stopped"
        with pytest.raises(ProcessLookupError):
            os.killpg(first.proc.pid, 0)  # its whole process group is gone
        assert pool.local.config.device == "auto"
    finally:
        pool.stop()


@pytest.mark.fast
def test_url_with_nothing_listening_fails_fast(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(BackendError, match=f"(?s){url}.*paradit serve"):
        BackendPool(tmp_path).handle(BackendSettings(url=url))
    with pytest.raises(BackendError, match="cannot reach"):
        generate(
            Client(url, timeout_s=5), TEXT_TO_VIDEO, build_request(TEXT_TO_VIDEO, job_values())
        )
    assert time.monotonic() - started < 10


# -- a scripted backend: lost mid-job, stalled --------------------------------------------------


class ScriptedBackend:
    """A tiny HTTP server that accepts one job and then answers as told."""

    def __init__(self, job_status: str = "running"):
        self.job_status, self.cancelled = job_status, False
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, body: dict, status: int = 200) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path == "/v1/info":
                    return self._send({"model": "fake", "task": "text-to-video", "limits": {}})
                self._send(
                    {
                        "id": "j1",
                        "status": owner.job_status,
                        "queue_position": None,
                        "progress": {"step": 1, "total": 4},
                        "error": None,
                    }
                )

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.path.endswith("/cancel"):
                    owner.cancelled = True
                    return self._send({"id": "j1", "status": "running"})
                self._send({"id": "j1", "status": "queued"}, 202)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.fast
def test_backend_lost_mid_job_is_a_clear_error():
    fake = ScriptedBackend()
    steps = []

    def on_step(step: int, total: int) -> None:
        steps.append(step)
        if len(steps) == 2:
            fake.close()  # the backend goes away while the job runs

    started = time.monotonic()
    with pytest.raises(BackendError, match="cannot reach the backend"):
        generate(
            Client(fake.url, timeout_s=5),
            TEXT_TO_VIDEO,
            build_request(TEXT_TO_VIDEO, job_values()),
            on_step=on_step,
            poll_s=0.02,
        )
    assert time.monotonic() - started < 10 and steps == [1, 1]


@pytest.mark.fast
def test_stalled_job_times_out_and_is_cancelled():
    fake = ScriptedBackend()
    try:
        with pytest.raises(BackendError, match="no progress for"):
            generate(
                Client(fake.url, timeout_s=5),
                TEXT_TO_VIDEO,
                build_request(TEXT_TO_VIDEO, job_values()),
                poll_s=0.02,
                stall_timeout_s=0.3,
            )
        assert fake.cancelled
    finally:
        fake.close()


@pytest.mark.fast
def test_unconfirmed_cancel_still_ends_the_wait():
    fake = ScriptedBackend()
    steps: list[int] = []
    try:
        with pytest.raises(Interrupted, match="not confirmed"):
            generate(
                Client(fake.url, timeout_s=5),
                TEXT_TO_VIDEO,
                build_request(TEXT_TO_VIDEO, job_values()),
                on_step=lambda s, t: steps.append(s),
                interrupted=lambda: bool(steps),
                poll_s=0.02,
                cancel_timeout_s=0.3,
            )
        assert fake.cancelled
    finally:
        fake.close()


# -- on a real 2-rank tiny-wan backend ---------------------------------------------------------


@pytest.fixture(scope="module")
def wan(backends) -> Client:
    return backends.get("tiny-wan", 2)


def test_text_to_video_end_to_end(wan, tmp_path):
    steps: list[tuple[int, int]] = []
    result = generate(
        wan,
        TEXT_TO_VIDEO,
        build_request(TEXT_TO_VIDEO, job_values(steps=3)),
        on_step=lambda step, total: steps.append((step, total)),
    )
    images = to_image_tensor(result.frames)
    assert images.shape == (5, 32, 32, 3) and images.dtype == torch.float32
    assert images.min() >= 0.0 and images.max() <= 1.0
    for index in range(5):
        with Image.open(io.BytesIO(wan.frame(result.job["id"], index))) as png:
            expected = torch.from_numpy(np.array(png.convert("RGB"))).float() / 255
        assert torch.equal(images[index], expected), f"frame {index} differs from its PNG"
    assert steps and all(total == 3 for _, total in steps)
    assert [s for s, _ in steps] == sorted(s for s, _ in steps)
    mp4 = tmp_path / "video.mp4"
    mp4.write_bytes(result.video)
    reader = imageio_ffmpeg.read_frames(str(mp4))
    meta = next(reader)
    assert meta["size"] == (32, 32) and meta["fps"] == result.fps == 16
    assert sum(1 for _ in reader) == 5
    assert "ranks: 2 x cpu" in result.info and "5 frame(s)" in result.info


def test_cancel_mid_job_cancels_the_backend_job(wan):
    seen: list[int] = []
    request = build_request(TEXT_TO_VIDEO, job_values(width=256, height=256, steps=200))
    started = time.monotonic()
    with pytest.raises(Interrupted):
        generate(
            wan,
            TEXT_TO_VIDEO,
            request,
            on_step=lambda step, total: seen.append(step),
            interrupted=lambda: bool(seen) and seen[-1] >= 1,
        )
    job = wan.jobs()[0]
    assert job["status"] == "cancelled" and 1 <= job["progress"]["step"] < 200
    assert time.monotonic() - started < 30


def test_backend_rejection_is_surfaced(wan):
    with pytest.raises(
        BackendError, match="width must be between 16 and 2048 and a multiple of 16"
    ):
        generate(wan, TEXT_TO_VIDEO, build_request(TEXT_TO_VIDEO, job_values(width=40)))
    with pytest.raises(ValueError, match="runs text-to-image"):
        generate(wan, TEXT_TO_IMAGE, build_request(TEXT_TO_IMAGE, job_values(frames=1)))
