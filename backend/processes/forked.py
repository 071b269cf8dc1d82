"""Ranks 1..N-1 forked from rank 0 once it has imported what every rank imports (CPU only).

A rank started as a fresh interpreter spends most of its start-up importing torch, diffusers,
transformers and its pipeline's modules: 6-15 s of CPU each on a 2-core machine, paid again
by every rank. Forked after rank 0 has imported them, a rank starts with the modules already
in memory (shared copy-on-write), so a group of N ranks imports once instead of N times.

Forking is safe only while rank 0 has one thread and no accelerator context: `serve` forks
before it opens the group's store (whose server runs a thread), and each forked rank waits
on a pipe for its environment (the store's port is known only after the fork).

A rebuild (after a lost rank) happens while rank 0 runs threads, so it cannot fork itself
again: `serve` keeps a zygote instead (`RankZygote`), a single-threaded copy of itself
forked at the same moment as the first ranks, which forks each rebuilt rank on request.
The rank reaches rank 0 as its child: the zygote forks a middle process that forks the
rank and exits, and rank 0 is a child subreaper (`PR_SET_CHILD_SUBREAPER`), so the orphaned
rank is adopted by rank 0, which waits for it like any other child. GPU ranks and processes
that already run threads start fresh interpreters instead (`Children`).
`PARADIT_FORK_RANKS=0` turns forking (and the zygote) off.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import NoReturn

from ..config import ServeConfig
from .child import die_with_parent
from .warm import settle_imports, warm_imports  # noqa: F401  (warm_imports: tests/zygote.py)

log = logging.getLogger(__name__)

FORK_ENV = "PARADIT_FORK_RANKS"


class ForkedRank:
    """A forked rank waiting for its environment, then running; the part of
    `subprocess.Popen` that `Children` uses (poll, wait, send_signal, kill, returncode)."""

    def __init__(self, pid: int, env_fd: int | None):
        self.pid = pid
        self.returncode: int | None = None
        self._env_fd: int | None = env_fd

    def release(self, env: dict[str, str]) -> None:
        """Hand the rank its environment; it then starts like a rank that `child.py` ran."""
        if self._env_fd is None:
            raise RuntimeError(f"forked rank {self.pid} was already released")
        fd, self._env_fd = self._env_fd, None
        try:
            with open(fd, "wb", closefd=True) as pipe:
                pipe.write(json.dumps(env).encode())
        except BrokenPipeError:  # it died while waiting: `poll` reports it
            pass

    def poll(self) -> int | None:
        if self.returncode is None:
            with contextlib.suppress(ChildProcessError):  # reaped elsewhere: gone all the same
                pid, status = os.waitpid(self.pid, os.WNOHANG)
                if pid == 0:
                    return None
                self.returncode = os.waitstatus_to_exitcode(status)
            if self.returncode is None:
                self.returncode = -signal.SIGKILL
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"forked rank {self.pid}", timeout or 0.0)
            time.sleep(0.02)
        return self.returncode  # type: ignore[return-value]

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def discard(self) -> None:
        """A forked rank that will never be released: kill and reap it."""
        if self._env_fd is not None:
            os.close(self._env_fd)
            self._env_fd = None
        self.kill()
        self.wait()


def can_fork(config: ServeConfig, device_type: str) -> bool:
    """Whether `serve` may fork its ranks: several ranks on CPU, a single-threaded process
    on a system with fork, and not turned off by `PARADIT_FORK_RANKS=0`."""
    return (
        config.world_size > 1
        and device_type == "cpu"
        and hasattr(os, "fork")
        and os.environ.get(FORK_ENV, "1") != "0"
        and threading.active_count() == 1
    )


def fork_ranks(config: ServeConfig, argv: list[str]) -> dict[int, ForkedRank]:
    """Fork ranks 1..N-1 after importing what they need; each waits for `release(env)` and
    then runs `child_main(argv)` with that environment."""
    settle_imports(config.model)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()  # nothing buffered is written twice
    ranks: dict[int, ForkedRank] = {}
    parent = os.getpid()
    try:
        for rank in range(1, config.world_size):
            read_fd, write_fd = os.pipe()
            pid = os.fork()
            if pid == 0:  # the forked rank: never returns
                os.close(write_fd)
                for other in ranks.values():
                    if other._env_fd is not None:
                        os.close(other._env_fd)
                _run_forked(read_fd, parent, argv)
            os.close(read_fd)
            ranks[rank] = ForkedRank(pid, write_fd)
    except OSError:
        for forked in ranks.values():
            forked.discard()
        raise
    log.info("forked ranks 1..%d after importing their modules", config.world_size - 1)
    return ranks


def run_then_exit(run: Callable[[], int]) -> NoReturn:
    """End a forked process: its exit code is `run()`'s (1 after an error, whose traceback
    goes to stderr); it leaves with `os._exit`, since the exit handlers and buffers it
    inherited are its parent's."""
    code = 1
    try:
        code = run()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)


def _run_forked(read_fd: int, parent: int, argv: list[str]) -> NoReturn:
    """The forked rank: its own session (as `Children` starts ranks), dies with rank 0,
    waits for its environment, then runs like a rank that `child.py` started."""

    def run() -> int:
        os.setsid()
        die_with_parent(parent)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)  # rank 0's handlers are not this rank's
        with open(read_fd, "rb", closefd=True) as pipe:
            data = pipe.read()
        if not data:  # rank 0 gave up before starting the group
            return 1
        from .rank import child_main

        os.environ.update(json.loads(data))
        return child_main(argv)

    run_then_exit(run)


PR_SET_CHILD_SUBREAPER = 36


class RankZygote:
    """A single-threaded, warm copy of rank 0 that forks the ranks of later rebuilds.

    Made by `start` (in rank 0 while it has one thread, after the imports); `spawn(env)`
    returns a started rank, already rank 0's child. `close` ends the zygote; it also ends
    by itself when rank 0 dies (its death signal) or hangs up its socket."""

    def __init__(self, pid: int, sock: socket.socket):
        self.pid = pid
        self._sock = sock

    @classmethod
    def start(cls, argv: list[str], inherited: dict[int, ForkedRank]) -> RankZygote:
        """Fork the zygote; `inherited`: forked ranks whose pipes it must not hold open."""
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the zygote: never returns
            ours.close()
            for rank in inherited.values():
                if rank._env_fd is not None:
                    os.close(rank._env_fd)
            _zygote_main(theirs, parent, argv)
        theirs.close()
        log.info("kept a zygote (pid %d) to fork the ranks of rebuilds", pid)
        return cls(pid, ours)

    def spawn(self, env: dict[str, str]) -> ForkedRank:
        """A rank forked from the zygote that runs `child_main(argv)` with `env`."""
        self._sock.sendall(json.dumps(env).encode() + b"\n")
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = self._sock.recv(64)
            if not chunk:
                raise OSError("the rank zygote exited")
            reply += chunk
        return ForkedRank(int(reply), env_fd=None)

    def close(self) -> None:
        """Hang up (the zygote exits) and reap it."""
        self._sock.close()
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


def _zygote_main(sock: socket.socket, parent: int, argv: list[str]) -> NoReturn:
    """The zygote: its own session (a Ctrl-C reaches rank 0 only), dies with rank 0, then
    forks one rank per request until rank 0 hangs up."""

    def run() -> int:
        os.setsid()
        die_with_parent(parent)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        buffered = b""
        while True:
            chunk = sock.recv(1 << 20)
            if not chunk:  # rank 0 is gone or done
                return 0
            buffered += chunk
            while b"\n" in buffered:
                line, buffered = buffered.split(b"\n", 1)
                pid = _fork_adopted(sock, parent, argv, json.loads(line))
                sock.sendall(f"{pid}\n".encode())

    run_then_exit(run)


def _fork_adopted(sock: socket.socket, parent: int, argv: list[str], env: dict) -> int:
    """Fork a middle process that forks the rank and exits; the rank's pid. Once the middle
    process is reaped, the rank belongs to `parent` (a child subreaper)."""
    read_end, write_end = os.pipe()
    middle = os.fork()
    if middle == 0:
        os.close(read_end)
        me = os.getpid()
        rank = os.fork()
        if rank == 0:
            os.close(write_end)
            sock.close()
            _run_adopted(me, parent, argv, env)
        os.write(write_end, f"{rank}\n".encode())
        os._exit(0)
    os.close(write_end)
    with open(read_end, "rb") as pipe:
        pid = int(pipe.read())
    os.waitpid(middle, 0)
    return pid


def _run_adopted(middle: int, parent: int, argv: list[str], env: dict) -> NoReturn:
    """A rank forked by the zygote: waits to be adopted by rank 0, then dies with it and
    runs like a rank that `child.py` started."""

    def run() -> int:
        deadline = time.monotonic() + 60  # a bound for a middle process that never exits
        while os.getppid() == middle:
            if time.monotonic() > deadline:
                raise RuntimeError("the rank was not adopted by rank 0")
            time.sleep(0.001)
        die_with_parent(parent)  # exits at once if it was adopted by anyone else
        from .rank import child_main

        os.environ.update(env)
        return child_main(argv)

    run_then_exit(run)
