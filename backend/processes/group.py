"""The group's processes as rank 0 holds them: ranks 1..N-1 started here and supervised
(`OwnGroup`: fresh interpreters or forked ranks, watched through their exit codes, killed
when hung, stopped in order), or every rank started by a launcher (`LaunchedGroup`: torchrun /
srun / mpirun decide). A child exits by itself when rank 0's store goes away and is killed by
the kernel when its parent dies (`child.py`)."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from typing import TYPE_CHECKING

import torch.distributed as dist

from ..config import ServeConfig
from ..runtime.group import STARTUP_TIMEOUT_S, Abort, Group, open_store
from ..runtime.launch_env import GENERATION_ENV, LaunchEnv
from .child import PARENT_ENV
from .forked import ForkedRank, RankZygote, can_fork, fork_ranks
from .rank import start_rank

if TYPE_CHECKING:  # the engine's imports wait until a rank loads its model
    from ..runtime.engine import Carried

log = logging.getLogger(__name__)


class Children:
    """Ranks 1..N-1 started by this process, supervised through their exit codes: ranks
    forked earlier (`forked`) that are handed their environment, ranks forked by `zygote`,
    or fresh interpreters."""

    def __init__(
        self,
        config: ServeConfig,
        env: LaunchEnv,
        forked: dict[int, ForkedRank] | None = None,
        zygote: RankZygote | None = None,
    ):
        self.procs: dict[int, subprocess.Popen | ForkedRank] = {}
        forked = forked or {}
        base = {
            **os.environ,
            "PARADIT_LAUNCHER": "paradit",
            "MASTER_ADDR": env.master_addr,
            "MASTER_PORT": str(env.master_port),
            "WORLD_SIZE": str(env.world_size),
            "LOCAL_WORLD_SIZE": str(env.world_size),
        }
        try:
            for rank in range(1, env.world_size):
                child_env = {
                    **base,
                    "RANK": str(rank),
                    "LOCAL_RANK": str(rank),
                    GENERATION_ENV: str(env.generation),
                    PARENT_ENV: str(os.getpid()),
                }
                if rank in forked:
                    forked[rank].release(child_env)
                    self.procs[rank] = forked.pop(rank)
                    continue
                if zygote is not None:
                    try:
                        self.procs[rank] = zygote.spawn(child_env)
                        continue
                    except OSError as exc:  # a fresh interpreter then, slower but the same
                        log.warning("the zygote failed (%s); rank %d starts afresh", exc, rank)
                        zygote = None
                # Own session: a Ctrl-C in the terminal reaches rank 0 only, which stops the
                # group in order; the children die with rank 0 in any case (PDEATHSIG).
                self.procs[rank] = subprocess.Popen(
                    [sys.executable, "-m", "paradit.backend.processes.child", *config.to_argv()],
                    env=child_env,
                    start_new_session=True,
                )
        except OSError:
            self.stop(grace_s=0)
            raise
        finally:
            for unused in forked.values():
                unused.discard()

    def lost(self) -> str | None:
        dead = {r: p.returncode for r, p in self.procs.items() if p.poll() is not None}
        if not dead:
            return None
        return ", ".join(f"rank {r} exited with code {code}" for r, code in sorted(dead.items()))

    def kill(self) -> None:
        """SIGKILL every child now (a hung rank answers nothing else) and reap them."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
        for proc in self.procs.values():
            proc.wait()

    def stop(self, grace_s: float = 10.0) -> None:
        """Wait for a clean exit, then terminate, then kill: no child is left behind."""
        for signal_to_send, wait_s in (
            (None, grace_s),
            (signal.SIGTERM, 5.0),
            (signal.SIGKILL, 5.0),
        ):
            deadline = time.monotonic() + wait_s
            for proc in self.procs.values():
                if proc.poll() is None and signal_to_send is not None:
                    proc.send_signal(signal_to_send)
            for proc in self.procs.values():
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            if all(proc.poll() is not None for proc in self.procs.values()):
                return


class OwnGroup:
    """Ranks 1..N-1 started and supervised here (`serve --world-size N` on one machine)."""

    rebuilds = True

    def __init__(self, config: ServeConfig, device_type: str):
        self.config = config
        # Forked before the store starts its thread: the ranks of the first start, and the
        # zygote that forks the ranks of rebuilds.
        self.forked: dict[int, ForkedRank] = {}
        self.zygote: RankZygote | None = None
        if can_fork(config, device_type):
            self.forked = fork_ranks(config, config.to_argv())
            try:
                self.zygote = RankZygote.start(config.to_argv(), self.forked)
            except OSError as exc:  # rebuilds start fresh interpreters then
                log.warning("no zygote for rebuilds: %s", exc)
        self.store = open_store(solo_env(config), timedelta(seconds=STARTUP_TIMEOUT_S))
        self.env = LaunchEnv(
            0, config.world_size, 0, config.world_size, "127.0.0.1", self.store.port, "paradit"
        )
        self.children: Children | None = None
        self.group: Group | None = None

    @property
    def generation(self) -> int:
        return self.env.generation

    def start(self, abort: Abort, generation: int = 0, carried: Carried | None = None):
        """Start ranks 1..N-1 and load rank 0's runtime (`carried`: what the broken group's
        runtime hands on to a rebuild's)."""
        self.env = dataclasses.replace(self.env, generation=generation)
        if self.config.world_size > 1:
            self.children = Children(self.config, self.env, self.forked, self.zygote)
        self.group, runtime = start_rank(self.config, self.env, self.store, abort, carried)
        return runtime

    def lost(self) -> str | None:
        return self.children.lost() if self.children is not None else None

    def on_hang(self, reason: str) -> None:
        """Kill the group's children (SIGKILL reaches a stopped process too): rank 0's
        blocked collective then fails at once. `reason`: why the group is broken."""
        if self.children is not None:
            self.children.kill()

    def close(self, *, kill: bool = False, final: bool = True) -> None:
        """Stop the children (at once with `kill`: a broken group's survivors may never
        leave their loops) and leave the process group; the zygote too unless a rebuild
        follows (`final=False`)."""
        if final and self.zygote is not None:
            self.zygote.close()
            self.zygote = None
        for unused in self.forked.values():  # a start that failed before handing them out
            unused.discard()
        self.forked = {}
        if self.children is not None:
            if kill:
                self.children.kill()
            else:
                self.children.stop()
            self.children = None
        if self.group is not None:
            self.group.close()
            self.group = None
        elif dist.is_initialized():  # a start that failed after joining
            dist.destroy_process_group()


class LaunchedGroup:
    """Every rank started by torchrun / srun / mpirun: a lost rank ends the whole group, and
    the launcher decides whether to start it again."""

    rebuilds = False

    def __init__(self, config: ServeConfig, env: LaunchEnv):
        self.config, self.env = config, env
        self.group: Group | None = None

    def start(self, abort: Abort, generation: int = 0):
        self.group, runtime = start_rank(self.config, self.env, None, abort)
        return runtime

    def lost(self) -> str | None:
        return None

    def on_hang(self, reason: str) -> None:
        """Rank 0 cannot stop ranks it did not start: it exits non-zero with the reason, and
        the launcher's restart policy applies (as for a lost rank)."""
        log.error("%s; exiting so that the launcher restarts the group", reason)
        logging.shutdown()
        os._exit(1)

    def close(self, *, kill: bool = False) -> None:
        if self.group is not None:
            self.group.close()
            self.group = None


def solo_env(config: ServeConfig) -> LaunchEnv:
    return LaunchEnv(0, config.world_size, 0, config.world_size, "127.0.0.1", 0, "paradit")
