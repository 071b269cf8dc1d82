"""Shared test fixtures: real backends (`paradit serve` process groups on CPU/gloo).

Backends are started once per session per (model, world size, options), kept while other
tests may want them (least recently used stopped beyond `MAX_LIVE_RANKS`) and stopped at the
end; each rank uses one thread so several groups fit on a 2-core machine.

Every test file states its cost in its docstring (`Cost: about N s`: the sum of its
`--durations=0` lines in the suite's own two-worker run on 2 cores); the files run most
costly first, so that the two workers (pytest-xdist, `--dist loadfile`) finish together.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import re
import socket
import subprocess
import tempfile
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")

from zygote import Zygote  # noqa: E402

from paradit.backend.client import Client  # noqa: E402
from paradit.backend.client.local import LocalBackend  # noqa: E402
from paradit.backend.config import ServeConfig  # noqa: E402

REFERENCE_FLAGS = ("--save-latents",)
POOL_LORA_CACHE_GIB = "0.01"
"""The pool backends' --lora-cache-gib: the memory plan counts it (tests' LoRAs are small)."""
"""The world-size-1 references keep their final latents (equivalence is judged on them too);
tests comparing with world size 1 ask for this backend, so they share it."""
MAX_LIVE_RANKS = 6
"""Idle groups beyond this many ranks are stopped, least recently used first (a start costs
10-20 s of CPU; an idle rank still polls its store on the same 2 cores)."""


CLI_ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PARADIT_LOG": "WARNING"}
CLI_ENV["PARADIT_TOKEN"] = "for-remote-servers-only"
"""A `paradit` command's environment in the tests: one thread, warnings only, and a token
meant for remote servers, which must not lock a backend the CLI starts for itself."""


class Backends:
    """Starts backends on demand and keeps them for the session, up to `MAX_LIVE_RANKS` ranks
    (least recently used stopped first, never one the running test module has asked for:
    module-scoped fixtures hold their clients)."""

    def __init__(self, root: Path):
        self.root = root
        self._running: OrderedDict[tuple, LocalBackend] = OrderedDict()
        self._in_use: set[tuple] = set()  # keys asked for by the running test module
        self._module = ""
        self._zygote: Zygote | None = None
        self.lora_dir = root / "loras"
        """Every pool backend's --lora-dir: a test writes the LoRAs its jobs name here (the
        backend reads them when a job names them), so LoRA tests share the pool's backends."""
        self.lora_dir.mkdir(exist_ok=True)

    def zygote(self) -> Zygote:
        """This worker's zygote, started with the first backend."""
        if self._zygote is None:
            self._zygote = Zygote()
        return self._zygote

    def get(self, model: str, world_size: int, *extra: str) -> Client:
        return self.start(model, world_size, *extra).client

    def start(
        self, model: str, world_size: int, *extra: str, env: tuple[tuple[str, str], ...] = ()
    ) -> LocalBackend:
        """A backend of `model` on `world_size` ranks with `serve` flags `extra` (in any
        order: the parsed config is the key) and extra environment variables `env`."""
        base = ServeConfig.from_argv(
            ["--lora-dir", str(self.lora_dir), "--lora-cache-gib", POOL_LORA_CACHE_GIB, *extra],
            model=model,
            world_size=world_size,
            device="cpu",
            threads_per_rank=1,
            output_dir=".",
            timeout_s=120.0,
        )
        key = (base, tuple(sorted(env)))
        backend = self._running.get(key)
        if backend is None or not backend.alive():
            self._make_room(world_size)
            digest = hashlib.sha256(repr(key).encode()).hexdigest()[:8]
            name = f"{model.replace('/', '_')[-40:]}-ws{world_size}-{digest}"
            spec = dataclasses.replace(base, output_dir=str(self.root / name))
            log_file = self.root / f"{name}.log"
            backend = WarmBackend(
                self.zygote(), spec, start_timeout_s=300, log_file=log_file, env=dict(env)
            )
            self._running[key] = backend
        self._running.move_to_end(key)
        self._in_use.add(key)
        return backend

    def paradit(
        self, *args: str, env: dict[str, str], timeout: float = 300
    ) -> subprocess.CompletedProcess:
        """`paradit <args>` forked from this worker's zygote, as `subprocess.run` with
        `capture_output=True, text=True` runs it: the real command (`cli.main`, the groups it
        starts are fresh `paradit serve` processes), minus its own imports. For commands whose
        files, exit code or report a test checks; a test of what a fresh interpreter prints
        (one-line errors, start-up, signals) starts one."""
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            proc = self.zygote().spawn(list(args), env, os.getcwd(), out.fileno(), err.fileno())
            try:
                code = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise
            out.seek(0)
            err.seek(0)
            stdout = out.read().decode(errors="replace")
            stderr = err.read().decode(errors="replace")
        return subprocess.CompletedProcess(["paradit", *args], code, stdout, stderr)

    def _make_room(self, world_size: int) -> None:
        live = sum(b.config.world_size for b in self._running.values())
        for key, backend in list(self._running.items()):  # least recently used first
            if live + world_size <= MAX_LIVE_RANKS:
                return
            if key not in self._in_use:
                backend.stop()
                del self._running[key]
                live -= backend.config.world_size

    def module_started(self, module: str) -> None:
        if module != self._module:
            self._module = module
            self._in_use.clear()

    def stop(self, client_or_backend) -> None:
        for key, backend in list(self._running.items()):
            if backend is client_or_backend or backend.client is client_or_backend:
                backend.stop()
                del self._running[key]

    def stop_all(self) -> None:
        for backend in self._running.values():
            backend.stop()
        self._running.clear()
        if self._zygote is not None:
            self._zygote.close()
            self._zygote = None


class WarmBackend(LocalBackend):
    """A pool backend: the same `paradit serve`, forked from the worker's zygote instead of a
    fresh interpreter (tests/zygote.py), so it starts without importing torch and diffusers."""

    def __init__(self, zygote: Zygote, *args: Any, **kwargs: Any):
        self._zygote = zygote
        super().__init__(*args, **kwargs)

    def _start(self, command: list[str], env: dict[str, str], workdir: Path):
        assert command[1:4] == ["-m", "paradit", "serve"], command
        read_end, write_end = os.pipe()
        try:
            proc = self._zygote.spawn(command[3:], env, str(workdir), write_end, self._log.fileno())
        finally:
            os.close(write_end)
        return proc, open(read_end, encoding="utf-8", errors="replace")  # noqa: SIM115


@pytest.fixture
def warm_local_backends(backends, monkeypatch) -> type[LocalBackend]:
    """Every `LocalBackend` the product starts during the test is forked from this worker's
    zygote (`WarmBackend`): the same `paradit serve`, without its 8 CPU-seconds of imports.
    For tests of what a command does with the backends it starts (the bench's rows, `paradit
    verify` run as `cli.main`, the ComfyUI pool), not of start-up itself (those start fresh
    interpreters). Returns the class, for code that took `LocalBackend` before the test began
    (a default argument)."""
    from paradit.backend.client import connect, local

    zygote = backends.zygote()

    class FromZygote(WarmBackend):
        def __init__(self, *args: Any, **kwargs: Any):
            super().__init__(zygote, *args, **kwargs)

    for module in (local, connect):  # connect.py (the CLI's own backends) imported the name
        monkeypatch.setattr(module, "LocalBackend", FromZygote)
    return FromZygote


@pytest.fixture
def paradit_warm(warm_local_backends, capsys, monkeypatch):
    """`paradit <args>` as `cli.main` in this worker, `env` added to the environment (so to
    the groups it starts): as `subprocess.run(..., capture_output=True, text=True)` returns
    it. The groups the command starts are the real `paradit serve`, forked from the worker's
    zygote (`warm_local_backends`); the command's own imports are the worker's. For commands
    whose files, exit code or report a test checks, not what a fresh interpreter prints."""
    from paradit.backend.tools.cli import main

    def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        for key, value in {"OMP_NUM_THREADS": "1", **(env or {})}.items():
            monkeypatch.setenv(key, value)
        capsys.readouterr()
        code = main(list(args))
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(["paradit", *args], code, out, err)

    return run


POOL = pytest.StashKey[Backends]()
COST = re.compile(r"^Cost: about (\d+) s\b", re.MULTILINE)


def rank_pids(client: Client) -> list[int]:
    """The process ids of a backend's ranks, rank 0 first (GET /v1/info)."""
    return [rank["pid"] for rank in client.info()["ranks"]]


def gone(pid: int) -> bool:
    """The process has exited (no such process, or a zombie waiting to be reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] in "ZX"
    except OSError:
        return True


def healthy(client: Client) -> bool:
    """The backend answers /health with "ok" (False while its group is rebuilt: 503)."""
    try:
        return client.health()["status"] == "ok"
    except Exception:
        return False


def file_cost_s(path: Path) -> int | None:
    """The cost a test file states in its docstring, in seconds (None if it states none)."""
    import ast

    docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
    match = COST.search(docstring)
    return int(match.group(1)) if match else None


RECORDED_VERSIONS = (
    "torch", "diffusers", "transformers", "accelerate", "gradio", "fastapi", "uvicorn",
    "numpy", "pillow", "gguf", "peft", "pytest", "pytest-xdist", "ruff",
)  # fmt: skip
"""Printed in the suite's header: the versions the suite last ran with are in its output."""


def installed_versions(names: list[str] | tuple[str, ...]) -> dict[str, str]:
    """name -> installed version (`missing` where the package is not installed)."""
    from importlib import metadata

    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "missing"
    return versions


def pytest_report_header(config: pytest.Config) -> str:
    found = installed_versions(RECORDED_VERSIONS)
    return "paradit ran with: " + " ".join(f"{name}=={v}" for name, v in found.items())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Most costly files first (a stable sort: tests keep their order within a file)."""
    costs: dict[Path, int] = {}
    for item in items:
        path = Path(str(item.path))
        if path not in costs:
            costs[path] = file_cost_s(path) or 0
    items.sort(key=lambda item: -costs[Path(str(item.path))])


@pytest.fixture(scope="session")
def backends(request, tmp_path_factory) -> Iterator[Backends]:
    pool = Backends(tmp_path_factory.mktemp("backends"))
    request.config.stash[POOL] = pool
    yield pool
    pool.stop_all()


def _tell_pool_the_module(item: pytest.Item) -> None:
    """Before a test's fixtures are set up: tell the pool which module runs (the backends a
    module asks for, its module-scoped fixtures' included, are never evicted under it)."""
    pool = item.config.stash.get(POOL, None)
    if pool is not None:
        pool.module_started(item.module.__name__ if item.module else "")


class References:
    """World-size-1 runs, each (model, request) run once per session on the shared
    world-size-1 backend: the reference many tests compare a parallel run with."""

    def __init__(self, pool: Backends):
        self.pool = pool
        self._done: dict[tuple[str, str], tuple[dict, list[bytes], Any]] = {}

    def get(self, model: str, body: dict) -> tuple[dict, list[bytes], Any]:
        """The finished job, its frames' PNG bytes and its final latents."""
        key = (model, json.dumps(body, sort_keys=True))
        if key not in self._done:
            client = self.pool.get(model, 1, *REFERENCE_FLAGS)
            job, frames = run_job(client, body)
            self._done[key] = job, frames, client.latents(job["id"])
        return self._done[key]

    def frames(self, model: str, body: dict) -> list[bytes]:
        return self.get(model, body)[1]


@pytest.fixture(scope="session")
def references(backends) -> References:
    return References(backends)


@pytest.fixture(scope="session")
def base(tmp_path_factory) -> Path:
    """The tiny ComfyUI files the template tests link under each template's names
    (tests/template_jobs.py `tiny_files`, `comfy_for`), written once per worker; a test
    writes its edits in its own folder, never in this one."""
    from template_jobs import tiny_files

    return tiny_files(tmp_path_factory.mktemp("ComfyUI"))


@pytest.fixture
def no_hub_cache(tmp_path, monkeypatch) -> Path:
    """An empty hub cache in `tmp_path`, in place of the user's."""
    import huggingface_hub.constants

    cache = tmp_path / "hub-cache"
    cache.mkdir()
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    return cache


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
    """Run `check(rank, world_size, *args)` in `world_size` forked processes joined in a gloo
    group on a free port (one thread each, a 120 s collective timeout); fails the test when
    any of them raises."""
    import torch.multiprocessing

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # Forked, not spawned: the ranks start with this worker's imports (torch, diffusers)
    # instead of importing them again, 5-15 s of CPU each on 2 cores.
    torch.multiprocessing.start_processes(
        _gloo_entry,
        args=(world_size, port, check, args),
        nprocs=world_size,
        join=True,
        start_method="fork",
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
    _tell_pool_the_module(item)
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
