"""Entry point of ranks 1..N-1 started by `serve`: die with the parent before anything else.

The death signal is set before torch is imported (seconds): a `serve` killed during start-up
leaves no rank behind. If the parent is already gone by then, exit at once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
from typing import NoReturn

PARENT_ENV = "PARADIT_PARENT_PID"


def die_with_parent(parent: int | None) -> None:
    """Linux: SIGKILL this process when its parent dies, even if the parent is SIGKILLed;
    exit at once if `parent` (its pid) is already gone."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if parent is not None and os.getppid() != parent:  # it died before the signal was set
        os._exit(1)


def exit_now(code: int) -> NoReturn:
    """End a process whose rank has stopped (its group closed, its outputs written) without
    the interpreter's teardown: freeing torch's, diffusers' and the model's objects one by
    one costs 1-2 s of CPU, for memory the exit frees anyway. Logs and output are flushed
    first, as the exit handlers would."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def main() -> NoReturn:
    parent = os.environ.get(PARENT_ENV)
    die_with_parent(int(parent) if parent else None)
    from .rank import child_main

    exit_now(child_main(sys.argv[1:]))


if __name__ == "__main__":
    main()
