"""Process-group setup: where a rank learns who it is and joins the group.

Launchers: paradit itself (`serve --world-size N` on one machine), torchrun, SLURM's srun and
Open MPI / MPICH's mpirun. Each gives rank, world size and local rank in its own environment
variables; the master address and port come from MASTER_ADDR / MASTER_PORT.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta

import torch
import torch.distributed as dist

log = logging.getLogger(__name__)

Abort = Callable[[], "str | None"]

GENERATION_ENV = "PARADIT_GENERATION"
"""Which incarnation of the group a rank started by `serve` belongs to (rebuilds count up)."""

DEFAULT_MASTER_PORT = 29500
"""Rank 0's store port when MASTER_PORT is not set (torchrun's default too)."""

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
    if one_host and launcher in ("slurm", "mpi"):
        return "127.0.0.1"
    first = first_host(env.get("SLURM_STEP_NODELIST", "")) if launcher == "slurm" else ""
    if not first:
        raise ValueError(
            f"{launcher} started ranks on several hosts: set MASTER_ADDR (and MASTER_PORT) "
            "to rank 0's host and a port open between the hosts "
            "(mpirun -x MASTER_ADDR=node0 -x MASTER_PORT=29500 ...)"
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


def pick_device(device: str, env: LaunchEnv) -> torch.device:
    """`auto`: one CUDA device per local rank when there are enough, else CPU.

    Under an external launcher that gives each task one GPU of its own (e.g. srun
    --gpus-per-task=1), every rank sees a single device: it is that rank's, cuda:0.
    """
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    index = None
    if count >= env.local_world_size:
        index = env.local_rank
    elif count == 1 and env.launcher != "paradit" and env.world_size > 1:
        index = 0
    if device == "cuda" and index is None:
        raise ValueError(
            f"--device cuda needs one CUDA device per local rank ({env.local_world_size}), "
            f"found {count}"
        )
    if device in ("cuda", "auto") and index is not None:
        return torch.device("cuda", index)
    if device == "auto" and count:
        log.warning(
            "%d CUDA device(s) for %d local ranks: running on CPU", count, env.local_world_size
        )
    return torch.device("cpu")


@dataclass
class Group:
    """A joined process group: this rank, its device, and the control channels."""

    env: LaunchEnv
    device: torch.device
    store: dist.Store
    """Control-plane key/value store (job specs, replies, heartbeats); never a collective."""
    ctrl: dist.ProcessGroup
    """gloo group of this rank's replica for small CPU messages during a job (tensors of the
    spec, cancel flags); the whole world when there is one replica."""
    timeout: timedelta
    abort: Abort = field(default=lambda: None)
    """Why to give up waiting for the other ranks at start-up (e.g. one exited), or None."""
    dp_degree: int = 1
    """Data-parallel replicas: consecutive blocks of `replica_size` ranks, each running its
    own jobs; every collective of a job stays inside its replica."""

    def __post_init__(self) -> None:
        if self.dp_degree < 1 or self.world_size % self.dp_degree:
            raise ValueError(
                f"dp degree {self.dp_degree} must divide the world size {self.world_size}"
            )

    @property
    def rank(self) -> int:
        return self.env.rank

    @property
    def world_size(self) -> int:
        return self.env.world_size

    @property
    def is_rank0(self) -> bool:
        """Rank 0: serves HTTP, encodes every job and drives every replica."""
        return self.env.rank == 0

    @property
    def replica_size(self) -> int:
        return self.world_size // self.dp_degree

    @property
    def replica(self) -> int:
        """Index of this rank's replica."""
        return self.rank // self.replica_size

    @property
    def leader(self) -> int:
        """Global rank of this replica's first rank: the source of its broadcasts."""
        return self.replica * self.replica_size

    @property
    def is_leader(self) -> bool:
        """The first rank of a replica: decodes its jobs' frames and renders previews."""
        return self.rank == self.leader

    def store_client(self, timeout: timedelta | None = None) -> dist.Store:
        """A second connection to the control store, for another thread (its reads of a
        missing key give up after `timeout`, by default the group's)."""
        store = dist.TCPStore(
            self.env.master_addr,
            self.env.master_port,
            is_master=False,
            timeout=timeout or self.timeout,
        )
        return dist.PrefixStore(self.env.prefix, store)

    def barrier(self, name: str, timeout_s: float = STARTUP_TIMEOUT_S) -> None:
        """Wait on the store (not a collective) until every rank arrives at `name`."""
        store_barrier(self.store, name, self.world_size, timeout_s, self.abort)

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()


def open_store(env: LaunchEnv, timeout: timedelta) -> dist.TCPStore:
    """Rank 0 hosts the TCPStore (unless torchrun's agent does); the others connect.

    paradit's own single-machine launch listens on 127.0.0.1 only: the store takes commands
    without authentication. Across machines it must listen where the other ranks reach it;
    keep that network private.
    """
    is_master = env.rank == 0 and not env.agent_store
    kwargs = {}
    if is_master and env.launcher == "paradit":
        listener = socket.socket()
        listener.bind(("127.0.0.1", env.master_port))
        listener.listen(128)
        env_port = listener.getsockname()[1]
        kwargs["master_listen_fd"] = listener.detach()  # the store owns the socket now
    else:
        env_port = env.master_port
    store = dist.TCPStore(
        env.master_addr,
        env_port,
        is_master=is_master,
        wait_for_workers=False,
        timeout=timeout,
        use_libuv=True,
        **kwargs,
    )
    return store


def store_barrier(
    store: dist.Store, name: str, world_size: int, timeout_s: float, abort: Abort = lambda: None
) -> None:
    """Every rank adds itself to counter `name`, then waits until all have (or `abort` says
    why not)."""
    key = f"barrier/{name}"
    store.add(key, 1)
    deadline = time.monotonic() + timeout_s
    while store.add(key, 0) < world_size:
        reason = abort()
        if reason:
            raise RuntimeError(f"start-up stopped: {reason}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"ranks did not all reach {name!r} within {timeout_s:.0f}s")
        time.sleep(0.01)


def join_group(
    env: LaunchEnv,
    device: torch.device,
    timeout: timedelta,
    store: dist.TCPStore | None = None,
    abort: Abort = lambda: None,
    dp_degree: int = 1,
) -> Group:
    """Join the default process group (NCCL+gloo on CUDA, gloo on CPU) and a gloo control
    group: the world's, or with `dp_degree` > 1 this rank's replica's."""
    store = store or open_store(env, timedelta(seconds=STARTUP_TIMEOUT_S))
    control = dist.PrefixStore(env.prefix, store)
    store_barrier(control, "join", env.world_size, STARTUP_TIMEOUT_S, abort)
    backend = "cuda:nccl,cpu:gloo" if device.type == "cuda" else "gloo"
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(
        backend=backend,
        store=dist.PrefixStore(f"pg/{env.generation}", store),
        rank=env.rank,
        world_size=env.world_size,
        timeout=timeout,
        device_id=device if device.type == "cuda" else None,
    )
    if dp_degree > 1:  # every rank creates every replica's group, in the same order
        ctrl, _ = dist.new_subgroups(env.world_size // dp_degree, timeout=timeout, backend="gloo")
    elif device.type == "cuda":
        ctrl = dist.new_group(backend="gloo", timeout=timeout)
    else:
        ctrl = dist.group.WORLD
    log.info("rank %d/%d joined on %s (%s)", env.rank, env.world_size, device, backend)
    return Group(env, device, control, ctrl, timeout, abort, dp_degree)
