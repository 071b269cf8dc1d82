"""Shared test fixtures: real backends (`paradit serve` process groups on CPU/gloo).

Backends are started once per session per (model, world size, options) and stopped at the
end; each rank uses one thread so several groups fit on a 2-core machine.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")

from paradit.backend.client import Client  # noqa: E402
from paradit.backend.client.local import LocalBackend  # noqa: E402
from paradit.backend.config import ServeConfig  # noqa: E402


class Backends:
    """Starts backends on demand and keeps them for the session."""

    def __init__(self, root: Path):
        self.root = root
        self._running: dict[ServeConfig, LocalBackend] = {}

    def get(self, model: str, world_size: int, *extra: str) -> Client:
        return self.start(model, world_size, *extra).client

    def start(
        self, model: str, world_size: int, *extra: str, env: tuple[tuple[str, str], ...] = ()
    ) -> LocalBackend:
        """A backend of `model` on `world_size` ranks with `serve` flags `extra` and extra
        environment variables `env` ((name, value) pairs)."""
        key = (model, world_size, extra, env)
        name = f"{model.replace('/', '_')[-40:]}-ws{world_size}-{abs(hash(key)) % 10**6}"
        spec = ServeConfig.from_argv(
            list(extra),
            model=model,
            world_size=world_size,
            device="cpu",
            threads_per_rank=1,
            output_dir=str(self.root / name),
            timeout_s=120.0,
        )
        backend = self._running.get(spec)
        if backend is None or not backend.alive():
            log_file = self.root / f"{name}.log"  # env is in `name`, so in the spec's folder
            backend = LocalBackend(spec, start_timeout_s=300, log_file=log_file, env=dict(env))
            self._running[spec] = backend
        return backend

    def stop(self, client_or_backend) -> None:
        for spec, backend in list(self._running.items()):
            if backend is client_or_backend or backend.client is client_or_backend:
                backend.stop()
                del self._running[spec]

    def stop_all(self) -> None:
        for backend in self._running.values():
            backend.stop()
        self._running.clear()


@pytest.fixture(scope="session")
def backends(tmp_path_factory) -> Iterator[Backends]:
    pool = Backends(tmp_path_factory.mktemp("backends"))
    yield pool
    pool.stop_all()


def wait_for(check: Callable[[], Any], timeout_s: float = 60, what: str = "a condition") -> Any:
    """Poll `check` until it returns something true; fail the test after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


def run_job(client: Client, body: dict, timeout_s: float = 300) -> tuple[dict, list[bytes]]:
    """Submit, wait, and return the finished job and its frames' PNG bytes."""
    job = client.wait(client.submit(body), timeout_s=timeout_s)
    return job, [client.frame(job["id"], i) for i in range(job["num_frames"])]


def spawn_gloo(world_size: int, check: Callable[..., None], *args: Any) -> None:
    """Run `check(rank, world_size, *args)` in `world_size` fresh processes joined in a gloo
    group on a free port (one thread each, a 120 s collective timeout); fails the test when
    any of them raises. `check` must be a module-level function (it is pickled)."""
    import torch.multiprocessing

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    torch.multiprocessing.spawn(
        _gloo_entry, args=(world_size, port, check, args), nprocs=world_size, join=True
    )


def _gloo_entry(rank: int, world_size: int, port: int, check, args: tuple) -> None:
    import torch
    import torch.distributed as dist

    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=120),
    )
    try:
        check(rank, world_size, *args)
    finally:
        dist.destroy_process_group()


# --- The fast marker's promise: a test marked `fast` starts no process ---------------------


class StartedAProcess(AssertionError):
    """A test marked `fast` started a process (a subprocess, a fork, a multiprocessing or
    torch.multiprocessing child, or a backend)."""


def _refuse(what: str) -> Callable[..., Any]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise StartedAProcess(
            f"a test marked fast started a process ({what}); fast tests are pure logic: "
            "drop the mark, or keep the process out of the test"
        )

    return refuse


@contextlib.contextmanager
def no_process_started() -> Iterator[None]:
    """Every way the suite starts a process fails inside this block."""
    import multiprocessing.process
    import subprocess
    from unittest import mock

    targets = [
        (subprocess.Popen, "_execute_child", "subprocess"),
        (multiprocessing.process.BaseProcess, "start", "multiprocessing"),
        (os, "fork", "os.fork"),
        (os, "system", "os.system"),
        (os, "posix_spawn", "os.posix_spawn"),
        (os, "posix_spawnp", "os.posix_spawnp"),
    ]
    with contextlib.ExitStack() as stack:
        for owner, name, what in targets:
            if hasattr(owner, name):
                stack.enter_context(mock.patch.object(owner, name, _refuse(what)))
        yield


def _guarded(item: pytest.Item):
    fast = item.get_closest_marker("fast") is not None
    return no_process_started() if fast else contextlib.nullcontext()


# setup, call and teardown: the fixtures a fast test sets up (module- and session-scoped
# ones included) are held to the same promise as its body
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    with _guarded(item):
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    with _guarded(item):
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item):
    with _guarded(item):
        yield
