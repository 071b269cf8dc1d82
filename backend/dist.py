"""Process-group setup: where a rank learns who it is and joins the group.

Launchers: paradit itself (`serve --world-size N` on one machine), torchrun, SLURM's srun and
Open MPI / MPICH's mpirun. Each gives rank, world size and local rank in its own environment
variables; the master address and port come from MASTER_ADDR / MASTER_PORT.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

log = logging.getLogger(__name__)

STARTUP_TIMEOUT_S = 1800.0
"""How long ranks wait for each other while starting (imports, downloads, loading): start-up
is not bound by the collective timeout, which is about lost peers during a job."""


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
    """"paradit", "torchrun", "slurm" or "mpi"."""

    def __post_init__(self) -> None:
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank {self.rank} must be in [0, world size {self.world_size})")
        if not 0 <= self.local_rank < max(self.local_world_size, 1):
            raise ValueError(f"local rank {self.local_rank} out of range")

    @property
    def agent_hosts_store(self) -> bool:
        """torchrun's agent already serves the TCPStore on MASTER_PORT."""
        return self.launcher == "torchrun"

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
            if launcher == "torchrun" and "TORCHELASTIC_RUN_ID" not in env:
                launcher = "paradit" if env.get("PARADIT_LAUNCHER") == "paradit" else "env"
            addr = env.get("MASTER_ADDR") or env.get("SLURM_LAUNCH_NODE_IPADDR")
            if not addr:
                raise ValueError(
                    f"{launcher} launch needs MASTER_ADDR: the address of rank 0's host"
                )
            port = int(env.get("MASTER_PORT", "29500"))
            size = int(env[size_key])
            local_size = env.get(local_size_key, "").split("(")[0]
            return cls(
                rank=int(env[rank_key]),
                world_size=size,
                local_rank=int(env.get(local_key, "0")),
                local_world_size=int(local_size) if local_size.isdigit() else size,
                master_addr=addr,
                master_port=port,
                launcher=launcher,
            )
        return None


def pick_device(device: str, env: LaunchEnv) -> torch.device:
    """`auto`: one CUDA device per local rank when there are enough, else CPU."""
    cuda_ok = torch.cuda.is_available() and torch.cuda.device_count() >= env.local_world_size
    if device == "cuda":
        if not cuda_ok:
            found = torch.cuda.device_count() if torch.cuda.is_available() else 0
            raise ValueError(
                f"--device cuda needs one CUDA device per local rank "
                f"({env.local_world_size}), found {found}"
            )
        return torch.device("cuda", env.local_rank)
    if device == "auto" and cuda_ok:
        return torch.device("cuda", env.local_rank)
    return torch.device("cpu")


@dataclass
class Group:
    """A joined process group: this rank, its device, and the control channels."""

    env: LaunchEnv
    device: torch.device
    store: dist.Store
    """Control-plane key/value store (job specs, replies, heartbeats); never a collective."""
    ctrl: dist.ProcessGroup
    """gloo group for small CPU messages during a job (tensors of the spec, cancel flags)."""
    timeout: timedelta

    @property
    def rank(self) -> int:
        return self.env.rank

    @property
    def world_size(self) -> int:
        return self.env.world_size

    @property
    def is_driver(self) -> bool:
        return self.env.rank == 0

    def store_client(self) -> dist.Store:
        """A second connection to the control store, for another thread."""
        store = dist.TCPStore(
            self.env.master_addr, self.env.master_port, is_master=False, timeout=self.timeout
        )
        return dist.PrefixStore("paradit", store)

    def barrier(self, name: str, timeout_s: float = STARTUP_TIMEOUT_S) -> None:
        """Wait on the store (not a collective) until every rank arrives at `name`."""
        store_barrier(self.store, name, self.world_size, timeout_s)

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()


def open_store(env: LaunchEnv, timeout: timedelta) -> dist.TCPStore:
    """Rank 0 hosts the TCPStore (unless torchrun's agent does); the others connect."""
    is_master = env.rank == 0 and not env.agent_hosts_store
    return dist.TCPStore(
        env.master_addr,
        env.master_port,
        is_master=is_master,
        wait_for_workers=False,
        timeout=timeout,
        use_libuv=True,
    )


def store_barrier(store: dist.Store, name: str, world_size: int, timeout_s: float) -> None:
    """Every rank adds itself to counter `name`, then waits until all have."""
    key = f"barrier/{name}"
    store.add(key, 1)
    deadline = time.monotonic() + timeout_s
    while store.add(key, 0) < world_size:
        if time.monotonic() > deadline:
            raise TimeoutError(f"ranks did not all reach {name!r} within {timeout_s:.0f}s")
        time.sleep(0.01)


def join_group(
    env: LaunchEnv, device: torch.device, timeout: timedelta, store: dist.TCPStore | None = None
) -> Group:
    """Join the default process group (NCCL+gloo on CUDA, gloo on CPU) and a gloo control group."""
    store = store or open_store(env, timedelta(seconds=STARTUP_TIMEOUT_S))
    store_barrier(dist.PrefixStore("paradit", store), "join", env.world_size, STARTUP_TIMEOUT_S)
    backend = "cuda:nccl,cpu:gloo" if device.type == "cuda" else "gloo"
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(
        backend=backend,
        store=dist.PrefixStore("pg", store),
        rank=env.rank,
        world_size=env.world_size,
        timeout=timeout,
        device_id=device if device.type == "cuda" else None,
    )
    ctrl = (
        dist.new_group(backend="gloo", timeout=timeout)
        if device.type == "cuda"
        else dist.group.WORLD
    )
    log.info("rank %d/%d joined on %s (%s)", env.rank, env.world_size, device, backend)
    return Group(env, device, dist.PrefixStore("paradit", store), ctrl, timeout)
