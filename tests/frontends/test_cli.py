"""The command line: generate writes the output layout; errors are one line and non-zero.

Cost: about 23 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CLI_ENV, REFERENCE_FLAGS

ENV = CLI_ENV
SERVE_ENV = {k: v for k, v in ENV.items() if k != "PARADIT_TOKEN"}  # serve would demand it


def paradit(
    *args: str, timeout: float = 300, env: dict[str, str] = ENV
) -> subprocess.CompletedProcess:
    """`paradit <args>` in a fresh interpreter, run under `python -X importtime`: `stderr` is
    the command's own (importtime's lines taken out), `imported` the modules it imported."""
    command = [sys.executable, "-X", "importtime", "-m", "paradit", *args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    lines = result.stderr.splitlines(keepends=True)
    timed = [line for line in lines if line.startswith("import time:")]
    result.imported = {line.rsplit("|", 1)[-1].strip() for line in timed}
    result.stderr = "".join(line for line in lines if not line.startswith("import time:"))
    return result


def _layout(out: Path, frames: int) -> list[bytes]:
    names = sorted(p.name for p in (out / "frames").iterdir())
    assert names == [f"{i:06d}.png" for i in range(frames)]
    record = json.loads((out / "job.json").read_text())
    assert record["status"] == "succeeded" and record["num_frames"] == frames
    assert {"request", "plan", "seed", "timings", "versions"} <= record.keys()
    return [(out / "frames" / n).read_bytes() for n in names]


def test_generate_on_its_own_group_then_through_a_server(tmp_path, backends, paradit_warm):
    out = tmp_path / "own"
    result = paradit_warm(  # in the worker: the group it starts is forked from the zygote
        "generate",
        "a red fox",
        "--model",
        "tiny-wan",
        "--world-size",
        "2",
        "--device",
        "cpu",
        "--threads",
        "1",
        "--steps",
        "3",
        "--seed",
        "9",
        "--out",
        str(out),
        env=ENV,
    )
    assert result.returncode == 0, result.stderr
    frames = _layout(out, 5)
    assert (out / "video.mp4").read_bytes()[4:8] == b"ftyp"
    assert json.loads((out / "job.json").read_text())["plan"]["world_size"] == 2

    url = backends.get("tiny-wan", 1, *REFERENCE_FLAGS).url
    via_server = tmp_path / "server"
    result = backends.paradit(
        "generate",
        "a red fox",
        "--server",
        url,
        "--steps",
        "3",
        "--seed",
        "9",
        "--out",
        str(via_server),
        env=ENV,
    )
    assert result.returncode == 0, result.stderr
    assert _layout(via_server, 5) == frames  # world size 1 and 2 agree


def test_generate_a_two_stage_job_with_its_upscaler(tmp_path, paradit_warm):
    """`paradit generate --upscaler FILE --upscale 2` (LTX-2's two stages) on the group it
    starts: the frames at the final size, job.json's request and run record the upscale."""
    from comfy_files import ltx2_upscaler_file

    out = tmp_path / "out"
    common = ("--model", "tiny-ltx2", "--device", "cpu", "--threads", "1", "--out", str(out))
    result = paradit_warm(
        "generate", "a drum solo", *common, "--upscaler", ltx2_upscaler_file(tmp_path, 8),
        "--upscale", "2", "--width", "128", "--height", "128", "--frames", "9",
        "--steps", "2", "--seed", "5", env=ENV,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    _layout(out, 9)
    record = json.loads((out / "job.json").read_text())
    assert record["request"]["upscale"]["sigmas"] == [0.909375, 0.725, 0.421875]
    assert record["upscale"]["stage_1"] == {"width": 64, "height": 64, "steps": 2}
    assert record["request"]["width"] == 128 and len(record["timings"]["step_s"]) == 2 + 3


def test_generate_image(tmp_path, backends):
    url = backends.get("tiny-flux", 1, *REFERENCE_FLAGS).url
    result = backends.paradit("generate", "a cat", "--server", url, "--out", str(tmp_path), env=ENV)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "image.png").read_bytes() == _layout(tmp_path, 1)[0]
    assert not (tmp_path / "video.mp4").exists()


# Which runs start a fresh interpreter: argparse's errors (before any import), and the
# CUDA refusal, which imports a superset of what the other serve/generate errors import (the
# client modules that generate adds: test_impossible_request_is_one_line's fresh run): import-
# time output of any module they load would break those runs' one line. The others are forked
# from the zygote (their imports done): each one's error handling is still checked.
FRESH, FORKED = True, False


@pytest.mark.parametrize(
    ("args", "needle", "fresh"),
    [
        (["generate", "x", "--out", "o", "--width", "abc"], "invalid int value", FRESH),
        (["generate", "x", "--out", "o"], "--server URL or --model", FORKED),
        (["generate", "x", "--out", "o", "--model", "no/such/thing"], "neither a preset", FORKED),
        (
            ["generate", "x", "--out", "o", "--server", "http://127.0.0.1:9"],
            "cannot reach",
            FORKED,
        ),
        (["serve", "--model", "tiny-wan", "--world-size", "0"], "--world-size", FORKED),
        (
            [
                "serve",
                "--model",
                "tiny-wan",
                "--ring-degree",
                "2",
                "--world-size",
                "2",
                "--device",
                "cpu",
            ],
            "CUDA",
            FRESH,
        ),
        (["frobnicate"], "invalid choice", FRESH),
    ],
)
def test_errors_are_one_line(args, needle, fresh, request):
    if fresh:
        result = paradit(*args, timeout=120)
        # argument errors import no torch (the CUDA refusal is the plan's: torch is needed)
        assert ("torch" in result.imported) == (needle == "CUDA")
    else:
        result = request.getfixturevalue("backends").paradit(*args, env=ENV, timeout=120)
    assert result.returncode != 0
    lines = [ln for ln in result.stderr.splitlines() if ln.strip() and "torchvision" not in ln]
    assert len(lines) == 1, result.stderr
    assert needle in lines[0] and "Traceback" not in result.stderr


def test_impossible_request_is_one_line(backends):
    url = backends.get("tiny-wan", 1, *REFERENCE_FLAGS).url
    result = paradit("generate", "x", "--server", url, "--frames", "6", "--out", "unused")
    assert result.returncode != 0
    assert result.stderr.strip().count("\n") == 0 and "4k+1" in result.stderr
    assert "torch" not in result.imported  # a client of a running backend needs none


def test_serve_cache_on_a_model_without_a_step_cache_fails_at_start(tmp_path, backends):
    """Z-Image has no step cache: `serve --cache` stops once the model is known (it would fail
    every job), with one line, not a traceback and not `ready`."""
    args = ["serve", "--model", "tiny-z-image", "--cache", "first-block", "--device", "cpu"]
    args += ["--world-size", "1", "--port", "0", "--output-dir", str(tmp_path)]
    result = backends.paradit(*args, env=ENV, timeout=120)
    assert result.returncode == 2 and "ready" not in result.stdout
    lines = [ln for ln in result.stderr.splitlines() if ln.strip() and "torchvision" not in ln]
    assert lines == ["error: --cache: tiny-z-image has no step cache; leave --cache out"]


def _serve_command(out: Path, *extra: str) -> list[str]:
    """`paradit serve` of tiny-wan on 2 CPU ranks, any free port."""
    return [
        sys.executable,
        "-m",
        "paradit",
        "serve",
        "--model",
        "tiny-wan",
        "--world-size",
        "2",
        "--device",
        "cpu",
        "--port",
        "0",
        "--output-dir",
        str(out),
        *extra,
    ]


def test_serve_says_ready_and_stops_cleanly_on_sigint(tmp_path):
    import re
    import signal
    import time

    from paradit.backend.client.http import Client

    proc = subprocess.Popen(
        _serve_command(tmp_path, "--threads", "1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=SERVE_ENV,
    )
    try:
        line = proc.stdout.readline()
        assert "ready" in line, line
        url = re.search(r"http://\S+", line).group(0)
        client = Client(url)
        workers = [r["pid"] for r in client.info()["ranks"][1:]]
        job_id = client.submit(
            {
                "prompt": "stopped midway",
                "num_inference_steps": 200,
                "width": 256,
                "height": 256,
                "num_frames": 17,
            }
        )
        deadline = time.monotonic() + 60
        while client.job(job_id)["progress"]["step"] < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0  # a running job does not hold the shutdown up
        for pid in workers:
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("place", ["join", "load"])
def test_start_up_stops_when_a_rank_dies(tmp_path, backends, place):
    """A rank killed while the group starts: `serve` gives up at once, naming it (it does not
    wait out the start-up timeout, nor the collective timeout in the process group's
    rendezvous). Rank 1 freezes itself at a known point of its start-up (an injected `stop`
    fault: `join`, where rank 0 then waits in the rendezvous, which cannot poll for lost ranks;
    `load`, where rank 0 reaches a barrier), and the test kills that process, found by its own
    log line, not by the order of `serve`'s children (a zygote is one of them too). `serve` is
    forked from the worker's zygote: it starts its ranks as a fresh one does."""
    import re
    import time

    argv = _serve_command(tmp_path)[3:]  # "serve", its flags
    env = {**ENV, "PARADIT_FAULT": f"rank=1,at={place},kind=stop"}
    frozen = re.compile(r"rank(\d+) WARNING \S+: injected fault \(stop\)")
    with open(os.devnull, "wb") as out, open(tmp_path / "serve.err", "w+") as err:
        proc = backends.zygote().spawn(argv, env, str(tmp_path), out.fileno(), err.fileno())
        try:
            deadline = time.monotonic() + 60
            rank1 = None
            while rank1 is None and time.monotonic() < deadline and proc.poll() is None:
                err.seek(0)
                found = frozen.search(err.read())
                rank1 = int(found.group(1)) if found else None
                time.sleep(0.05)
            assert rank1 is not None, "rank 1 never reached its fault"
            state = Path(f"/proc/{rank1}/status").read_text()
            assert f"PPid:\t{proc.pid}\n" in state and "State:\tT" in state  # serve's, frozen
            os.kill(rank1, 9)
            assert proc.wait(timeout=30) != 0  # neither the 30-minute nor the 10-minute wait
            err.seek(0)
            assert "rank 1 exited with code -9" in err.read()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_batch_writes_one_folder_per_prompt_and_seed(tmp_path, backends):
    url = backends.get("tiny-wan", 1, *REFERENCE_FLAGS).url
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("a red fox\n\na boat on a lake\n")
    out = tmp_path / "batch"
    result = backends.paradit(
        "batch",
        "--prompts",
        str(prompts),
        "--seeds",
        "3-4",
        "--server",
        url,
        "--steps",
        "2",
        "--out",
        str(out),
        env=ENV,
    )
    assert result.returncode == 0, result.stderr
    folders = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert folders == ["0000-seed3", "0000-seed4", "0001-seed3", "0001-seed4"]
    assert {"manifest.json", "contact_sheet.png"} <= {p.name for p in out.iterdir()}
    seeds = [json.loads((out / f / "job.json").read_text())["seed"] for f in folders]
    assert seeds == [3, 4, 3, 4]
    assert _layout(out / "0000-seed3", 5) != _layout(out / "0000-seed4", 5)


def test_plan_reports_degrees_and_memory(backends):
    # a fresh interpreter: its standard output is the JSON and nothing else
    result = paradit(
        "plan",
        "--model",
        "tiny-wan",
        "--gpus",
        "4",
        "--gpu-memory",
        "1",
        "--width",
        "832",
        "--height",
        "480",
        "--frames",
        "81",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["tokens"] == 21 * 30 * 52 and report["fits"] is True
    assert report["plan"]["cfg_degree"] * report["plan"]["ulysses_degree"] == 4
    tight = backends.paradit(
        "plan",
        "--model",
        "tiny-wan",
        "--gpus",
        "1",
        "--gpu-memory",
        "0.001",
        "--width",
        "64",
        "--height",
        "64",
        "--frames",
        "5",
        env=ENV,
    )
    assert tight.returncode == 3 and "does NOT fit" in tight.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["serve", "--model", "tiny-wan", "--host", "0.0.0.0"], "--token-file"),
        (["ui", "--model", "tiny-wan", "--host", "0.0.0.0"], "--auth"),
    ],
)
def test_exposed_without_a_token_or_login_is_refused(args, needle):
    out = paradit(*args, timeout=120, env=SERVE_ENV)
    assert out.returncode == 2, out.stderr
    assert needle in out.stderr and "--insecure" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert "torch" not in out.imported  # the ui's --model was parsed first, without torch
    assert ("paradit.backend.models.loading" in out.imported) == (args[0] == "ui")
