"""Launchers: the same `paradit serve` under torchrun, or srun- and mpirun-style environments.

Cost: about 78 s (in the suite's two-worker run on 2 cores).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys

import pytest
from conftest import run_job

from paradit.backend.client.http import Client
from paradit.backend.runtime.group import LaunchEnv

BODY = {"prompt": "launched elsewhere", "seed": 5}
# torchrun is this module of the torch the tests run with: never missing from PATH, so the
# tests that use it never skip
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
SERVE = [
    "-m",
    "paradit",
    "serve",
    "--model",
    "tiny-wan",
    "--device",
    "cpu",
    "--threads",
    "1",
    "--port",
    "0",
]


@pytest.mark.fast
def test_launch_env_from_each_launcher():
    assert LaunchEnv.from_environ({}) is None
    torchrun = LaunchEnv.from_environ(
        {
            "RANK": "3",
            "WORLD_SIZE": "4",
            "LOCAL_RANK": "1",
            "LOCAL_WORLD_SIZE": "2",
            "MASTER_ADDR": "node0",
            "MASTER_PORT": "29400",
            "TORCHELASTIC_RUN_ID": "x",
            "TORCHELASTIC_USE_AGENT_STORE": "True",
            "TORCHELASTIC_RESTART_COUNT": "2",
        }
    )
    assert (torchrun.rank, torchrun.world_size, torchrun.local_rank) == (3, 4, 1)
    assert torchrun.launcher == "torchrun" and torchrun.agent_store
    assert torchrun.prefix == "paradit/2"  # an elastic restart reads fresh keys
    slurm_task = {
        "SLURM_PROCID": "5",
        "SLURM_NTASKS": "8",
        "SLURM_LOCALID": "1",
        "SLURM_STEP_TASKS_PER_NODE": "4(x2)",
        "MASTER_ADDR": "node0",
    }
    # a batch script's own shell has SLURM_PROCID too, but it is no task of an srun step
    assert LaunchEnv.from_environ(slurm_task) is None
    slurm = LaunchEnv.from_environ({**slurm_task, "SLURM_STEP_ID": "0"})
    assert (slurm.rank, slurm.world_size, slurm.local_rank, slurm.local_world_size) == (5, 8, 1, 4)
    assert slurm.master_port == 29500 and not slurm.agent_store
    mpi = LaunchEnv.from_environ(
        {
            "OMPI_COMM_WORLD_RANK": "1",
            "OMPI_COMM_WORLD_SIZE": "2",
            "OMPI_COMM_WORLD_LOCAL_RANK": "1",
            "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
            "MASTER_ADDR": "10.0.0.1",
            "MASTER_PORT": "1234",
        }
    )
    assert (mpi.rank, mpi.launcher, mpi.master_addr, mpi.master_port) == (
        1,
        "mpi",
        "10.0.0.1",
        1234,
    )
    with pytest.raises(ValueError, match="MASTER_ADDR"):
        LaunchEnv.from_environ({"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_STEP_ID": "3"})
    with pytest.raises(ValueError, match="rank"):
        LaunchEnv.from_environ({"RANK": "2", "WORLD_SIZE": "2", "MASTER_ADDR": "a"})


@pytest.mark.fast
def test_launch_env_mpich_pmi_and_which_launcher_wins():
    mpich = LaunchEnv.from_environ(
        {
            "PMI_RANK": "6",
            "PMI_SIZE": "8",
            "MPI_LOCALRANKID": "2",
            "MPI_LOCALNRANKS": "4",
            "MASTER_ADDR": "node1",
        }
    )
    assert (mpich.rank, mpich.world_size, mpich.local_rank, mpich.local_world_size) == (6, 8, 2, 4)
    assert mpich.launcher == "mpi" and mpich.master_port == 29500
    # torchrun inside a SLURM allocation: torchrun's variables name this process
    inside = LaunchEnv.from_environ(
        {
            "RANK": "1",
            "WORLD_SIZE": "2",
            "TORCHELASTIC_RUN_ID": "x",
            "MASTER_ADDR": "a",
            "SLURM_PROCID": "0",
            "SLURM_NTASKS": "1",
            "SLURM_STEP_ID": "0",
        }
    )
    assert (inside.launcher, inside.rank, inside.world_size) == ("torchrun", 1, 2)
    # RANK/WORLD_SIZE by hand, or from paradit's own launch
    by_hand = {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "a", "MASTER_PORT": "7"}
    assert LaunchEnv.from_environ(by_hand).launcher == "env"
    own = LaunchEnv.from_environ(
        {**by_hand, "PARADIT_LAUNCHER": "paradit", "PARADIT_GENERATION": "3"}
    )
    assert own.launcher == "paradit" and own.prefix == "paradit/3"
    # srun without MASTER_ADDR: the node srun ran on
    slurm = LaunchEnv.from_environ(
        {
            "SLURM_PROCID": "1",
            "SLURM_NTASKS": "2",
            "SLURM_STEP_ID": "0",
            "SLURM_LAUNCH_NODE_IPADDR": "10.1.2.3",
        }
    )
    assert (slurm.launcher, slurm.master_addr, slurm.local_world_size) == ("slurm", "10.1.2.3", 2)
    with pytest.raises(ValueError, match="MASTER_ADDR"):
        LaunchEnv.from_environ({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2"})


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _spawn(cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
    """A serve process in its own session, its stdout (the ready line) piped back."""
    return subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        start_new_session=True,
    )


def _ready_url(proc: subprocess.Popen) -> str:
    line = proc.stdout.readline()
    match = re.search(r"ready at (http://\S+) .*world size (\d+)", line)
    assert match, f"no ready line: {line!r}"
    assert match.group(2) == "2"
    return match.group(1)


def _stop(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
    for proc in procs:
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _reference(backends) -> list[bytes]:
    return run_job(backends.get("tiny-wan", 1, "--save-latents"), BODY)[1]


def test_under_torchrun(tmp_path, backends):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [
        *TORCHRUN,
        "--nproc-per-node",
        "2",
        "--master-port",
        str(_free_port()),
        *SERVE,
        "--output-dir",
        str(tmp_path),
    ]
    proc = _spawn(cmd, env)
    try:
        client = Client(_ready_url(proc))
        assert client.info()["world_size"] == 2
        assert run_job(client, BODY)[1] == _reference(backends)
    finally:
        _stop([proc])


def _launcher_vars(launcher: str, rank: int) -> dict[str, str]:
    """What srun, or Open MPI's mpirun, gives each of two tasks on one node."""
    if launcher == "srun":
        return {
            "SLURM_PROCID": str(rank),
            "SLURM_NTASKS": "2",
            "SLURM_LOCALID": str(rank),
            "SLURM_NTASKS_PER_NODE": "2",
            "SLURM_STEP_ID": "0",
        }
    return {
        "OMPI_COMM_WORLD_RANK": str(rank),
        "OMPI_COMM_WORLD_SIZE": "2",
        "OMPI_COMM_WORLD_LOCAL_RANK": str(rank),
        "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
    }


@pytest.mark.parametrize("launcher", ["srun", "mpirun"])
def test_under_an_srun_or_mpirun_style_environment(tmp_path, backends, launcher):
    """mpirun and srun are not installed here: their variables are set by hand."""
    port = _free_port()
    procs = []
    for rank in (0, 1):
        env = {
            **{k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")},
            **_launcher_vars(launcher, rank),
            "OMP_NUM_THREADS": "1",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
        }
        procs.append(_spawn([sys.executable, *SERVE, "--output-dir", str(tmp_path)], env))
    try:
        client = Client(_ready_url(procs[0]))
        ranks = client.info()["ranks"]
        assert [r["pid"] for r in ranks] == [p.pid for p in procs]
        assert run_job(client, BODY)[1] == _reference(backends)
    finally:
        _stop(procs)
