"""Pure logic, no process started: the plan choice, request validation, the job book, the
group-health rule, control messages and the serve configuration (`pytest -m fast`).

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import base64
import io
from pathlib import Path

import pytest

from paradit.backend.config import BACKEND, SERVING, ServeConfig, add_flags
from paradit.backend.contract import FINAL_STATES, JOB_STATES, Limits
from paradit.backend.parallel.plan import ParallelPlan, choose_plan
from paradit.backend.request import JOB_FIELDS, JobRequest
from paradit.backend.runtime.messages import (
    Reply,
    RunJob,
    Shutdown,
    combine,
    from_json,
    to_json,
)
from paradit.backend.serving.jobs import Job, JobBook, QueueFull

pytestmark = pytest.mark.fast

WAN = Limits(
    task="text-to-video",
    size_multiple=16,
    min_size=16,
    max_size=2048,
    frame_multiple=4,
    max_frames=257,
    min_tokens=2,
    max_tokens=4096,
)
I2V = Limits(**{**WAN.to_dict(), "task": "image-to-video", "needs_image": True})


# -- the parallel plan ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("world_size", "supports_cfg", "expected"),
    [
        (1, True, (1, 1, 1)),
        (2, True, (2, 1, 1)),
        (3, True, (1, 3, 1)),
        (4, True, (2, 2, 1)),
        (6, True, (2, 3, 1)),
        (4, False, (1, 4, 1)),
    ],
)
def test_automatic_plan(world_size, supports_cfg, expected):
    plan = choose_plan(world_size, supports_cfg=supports_cfg, device_type="cpu")
    assert (plan.cfg_degree, plan.ulysses_degree, plan.ring_degree) == expected
    assert plan.world_size == world_size


def test_explicit_degrees_and_their_rules():
    plan = choose_plan(4, supports_cfg=True, device_type="cpu", cfg_degree=1)
    assert (plan.cfg_degree, plan.ulysses_degree) == (1, 4)
    ring = choose_plan(4, supports_cfg=True, device_type="cuda", ring_degree=2)
    assert (ring.cfg_degree, ring.ring_degree, ring.ulysses_degree) == (2, 2, 1)
    with pytest.raises(ValueError, match="needs CUDA"):
        choose_plan(2, supports_cfg=True, device_type="cpu", ring_degree=2)
    with pytest.raises(ValueError, match="must divide the world size"):
        choose_plan(3, supports_cfg=True, device_type="cpu", cfg_degree=2)
    with pytest.raises(ValueError, match="classifier-free guidance"):
        choose_plan(2, supports_cfg=False, device_type="cpu", cfg_degree=2)
    with pytest.raises(ValueError, match="must equal the world size"):
        choose_plan(4, supports_cfg=True, device_type="cpu", cfg_degree=1, ulysses_degree=3)
    with pytest.raises(ValueError, match="cannot be combined"):
        ParallelPlan(1, 2, 2)


def test_plan_document_names_its_modes():
    doc = ParallelPlan(2, 2, 1, True).to_dict()
    assert doc["modes"] == ["cfg", "ulysses", "fsdp"] and doc["world_size"] == 4
    assert ParallelPlan().to_dict()["sharded"] is False  # one rank has nothing to shard


# -- request validation ---------------------------------------------------------------------


def _png() -> str:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), "red").save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def test_a_valid_request_takes_the_model_defaults():
    request = JobRequest.from_body({"prompt": "a fox"}, WAN)
    assert (request.width, request.height, request.num_frames) == (64, 64, 5)
    assert request.seed == 0 and request.uses_cfg
    assert JobRequest.from_dict(request.to_dict()) == request
    assert set(request.to_dict()) == set(JOB_FIELDS)


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ([], "JSON object"),
        ({"prompt": " "}, "non-empty"),
        ({"prompt": "x", "colour": 1}, "unknown fields"),
        ({"prompt": "x", "width": 100}, "multiple of 16"),
        ({"prompt": "x", "width": True}, "whole number"),
        ({"prompt": "x", "num_frames": 6}, "4k\\+1"),
        ({"prompt": "x", "num_inference_steps": 0}, "between 1 and 200"),
        ({"prompt": "x", "guidance_scale": float("nan")}, "between 0 and 30"),
        ({"prompt": "x", "seed": -1}, "seed must be between"),
        ({"prompt": "\ud800"}, "valid Unicode"),
        ({"prompt": "x", "width": 2048, "height": 2048, "num_frames": 257}, "latent tokens"),
        ({"prompt": "x", "image": _png()}, "only accepted by image-to-video"),
    ],
)
def test_bad_requests_say_what_is_allowed(body, needle):
    with pytest.raises(ValueError, match=needle):
        JobRequest.from_body(body, WAN)


def test_image_to_video_needs_a_decodable_image():
    with pytest.raises(ValueError, match="image is required"):
        JobRequest.from_body({"prompt": "x"}, I2V)
    with pytest.raises(ValueError, match="not valid base64"):
        JobRequest.from_body({"prompt": "x", "image": "***"}, I2V)
    with pytest.raises(ValueError, match="could not be decoded"):
        JobRequest.from_body({"prompt": "x", "image": base64.b64encode(b"GIF8").decode()}, I2V)
    assert JobRequest.from_body({"prompt": "x", "image": _png()}, I2V).image


# -- the job book ---------------------------------------------------------------------------


def _job(prompt: str = "x") -> Job:
    return Job(request=JobRequest.from_body({"prompt": prompt}, WAN), out_dir=Path("."))


def test_job_book_is_fifo_with_positions_and_a_bound():
    book = JobBook(max_queue=2, keep=10)
    first, second = book.submit(_job("a")), book.submit(_job("b"))
    assert (book.position(first), book.position(second)) == (0, 1)
    with pytest.raises(QueueFull):
        book.submit(_job("c"))
    running = book.next(timeout_s=0.01)
    assert running is first and first.status == "running" and book.position(first) is None
    assert book.position(second) == 0
    book.finish(first, "succeeded")
    assert first.request.image is None and first.status in FINAL_STATES
    assert book.next(timeout_s=0.01) is second
    assert book.next(timeout_s=0.01) is None  # empty: times out


def test_cancel_queued_and_running_jobs():
    book = JobBook(max_queue=4, keep=10)
    running, queued = book.submit(_job()), book.submit(_job())
    assert book.next(timeout_s=0.01) is running
    book.cancel(queued.id)
    assert queued.status == "cancelled" and book.position(queued) is None
    book.cancel(running.id)
    assert running.status == "running" and running.cancel_requested  # stops at a step
    assert book.cancel("no-such-job") is None


def test_fail_queued_close_and_forgetting_old_jobs():
    book = JobBook(max_queue=8, keep=2)
    jobs = [book.submit(_job(str(i))) for i in range(3)]
    book.fail_queued("lost a rank")
    assert all(j.status == "failed" and j.error == "lost a rank" for j in jobs)
    newest = book.submit(_job("new"))
    assert [j.id for j in book.recent()][0] == newest.id
    assert len(book.recent()) <= 3  # two finished kept at most, plus the queued one
    book.close()
    assert newest.status == "cancelled"
    with pytest.raises(RuntimeError, match="shutting down"):
        book.submit(_job())
    assert set(JOB_STATES) >= {j.status for j in jobs}


# -- control messages and the group-health rule ----------------------------------------------


def test_messages_round_trip_as_json():
    run = RunJob("abc", {"prompt": "x"}, [["prompt_embeds", [1, 4, 8], "float32"]])
    assert from_json(to_json(run)) == run
    assert from_json(to_json(Shutdown())) == Shutdown()
    reply = Reply.failure(3, ValueError("bad"), cancelled=False)
    assert Reply.from_json(reply.to_json()) == reply and reply.error == "ValueError: bad"
    with pytest.raises(ValueError, match="unknown control message"):
        from_json({"type": "reboot"})


def _fail(rank: int, text: str = "boom", kind: type[Exception] = RuntimeError) -> Reply:
    return Reply.failure(rank, kind(text))


def test_success_and_cancel_on_every_rank():
    assert combine(Reply(0), {1: Reply(1), 2: Reply(2)}).status == "succeeded"
    cancelled = Reply.failure(0, RuntimeError("cancelled after step 2"), cancelled=True)
    others = {r: Reply.failure(r, RuntimeError("c"), cancelled=True) for r in (1, 2)}
    assert combine(cancelled, others).status == "cancelled"


def test_the_same_failure_everywhere_keeps_the_group_in_step():
    outcome = combine(_fail(0, "out of range"), {1: _fail(1, "out of range")})
    assert outcome.status == "failed" and outcome.in_step
    assert outcome.message == "RuntimeError: out of range"


@pytest.mark.parametrize(
    ("own", "replies", "needle"),
    [
        (Reply(0), {1: _fail(1, "CUDA out of memory")}, "rank 1: RuntimeError: CUDA out"),
        (_fail(0, "a"), {1: _fail(1, "b")}, "RuntimeError: a"),
        (_fail(0, "x", ValueError), {1: _fail(1, "x", KeyError)}, "ValueError: x"),
        (_fail(0, "x"), {1: _fail(1, "x"), 2: Reply(2)}, "RuntimeError: x"),
        (
            Reply.failure(0, RuntimeError("cancelled"), cancelled=True),
            {1: Reply(1)},
            "cancelled",
        ),
    ],
)
def test_ranks_that_disagree_take_the_group_out_of_step(own, replies, needle):
    outcome = combine(own, replies)
    assert outcome.status == "failed" and not outcome.in_step
    assert needle in outcome.message


# -- the serve configuration ----------------------------------------------------------------


def test_serve_config_round_trips_through_its_flags():
    config = ServeConfig(
        model="tiny-wan",
        world_size=4,
        device="cpu",
        cfg_degree=2,
        ulysses_degree=2,
        shard_weights=False,
        threads_per_rank=1,
        timeout_s=30.0,
        port=0,
        token="secret",
    )
    argv = config.to_argv()
    assert "secret" not in argv and "--no-shard" in argv  # a token is never on a command line
    assert ServeConfig.from_argv(argv) == ServeConfig(**{**config.__dict__, "token": None})
    assert "secret" in config.to_argv(with_token=True)
    assert ServeConfig.from_argv(["--model", "m"]).to_argv() == ["--model", "m"]


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        ([], "--model is required"),
        (["--model", "m", "--world-size", "0"], "--world-size must be"),
        (["--model", "m", "--timeout", "0"], "--timeout must be"),
        (["--model", "m", "--token", ""], "--token must not be empty"),
        (["--model", "m", "--ulysses-degree", "0"], "--ulysses-degree must be"),
    ],
)
def test_serve_config_states_its_rules(argv, needle):
    with pytest.raises(ValueError, match=needle):
        ServeConfig.from_argv(argv)


def test_every_flag_of_every_command_has_a_help_line():
    import argparse

    from paradit.backend.tools.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert {"serve", "generate", "verify", "batch", "plan", "bench", "ui"} <= set(commands.choices)
    for name, sub in commands.choices.items():
        for action in sub._actions:
            if not isinstance(action, argparse._HelpAction):
                assert action.help, f"paradit {name} {action.option_strings or action.dest}"
    # the backend flags are the same on every command that starts a backend
    probe = argparse.ArgumentParser()
    add_flags(probe, BACKEND)
    backend_flags = {s for a in probe._actions for s in a.option_strings} - {"-h", "--help"}
    for name in ("serve", "generate", "verify", "batch", "ui"):
        flags = {s for a in commands.choices[name]._actions for s in a.option_strings}
        assert backend_flags <= flags, (name, backend_flags - flags)
    probe = argparse.ArgumentParser()
    add_flags(probe, SERVING)
    serving = {s for a in probe._actions for s in a.option_strings} - {"-h", "--help"}
    assert serving <= {s for a in commands.choices["serve"]._actions for s in a.option_strings}


def test_non_loopback_needs_a_token_or_insecure(tmp_path):
    with pytest.raises(ValueError, match="reachable from other machines"):
        ServeConfig(model="m", host="0.0.0.0")
    assert ServeConfig(model="m", host="0.0.0.0", insecure=True).insecure
    assert ServeConfig(model="m", host="0.0.0.0", token="t").token == "t"
    assert ServeConfig(model="m", host="127.0.0.2").host == "127.0.0.2"  # loopback range

    from paradit.backend.config import read_token

    path = tmp_path / "token"
    path.write_text("s3cret\n")
    assert read_token(str(path), env={}) == "s3cret"
    assert read_token(None, env={"PARADIT_TOKEN": "from-env"}) == "from-env"
    assert read_token(None, env={}) is None
    (tmp_path / "empty").write_text("")
    with pytest.raises(ValueError, match="is empty"):
        read_token(str(tmp_path / "empty"), env={})


def test_the_web_app_is_not_exposed_without_a_login(monkeypatch):
    from paradit.web.app import check_exposure

    with pytest.raises(ValueError, match="--auth"):
        check_exposure("0.0.0.0", None, None, insecure=False)
    check_exposure("0.0.0.0", ("u", "p"), None, insecure=False)
    check_exposure("0.0.0.0", None, None, insecure=True)
    monkeypatch.setenv("PARADIT_TOKEN", "backend-token")
    with pytest.raises(ValueError, match="for every visitor"):
        check_exposure("127.0.0.1", None, "http://127.0.0.1:7870", insecure=False)
    check_exposure("127.0.0.1", ("u", "p"), "http://127.0.0.1:7870", insecure=False)
