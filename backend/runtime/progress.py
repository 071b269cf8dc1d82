"""How a rank shows that it is working, and rank 0 tells frozen, hung and slow ranks apart.

Each rank other than 0 runs a heartbeat thread (`Heartbeat`) that publishes two counters in
the control store every half second:

- `hb/<rank>`, bumped on every beat: it stops only when the whole process stops (SIGSTOP, a
  wedged driver that freezes the process, a machine gone). A stale heartbeat means *frozen*.
- `ticks/<rank>`, the rank's work counter (`Progress`): the main thread ticks it before every
  block of the DiTs and of the VAE (each item of their `ModuleList`s: transformer blocks,
  VAE up-blocks and resnets), at every step and at every tile of a decode. A live heartbeat
  with ticks that keep moving is a *slow* rank (a 720p decode, an offloaded 14B step); a live
  heartbeat whose ticks stand still while the others wait for it is a *hung* rank (a stuck
  kernel that leaves the process's other threads running).

With them, `where/<rank>`: where the rank's main thread is (`main_thread_place`): between
jobs, waiting in a collective (its innermost Python frame is in torch.distributed), or at a
file and line of its own work. Inside a job, a rank whose work counter stands still and which
is not waiting in a collective is the one the others wait for.

Rank 0 reads them through `RankWatch` (see `serving/health.py` for the rules).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import torch
import torch.distributed as dist

log = logging.getLogger(__name__)

BEAT_PERIOD_S = 0.5
BETWEEN_JOBS = "between jobs"
IN_COLLECTIVE = "in a collective"
_DISTRIBUTED = f"{os.sep}torch{os.sep}distributed{os.sep}"


def main_thread_place() -> str:
    """Where this process's main thread is: `IN_COLLECTIVE` when its innermost Python frame
    is torch.distributed's (a collective, or FSDP2 or a functional collective waiting on
    one), else `file:line in function` of that frame."""
    frame = sys._current_frames().get(threading.main_thread().ident)
    if frame is None:
        return "unknown"
    code = frame.f_code
    if _DISTRIBUTED in code.co_filename:
        return IN_COLLECTIVE
    return f"{os.path.basename(code.co_filename)}:{frame.f_lineno} in {code.co_name}"


class Progress:
    """This rank's work counter: the main thread ticks it, the heartbeat thread publishes it."""

    def __init__(self) -> None:
        self.ticks = 0
        self.working: Callable[[], bool] = lambda: False
        """Whether the main thread works without ticking (compiling a block for a new shape:
        `runtime/compiled.py`); the heartbeat ticks for it meanwhile."""

    def tick(self, *_args: Any) -> None:
        self.ticks += 1

    def watch(self, module: torch.nn.Module, opaque: Iterable[torch.nn.Module] = ()) -> int:
        """Tick before each item of every `ModuleList` inside `module` (its blocks), but none
        inside an `opaque` module (a compiled block: dynamo would trace the tick and guard on
        its count, recompiling at every call); returns how many hooks it added."""
        hidden = {id(m) for m in opaque}
        inside = tuple(f"{name}." for name, sub in module.named_modules() if id(sub) in hidden)
        added = 0
        for name, sub in module.named_modules():
            if isinstance(sub, torch.nn.ModuleList) and not name.startswith(inside):
                for item in sub:
                    item.register_forward_pre_hook(self.tick)
                    added += 1
        return added


class Heartbeat:
    """A thread that bumps `hb/<rank>` and publishes `ticks/<rank>` (see the module doc)."""

    def __init__(
        self,
        store: dist.Store,
        rank: int,
        progress: Progress | None = None,
        period_s: float = BEAT_PERIOD_S,
        place: Callable[[], str] = lambda: BETWEEN_JOBS,
    ):
        self.store, self.rank, self.period_s = store, rank, period_s
        self.progress = progress or Progress()
        self.place = place
        """Where the rank's main thread is (`Runtime.place`), published as `where/<rank>`."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{rank}", daemon=True)

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        published = 0
        while not self._stop.wait(self.period_s):
            try:
                self.store.add(f"hb/{self.rank}", 1)
                self.store.set(f"where/{self.rank}", self.place())
                if self.progress.working():
                    self.progress.tick()
                ticks = self.progress.ticks
                if ticks != published:
                    self.store.add(f"ticks/{self.rank}", ticks - published)
                    published = ticks
            except dist.DistError:
                return  # rank 0 is gone; the main loop notices and exits


class RankWatch:
    """Rank 0: for each rank, how long its heartbeat and its work counter have stood still."""

    def __init__(self, store: dist.Store, ranks: list[int]):
        self.store, self.ranks = store, ranks
        self._seen: dict[str, tuple[int, float]] = {}
        self._lock = threading.Lock()  # read from the HTTP, replica and watchdog threads

    def still_s(self, counter: str, ranks: list[int] | None = None) -> dict[int, float]:
        """For each of `ranks` (default all), how long its `counter` ("hb" or "ticks") has
        not moved, in seconds."""
        now = time.monotonic()
        out = {}
        with self._lock:
            for rank in self.ranks if ranks is None else ranks:
                key = f"{counter}/{rank}"
                value = self.store.add(key, 0)
                seen, since = self._seen.get(key, (-1, now))
                if value != seen:
                    self._seen[key], since = (value, now), now
                out[rank] = now - since
        return out

    def frozen(self, after_s: float) -> list[int]:
        """Ranks whose heartbeat has not moved for `after_s` seconds."""
        return [rank for rank, still in self.still_s("hb").items() if still > after_s]

    def idle(self, after_s: float) -> list[int]:
        """Ranks whose work counter has not moved for `after_s` seconds."""
        return [rank for rank, still in self.still_s("ticks").items() if still > after_s]

    def place(self, rank: int) -> str:
        """Where `rank`'s main thread was at its last heartbeat (`main_thread_place`)."""
        key = f"where/{rank}"
        return self.store.get(key).decode() if self.store.check([key]) else BETWEEN_JOBS
