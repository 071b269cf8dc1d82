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
        """Read a launcher's variables; None when no launcher started this process.

        The innermost launcher names the process (`innermost`): launchers nest, and an inner
        one's processes inherit the outer one's variables."""
        env = os.environ if env is None else env
        found = innermost(env)
        if found is None:
            return None
        launcher, (rank_key, size_key, local_key, local_size_key) = found
        if launcher == "torchrun" and "TORCHELASTIC_RUN_ID" not in env:
            launcher = "paradit" if env.get("PARADIT_LAUNCHER") == "paradit" else "env"
        size = int(env[size_key])
        local_size = env.get(local_size_key, "")
        if launcher == "slurm":
            local_size = local_size or env.get("SLURM_STEP_TASKS_PER_NODE", "")
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
            generation=int(env.get("TORCHELASTIC_RESTART_COUNT") or env.get(GENERATION_ENV) or 0),
        )


LAUNCHER_KEYS: dict[str, tuple[tuple[str, str, str, str], ...]] = {
    "torchrun": (("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"),),
    "mpi": (
        (
            "OMPI_COMM_WORLD_RANK",
            "OMPI_COMM_WORLD_SIZE",
            "OMPI_COMM_WORLD_LOCAL_RANK",
            "OMPI_COMM_WORLD_LOCAL_SIZE",
        ),
        ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    ),
    "slurm": (("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"),),
}
"""Each launcher's rank, world size, local rank and local world size variables (Open MPI's,
then MPICH / Intel MPI's Hydra)."""


def innermost(env: Mapping[str, str]) -> tuple[str, tuple[str, str, str, str]] | None:
    """The launcher that started this process, and its variables: torchrun's (or RANK and
    WORLD_SIZE set by hand), else mpirun's, else srun's.

    mpirun inside a SLURM allocation starts its processes through srun (MPICH's Hydra its
    proxies, Open MPI its daemons on the other nodes), so they inherit that srun step's
    SLURM_PROCID (0 on every rank of a node): MPI's variables win. But srun itself sets
    PMI_RANK and PMI_SIZE (`--mpi=pmi2`) to its task's rank and its step's task count: then
    srun is the launcher, and its node list says where rank 0 is."""
    found: dict[str, tuple[str, str, str, str]] = {}
    for launcher, options in LAUNCHER_KEYS.items():
        given = [keys for keys in options if keys[0] in env and keys[1] in env]
        if given:
            found[launcher] = given[0]
    slurm = found.get("slurm")
    if slurm and not env.get("SLURM_STEP_ID", "").isdigit():
        del found["slurm"]  # an sbatch/salloc shell, not a task of an srun step
    mpi = found.get("mpi")
    if mpi and "slurm" in found:
        step_size = env.get("SLURM_STEP_NUM_TASKS") or env[slurm[1]]
        if (env[mpi[0]], env[mpi[1]]) == (env[slurm[0]], step_size):
            del found["mpi"]  # srun's own PMI: the rank and size of srun's step
    for launcher in LAUNCHER_KEYS:
        if launcher in found:
            return launcher, found[launcher]
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
