"""Starting the group: the ranks' processes, their supervision, and `serve`'s lifecycle.

On one machine `serve --world-size N` is rank 0 and starts ranks 1..N-1 as child processes
(`python -m paradit.backend.serving.launch`), watching their sentinels; a child exits by itself when
rank 0's store goes away and is killed by the kernel when its parent dies. Under torchrun /
srun / mpirun every process runs `serve` and reads its rank from the environment.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import timedelta

import torch
import torch.distributed as dist

from ..config import ServeConfig, is_loopback
from ..runtime.group import STARTUP_TIMEOUT_S, Abort, Group, open_store, pick_device
from ..runtime.launch_env import GENERATION_ENV, LaunchEnv
from .child import PARENT_ENV
from .forked import ForkedRank, RankZygote, can_fork, fork_ranks
from .rank import run_worker, start_rank

log = logging.getLogger(__name__)

REBUILD_BACKOFF_S = (2.0, 5.0, 15.0, 30.0)


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
                    [sys.executable, "-m", "paradit.backend.serving.child", *config.to_argv()],
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


def serve(config: ServeConfig, on_ready: Callable[[str, int], None]) -> int:
    """Run a backend until SIGINT/SIGTERM; rank 0 serves HTTP. Returns the exit code.

    On one machine (`serve --world-size N`) rank 0 supervises ranks 1..N-1: when one is lost
    (exited, stopped answering, or hung) the group is rebuilt with the same plan and the
    queued jobs run afterwards. Under torchrun / srun / mpirun rank 0 exits with code 1
    instead, so the launcher restarts every rank (torchrun `--max-restarts`).
    """
    env = LaunchEnv.from_environ()
    if env is not None and env.rank != 0:
        return run_worker(config, env)
    if env is not None and env.world_size != config.world_size:
        log.info("launcher world size %d overrides --world-size", env.world_size)
        config = dataclasses.replace(config, world_size=env.world_size)
    device = pick_device(config.device, env or _solo_env(config))
    _check_plan_flags(config, device)
    group = _OwnGroup(config, device.type) if env is None else _LaunchedGroup(config, env)
    stop = threading.Event()
    service = None

    def on_signal(*_args) -> None:
        stop.set()
        if service is not None:
            service.book.close()  # a running job stops at its next step

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    http = None

    def abort() -> str | None:
        return "stopped by a signal" if stop.is_set() else group.lost()

    try:
        runtime = group.start(abort)
        from .service import Service  # imported once the other ranks have started

        service = Service(
            runtime,
            config,
            group.lost,
            recoverable=group.rebuilds and config.max_rebuilds > 0,
            on_hang=group.on_hang,
        )
        service.wait_ready(abort)
        if config.token is None and not is_loopback(config.host):  # --insecure said so
            log.warning(
                "serving on %s without a token: anyone who reaches it can run jobs", config.host
            )
        from .http import HttpServer, create_app  # after the other ranks started: 1-2 s

        http = HttpServer(create_app(service, config.token), config.host, config.port).start()
        on_ready(http.url, config.world_size)
        while True:
            service.run_forever(stop)
            if stop.is_set():
                service.shutdown()
                return 0
            if not group.rebuilds:
                log.error(
                    "a rank was lost (%s); exiting for the launcher to restart",
                    service.group_health.broken,
                )
                return 1
            if not _rebuild(group, service, config, stop, abort):
                stop.wait()  # down: /health says why until someone stops the backend
                return 1
    finally:
        if http is not None:
            http.stop()
        group.close()


def _rebuild(group: _OwnGroup, service, config: ServeConfig, stop, abort) -> bool:
    """Replace a broken group by a new one, retried with back-off; False when it stays down
    (every attempt failed, or the group keeps breaking without finishing a job)."""
    from ..runtime.engine import release_freed_memory

    health = service.group_health
    reason = health.broken
    if health.rebuilds_in_a_row >= config.max_rebuilds:
        health.give_up(
            f"the group broke {health.rebuilds_in_a_row + 1} times without finishing a job "
            f"(last: {reason}); restart the backend"
        )
        return False
    for attempt in range(1, config.max_rebuilds + 1):
        if stop.is_set():
            return True
        health.note = f"rebuilding the group (attempt {attempt} of {config.max_rebuilds})"
        log.warning("%s after: %s", health.note, reason)
        service.detach()
        group.close(kill=True, final=False)
        release_freed_memory(collect=True)  # the old model, before loading the new one
        try:
            runtime = group.start(abort, generation=group.generation + 1)
            service.attach(runtime, group.lost)
            service.wait_ready(abort)
        except Exception as exc:  # a failed rebuild is retried after a pause
            log.error("rebuild %d failed: %s: %s", attempt, type(exc).__name__, exc)
            stop.wait(REBUILD_BACKOFF_S[min(attempt, len(REBUILD_BACKOFF_S)) - 1])
            continue
        health.rebuilt()
        log.warning("group rebuilt (generation %d); serving again", group.generation)
        return True
    health.give_up(
        f"the group could not be rebuilt in {config.max_rebuilds} attempts ({reason}); "
        "restart the backend"
    )
    return False


class _OwnGroup:
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
        self.store = open_store(_solo_env(config), timedelta(seconds=STARTUP_TIMEOUT_S))
        self.env = LaunchEnv(
            0, config.world_size, 0, config.world_size, "127.0.0.1", self.store.port, "paradit"
        )
        self.children: Children | None = None
        self.group: Group | None = None

    @property
    def generation(self) -> int:
        return self.env.generation

    def start(self, abort: Abort, generation: int = 0):
        self.env = dataclasses.replace(self.env, generation=generation)
        if self.config.world_size > 1:
            self.children = Children(self.config, self.env, self.forked, self.zygote)
        self.group, runtime = start_rank(self.config, self.env, self.store, abort)
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


class _LaunchedGroup:
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


def _solo_env(config: ServeConfig) -> LaunchEnv:
    return LaunchEnv(0, config.world_size, 0, config.world_size, "127.0.0.1", 0, "paradit")


def _check_plan_flags(config: ServeConfig, device: torch.device) -> None:
    """Fail before starting any rank when the degrees cannot work (the model may refuse more)."""
    from ..parallel.plan import choose_plan

    choose_plan(
        config.replica_size,
        supports_cfg=True,
        device_type=device.type,
        cfg_degree=config.cfg_degree,
        ulysses_degree=config.ulysses_degree,
        ring_degree=config.ring_degree,
    )
