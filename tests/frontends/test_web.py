"""The Gradio app (`paradit ui`) driven by gradio_client against a real 2-rank tiny-wan backend.

One app is served in this process for the module; `test_cli_*` runs the `paradit ui` command
(`cli.main`, login on, a backend it starts itself, forked from the worker's zygote) and stops
it with SIGTERM.

Cost: about 18 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import io
import logging
import os
import re
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import imageio_ffmpeg
import numpy as np
import pytest
from conftest import REFERENCE_FLAGS, wait_for
from gradio_client import Client as GradioClient
from gradio_client import handle_file
from PIL import Image

from paradit.backend.client.http import Client
from paradit.backend.client.summary import backend_summary
from paradit.backend.config import frontend_settings
from paradit.backend.request import JOB_FIELDS
from paradit.web.app import launch, parse_auth
from paradit.web.forms import job_body, pick_seed, size_presets
from paradit.web.progress import ProgressClock, progress_text
from paradit.web.settings import READ_ONLY_NOTE
from paradit.web.ui import build_ui

SMALL = {"width": 64, "height": 64, "num_frames": 5, "num_inference_steps": 2}
LONG = {"width": 256, "height": 256, "num_frames": 5, "num_inference_steps": 200}


def job_args(prompt: str, **overrides: Any) -> dict[str, Any]:
    """Keyword arguments of the `/generate` endpoint (the `POST /v1/jobs` fields)."""
    return {
        "prompt": prompt,
        "negative_prompt": "",
        "guidance_scale": 5.0,
        "seed": 7,
        "image": None,
        **SMALL,
        **overrides,
    }


def status_of(html: str) -> str:
    return re.search(r'data-status="(\w+)"', html).group(1)


def job_id_of(html: str) -> str:
    return re.search(r'data-job="(\w+)"', html).group(1)


def path_of(output: Any) -> Path:
    """A file output as gradio_client returns it (a path, or a dict holding one)."""
    if isinstance(output, dict):
        output = output.get("video") or output.get("image") or output.get("path")
    return Path(output)


def luma(rgb: np.ndarray) -> np.ndarray:
    return rgb.astype(float) @ np.array([0.299, 0.587, 0.114])


def statuses(job) -> list[str]:
    return [out[0] for out in job.outputs()]


@pytest.fixture(scope="module")
def ui(backends, tmp_path_factory) -> Iterator[SimpleNamespace]:
    client = backends.get("tiny-wan", 2)
    out = tmp_path_factory.mktemp("ui-outputs")
    demo = build_ui(client, out, poll_s=0.1)
    url = launch(demo, out)
    downloads = tmp_path_factory.mktemp("gradio-client")
    try:
        yield SimpleNamespace(url=url, backend=client, out=out, downloads=downloads)
    finally:
        demo.close()


def gradio(ui: SimpleNamespace) -> GradioClient:
    """A new browser-like session on the app."""
    return GradioClient(ui.url, verbose=False, download_files=str(ui.downloads))


# -- end to end through gradio_client ----------------------------------------------------------


def test_generate_returns_the_backends_video_and_frames(ui):
    app = gradio(ui)
    status, video, gallery, info, files = app.predict(**job_args("a red fox"), api_name="/generate")
    assert status_of(status) == "succeeded"
    job_id = job_id_of(status)
    backend = ui.backend
    assert backend.job(job_id)["status"] == "succeeded"
    assert path_of(video).read_bytes() == backend.video(job_id)
    frames = [path_of(item).read_bytes() for item in gallery]
    assert frames == [backend.frame(job_id, i) for i in range(5)]
    # the mp4 decodes to 5 frames of 64x64 whose brightness matches the lossless PNGs (H.264
    # 4:2:0 blurs colour; a wrong frame is off by ~40 levels, the right one by ~4)
    reader = imageio_ffmpeg.read_frames(str(path_of(video)))
    meta = next(reader)
    decoded = [np.frombuffer(f, np.uint8).reshape(64, 64, 3) for f in reader]
    assert meta["size"] == (64, 64) and len(decoded) == 5
    pngs = [np.asarray(Image.open(io.BytesIO(png))) for png in frames]
    for got, want in zip(decoded, pngs, strict=True):
        assert np.abs(luma(got) - luma(want)).mean() < 8
    # info and downloads; the job's own folder under the output dir
    assert info["seed"] == 7 and info["id"] == job_id
    assert info["plan"] == backend.info()["plan"] and "total_s" in info["timings"]
    assert sorted(Path(f).name for f in files) == ["frames.zip", "job.json", "video.mp4"]
    folder = ui.out / job_id
    assert info["output_folder"] == str(folder)
    assert sorted(p.name for p in folder.iterdir()) == [
        "frames",
        "frames.zip",
        "job.json",
        "video.mp4",
    ]


def test_bad_request_is_refused_with_the_backends_rule(ui):
    with pytest.raises(Exception, match="multiple of 16"):
        gradio(ui).predict(**job_args("a fox", width=72), api_name="/generate")


def _running_job_id(ui, job) -> str:
    """The backend id of a submitted generate event, once its first step is done."""
    html = wait_for(
        lambda: next((s for s in statuses(job) if "data-job" in s), None),
        60,
        "the job to be submitted",
    )
    job_id = job_id_of(html)
    wait_for(lambda: ui.backend.job(job_id)["progress"]["step"] >= 1, 60, "step 1")
    return job_id


def test_cancel_cancels_the_backend_job_and_progress_is_live(ui):
    app = gradio(ui)
    job = app.submit(**job_args("a long one", **LONG), api_name="/generate")
    job_id = _running_job_id(ui, job)
    wait_for(
        lambda: any("Step " in s and "of 200" in s and "elapsed" in s for s in statuses(job)),
        30,
        "step i of N in the status panel",
    )
    wait_for(
        lambda: any(" left" in s and "about" in s for s in statuses(job)),
        30,
        "an estimate of the time left",
    )
    app.predict(api_name="/cancel")
    final = job.result(timeout=60)
    assert status_of(final[0]) == "cancelled"
    assert ui.backend.job(job_id)["status"] == "cancelled"
    assert ui.backend.job(job_id)["progress"]["step"] < 200


def test_leaving_the_event_cancels_the_backend_job(ui, caplog):
    caplog.set_level(logging.INFO, logger="paradit.web.ui")
    job = gradio(ui).submit(**job_args("abandoned", **LONG), api_name="/generate")
    job_id = _running_job_id(ui, job)
    job.cancel()  # Gradio's own cancel: the browser event ends, not only the UI's view of it
    wait_for(
        lambda: ui.backend.job(job_id)["status"] == "cancelled",
        30,
        "the backend job to be cancelled",
    )
    assert f"cancelled job {job_id}: its browser event ended" in caplog.text


def test_two_sessions_share_the_backend_queue(ui):
    """A job from elsewhere holds the backend (200 steps) until both sessions' jobs are seen
    waiting behind it, the second behind the first; then it is cancelled and both run."""
    blocker = ui.backend.submit({"prompt": "ahead of both", **LONG, "seed": 1})
    wait_for(lambda: ui.backend.job(blocker)["progress"]["step"] >= 1, 60, "the blocker to run")
    first, second = gradio(ui), gradio(ui)
    first_job = first.submit(**job_args("first"), api_name="/generate")
    wait_for(
        lambda: any("backend queue at position 1" in s for s in statuses(first_job)),
        60,
        "the first session's job to wait at position 1",
    )
    second.predict(api_name="/cancel")  # another session's Cancel leaves the first's job alone
    second_job = second.submit(**job_args("second"), api_name="/generate")
    wait_for(
        lambda: any("backend queue at position 2" in s for s in statuses(second_job)),
        60,
        "the second session's job to wait at position 2, behind the first",
    )
    ui.backend.cancel(blocker)
    results = [first_job.result(timeout=120), second_job.result(timeout=120)]
    assert [status_of(r[0]) for r in results] == ["succeeded", "succeeded"]
    assert ui.backend.job(blocker)["status"] == "cancelled"
    ids = [job_id_of(r[0]) for r in results]
    assert ids[0] != ids[1] and all((ui.out / i / "video.mp4").is_file() for i in ids)


def test_history_shows_any_backend_job(ui):
    job = ui.backend.wait(
        ui.backend.submit({"prompt": "made elsewhere", **SMALL, "seed": 3}), timeout_s=60
    )
    video, gallery, info, files = gradio(ui).predict(job["id"], api_name="/job")
    assert path_of(video).read_bytes() == ui.backend.video(job["id"])
    assert len(gallery) == 5 and info["request"]["prompt"] == "made elsewhere"
    assert (ui.out / job["id"] / "frames.zip").is_file()
    with pytest.raises(Exception, match="job id"):
        gradio(ui).predict("../etc", api_name="/job")


def test_named_api_takes_the_job_fields(ui):
    api = gradio(ui).view_api(print_info=False, return_format="dict")["named_endpoints"]
    assert sorted(api) == ["/cancel", "/generate", "/job"]
    names = [p["parameter_name"] for p in api["/generate"]["parameters"]]
    assert names == list(JOB_FIELDS)  # the fields of POST /v1/jobs, in order
    image = next(p for p in api["/generate"]["parameters"] if p["parameter_name"] == "image")
    assert image["parameter_has_default"] and image["parameter_default"] is None


def test_loras_picked_in_the_form_reach_the_job(ui, backends):
    """The form's LoRA list is the `loras` field: a job given it records the LoRA applied."""
    import torch
    from safetensors.torch import save_file

    from paradit.web.forms import add_lora

    generator = torch.Generator().manual_seed(9)
    module = "transformer.blocks.1.ffn.net.2"  # tiny-wan: 128 -> 64
    save_file(
        {
            f"{module}.lora_A.weight": torch.randn(2, 128, generator=generator),
            f"{module}.lora_B.weight": torch.randn(64, 2, generator=generator),
        },
        str(backends.lora_dir / "web.safetensors"),
    )
    assert "web.safetensors" in ui.backend.loras()
    picked = add_lora(add_lora(None, "web.safetensors", 0.5, "both"), "web", None, "high")
    assert picked == [
        {"name": "web.safetensors", "strength": 0.5},
        {"name": "web", "high": 1.0, "low": 0.0},
    ]
    with pytest.raises(ValueError, match="choose a LoRA"):
        add_lora(picked, None, 1.0, "both")
    status, *_, info, _ = gradio(ui).predict(
        **job_args("a red fox", loras=picked[:1]), api_name="/generate"
    )
    assert status_of(status) == "succeeded"
    assert [(item["name"], item["strength"]) for item in info["loras"]] == [
        ("web.safetensors", 0.5)
    ]


def test_settings_of_a_backend_it_did_not_start_are_read_only(ui):
    """The app was given a client (as with --server): the Backend tab shows what the backend
    reports, says why it cannot change it, and has no Apply (no apply_settings API)."""
    config = httpx.get(ui.url.rstrip("/") + "/config").json()
    props = [c.get("props", {}) for c in config["components"]]
    assert any(READ_ONLY_NOTE in str(p.get("value")) for p in props)
    settings = {s.widget for s in frontend_settings()}
    shown = {p["label"]: p for p in props if p.get("label") in settings}
    assert set(shown) == settings and not any(p["interactive"] for p in shown.values())
    assert (shown["gpus"]["value"], shown["dp_degree"]["value"]) == (2, 1)
    assert (shown["offload"]["value"], shown["no_shard"]["value"]) == ("auto", False)
    assert shown["encoder_placement"]["value"] == "auto"
    plan = next(p["value"] for p in props if str(p.get("label", "")).startswith("Memory plan"))
    assert plan == backend_summary(ui.backend.info()) and "memory plan:" in plan


def test_generate_without_an_image_for_text_to_video(ui):
    args = job_args("no image argument at all", seed=3)
    del args["image"]
    status, video, gallery, _info, _files = gradio(ui).predict(**args, api_name="/generate")
    job_id = job_id_of(status)
    assert status_of(status) == "succeeded"
    assert ui.backend.job(job_id)["request"]["image"] is None
    assert [path_of(g).read_bytes() for g in gallery] == [
        ui.backend.frame(job_id, i) for i in range(5)
    ]


def test_image_to_video_mode_needs_and_sends_the_start_image(backends, tmp_path):
    client = backends.get("tiny-wan-i2v", 1, *REFERENCE_FLAGS)
    demo = build_ui(client, tmp_path / "out", poll_s=0.1)
    url = launch(demo, tmp_path / "out")
    try:
        image = tmp_path / "start.png"
        Image.new("RGB", (64, 64), (200, 40, 30)).save(image)
        app = GradioClient(url, verbose=False, download_files=str(tmp_path / "dl"))
        with pytest.raises(Exception, match="needs a start image"):
            app.predict(**job_args("no image"), api_name="/generate")
        status, video, gallery, _info, _files = app.predict(
            **job_args("from an image", image=handle_file(str(image))), api_name="/generate"
        )
        job_id = job_id_of(status)
        assert status_of(status) == "succeeded"
        assert [path_of(g).read_bytes() for g in gallery] == [
            client.frame(job_id, i) for i in range(5)
        ]
        assert path_of(video).read_bytes() == client.video(job_id)
    finally:
        demo.close()


# -- pure helpers ------------------------------------------------------------------------------


@pytest.mark.fast
def test_forms_presets_seed_and_body():
    limits = {
        "size_multiple": 16,
        "min_size": 16,
        "max_size": 2048,
        "default_width": 832,
        "default_height": 480,
        "needs_image": False,
    }
    presets = size_presets(limits)
    assert presets[0] == ("Default (832×480)", "832x480") and presets[-1][1] == "custom"
    for _, value in presets[:-1]:
        width, height = map(int, value.split("x"))
        assert width % 16 == 0 and height % 16 == 0
    assert pick_seed(5, randomize=False) == 5
    assert 0 <= pick_seed(5, randomize=True) < 2**32
    assert 0 <= pick_seed(-1, randomize=False) < 2**32
    body = job_body(
        prompt="p",
        negative_prompt=None,
        width=64.0,
        height=64,
        num_frames=5,
        num_inference_steps=4,
        guidance_scale=5,
        seed=9,
        image=None,
        limits=limits,
    )
    assert body == {
        "prompt": "p",
        "negative_prompt": "",
        "width": 64,
        "height": 64,
        "num_frames": 5,
        "num_inference_steps": 4,
        "guidance_scale": 5.0,
        "seed": 9,
    }
    with pytest.raises(ValueError, match="whole number"):
        job_body(**{**body, "width": 64.5, "image": None, "limits": limits})
    with pytest.raises(ValueError, match="start image"):
        job_body(**{**body, "image": None, "limits": {**limits, "needs_image": True}})


@pytest.mark.fast
def test_the_step_cache_pick_is_the_cache_field():
    from paradit.web.forms import cache_value

    assert cache_value("off", 0.5) is None and cache_value(None, None) is None
    assert cache_value("first-block", None) == {"method": "first-block", "threshold": 0.05}
    assert cache_value("first-block", 0.3) == {"method": "first-block", "threshold": 0.3}
    with pytest.raises(ValueError, match="cache method must be one of"):
        cache_value("teacache", 0.3)
    with pytest.raises(ValueError, match="cache threshold must be a number > 0"):
        cache_value("first-block", 0.0)


@pytest.mark.fast
def test_the_form_offers_the_step_cache_only_where_the_model_has_one():
    """The step-cache picker is in the form for a model with a step cache; for one without
    (Z-Image's `limits.step_cache` false) the `cache` field is a hidden API input."""
    import gradio as gr

    from paradit.backend.contract import TEXT_TO_IMAGE, Limits
    from paradit.web.ui import _form

    def accordions(step_cache: bool) -> list[str]:
        limits = Limits(TEXT_TO_IMAGE, 16, 16, 256, 0, 1, step_cache=step_cache).to_dict()
        with gr.Blocks() as demo:
            form = _form({"model": "tiny-z-image", "limits": limits}, [])
        assert "cache" in form.inputs  # an API parameter either way
        return [b.label for b in demo.blocks.values() if isinstance(b, gr.Accordion)]

    assert "Step cache" in accordions(True)
    assert "Step cache" not in accordions(False)


@pytest.mark.fast
def test_progress_estimate():
    clock = ProgressClock(started=100.0)
    job = {"id": "j", "status": "running", "progress": {"step": 2, "total": 10}}
    assert "estimating" in progress_text(job, clock, 101.0)  # first step seen: no rate yet
    job["progress"]["step"] = 4
    assert progress_text(job, clock, 103.0) == (
        "Step 4 of 10 · elapsed 3.0 s · about 6.0 s left"
    )  # 1 s per step, 6 steps left
    queued = {"id": "j", "status": "queued", "queue_position": 2, "progress": {}}
    assert "position 3" in progress_text(queued, clock, 104.0)


@pytest.mark.fast
def test_parse_auth():
    assert parse_auth(None) is None and parse_auth("a:b:c") == ("a", "b:c")
    for bad in ("nopass", ":x", "x:"):
        with pytest.raises(ValueError, match="user:pass"):
            parse_auth(bad)


# -- the command, with login -------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class UiCommand:
    """`paradit ui` run as `cli.main` in this worker's main thread (the command's own parsing,
    login from PARADIT_UI_AUTH, root path, backend start, signal handling and exit code), while
    a test body runs in a thread beside it. The backends it starts are `paradit serve` forked
    from the worker's zygote (`warm_local_backends`), its restarts included; a fresh `paradit
    ui` interpreter is test_cli's `test_exposed_without_a_token_or_login_is_refused`."""

    def __init__(self, caplog: pytest.LogCaptureFixture):
        self.caplog = caplog
        self.done = threading.Event()  # main() returned (or raised)
        self.default_sigterm = signal.getsignal(signal.SIGTERM)

    def line_with(self, text: str, timeout_s: float = 240) -> str:
        """The first log message of the command that holds `text`."""

        def found() -> str | None:
            line = next((m for m in self.caplog.messages if text in m), None)
            if line is None and self.done.is_set():
                raise AssertionError(f"paradit ui returned before logging {text!r}")
            return line

        return wait_for(found, timeout_s, repr(text))

    def sigterm(self) -> None:
        """SIGTERM to this process once the command handles it (never to pytest itself)."""
        wait_for(
            lambda: self.done.is_set() or signal.getsignal(signal.SIGTERM) != self.default_sigterm,
            60,
            "paradit ui's SIGTERM handler",
        )
        if not self.done.is_set():
            os.kill(os.getpid(), signal.SIGTERM)

    def run(self, argv: list[str], body: Callable[[], None]) -> int:
        """`main(argv)` here, `body()` in a thread; SIGTERM once `body` ends (however it
        ends); returns main's exit code, after re-raising what `body` raised."""
        from paradit.backend.tools.cli import main

        failure: list[BaseException] = []

        def checks() -> None:
            try:
                body()
            except BaseException as exc:  # re-raised in the test's thread
                failure.append(exc)
            finally:
                self.sigterm()

        thread = threading.Thread(target=checks, daemon=True)
        thread.start()
        try:
            code = main(argv)
        finally:
            self.done.set()
            thread.join(timeout=120)
        if failure:
            raise failure[0]
        assert not thread.is_alive(), "the checks did not end"
        return code


def test_cli_login_root_path_backend_settings_and_clean_stop(
    warm_local_backends, monkeypatch, caplog, tmp_path
):
    port = free_port()
    url, out = f"http://127.0.0.1:{port}", tmp_path / "out"
    monkeypatch.setenv("PARADIT_UI_AUTH", "alice:s3cret")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    caplog.set_level(logging.INFO, logger="paradit")
    flags = "--model tiny-wan --world-size 1 --device cpu --threads 1 --root-path /paradit"
    argv = ["ui", *flags.split(), "--port", str(port), "--output-dir", str(out)]
    command = UiCommand(caplog)
    started: list[int] = []  # the rank pids of the backend it runs when stopped

    def checks() -> None:
        ready = command.line_with("paradit ui ready at")
        assert ready.startswith(f"paradit ui ready at {url}") and "login required" in ready
        first = Client(re.search(r"backend (http://\S+),", ready).group(1))
        # login required: the page config and the API refuse an unauthenticated caller
        assert httpx.get(f"{url}/config").status_code == 401
        assert httpx.post(f"{url}/gradio_api/call/generate", json={"data": []}).status_code == 401
        with pytest.raises(Exception, match="credentials"):
            GradioClient(url, verbose=False)
        with httpx.Client() as session:
            wrong = session.post(f"{url}/login", data={"username": "alice", "password": "nope"})
            assert wrong.status_code == 400
            session.post(f"{url}/login", data={"username": "alice", "password": "s3cret"})
            proxied = {"X-Forwarded-Host": "example.org", "X-Forwarded-Proto": "https"}
            config = session.get(f"{url}/config", headers=proxied).json()
            assert config["root"] == "https://example.org/paradit"  # links go through the proxy
        app = GradioClient(url, auth=("alice", "s3cret"), verbose=False,
                           download_files=str(tmp_path / "dl"))  # fmt: skip
        status = app.predict(**job_args("with login"), api_name="/generate")[0]
        assert status_of(status) == "succeeded"
        assert (out / job_id_of(status) / "video.mp4").is_file()
        # the Backend tab's settings reach the backend: a rule broken changes nothing; Apply
        # restarts the backend with 2 ranks as 2 replicas, the DiT offloaded, the VAE tiled
        old_pids = [rank["pid"] for rank in first.info()["ranks"]]
        rule = "--dp-degree must be >= 1 and divide the world size 1"
        with pytest.raises(Exception, match=rule):
            app.predict(dp_degree=3, api_name="/apply_settings")
        assert all(_alive(pid) for pid in old_pids) and first.health()["status"] == "ok"
        _panel, plan = app.predict(
            gpus=2, dp_degree=2, offload="model", vae_tiling="on", api_name="/apply_settings"
        )
        restarted = command.line_with("backend restarted at")
        backend = Client(re.search(r"backend restarted at (http://\S+)", restarted).group(1))
        info = backend.info()
        assert (info["world_size"], info["plan"]["dp_degree"], len(info["replicas"])) == (2, 2, 2)
        memory = info["memory"]
        assert (memory["settings"]["offload"], memory["settings"]["vae_tiling"]) == ("model", "on")
        assert (memory["dit"], memory["reference_job"]["decode"]) == ("offload-model", "tiled")
        assert "replicas: 2" in plan and "DiT: offload-model (offload: model)" in plan
        for pid in old_pids:
            wait_for(lambda pid=pid: not _alive(pid), 30, f"old backend rank pid {pid} to exit")
        # the app's jobs now run on the restarted backend
        status = app.predict(**job_args("after the restart"), api_name="/generate")[0]
        assert status_of(status) == "succeeded"
        assert backend.job(job_id_of(status))["status"] == "succeeded"
        started.extend(rank["pid"] for rank in info["ranks"])

    # SIGTERM (sent once the checks end): exit 0, and the backend it started is gone too
    assert command.run(argv, checks) == 0
    assert len(started) == 2
    for pid in started:
        wait_for(lambda pid=pid: not _alive(pid), 30, f"backend rank pid {pid} to exit")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie that nobody reaped yet counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.fast
def test_settings_read_from_info_take_what_was_asked():
    """`/v1/info` reports the attention kernel with how it resolved: the settings panel of a
    backend it did not start shows the choice asked for (a value among the widget's choices)."""
    from paradit.web.settings import values_from_info

    info = {
        "world_size": 2,
        "plan": {},
        "memory": {"settings": {}},
        "attention": {"asked": "math", "kernel": "math", "lossy": False, "reason": "asked"},
    }
    assert values_from_info(info)["attention"] == "math"
