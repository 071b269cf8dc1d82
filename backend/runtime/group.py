"""Process-group setup: a rank picks its device and joins the group (who it is in the group
comes from `launch_env.py`)."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

import torch
import torch.distributed as dist

from .faults import Faults
from .launch_env import LaunchEnv

log = logging.getLogger(__name__)

Abort = Callable[[], "str | None"]

STARTUP_TIMEOUT_S = 1800.0
"""How long ranks wait for each other while starting (imports, downloads, loading): start-up
is not bound by the collective timeout, which is about lost peers during a job."""


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
    faults = Faults.from_environ(env.rank, env.generation)  # tests only
    if faults is not None:
        faults.at_place("join")
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
