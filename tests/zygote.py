"""A warm start for the test pool's backends: `paradit serve` forked from a process that has
already imported torch, diffusers and the tiny presets' pipelines.

Every `paradit serve` spends about 8 of its 10 CPU-seconds of start-up importing; the pool
starts some 50 of them per run on 2 cores. The zygote (this file run as a script, once per
pytest worker) imports once and forks each backend: the backend is the real `paradit serve`
(`cli.main`, its ranks, its HTTP server), started without the imports. Tests of start-up,
launchers and process supervision still start fresh interpreters (`LocalBackend` itself).

How a backend reaches the pytest worker as its own child: the zygote forks a middle process,
which forks the backend and exits; the worker is a child subreaper (`PR_SET_CHILD_SUBREAPER`),
so the orphaned backend becomes the worker's child, which it waits for like any other. The
backend starts `cli.main` only once it has been adopted (its death signal, set by `serve`,
follows its parent at that moment: the worker).
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import signal
import socket
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
WARM_MODELS = ("tiny-wan", "tiny-wan-i2v", "tiny-flux", "tiny-cogvideox", "tiny-cogvideox-i2v")


class Zygote:
    """The worker's side: start the zygote, then `spawn` backends through it."""

    def __init__(self) -> None:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
        self._sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.proc = subprocess.Popen(
            [sys.executable, __file__, str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        theirs.close()
        if self._sock.recv(6) != b"ready\n":
            raise RuntimeError(f"the zygote did not start (exit code {self.proc.wait()})")

    def spawn(self, argv: list[str], env: dict[str, str], cwd: str, stdout: int, stderr: int):
        """`paradit <argv>` forked from the zygote with this environment, folder and output
        files; returns a handle with `pid`, `poll`, `wait`, `send_signal`, `kill`."""
        from paradit.backend.processes.forked import ForkedRank

        message = json.dumps({"argv": argv, "env": env, "cwd": cwd}).encode() + b"\n"
        socket.send_fds(self._sock, [message], [stdout, stderr])
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = self._sock.recv(64)
            if not chunk:
                raise RuntimeError("the zygote exited")
            reply += chunk
        return ForkedRank(int(reply), env_fd=-1)

    def close(self) -> None:
        self._sock.close()
        self.proc.wait(timeout=30)


def _serve_forever(fd: int) -> None:
    """The zygote: import, then fork one backend per request until the worker hangs up."""
    from paradit.backend.processes.forked import warm_imports
    from paradit.backend.serving import http, service  # noqa: F401
    from paradit.backend.tools import cli  # noqa: F401

    for model in WARM_MODELS:
        warm_imports(model)
    gc.collect()  # then freeze what the imports made, as `serve` does (`settle_imports`):
    gc.freeze()  # each backend's collections walk only its own objects
    sock = socket.socket(fileno=fd)
    sock.sendall(b"ready\n")
    buffered = b""
    while True:
        message, fds, _flags, _addr = socket.recv_fds(sock, 1 << 20, 2)
        if not message:  # the worker is gone: leave without the interpreter's teardown of
            os._exit(0)  # torch and diffusers (2 s of CPU on 2 cores); nothing is buffered
        buffered += message
        if not buffered.endswith(b"\n"):
            continue
        request, buffered = json.loads(buffered), b""
        pid = _fork_backend(request, fds)
        for descriptor in fds:
            os.close(descriptor)
        sock.sendall(f"{pid}\n".encode())


def _fork_backend(request: dict, fds: list[int]) -> int:
    """Fork a middle process that forks the backend and exits; the backend's pid."""
    read_end, write_end = os.pipe()
    middle = os.fork()
    if middle == 0:
        os.close(read_end)
        me = os.getpid()  # not the backend's getppid(): this process may have exited by then
        backend = os.fork()
        if backend == 0:
            os.close(write_end)
            _run_backend(request, fds, me)
        os.write(write_end, f"{backend}\n".encode())
        os._exit(0)
    os.close(write_end)
    with open(read_end, "rb") as pipe:
        pid = int(pipe.read())
    os.waitpid(middle, 0)  # once it is reaped, the backend belongs to the worker
    return pid


def _run_backend(request: dict, fds: list[int], middle: int) -> None:
    from paradit.backend.processes.forked import run_then_exit

    def run() -> int:
        os.setsid()
        os.dup2(fds[0], 1)
        os.dup2(fds[1], 2)
        for descriptor in fds:
            os.close(descriptor)
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        deadline = time.monotonic() + 60  # a bound for a middle process that never exits
        while os.getppid() == middle:  # wait to be adopted by the worker
            if time.monotonic() > deadline:
                raise RuntimeError("the backend was not adopted by the pytest worker")
            time.sleep(0.001)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        from paradit.backend.tools.cli import main

        return main(request["argv"])

    run_then_exit(run)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    _serve_forever(int(sys.argv[1]))
