"""Who this process is in the group, from its launcher's environment variables (no torch
import: `serve` reads it, and refuses a bad launch, before loading anything).

Launchers: paradit itself (`serve --world-size N` on one machine), torchrun, SLURM's srun and
Open MPI / MPICH's mpirun. Each gives rank, world size and local rank in its own variables;
rank 0's address and port come from MASTER_ADDR / MASTER_PORT, or from the defaults below.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

GENERATION_ENV = "PARADIT_GENERATION"
"""Which incarnation of the group a rank started by `serve` belongs to (rebuilds count up)."""

DEFAULT_MASTER_PORT = 29500
"""Rank 0's store port when MASTER_PORT is not set (torchrun's default too)."""


@dataclass(frozen=True)
class LaunchEnv:
    """Who this process is in the group and where rank 0's store listens."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    master_addr: str
    master_port: int
    launcher: str
    """"paradit", "torchrun", "slurm", "mpi" or "env" (RANK/WORLD_SIZE set by hand)."""
    agent_store: bool = False
    """torchrun's agent already serves the TCPStore on MASTER_PORT."""
    generation: int = 0
    """torchrun's restart count: keys of an earlier incarnation must not be read again."""

    def __post_init__(self) -> None:
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank {self.rank} must be in [0, world size {self.world_size})")
        if not 0 <= self.local_rank < max(self.local_world_size, 1):
            raise ValueError(f"local rank {self.local_rank} out of range")

    @property
    def prefix(self) -> str:
        return f"paradit/{self.generation}"

    @classmethod
    def from_environ(cls, env: Mapping[str, str] | None = None) -> LaunchEnv | None:
        """Read a launcher's variables; None when no launcher started this process."""
        env = os.environ if env is None else env
        keys = [
            ("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"),
            ("slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"),
            (
                "mpi",
                "OMPI_COMM_WORLD_RANK",
                "OMPI_COMM_WORLD_SIZE",
                "OMPI_COMM_WORLD_LOCAL_RANK",
                "OMPI_COMM_WORLD_LOCAL_SIZE",
            ),
            ("mpi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
        ]
        for launcher, rank_key, size_key, local_key, local_size_key in keys:
            if rank_key not in env or size_key not in env:
                continue
            if launcher == "slurm" and not env.get("SLURM_STEP_ID", "").isdigit():
                continue  # an sbatch/salloc shell, not a task of an srun step
            if launcher == "torchrun" and "TORCHELASTIC_RUN_ID" not in env:
                launcher = "paradit" if env.get("PARADIT_LAUNCHER") == "paradit" else "env"
            size = int(env[size_key])
            local_size = env.get(local_size_key) or env.get("SLURM_STEP_TASKS_PER_NODE", "")
            local_size = local_size.split("(")[0].split(",")[0]
            rank = int(env[rank_key])
            return cls(
                rank=rank,
                world_size=size,
                local_rank=int(env.get(local_key, "0")),
                local_world_size=int(local_size) if local_size.isdigit() else size,
                master_addr=_master_addr(env, launcher, rank, local_size == str(size)),
                master_port=int(env.get("MASTER_PORT") or DEFAULT_MASTER_PORT),
                launcher=launcher,
                agent_store=env.get("TORCHELASTIC_USE_AGENT_STORE") == "True",
                generation=int(
                    env.get("TORCHELASTIC_RESTART_COUNT") or env.get(GENERATION_ENV) or 0
                ),
            )
        return None


def _master_addr(env: Mapping[str, str], launcher: str, rank: int, one_host: bool) -> str:
    """Rank 0's address: MASTER_ADDR; else, when the launcher says every rank runs on this
    host, 127.0.0.1; else, under srun, the first node of the step (where SLURM puts task 0)."""
    if env.get("MASTER_ADDR"):
        return env["MASTER_ADDR"]
    if launcher == "slurm":
        one_host = env.get("SLURM_STEP_NUM_NODES", env.get("SLURM_NNODES")) == "1"
    elif launcher != "mpi":
        raise ValueError(f"{launcher} launch needs MASTER_ADDR: the address of rank 0's host")
    if one_host:
        return "127.0.0.1"
    first = first_host(env.get("SLURM_STEP_NODELIST", "")) if launcher == "slurm" else ""
    if not first:
        example = (
            "mpirun -x MASTER_ADDR=node0 -x MASTER_PORT=29500 ..."
            if launcher == "mpi"
            else "MASTER_ADDR=node0 MASTER_PORT=29500 srun ..."
        )
        raise ValueError(
            f"{launcher} started ranks on several hosts: set MASTER_ADDR (and MASTER_PORT) "
            f"to rank 0's host and a port open between the hosts ({example})"
        )
    here = env.get("SLURMD_NODENAME")
    if rank == 0 and here and here != first:
        raise ValueError(
            f"task 0 runs on {here}, not on the step's first node {first}: "
            "set MASTER_ADDR to task 0's host"
        )
    return first


def first_host(nodelist: str) -> str:
    """The first host of a SLURM node list: `gpu[03-05,9],cpu1` -> `gpu03`."""
    match = re.match(r"([^,\[]*)(?:\[([^],-]*))?", nodelist.strip())
    return "".join(match.groups(default="")) if match else ""
