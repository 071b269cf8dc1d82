"""Lost ranks, hangs and restarts, with real process groups and injected faults.

Faults come from the test-only `PARADIT_FAULT` switch (backend/runtime/faults.py); a group
rebuilt after a lost rank is a new generation, which the faults leave alone unless they say
`gen=`. Every backend here runs with a short `--hang-timeout` (`HANG_S`), all else default.
Backends are forked from the worker's zygote (tests/conftest.py `WarmBackend`): the real
`paradit serve`, its ranks forked or started as without the zygote, minus `serve`'s imports;
the ranks of its rebuilds come from `serve`'s own zygote (backend/processes/forked.py), as
for users; `serve` killed before its ranks start is a fresh interpreter.

Cost: about 25 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import Backends, WarmBackend, wait_for

from paradit.backend.client import BackendError, Client, JobFailed
from paradit.backend.client.local import LocalBackend
from paradit.backend.config import ServeConfig
from paradit.backend.runtime.faults import Fault, Faults
from paradit.backend.runtime.progress import Heartbeat, Progress, RankWatch

SLOW = {"prompt": "a long one", "num_inference_steps": 200, "guidance_scale": 1.0}
HANG_S = 1.0
"""The backends' --hang-timeout, the lowest the config allows: a frozen or hung rank is lost
after this long. Heartbeats come every 0.5 s; the largest gap measured on a busy rank (jobs
running, load 5.5 on 2 cores, 60 s) was 0.55 s, under the 1 s a frozen verdict needs (two
beats missed)."""


def _backend(backends: Backends, tmp_path: Path, fault: str = "", *extra: str) -> LocalBackend:
    config = ServeConfig.from_argv(
        ["--hang-timeout", str(HANG_S), *extra],
        model="tiny-wan",
        world_size=2,
        device="cpu",
        threads_per_rank=1,
        output_dir=str(tmp_path / "out"),
        timeout_s=120.0,
    )
    env = {"PARADIT_FAULT": fault} if fault else {}
    log_file = tmp_path / "serve.log"
    return WarmBackend(backends.zygote(), config, start_timeout_s=300, log_file=log_file, env=env)


def _ended(client: Client, job_id: str, timeout_s: float = 180) -> dict:
    """The job document once it has ended, failed or not."""
    try:
        return client.wait(job_id, timeout_s=timeout_s)
    except JobFailed as exc:
        return exc.job


def _rank_pids(client: Client) -> list[int]:
    return [rank["pid"] for rank in client.info()["ranks"]]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] in "ZX"
    except OSError:  # gone between the two looks
        return True


def _state(pid: int) -> str:
    """The process's state letter (`T`: stopped), "" once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0]
    except OSError:
        return ""


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().split(")")[-1].split()[1])


def _children(pid: int) -> set[int]:
    """The live children of `pid` (every thread's)."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            found |= {int(child) for child in (task / "children").read_text().split()}
    return {child for child in found if not _gone(child)}


def _health_code(client: Client) -> int | None:
    """/health's HTTP status (None: no answer at all)."""
    try:
        client.health()
    except BackendError as exc:
        return exc.status
    return 200


def _unhealthy_because(client: Client) -> str:
    """/health's error while it answers 503, "" while it answers 200."""
    try:
        client.health()
    except BackendError as exc:
        return str(exc)
    return ""


def _plan(client: Client) -> dict:
    """The reference job's predicted bytes in the backend's memory plan (/v1/info): what the
    dry runs give (the budget, measured again at each start, is left out)."""
    job = client.info()["memory"]["reference_job"]
    return {key: job[key] for key in ("size", "predicted_bytes", "parts_bytes")}


def _preview(client: Client) -> bytes:
    """The preview of a one-step job (the same job each time: the same latents)."""
    job = client.wait(client.submit({"prompt": "a preview", "num_inference_steps": 1}))
    return client.preview(job["id"])


def _recovered(client: Client, old_pid: int, timeout_s: float = 90) -> None:
    """503 first, healthy again within `timeout_s` with a new rank 1; the old one gone."""
    wait_for(lambda: _health_code(client) == 200, timeout_s, "the group to be rebuilt")
    new_pid = _rank_pids(client)[1]
    assert new_pid != old_pid and _gone(old_pid)


def test_fault_switch_parses_and_targets_one_rank_and_generation():
    faults = Faults.from_environ(1, 0, {"PARADIT_FAULT": "rank=1,at=step:2,kind=hang"})
    assert faults is not None and faults.faults[0].kind == "hang"
    assert Faults.from_environ(0, 0, {"PARADIT_FAULT": "rank=1,at=step:2,kind=hang"}) is None
    both = "rank=all,at=load,kind=exit,gen=1;rank=1,at=step:1,kind=raise,times=1"
    assert Faults.from_environ(1, 0, {"PARADIT_FAULT": both}).faults[0].kind == "raise"
    assert Faults.from_environ(0, 1, {"PARADIT_FAULT": both}).faults[0].at == "load"
    with pytest.raises(ValueError, match="must look like"):
        Fault.parse("rank=1,at=sometime,kind=raise")
    raising = Fault.parse("rank=1,at=step:2,kind=raise,times=1")
    raising.at_step(1)  # not yet
    with pytest.raises(RuntimeError, match="injected fault"):
        raising.at_step(2)
    raising.at_step(2)  # times=1: only once
    slow = Fault.parse("rank=1,at=decode,kind=slow,secs=0.5")
    assert (slow.at, slow.kind, slow.secs) == ("decode", "slow", 0.5)
    with pytest.raises(ValueError, match="must look like"):
        Fault.parse("rank=1,at=decode,kind=slow,secs=0")


@pytest.mark.fast
def test_a_slow_fault_ticks_the_work_counter_while_it_works():
    progress = Progress()
    faults = Faults.from_environ(
        1, 0, {"PARADIT_FAULT": "rank=1,at=decode,kind=slow,secs=0.6"}, tick=progress.tick
    )
    faults.begin_job("a job")  # faults fire inside jobs only
    faults.at_step(1)  # not its moment
    assert progress.ticks == 0
    faults.at_decode()
    assert progress.ticks >= 2  # every 0.25 s while it works


@pytest.mark.fast
def test_every_block_of_a_model_ticks_the_work_counter():
    import torch

    blocks = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(3))
    inner = torch.nn.ModuleList([torch.nn.Sequential(torch.nn.ReLU())])
    model = torch.nn.ModuleDict({"blocks": blocks, "up": inner})
    progress = Progress()
    assert progress.watch(model) == 4
    x = torch.ones(1, 4)
    for block in blocks:
        x = block(x)
    inner[0](x)
    assert progress.ticks == 4


@pytest.mark.fast
def test_rank_watch_tells_frozen_from_hung_from_slow():
    import torch.distributed as dist

    store = dist.HashStore()
    alive, frozen = Progress(), Progress()
    beats = [Heartbeat(store, 1, alive, 0.05).start(), Heartbeat(store, 2, frozen, 0.05).start()]
    watch = RankWatch(store, [1, 2])
    try:

        def work(seconds: float) -> None:  # rank 1 works; rank 0 looks as its watchdog does
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                alive.tick()
                watch.frozen(60), watch.idle(60)
                time.sleep(0.05)

        work(0.6)  # rank 2 beats but does nothing
        beats[1].stop()  # then rank 2 freezes: its heartbeat stops too
        work(1.0)
        assert watch.idle(0.6) == [2]  # no work for 1.6 s: hung or frozen
        assert watch.frozen(0.6) == [2]  # no heartbeat for 1 s: frozen
        assert watch.frozen(30) == [] and watch.idle(30) == []
    finally:
        for beat in beats:
            beat.stop()


@pytest.mark.fast
def test_a_rank_freezes_its_imports_once_so_a_rebuilds_garbage_stays_collectable(monkeypatch):
    """A rank's first start moves what its imports made to the collector's permanent
    generation (the load's and each rebuild's full collection then skip it); a rebuild's
    start freezes nothing more: what exists then (an old model in a reference cycle, say)
    is still freed by the collector. (The model's imports themselves are left out: this
    worker's torch stands for them.)"""
    import gc
    import weakref

    from paradit.backend.processes import warm

    monkeypatch.setattr(warm, "warm_imports", lambda model: None)
    assert not gc.get_freeze_count(), "the pytest worker froze its objects"
    try:
        warm.settle_imports("tiny-wan")  # the first start
        frozen = gc.get_freeze_count()
        assert frozen > 100_000, frozen  # torch's objects, at least

        class Model:
            pass

        old, part = Model(), Model()
        old.part, part.model = part, old  # a cycle: only the collector frees it
        collected = weakref.ref(old)
        freezes = []
        freeze = gc.freeze
        monkeypatch.setattr(gc, "freeze", lambda: freezes.append(1) or freeze())
        warm.settle_imports("tiny-wan")  # a rebuild's start
        assert freezes == []  # (not the frozen count: another thread's objects may join it)
        del old, part
        gc.collect()
        assert collected() is None
    finally:
        gc.unfreeze()


def test_a_lost_or_hung_rank_rebuilds_the_group_and_a_failed_rebuild_is_retried(tmp_path, backends):
    """One backend, one rebuild after another: rank 1 failing alone, killed while idle (a
    job submitted while the group is rebuilt is refused), killed mid-job, hung mid-job (the
    next generation's rank 1 then dies while loading, so the second attempt brings the
    group back); each time the next job succeeds and no old rank is left."""
    fault = "rank=1,at=step:2,kind=oom;"  # generation 0: the first job
    fault += "rank=1,at=step:2,kind=hang,gen=3,prompt=hangs;rank=1,at=load,kind=exit,gen=4"
    with _backend(backends, tmp_path, fault) as backend:
        client = backend.client
        serve_pid, first_pid = _rank_pids(client)
        # serve keeps a zygote for rebuilds: its one child besides rank 1
        (zygote,) = _children(serve_pid) - {first_pid}
        plan, preview = _plan(client), _preview(client)  # one step: no fault
        # rank 1 fails alone at step 2 of the first job: the ranks disagree, a rebuild
        job = _ended(client, client.submit({"prompt": "x", "seed": 1}))
        assert job["status"] == "failed" and "rank 1" in job["error"]
        assert "OutOfMemoryError" in job["error"]
        _recovered(client, first_pid)
        assert client.wait(client.submit({"prompt": "x"}))["status"] == "succeeded"
        # rank 0 took over the memory plan's dry runs and the preview's map (the log, end):
        # the same plan and the same preview
        assert _plan(client) == plan and _preview(client) == preview
        # the rebuilt rank was forked by the zygote (not a fresh interpreter running
        # processes.child) and is serve's own child, which supervises it
        rebuilt = _rank_pids(client)[1]
        assert _parent(rebuilt) == serve_pid
        assert b"processes.child" not in Path(f"/proc/{rebuilt}/cmdline").read_bytes()
        assert _children(serve_pid) == {zygote, rebuilt}

        # killed while idle: 503 within 10 s, a job then refused, healthy again, the next
        # job succeeds
        idle_pid = _rank_pids(client)[1]
        os.kill(idle_pid, signal.SIGKILL)
        started = time.monotonic()
        wait_for(lambda: _health_code(client) == 503, 10, "/health to turn 503")
        assert time.monotonic() - started < 10
        with pytest.raises(BackendError) as refused:
            client.submit({"prompt": "while the group is rebuilt"})
        assert refused.value.status == 503 and "not healthy" in str(refused.value)
        _recovered(client, idle_pid)
        assert client.wait(client.submit({"prompt": "y"}))["status"] == "succeeded"

        # killed mid-job: that job fails within 10 s naming the rank; a queued job then runs
        running = client.submit(SLOW)
        wait_for(lambda: client.job(running)["progress"]["step"] >= 2, 120, "the job to run")
        queued = client.submit({"prompt": "after the rebuild", "seed": 3})
        busy_pid = _rank_pids(client)[1]
        os.kill(busy_pid, signal.SIGKILL)
        killed = time.time()
        failed = _ended(client, running)
        assert failed["status"] == "failed" and "rank 1" in failed["error"]
        assert failed["finished"] - killed < 10  # server clock, same machine
        assert client.wait(queued, timeout_s=180)["status"] == "succeeded"
        assert _gone(busy_pid)

        # generation 3: hung after step 2 (alive, heartbeats going): the job fails within
        # the hang timeout; the first rebuild's rank 1 dies while loading, the second holds
        hung_pid = _rank_pids(client)[1]
        job_id = client.submit({"prompt": "it hangs", "num_inference_steps": 6})
        wait_for(lambda: client.job(job_id)["progress"]["step"] >= 2, 120, "step 2")
        hung = time.time()
        job = _ended(client, job_id, 120)
        assert job["status"] == "failed" and "[1] stopped progressing" in job["error"]
        assert job["finished"] - hung < HANG_S + 10
        _recovered(client, hung_pid, timeout_s=120)
        assert client.wait(client.submit({"prompt": "x"}))["status"] == "succeeded"
        pids = _rank_pids(client)
    assert all(_gone(pid) for pid in pids[1:])  # no process of any group is left
    assert _gone(zygote)
    log = (tmp_path / "serve.log").read_text()
    assert "rebuild 1 failed" in log and "group rebuilt (generation 5)" in log
    plans = [line for line in log.splitlines() if "memory plan: " in line]
    taken_over = ["dry runs taken over from the group rebuilt" in line for line in plans]
    assert taken_over[0] is False and len(taken_over) >= 5 and all(taken_over[1:]), plans


def test_a_frozen_rank_is_lost_wherever_it_froze_and_a_slow_one_is_kept(tmp_path, backends):
    # gen 0: rank 1 freezes itself (SIGSTOP) as it starts the first job's decode; gen 1: the
    # first job's step 3 works for 2.5 hang timeouts on rank 1, ticking its work counter
    slow_s = 2.5 * HANG_S
    fault = "rank=1,at=decode,kind=stop,times=1;"
    fault += f"rank=1,at=step:2,kind=slow,secs={slow_s},gen=1,times=1"
    with _backend(backends, tmp_path, fault) as backend:
        client = backend.client

        # frozen in the decode: that job fails naming the rank; the one queued behind runs
        pid = _rank_pids(client)[1]
        decoding = client.submit({"prompt": "x", "num_inference_steps": 3})
        slow = client.submit({"prompt": "slow", "num_inference_steps": 4})
        wait_for(lambda: _state(pid) == "T", 120, "rank 1 to freeze at the decode")
        frozen = time.time()
        job = _ended(client, decoding)
        assert job["status"] == "failed" and "ranks [1] stopped answering" in job["error"]
        assert job["finished"] - frozen < HANG_S + 10
        _recovered(client, pid)

        # slow, but working: never killed, although rank 0 waited for it past the timeout
        pid = _rank_pids(client)[1]
        done = client.wait(slow, timeout_s=180)
        assert done["status"] == "succeeded" and max(done["timings"]["step_s"]) > slow_s
        assert _rank_pids(client)[1] == pid and client.health()["status"] == "ok"

        # frozen while denoising (from outside, as a wedged driver): the same
        running = client.submit(SLOW)
        wait_for(lambda: client.job(running)["progress"]["step"] >= 2, 120, "the job to run")
        queued = client.submit({"prompt": "after the rebuild", "seed": 3})
        os.kill(pid, signal.SIGSTOP)
        frozen = time.time()
        job = _ended(client, running)
        assert job["status"] == "failed" and "ranks [1] stopped answering" in job["error"]
        assert job["finished"] - frozen < HANG_S + 10  # server clock, same machine
        assert client.wait(queued, timeout_s=180)["status"] == "succeeded"
        assert _gone(pid)

        # frozen while idle: /health names it, the group is rebuilt, the next job runs
        pid = _rank_pids(client)[1]
        os.kill(pid, signal.SIGSTOP)
        frozen = time.monotonic()
        reason = wait_for(lambda: _unhealthy_because(client), HANG_S + 10, "/health: 503")
        assert "ranks [1] stopped answering" in reason, reason
        assert time.monotonic() - frozen < HANG_S + 10
        _recovered(client, pid)
        assert client.wait(client.submit({"prompt": "y"}))["status"] == "succeeded"
        pids = _rank_pids(client)
    assert all(_gone(pid) for pid in pids[1:])  # no process of any group is left
    assert "injected fault (stop) at the decode" in (tmp_path / "serve.log").read_text()


def _processes_of(output_dir: Path) -> list[int]:
    """Live processes whose command line names `output_dir`: a `serve` and its ranks (a
    forked rank keeps `serve`'s command line, a started one gets the same flags)."""
    needle = str(output_dir).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "cmdline").read_bytes() and not _gone(int(entry.name)):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_serve_killed_before_its_ranks_start_leaves_none(tmp_path):
    """SIGKILL to a fresh `serve` while its interpreter still imports: no rank is left (none
    had started)."""
    cmd = [sys.executable, "-m", "paradit", "serve", "--model", "tiny-wan"]
    cmd += ["--world-size", "3", "--device", "cpu", "--port", "0", "--threads", "1"]
    cmd += ["--output-dir", str(tmp_path)]
    serve = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def ranks() -> list[int]:
        return [pid for pid in _processes_of(tmp_path) if pid != serve.pid]

    try:
        time.sleep(0.5)  # the interpreter is still importing: no rank exists yet
        assert not ranks(), "ranks already run 0.5 s after serve started"
    finally:
        serve.kill()
        serve.wait()
    wait_for(lambda: not ranks(), 10, "every rank to be gone with serve")


def test_serve_killed_once_its_ranks_run_leaves_none(tmp_path, backends):
    """SIGKILL to `serve` (nothing of it runs after that) while its ranks join and load: they
    die with it (seen running, then gone), and so does the zygote it keeps for rebuilds
    (forked with the ranks). `serve` is forked from the worker's zygote (it forks its ranks
    and zygote as a fresh one does, after the same imports); its orphans become the worker's
    children, which it reaps."""
    argv = ["serve", "--model", "tiny-wan", "--world-size", "3", "--device", "cpu"]
    argv += ["--port", "0", "--threads", "1", "--output-dir", str(tmp_path / "out")]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with open(tmp_path / "serve.log", "wb") as log:
        serve = backends.zygote().spawn(argv, env, str(tmp_path), log.fileno(), log.fileno())
    seen: set[int] = set()
    try:
        seen = wait_for(lambda: len(_children(serve.pid)) == 3 and _children(serve.pid), 120)
        assert serve.poll() is None, "serve ended before it was killed"
    finally:
        serve.kill()
        serve.wait()
    try:
        wait_for(lambda: all(_gone(pid) for pid in seen), 10, "ranks 1, 2, zygote to be gone")
    finally:
        for pid in seen:  # orphans of serve: the worker (a child subreaper) adopted them
            if not _gone(pid):  # the test failed: leave nothing running
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def test_restart_with_the_same_output_folder_keeps_the_jobs(tmp_path, backends):
    def start() -> LocalBackend:
        config = ServeConfig(
            model="tiny-wan", device="cpu", threads_per_rank=1, output_dir=str(tmp_path / "out")
        )
        log_file = tmp_path / "serve.log"
        return WarmBackend(backends.zygote(), config, start_timeout_s=300, log_file=log_file)

    first = start()
    try:
        client = first.client
        done = client.wait(client.submit({"prompt": "kept", "seed": 2}))
        frame = client.frame(done["id"], 0)
        running = client.submit(SLOW)
        queued = [client.submit({"prompt": f"queued {i}", "seed": i}) for i in range(2)]
        wait_for(lambda: client.job(running)["progress"]["step"] >= 1, 120, "the slow job")
    finally:
        first.proc.kill()  # a crash: no goodbye to anyone
        first.proc.wait()
        first.stop()
    with start() as second:
        client = second.client
        jobs = {job["id"]: job for job in client.jobs()}
        assert jobs[done["id"]]["status"] == "succeeded"
        assert client.frame(done["id"], 0) == frame  # its files are served again
        assert jobs[running]["status"] == "failed"
        assert "stopped while this job ran" in jobs[running]["error"]
        for job_id in queued:
            assert client.wait(job_id, timeout_s=120)["status"] == "succeeded"


def test_with_no_rebuilds_left_the_backend_stays_down_and_says_why(tmp_path, backends):
    with _backend(backends, tmp_path, "", "--max-rebuilds", "0") as backend:
        client = backend.client
        rank_pid = _rank_pids(client)[1]
        os.kill(rank_pid, signal.SIGKILL)
        wait_for(lambda: _health_code(client) == 503, 10, "/health to turn 503")
        # no rebuild comes: the supervisor gives up at once and says so
        wait_for(lambda: "restart the backend" in _unhealthy_because(client), 10, "give-up")
        with pytest.raises(BackendError) as down:
            client.health()
        assert down.value.status == 503 and "restart the backend" in str(down.value)
        with pytest.raises(BackendError) as refused:
            client.submit({"prompt": "x"})
        assert refused.value.status == 503
