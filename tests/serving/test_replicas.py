"""Data-parallel replicas (`--dp-degree`): jobs run side by side, each equal to world size 1.

Real `paradit serve` groups on CPU/gloo; a replica of one rank runs every kernel with the
shapes of world size 1 and a CFG-only replica keeps them too, so those outputs (frames and,
with --save-latents, the final latents) are compared byte for byte.

Cost: about 34 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import CLI_ENV, REFERENCE_FLAGS, run_job, wait_for
from launchers import SERVE, TORCHRUN, free_port, ready_url, spawn, stop

BODY = {"width": 64, "height": 64, "num_inference_steps": 3}
WAN = {**BODY, "num_frames": 5}
FLUX = {**BODY, "num_frames": 1}
BODIES = {"tiny-wan": WAN, "tiny-flux": FLUX}
PROMPTS = ["a red fox", "a boat on a lake"]


def _frames(folder: Path) -> list[bytes]:
    return [p.read_bytes() for p in sorted((folder / "frames").iterdir())]


def _batch(run: Callable[..., Any], out: Path, model: str, *backend: str) -> None:
    """`paradit batch` of PROMPTS x seeds 3-4 into `out`, run by `run`: `Backends.paradit`
    (forked from the worker's zygote) or conftest's `paradit_warm` (in the worker, the group
    it starts forked from the zygote)."""
    prompts = out.parent / f"{out.name}-prompts.txt"
    prompts.write_text("\n".join(PROMPTS) + "\n")
    body = BODIES[model]
    result = run(
        "batch",
        "--prompts",
        str(prompts),
        "--seeds",
        "3-4",
        "--steps",
        str(body["num_inference_steps"]),
        "--width",
        "64",
        "--height",
        "64",
        "--frames",
        str(body["num_frames"]),
        "--out",
        str(out),
        *backend,
        env=CLI_ENV,
    )
    assert result.returncode == 0, result.stderr


FOLDERS = ["0000-seed3", "0000-seed4", "0001-seed3", "0001-seed4"]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("model", ["tiny-wan", "tiny-flux"])
def test_batch_on_two_replicas_equals_world_size_one(tmp_path, backends, paradit_warm, model):
    one, two = tmp_path / "one", tmp_path / "two"
    _batch(backends.paradit, one, model, "--server", backends.get(model, 1, *REFERENCE_FLAGS).url)
    if model == "tiny-wan":  # the batch command starts its own two-replica group
        own = ("--model", model, "--world-size", "2", "--dp-degree", "2", "--device", "cpu")
        _batch(paradit_warm, two, model, *own, "--threads", "1")
    else:
        url = backends.get(model, 2, "--dp-degree", "2").url
        _batch(backends.paradit, two, model, "--server", url)
    for out in (one, two):
        assert sorted(p.name for p in out.iterdir() if p.is_dir()) == FOLDERS
    for folder in FOLDERS:
        assert _frames(two / folder) == _frames(one / folder), folder
    replicas = {json.loads((two / f / "job.json").read_text())["replica"] for f in FOLDERS}
    assert replicas == {0, 1}  # four queued items: both replicas took some
    manifest = json.loads((two / "manifest.json").read_text())["items"]
    assert [(r["index"], r["prompt"], r["seed"]) for r in manifest] == [
        (0, PROMPTS[0], 3),
        (1, PROMPTS[0], 4),
        (2, PROMPTS[1], 3),
        (3, PROMPTS[1], 4),
    ]
    assert all((two / r["files"][0]).is_file() and r["seconds"] > 0 for r in manifest)
    from PIL import Image

    sheet = Image.open(io.BytesIO((two / "contact_sheet.png").read_bytes()))
    assert sheet.size == (2 * 160, 2 * (160 + 28))  # four thumbnails in a 2x2 grid
    # One frame's pixels are in the sheet: a broken sheet (blank, wrong frame) fails this.
    corner = np.asarray(sheet.convert("RGB"))[:160, :160]
    assert corner.std() > 0


@pytest.mark.timeout(600)
def test_batch_skips_items_already_complete(tmp_path, backends):
    url = backends.get("tiny-flux", 2, "--dp-degree", "2").url
    out = tmp_path / "out"
    _batch(backends.paradit, out, "tiny-flux", "--server", url)
    ids = {f: json.loads((out / f / "job.json").read_text())["id"] for f in FOLDERS}
    frames = _frames(out / FOLDERS[2])
    (out / FOLDERS[2] / "job.json").unlink()  # an item interrupted before it completed
    _batch(backends.paradit, out, "tiny-flux", "--server", url)
    again = {f: json.loads((out / f / "job.json").read_text())["id"] for f in FOLDERS}
    assert [f for f in FOLDERS if again[f] != ids[f]] == [FOLDERS[2]]
    assert _frames(out / FOLDERS[2]) == frames
    manifest = json.loads((out / "manifest.json").read_text())["items"]
    assert all(row["files"] for row in manifest)


@pytest.mark.timeout(600)
def test_two_jobs_run_at_the_same_time_on_two_replicas(backends):
    client = backends.get("tiny-wan", 2, "--dp-degree", "2")
    info = client.info()
    assert info["plan"]["dp_degree"] == 2 and info["plan"]["world_size"] == 1
    assert [(r["index"], r["ranks"]) for r in info["replicas"]] == [(0, [0]), (1, [1])]
    body = {**WAN, "prompt": "a fox", "num_inference_steps": 12}
    # The second job is submitted once the first is running (so one replica is busy): the
    # other replica must take it and start it before the first ends. The recorded start and
    # end times say whether they overlapped, whatever the machine's speed.
    first = client.submit({**body, "seed": 1})
    wait_for(lambda: client.job(first)["status"] != "queued", 120, "the first job to start")
    ids = [first, client.submit({**body, "seed": 2})]
    jobs = [client.wait(job_id, timeout_s=300) for job_id in ids]
    assert [j["status"] for j in jobs] == ["succeeded", "succeeded"]
    assert {j["replica"] for j in jobs} == {0, 1}
    (a, b) = jobs
    assert a["started"] <= b["started"] < a["finished"], (a, b)  # overlapping
    reference = backends.get("tiny-wan", 1, "--save-latents")
    for job in jobs:
        _, expected = run_job(reference, {**body, "seed": job["request"]["seed"]})
        frames = [client.frame(job["id"], i) for i in range(job["num_frames"])]
        assert frames == expected
        record = client.record(job["id"])
        assert record["replica"] == job["replica"]
        # every job's job.json has its per-step timings, whichever replica ran it
        timings = record["timings"]
        assert len(timings["step_s"]) == 12 and all(s > 0 for s in timings["step_s"])
        assert timings["mean_step_s"] > 0 and timings["decode_s"] > 0
        assert timings["encode_s"] <= timings["first_step_start_s"] < timings["total_s"]


@pytest.mark.timeout(600)
def test_cancel_and_previews_reach_every_replica(backends):
    client = backends.get("tiny-wan", 2, "--dp-degree", "2")
    body = {**WAN, "prompt": "long", "width": 128, "height": 128, "num_inference_steps": 200}
    ids = [client.submit({**body, "seed": seed}) for seed in (1, 2)]

    def both_previewed():
        jobs = [client.job(job_id) for job_id in ids]
        return all(j["status"] == "running" and j["preview_step"] > 0 for j in jobs) and jobs

    jobs = wait_for(both_previewed, 240, "both jobs running with a preview")
    assert {j["replica"] for j in jobs} == {0, 1}
    busy = {r["index"]: r["busy_job"] for r in client.info()["replicas"]}
    assert set(busy.values()) == set(ids)
    assert all(client.preview(job_id)[:8] == b"\x89PNG\r\n\x1a\n" for job_id in ids)
    for job_id in ids:
        client.cancel(job_id)

    def stopped():
        jobs = [client.job(job_id) for job_id in ids]
        return all(j["status"] not in ("queued", "running") for j in jobs) and jobs

    done = wait_for(stopped, 120, "both jobs to stop")
    assert [j["status"] for j in done] == ["cancelled", "cancelled"]
    assert all(j["progress"]["step"] < 200 for j in done)
    job, _ = run_job(client, {**WAN, "prompt": "after"})  # the replicas are still in step
    assert job["status"] == "succeeded"


@pytest.mark.timeout(900)
@pytest.mark.parametrize("model", ["tiny-wan"])  # tiny-flux's replicas: the batch test's
def test_world_size_four_as_two_replicas_of_two(backends, model):
    from paradit.backend.tools.equivalence import DIFFERENT, FLOAT32, IDENTICAL, compare

    client = backends.get(model, 4, "--dp-degree", "2", "--save-latents")
    info = client.info()
    plan = info["plan"]
    assert plan["dp_degree"] == 2 and plan["world_size"] == 2
    # The plan is pinned: both models use CFG (tiny-flux has no guidance embedding), so each
    # replica of two splits CFG only and every kernel keeps its shapes: byte-identical frames
    # and latents. (A sequence-parallel replica would be compared within float32 instead.)
    assert (plan["cfg_degree"], plan["ulysses_degree"], plan["ring_degree"]) == (2, 1, 1), plan
    assert [r["ranks"] for r in info["replicas"]] == [[0, 1], [2, 3]]
    reference = backends.get(model, 1, "--save-latents")
    body = {**BODIES[model], "prompt": "a fox"}
    # The second job has no guidance: its replica spreads its sequence over both of its ranks
    # (Ulysses 2), compared within float32 rounding; it runs the step cache too, and takes
    # world size 1's decisions (the metric is reduced over its replica's ranks only).
    cache = {"method": "first-block", "threshold": 0.9}
    unguided = {**body, "seed": 6, "guidance_scale": 1.0, "num_inference_steps": 5}
    bodies = [{**body, "seed": 5}, {**unguided, "cache": cache}]
    ids = [client.submit(b) for b in bodies]
    jobs = [client.wait(job_id, timeout_s=600) for job_id in ids]
    assert {j["replica"] for j in jobs} == {0, 1}
    for job, job_body in zip(jobs, bodies, strict=True):
        ref_job, _ = run_job(reference, job_body)
        ref, other = (_decoded(c, j) for c, j in ((reference, ref_job), (client, job)))
        result = compare(ref[0], other[0], FLOAT32, ref[1], other[1])
        guided = "guidance_scale" not in job_body  # the default guidance uses CFG
        assert job["timings"]["sequence_layout"] == ("plan" if guided else "spread"), job
        if not guided:
            assert result.verdict != DIFFERENT, result.reasons
            ours, ones = job["timings"]["cache"], ref_job["timings"]["cache"]
            assert ours["skipped_steps"] == ones["skipped_steps"] and ones["num_skipped"] >= 1
            continue
        assert result.verdict == IDENTICAL, result.reasons
        assert (other[1].dtype, other[1].tobytes()) == (ref[1].dtype, ref[1].tobytes())


def _decoded(client, job) -> tuple[np.ndarray, np.ndarray]:
    from PIL import Image

    frames = [client.frame(job["id"], i) for i in range(job["num_frames"])]
    pixels = np.stack([np.asarray(Image.open(io.BytesIO(f)).convert("RGB")) for f in frames])
    return pixels, client.latents(job["id"])


@pytest.mark.timeout(600)
def test_a_lost_rank_in_one_replica_rebuilds_the_group(tmp_path, backends):
    from conftest import WarmBackend

    from paradit.backend.client import JobFailed
    from paradit.backend.config import ServeConfig

    config = ServeConfig(
        model="tiny-wan",
        world_size=2,
        dp_degree=2,
        device="cpu",
        threads_per_rank=1,
        output_dir=str(tmp_path / "out"),
        timeout_s=120.0,
        port=0,
    )
    env = {"PARADIT_FAULT": "rank=1,at=step:2,kind=exit"}  # replica 1's only rank
    log_file = tmp_path / "serve.log"  # forked from the worker's zygote; rebuilt by serve's
    with WarmBackend(
        backends.zygote(), config, start_timeout_s=300, log_file=log_file, env=env
    ) as b:
        client = b.client
        old_pid = client.info()["ranks"][1]["pid"]
        body = {**WAN, "prompt": "x", "num_inference_steps": 6}
        ids = [client.submit({**body, "seed": seed}) for seed in (1, 2)]
        ended = []
        for job_id in ids:
            try:
                ended.append(client.wait(job_id, timeout_s=180))
            except JobFailed as exc:
                ended.append(exc.job)
        failed = [j for j in ended if j["status"] == "failed"]
        assert len(failed) == 1 and failed[0]["replica"] == 1, ended
        assert "lost" in failed[0]["error"]
        wait_for(lambda: _healthy(client), 120, "the group to be rebuilt")
        assert client.info()["ranks"][1]["pid"] != old_pid
        again = [client.submit({**body, "seed": seed}) for seed in (3, 4)]
        assert [client.wait(job_id, timeout_s=180)["status"] for job_id in again] == [
            "succeeded",
            "succeeded",
        ]


def _healthy(client) -> bool:
    from paradit.backend.client import BackendError

    try:
        return client.health()["status"] == "ok"
    except BackendError:  # 503 while the group is rebuilt
        return False


@pytest.mark.timeout(600)
def test_two_replicas_on_two_torchrun_nodes(tmp_path, backends):
    """torchrun --nnodes 2, both "nodes" on this machine rendezvousing on localhost: one
    replica per node, each job equal to world size 1. It is also the suite's run of `serve`
    under torchrun (its variables, its agent's store, the ready line's world size): a second
    torchrun launch of two ranks in one group would start two more ranks and an agent for
    that one fact (one group split over launched ranks is the mpirun and srun tests')."""
    import os

    from paradit.backend.client.http import Client

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    port = str(free_port())
    procs = []
    for node in (0, 1):
        cmd = [*TORCHRUN, "--nnodes", "2", "--node-rank", str(node), "--nproc-per-node", "1"]
        cmd += ["--master-addr", "127.0.0.1", "--master-port", port, *SERVE]
        cmd += ["--dp-degree", "2", "--output-dir", str(tmp_path / f"node{node}")]
        procs.append(spawn(cmd, env))
    try:
        client = Client(ready_url(procs[0]))
        info = client.info()
        assert info["world_size"] == 2 and info["plan"]["dp_degree"] == 2
        body = {**WAN, "prompt": "two nodes"}
        ids = [client.submit({**body, "seed": seed}) for seed in (7, 8)]
        jobs = [client.wait(job_id, timeout_s=300) for job_id in ids]
        assert {j["replica"] for j in jobs} == {0, 1}
        reference = backends.get("tiny-wan", 1, "--save-latents")
        for job in jobs:
            _, expected = run_job(reference, {**body, "seed": job["request"]["seed"]})
            assert [client.frame(job["id"], i) for i in range(job["num_frames"])] == expected
    finally:
        stop(procs)
