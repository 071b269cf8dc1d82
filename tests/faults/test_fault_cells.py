"""The fault matrix's cells that tests/faults/test_fault_matrix.py leaves out, on one backend.

Kind (raise, hang, out-of-memory) x place (before the first step, inside a block, inside a
collective, in the decode): rank 1 alone in the seven cells the matrix file lacks, and a hang
on every rank (rank 0 too) at each place. Each job ends within `--hang-timeout` + 10 s with
the failing rank's own error (or where it hung), the group is rebuilt (each cell a generation
of the same backend, `gen=`: the backend surviving a failure is the property), no old rank 1
is left, and the next plain, LoRA and cached jobs give a fresh backend's frames byte for
byte. The backend runs with a short `--hang-timeout` (`fault_jobs.HANG_S`, 2 s). Another
data-parallel replica hung inside its step, and rank 0's standstill timed within one job, are
checked without processes (the last two tests).

Cost: about 40 s (the suite's two-worker run on 2 cores, 2026-11-29): a backend start,
eleven rebuilds of the group, about 15 small jobs.
"""

from __future__ import annotations

import time

import pytest
from conftest import Backends, gone, healthy, rank_pids, wait_for
from fault_jobs import ERRORS, HANG_S, failed, frames, fresh_frames, next_jobs
from fault_jobs import PLACES as FAULT_PLACES

NEXT = next_jobs("fault-cells.safetensors")
PLACES = {k: FAULT_PLACES[k] for k in ("start", "block", "collective", "decode")}
"""Where a cell fails (the step end is tests/faults/test_faults.py's)."""
CELLS = [
    ("raise", "decode"),
    ("oom", "decode"),
    ("hang", "decode"),
    ("oom", "start"),
    ("oom", "block"),
    ("hang", "start"),
    ("raise", "collective"),
]
"""Rank 1 alone: with tests/faults/test_fault_matrix.py's five, all twelve cells."""


@pytest.fixture(scope="module")
def fresh(backends) -> dict[str, list[bytes]]:
    """The pool's plain tiny-wan on 2 ranks: each next job's frames on a fresh backend."""
    return fresh_frames(backends, NEXT)


def test_one_rank_failing_or_hanging_at_every_place_fails_its_job_with_its_own_error(
    backends: Backends, fresh
):
    """Rank 1 alone in the seven cells, then every rank hanging at each place: the failing
    rank's error (or where it hung) within `--hang-timeout` + 10 s, a rebuilt group with no
    old rank 1 left, and a fresh backend's next jobs. Before, a rank hung at its decode was
    found at the collective timeout, and a hang on every rank only by restarting the backend
    (rank 0's own job never ended)."""
    table = [
        f"rank=1,{PLACES[place][0]},kind={kind},gen={gen},prompt=cell-{kind}-{place}"
        for gen, (kind, place) in enumerate(CELLS)
    ]
    table += [
        f"rank=all,{PLACES[place][0]},kind=hang,gen={gen},prompt=every-rank-hangs-{place}"
        for gen, place in enumerate(PLACES, start=len(CELLS))
    ]
    backend = backends.start(
        "tiny-wan", 2, "--hang-timeout", str(HANG_S), env=(("PARADIT_FAULT", ";".join(table)),)
    )
    seen: list[int] = []
    try:
        client = backend.client
        kinds = list(NEXT)
        for index, (kind, place) in enumerate(CELLS):
            pids = rank_pids(client)
            seen += pids[1:]
            job, took_s = failed(client, f"cell-{kind}-{place}")
            error = job["error"]
            assert "rank 1" in error or "ranks [1]" in error, (kind, place, error)
            if kind == "hang":
                assert "stopped progressing" in error and "faults.py" in error, error
            else:
                assert ERRORS[kind] in error and PLACES[place][1] in error, error
            assert took_s < HANG_S + 10, (kind, place, took_s, error)
            wait_for(lambda: healthy(client), 120, "the group to be rebuilt")
            assert all(gone(pid) for pid in pids[1:]), (kind, place)
            after = kinds[index % len(kinds)]
            assert frames(client, NEXT[after]) == fresh[after], (kind, place, after)
        for index, place in enumerate(PLACES):  # every rank hangs: rank 0's job interrupted
            pids = rank_pids(client)
            seen += pids[1:]
            job, took_s = failed(client, f"every-rank-hangs-{place}")
            error = job["error"]
            # rank 0 is named at its hang (rank 1 too when it stood still as long by then)
            assert "stopped progressing inside the job" in error, (place, error)
            assert "ranks [0" in error and "rank 0 at faults.py" in error, (place, error)
            assert "rank 0's job was interrupted" in error, (place, error)
            assert took_s < HANG_S + 10, (place, took_s, error)
            wait_for(lambda: healthy(client), 120, "the group to be rebuilt")
            assert rank_pids(client)[0] == pids[0] and all(gone(pid) for pid in pids[1:]), place
            after = kinds[index % len(kinds)]
            assert frames(client, NEXT[after]) == fresh[after], (place, after)
        for kind, body in NEXT.items():
            assert frames(client, body) == fresh[kind], kind
        seen += rank_pids(client)[1:]
    finally:
        backends.stop(backend)
    wait_for(lambda: all(gone(pid) for pid in seen), 10, "every rank 1 to be gone")


@pytest.mark.fast
def test_another_replica_that_hangs_inside_a_step_is_found_within_the_hang_timeout():
    """Replica 1 (rank 1 alone, dp 2 on 2 ranks) has a job: while its work counter moves it
    is slow, not hung; once it has stood still for `--hang-timeout` outside any collective
    the group is stopped naming it, where rank 0 would have waited for the collective
    timeout (the replica's next step) before."""
    import types

    import torch.distributed as dist

    from paradit.backend.runtime.control import Sender
    from paradit.backend.runtime.messages import Shutdown
    from paradit.backend.serving.health import GroupHealth
    from paradit.backend.serving.jobs import JobBook

    store = dist.HashStore()
    group = types.SimpleNamespace(world_size=2, store_client=lambda *_: store)
    runtime = types.SimpleNamespace(group=group, in_job=False)
    stopped: list[str] = []
    health = GroupHealth(JobBook(4, 4), 0.3, on_hang=stopped.append)
    try:
        own, other = Sender(store, 2, ranks=[]), Sender(store, 2, ranks=[1], prefix="replica1/")
        health.attach(runtime, own, lambda: None, [other])
        other.send(Shutdown())  # any message: replica 1 is busy with it
        store.set("where/1", "attention.py:120 in forward")
        for _ in range(8):  # slow: it ticks every 0.1 s
            store.add("ticks/1", 1)
            last_tick = time.monotonic()
            health._check_inside_job()
            time.sleep(0.1)
        assert not stopped
        store.set("where/1", "faults.py:149 in _fire")
        started = time.monotonic()
        while not stopped and time.monotonic() - started < 5:
            health._check_inside_job()
            time.sleep(0.05)
        assert stopped == [
            "replica 1: ranks [1] stopped progressing inside the job "
            "(rank 1 at faults.py:149 in _fire) for 0s (--hang-timeout)"
        ]
        assert 0.3 <= time.monotonic() - last_tick < 1.0
    finally:
        health.close()


@pytest.mark.fast
def test_rank_0s_standstill_is_timed_within_one_job():
    """The watchdog times rank 0's standstill inside the job it runs: the next job (or the
    next group's first one) starts at the count the previous one ended on (rank 0 encodes
    its prompt without ticking), which is not a standstill since that job. Before, rank 0
    was taken for hung at the next job's start after an idle pause as long as
    `--hang-timeout` (its job interrupted, its group rebuilt); seen under load as "rank 0
    at functional.py in norm" in tests/faults/test_fault_matrix.py."""
    import types

    import torch.distributed as dist

    from paradit.backend.runtime.control import Sender
    from paradit.backend.runtime.messages import Shutdown
    from paradit.backend.runtime.progress import Progress
    from paradit.backend.serving.health import GroupHealth
    from paradit.backend.serving.jobs import JobBook

    store = dist.HashStore()
    group = types.SimpleNamespace(world_size=2, store_client=lambda *_: store)
    progress = Progress()
    runtime = types.SimpleNamespace(
        group=group, in_job=True, progress=progress, place=lambda: "functional.py:1 in norm"
    )
    stopped: list[str] = []
    health = GroupHealth(JobBook(4, 4), 0.3, on_hang=stopped.append)

    def job(sender: Sender, ticks: int) -> None:
        """A job on rank 0: it encodes (no tick), works (`ticks`), then ends; an idle pause
        longer than the hang timeout follows."""
        sender.send(Shutdown())  # any message: the job rank 0 runs
        health._check_inside_job()
        for _ in range(ticks):
            progress.tick()
            health._check_inside_job()
        sender.pending = None
        time.sleep(0.4)

    try:
        for ticks in (0, 3):  # the first group breaks while rank 0 encodes its first job
            sender = Sender(store, 2, ranks=[1])  # a rebuilt group: its counts start again
            health.attach(runtime, sender, lambda: None)
            progress.ticks = 0
            job(sender, ticks)
        job(sender, 3)  # it starts at the count the previous job ended on
        assert not stopped, stopped
        sender.send(Shutdown())  # a job whose rank 0 stands still: found
        started = time.monotonic()
        while not stopped and time.monotonic() - started < 5:
            health._check_inside_job()
            time.sleep(0.05)
        assert stopped and "ranks [0] stopped progressing" in stopped[0], stopped
        assert 0.3 <= time.monotonic() - started < 1.0
    finally:
        health.close()
