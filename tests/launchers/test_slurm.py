"""`paradit serve` under SLURM for real: a one-machine cluster (tests/slurm_cluster.py: munged,
slurmctld and slurmd from Debian's `slurm-wlm` and `munge`, installed by `.ci/run`) runs
`srun -n 2`, `sbatch` of docs/launchers.md's script, and Open MPI's and MPICH's mpirun inside
an allocation; each job equals world size 1.

The cluster's node is named `node0`, not after this host: to mpirun inside an allocation it
is another machine, which it reaches through srun as it reaches the other machines of a
real cluster (Open MPI starts its daemon there with srun, MPICH's Hydra its proxy).

Cost: about 62 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator

import pytest
from conftest import run_job, wait_for
from launchers import (
    BODY,
    SERVE,
    alive,
    descendants,
    docs_block,
    free_port,
    launch_env,
    processes_of,
    ready_url,
    require,
    spawn,
    stop,
)
from slurm_cluster import SlurmCluster

from paradit.backend.client.http import Client


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[SlurmCluster]:
    slurm = SlurmCluster(tmp_path_factory.mktemp("slurm"), cpus=2, node="node0").start()
    yield slurm
    slurm.stop()


def _env(cluster: SlurmCluster, **extra: str) -> dict[str, str]:
    return launch_env(SLURM_CONF=cluster.env["SLURM_CONF"], MASTER_PORT=str(free_port()), **extra)


def test_srun_serves_then_a_killed_task_makes_rank_0_exit_with_the_reason(
    cluster, tmp_path, references
):
    out = tmp_path / "out"
    cmd = ["srun", "-n", "2", sys.executable, *SERVE, "--hang-timeout", "4"]
    log = tmp_path / "srun.log"
    proc = spawn([*cmd, "--output-dir", str(out)], _env(cluster), log)
    try:
        client = Client(ready_url(proc))
        ranks = client.info()["ranks"]
        assert run_job(client, BODY)[1] == references.frames("tiny-wan", BODY)
        pids = processes_of(out)
        assert {r["pid"] for r in ranks} <= set(pids)
        os.kill(ranks[1]["pid"], signal.SIGKILL)  # rank 1 ran the job: it had started
        assert proc.wait(timeout=60) != 0
        text = log.read_text()
        assert re.search(
            r"ranks \[1\] stopped answering \(no heartbeat for 4s, --hang-timeout\); "
            r"exiting so that the launcher restarts the group",
            text,
        ), text
        # srun's own words on the two tasks: rank 0 exited non-zero by itself
        assert "task 1: Killed" in text and "task 0: Exited with exit code 1" in text, text
        wait_for(lambda: not [p for p in pids if alive(p)], 30, "the tasks to end")
        wait_for(lambda: not cluster.jobs(), 30, "the step's allocation to end")
    finally:
        stop([proc])


def test_sbatch_of_the_documented_script(cluster, tmp_path, references):
    script = tmp_path / "paradit.sbatch"
    script.write_text(docs_block("#!/bin/bash\n#SBATCH"))
    (tmp_path / "token").write_text("sbatch-test-token\n")
    out = tmp_path / "out"
    submit = subprocess.run(
        [
            "sbatch",
            "--parsable",
            "--nodes",
            "1",
            "--ntasks-per-node",
            "2",
            "--gpus-per-task",
            "0",
            "--chdir",
            str(tmp_path),
            str(script),
            *("--device", "cpu", "--threads", "1", "--port", "0", "--output-dir", str(out)),
        ],
        env=_env(cluster, MODEL="tiny-wan"),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert submit.returncode == 0, submit.stderr
    job_id = submit.stdout.strip().split(";")[0]
    log = tmp_path / f"paradit-{job_id}.log"

    def url() -> str | None:
        found = re.search(r"ready at (http://\S+)", log.read_text()) if log.exists() else None
        return found.group(1) if found else None

    try:
        client = Client(wait_for(url, 180, "the job's ready line"), token="sbatch-test-token")
        info = client.info()
        assert info["world_size"] == 2 and info["model"] == "tiny-wan"
        assert run_job(client, BODY)[1] == references.frames("tiny-wan", BODY)
        pids = processes_of(out)
        assert {r["pid"] for r in info["ranks"]} <= set(pids)
        # the script's srun --kill-on-bad-exit=1 ends the step, and so the job, at once
        os.kill(info["ranks"][1]["pid"], signal.SIGKILL)
        wait_for(lambda: not cluster.jobs(), 60, "the job to end")
    finally:
        if cluster.jobs():
            subprocess.run(["scancel", job_id], env=cluster.env, check=False)
    job = subprocess.run(
        ["scontrol", "show", "job", job_id], env=cluster.env, capture_output=True, text=True
    ).stdout
    assert "JobState=FAILED" in job, job
    assert "task 1: Killed" in log.read_text()
    wait_for(lambda: not [p for p in pids if alive(p)], 30, "the tasks to end")
    assert processes_of(out) == []


def _argv0(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return os.path.basename(f.read().split(b"\0")[0].decode())


def _environ(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as f:
        items = [item.decode(errors="replace") for item in f.read().split(b"\0") if item]
    return dict(item.split("=", 1) for item in items if "=" in item)


@pytest.mark.parametrize("mpirun", ["mpirun.openmpi", "mpirun.mpich"])
def test_mpirun_inside_an_allocation_numbers_the_ranks_by_mpi(
    cluster, tmp_path, references, mpirun
):
    """`salloc -n 2 mpirun -np 2 ... serve`: mpirun starts its ranks through srun (Open MPI its
    daemon on the node, MPICH's Hydra its proxy), so both ranks inherit SLURM_PROCID=0 of that
    one-task srun step; MPI's variables, the innermost launcher's, must number them 0 and 1.

    MPICH's run is also the suite's `serve` under MPICH on one machine without MASTER_ADDR,
    stopped by Ctrl-C at mpirun: the group stops cleanly, mpirun exits 0 (and so salloc)
    (tests/launchers/test_mpirun.py keeps MPICH's error across hosts)."""
    require(mpirun, package="openmpi-bin" if "openmpi" in mpirun else "mpich")
    out = tmp_path / "out"
    forward = [] if "mpich" in mpirun else ["-x", "PYTHONPATH", "-x", "OMP_NUM_THREADS"]
    env = _env(
        cluster,
        OMPI_ALLOW_RUN_AS_ROOT="1",  # root in CI containers
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        PMIX_MCA_gds="hash",  # mpirun's and the node's daemon on one host
    )
    if "openmpi" in mpirun:
        forward += ["-x", f"MASTER_PORT={env['MASTER_PORT']}"]
        # its own session directory: Open MPI launches on one machine sharing /tmp's race
        # to create and remove it (tests/launchers/test_mpirun.py's may run meanwhile)
        env["OMPI_MCA_orte_tmpdir_base"] = sessions = tempfile.mkdtemp(prefix="ompi-")
    else:  # one machine: rank 0's address is 127.0.0.1 without being told
        env.pop("MASTER_ADDR", None)
    cmd = ["salloc", "-n", "2", mpirun, "-np", "2", *forward, sys.executable, *SERVE]
    log = tmp_path / "salloc.log"
    proc = spawn([*cmd, "--output-dir", str(out)], env, log)
    try:
        client = Client(ready_url(proc))  # world size 2, not two groups of one
        ranks = client.info()["ranks"]
        assert [r["rank"] for r in ranks] == [0, 1]
        inherited = [_environ(r["pid"]) for r in ranks]
        assert [e.get("SLURM_PROCID") for e in inherited] == ["0", "0"], inherited
        assert all(e.get("SLURM_STEP_ID", "").isdigit() for e in inherited), inherited
        assert run_job(client, BODY)[1] == references.frames("tiny-wan", BODY)
        if "mpich" in mpirun:  # Ctrl-C at mpirun (salloc's child): the group stops cleanly
            (launcher,) = [p for p in descendants(proc.pid) if _argv0(p) == mpirun]
            os.kill(launcher, signal.SIGINT)
            assert proc.wait(timeout=60) == 0, log.read_text()
    finally:
        stop([proc])  # SIGINT: salloc gives the allocation back, srun ends its steps
    wait_for(lambda: not processes_of(out), 60, "the ranks to end")
    wait_for(lambda: not cluster.jobs(), 60, "the allocation to end")
    if "openmpi" in mpirun:
        shutil.rmtree(sessions, ignore_errors=True)
