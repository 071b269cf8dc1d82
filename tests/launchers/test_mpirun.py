"""`paradit serve` under the real mpirun of Open MPI and of MPICH (Debian's `openmpi-bin` and
`mpich`, installed by `.ci/run`): one group of two ranks whose job equals world size 1.

Open MPI runs two "nodes": a hostfile names two hosts and mpirun reaches them through a
stand-in for ssh that runs the command on this machine, so each host gets its own Open MPI
daemon and its own process set (local size 1 each), as on two machines. MPICH across two
such hosts without MASTER_ADDR is a usage error; MPICH serving on one machine without it
(the one-machine default) and stopping at Ctrl-C is tests/launchers/test_slurm.py's MPICH
run inside an allocation (one launch proves both).

Cost: about 14 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile

import pytest
from conftest import run_job, wait_for
from launchers import (
    BODY,
    SERVE,
    alive,
    descendants,
    free_port,
    launch_env,
    processes_of,
    ready_url,
    require,
    spawn,
    stop,
)

from paradit.backend.client.http import Client

OPEN_MPI = "mpirun.openmpi"
MPICH = "mpirun.mpich"
FAKE_SSH = """#!/bin/sh
# Stands in for ssh: "on HOST, run COMMAND" runs COMMAND here, with HOST's own Open MPI
# session directory, as on a machine of its own.
while [ "${1#-}" != "$1" ]; do shift; done
mkdir -p "%(sessions)s/$1"
OMPI_MCA_orte_tmpdir_base="%(sessions)s/$1"
export OMPI_MCA_orte_tmpdir_base
shift
exec sh -c "$*"
"""


@pytest.fixture
def two_hosts(tmp_path):
    """A stand-in for ssh, which mpirun uses to reach hosts other than its own.

    Each "host" gets its own session directory: two Open MPI daemons of one launch sharing
    /tmp's on one machine race to create the job's directory (mkdir "File exists", mpirun
    exits 213) and write their topology into one shared-memory file (the daemon segfaults,
    139); on this machine 25 launches in 150 failed so (`mpirun.openmpi -np 2 --hostfile`
    of /bin/true), none in 180 with a directory per host. The directories live under /tmp
    itself, not tmp_path: Open MPI's socket paths beneath them must stay short."""
    sessions = tempfile.mkdtemp(prefix="ompi-hosts-")
    ssh = tmp_path / "fake-ssh"
    ssh.write_text(FAKE_SSH % {"sessions": sessions})
    ssh.chmod(0o755)
    yield str(ssh)
    shutil.rmtree(sessions, ignore_errors=True)


def test_open_mpi_on_two_nodes_then_a_killed_rank_ends_the_group(tmp_path, references, two_hosts):
    require(OPEN_MPI, package="openmpi-bin")
    hostfile = tmp_path / "hosts"
    hostfile.write_text("node0 slots=1\nnode1 slots=1\n")
    out = tmp_path / "out"
    cmd = [
        OPEN_MPI,
        "-np",
        "2",
        "--hostfile",
        str(hostfile),
        "--mca",
        "plm_rsh_agent",
        two_hosts,
        "-x",
        "MASTER_ADDR=127.0.0.1",
        "-x",
        f"MASTER_PORT={free_port()}",
        "-x",
        "PYTHONPATH",
        "-x",
        "OMP_NUM_THREADS",
        sys.executable,
        *SERVE,
        "--output-dir",
        str(out),
    ]
    env = launch_env(
        OMPI_ALLOW_RUN_AS_ROOT="1",  # root in CI containers
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        PMIX_MCA_gds="hash",  # two daemons on one host: no shared PMIx data store
    )
    log = tmp_path / "mpirun.log"
    proc = spawn(cmd, env, log)
    try:
        client = Client(ready_url(proc))
        ranks = client.info()["ranks"]
        assert run_job(client, BODY)[1] == references.frames("tiny-wan", BODY)
        tree = descendants(proc.pid)  # both "nodes'" daemons and ranks
        assert {r["pid"] for r in ranks} <= set(tree)
        os.kill(ranks[1]["pid"], signal.SIGKILL)  # rank 1 ran the job: it had started
        assert proc.wait(timeout=60) != 0
        text = log.read_text()
        assert "process rank 1" in text and "exited on signal 9 (Killed)" in text, text
        wait_for(lambda: not [p for p in tree if alive(p)], 30, "the launch's processes to end")
        assert processes_of(out) == []
    finally:
        stop([proc])


def test_mpich_across_hosts_without_master_addr_is_a_usage_error(tmp_path, two_hosts):
    """Across hosts, no MASTER_ADDR is a clear error on every rank, before torch is imported.
    (`serve` under MPICH on one machine without MASTER_ADDR, its job and Ctrl-C's clean stop:
    tests/launchers/test_slurm.py's MPICH run inside an allocation, one launch for both.)"""
    require(MPICH, package="mpich")
    out = tmp_path / "out"
    env = {k: v for k, v in launch_env(MASTER_PORT=str(free_port())).items() if k != "MASTER_ADDR"}
    hosts = ["-hosts", "node0,node1", "-launcher-exec", two_hosts]
    failed = subprocess.run(
        [MPICH, "-np", "2", *hosts, sys.executable, *SERVE, "--output-dir", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert failed.returncode == 2, failed.stderr  # the one-line usage error's code
    assert "error: mpi started ranks on several hosts: set MASTER_ADDR" in failed.stderr
    assert processes_of(out) == []
