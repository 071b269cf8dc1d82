"""`serve`'s lifecycle on rank 0: start the group, serve HTTP, rebuild a broken group.

The ranks' processes (started, forked, supervised and stopped) are `processes/`'s: on one
machine `serve --world-size N` is rank 0 and starts ranks 1..N-1 (`processes.group.OwnGroup`);
under torchrun / srun / mpirun every process runs `serve` and reads its rank from the
environment (`processes.group.LaunchedGroup`), and ranks 1..N-1 run the worker loop.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable

import torch

from ..config import ServeConfig, is_loopback
from ..processes.group import LaunchedGroup, OwnGroup, solo_env
from ..processes.rank import run_worker
from ..processes.start_watch import StartWatch
from ..runtime.group import pick_device
from ..runtime.launch_env import LaunchEnv

log = logging.getLogger(__name__)

REBUILD_BACKOFF_S = (2.0, 5.0, 15.0, 30.0)


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
    device = pick_device(config.device, env or solo_env(config))
    _check_plan_flags(config, device)
    group = OwnGroup(config, device.type) if env is None else LaunchedGroup(config, env)
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
        with StartWatch(group.lost, lambda reason: _give_up_start(group, reason)):
            runtime = group.start(abort)
        from .service import Service  # imported once the other ranks have started

        service = Service(
            runtime,
            config,
            group.lost,
            recoverable=group.rebuilds and config.max_rebuilds > 0,
            on_hang=group.on_hang,
        )
        if threading.current_thread() is threading.main_thread():  # it runs rank 0's share
            service.group_health.install_interrupt()
        service.wait_ready(abort)
        if config.token is None and not is_loopback(config.host):  # --insecure said so
            log.warning(
                "serving on %s without a token: anyone who reaches it can run jobs", config.host
            )
        from .http import HttpServer, create_app  # after the other ranks started: 1-2 s

        app = create_app(service, config.token, config.cors_origins)
        http = HttpServer(app, config.host, config.port).start()
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


def _give_up_start(group: OwnGroup | LaunchedGroup, reason: str) -> None:
    """A rank was lost while rank 0 waited where it cannot give up by itself (the process
    group's rendezvous): kill the other ranks and exit 1 with the reason, as a start-up that
    noticed it would (`StartWatch`)."""
    group.on_hang(reason)  # SIGKILLs our ranks (a launcher's are the launcher's)
    print(f"error: RuntimeError: start-up stopped: {reason}", file=sys.stderr, flush=True)
    logging.shutdown()
    os._exit(1)


def _rebuild(group: OwnGroup, service, config: ServeConfig, stop, abort) -> bool:
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
    # the new runtime takes over the old one's dry runs and preview map (not its model)
    carried = service.runtime.carried() if service.runtime is not None else None
    for attempt in range(1, config.max_rebuilds + 1):
        if stop.is_set():
            return True
        health.note = f"rebuilding the group (attempt {attempt} of {config.max_rebuilds})"
        log.warning("%s after: %s", health.note, reason)
        service.detach()
        group.close(kill=True, final=False)
        release_freed_memory(collect=True)  # the old model, before loading the new one
        try:
            runtime = group.start(abort, generation=group.generation + 1, carried=carried)
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
