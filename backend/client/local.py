"""Starting a backend as its own process group from another program (CLI, ComfyUI, the UI).

`LocalBackend` runs `python -m paradit serve ... --port 0`, waits for its `ready` line, and
stops it with SIGTERM (then SIGKILL) — also when the owning program exits.
"""

from __future__ import annotations

import atexit
import dataclasses
import logging
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO

from ..config import ServeConfig
from .http import BackendError, Client

log = logging.getLogger(__name__)

READY = re.compile(r"\bready\b.*?(http://\S+)")

LAUNCHER_VARS = frozenset(
    {
        # The backend starts its own group: an outer launcher's rank must not leak into it,
        # nor a token it would then demand from this process's own client.
        "RANK",
        "WORLD_SIZE",
        "LOCAL_RANK",
        "LOCAL_WORLD_SIZE",
        "MASTER_ADDR",
        "MASTER_PORT",
        "TORCHELASTIC_RUN_ID",
        "SLURM_PROCID",
        "SLURM_STEP_ID",
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE",
        "PMI_RANK",
        "PMI_SIZE",
        "PARADIT_TOKEN",
        "PARADIT_LAUNCHER",
    }
)


def serve_command(config: ServeConfig) -> list[str]:
    """`paradit serve` for a local backend: loopback, any free port, absolute paths (it runs
    in another folder). A token goes through the environment, never the command line."""
    model = str(Path(config.model).resolve()) if Path(config.model).is_dir() else config.model
    local = dataclasses.replace(
        config,
        model=model,
        host="127.0.0.1",
        port=0,
        token=None,
        output_dir=str(Path(config.output_dir).resolve()),
    )
    return [sys.executable, "-m", "paradit", "serve", *local.to_argv()]


class LocalBackend:
    """A `paradit serve` child process; use as a context manager or call `stop()`."""

    def __init__(
        self,
        config: ServeConfig,
        *,
        start_timeout_s: float = 600.0,
        log_file: str | Path | None = None,
        env: dict[str, str] | None = None,
    ):
        self.config = config
        self._own_log = log_file is None
        if log_file is None:
            handle, log_file = tempfile.mkstemp(prefix="paradit-serve-", suffix=".log")
            os.close(handle)
        self.log_path = Path(log_file)
        self._log: IO | None = open(self.log_path, "ab")  # noqa: SIM115
        env = {k: v for k, v in {**os.environ, **(env or {})}.items() if k not in LAUNCHER_VARS}
        if config.token:  # through the environment: a command line is visible to all users
            env["PARADIT_TOKEN"] = config.token
        env |= {"PARADIT_DIE_WITH_PARENT": "1", "PYTHONUNBUFFERED": "1"}
        # A neutral working folder: the caller's (e.g. ComfyUI's) would come first on the
        # child's import path, and its top-level modules could shadow libraries.
        workdir = Path(config.output_dir).resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        self.proc, stdout = self._start(serve_command(config), env, workdir)
        atexit.register(self.stop)
        self._lines: queue.Queue[str | None] = queue.Queue()
        pump = threading.Thread(target=self._pump, args=(stdout,), daemon=True)
        pump.start()
        self.url = self._wait_ready(start_timeout_s)
        self.client = Client(self.url, token=config.token)

    def _start(self, command: list[str], env: dict[str, str], workdir: Path):
        """Start `command` in its own session: the process and its standard output (text).
        Its standard error goes to the log."""
        proc = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=env,
            text=True,
            start_new_session=True,
            cwd=workdir,
        )
        return proc, proc.stdout

    def _pump(self, stdout: IO[str]) -> None:
        for line in stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _wait_ready(self, timeout_s: float) -> str:
        last = ""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.stop()
                raise BackendError(
                    f"backend did not report ready within {timeout_s:.0f}s"
                ) from None
            if line is None:
                code = self.proc.wait()
                reason = self.last_error() or last.strip() or "no message"
                self.stop()
                raise BackendError(f"backend exited with code {code} before ready: {reason}")
            last = line if line.strip() else last
            match = READY.search(line)
            if match:
                return match.group(1)

    def last_error(self) -> str:
        """The backend's last error line from its log ('' if none)."""
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        for line in reversed(lines):
            if line.startswith("error:") or " ERROR " in line or "Error" in line:
                return line.removeprefix("error: ").strip()
        return ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, grace_s: float = 30.0) -> None:
        """SIGTERM the backend (it stops its ranks), SIGKILL its session if it lingers."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None
            if self._own_log:
                self.log_path.unlink(missing_ok=True)
        atexit.unregister(self.stop)

    def __enter__(self) -> LocalBackend:
        return self

    def __exit__(self, *_exc) -> None:
        self.stop()
