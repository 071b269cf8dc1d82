"""What the launcher tests share: the `serve` command they launch, starting it under a
launcher, its ready line, and finding the processes a launch left."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

BODY = {"prompt": "launched elsewhere", "seed": 5}
SERVE = [
    "-m",
    "paradit",
    "serve",
    "--model",
    "tiny-wan",
    "--device",
    "cpu",
    "--threads",
    "1",
    "--port",
    "0",
]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
LAUNCHERS_PAGE = Path(__file__).parent.parent / "docs" / "launchers.md"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def require(*programs: str, package: str) -> None:
    """A launcher the tests need is installed (`.ci/run` installs it): fail, never skip."""
    missing = [name for name in programs if shutil.which(name) is None]
    if missing:
        raise AssertionError(
            f"{', '.join(missing)} not found: apt-get install {package} (as .ci/run does)"
        )


def launch_env(**extra: str) -> dict[str, str]:
    """The test's environment for a launcher: one thread per rank, this interpreter first on
    PATH (so `python` in a script is the one that imports this paradit)."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return {**os.environ, "OMP_NUM_THREADS": "1", "PATH": path, **extra}


def spawn(cmd: list[str], env: dict[str, str], log: Path | None = None) -> subprocess.Popen:
    """A launcher in its own session: stdout (the ready line) piped back, stderr to `log`
    (or nowhere)."""
    with open(log or os.devnull, "wb") as err:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env, start_new_session=True
        )
    proc.log = log  # what ready_url shows when the launch ends before it is ready
    return proc


def ready_url(proc: subprocess.Popen, world_size: int = 2) -> str:
    line = proc.stdout.readline()
    match = re.search(r"ready at (http://\S+) .*world size (\d+)", line)
    if not match:
        log = getattr(proc, "log", None)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        text = log.read_text(errors="replace")[-4000:] if log and log.exists() else ""
        raise AssertionError(f"no ready line: {line!r} (exit {proc.poll()}); its log ends:\n{text}")
    assert match.group(2) == str(world_size)
    return match.group(1)


def stop(procs: list[subprocess.Popen], sig: int = signal.SIGINT) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(sig)
    for proc in procs:
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _stat(pid: int) -> list[str]:
    """/proc/PID/stat's fields after the command name (state first, then the parent), or []."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[-1].split()
    except OSError:
        return []


def alive(pid: int) -> bool:
    fields = _stat(pid)
    return bool(fields) and fields[0] not in "ZX"


def descendants(pid: int) -> list[int]:
    """The live processes under `pid` (its children, theirs, ...)."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields and fields[0] not in "ZX":
                parents[int(entry.name)] = int(fields[1])
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        children = [child for child, p in parents.items() if p == parent]
        found += children
        todo += children
    return found


def processes_of(output_dir: Path) -> list[int]:
    """Live processes whose command line names `output_dir` (the ranks launched with it)."""
    needle = str(output_dir).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "cmdline").read_bytes() and alive(int(entry.name)):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def docs_block(first_line: str) -> str:
    """The ```bash block of docs/launchers.md that starts with `first_line`."""
    text = LAUNCHERS_PAGE.read_text()
    blocks = re.findall(r"^```bash\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)
    found = [block for block in blocks if block.startswith(first_line)]
    assert len(found) == 1, f"{LAUNCHERS_PAGE} has {len(found)} bash blocks: {first_line!r}"
    return found[0]
