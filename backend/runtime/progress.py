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

Rank 0 reads both through `RankWatch` (see `serving/health.py` for the rules).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import torch
import torch.distributed as dist

log = logging.getLogger(__name__)

BEAT_PERIOD_S = 0.5


class Progress:
    """This rank's work counter: the main thread ticks it, the heartbeat thread publishes it."""

    def __init__(self) -> None:
        self.ticks = 0

    def tick(self, *_args: Any) -> None:
        self.ticks += 1

    def watch(self, module: torch.nn.Module) -> int:
        """Tick before each item of every `ModuleList` inside `module` (its blocks); returns
        how many hooks it added."""
        added = 0
        for sub in module.modules():
            if isinstance(sub, torch.nn.ModuleList):
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
    ):
        self.store, self.rank, self.period_s = store, rank, period_s
        self.progress = progress or Progress()
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

    def _still_s(self, counter: str) -> dict[int, float]:
        now = time.monotonic()
        out = {}
        with self._lock:
            for rank in self.ranks:
                key = f"{counter}/{rank}"
                value = self.store.add(key, 0)
                seen, since = self._seen.get(key, (-1, now))
                if value != seen:
                    self._seen[key], since = (value, now), now
                out[rank] = now - since
        return out

    def frozen(self, after_s: float) -> list[int]:
        """Ranks whose heartbeat has not moved for `after_s` seconds."""
        return [rank for rank, still in self._still_s("hb").items() if still > after_s]

    def idle(self, after_s: float) -> list[int]:
        """Ranks whose work counter has not moved for `after_s` seconds."""
        return [rank for rank, still in self._still_s("ticks").items() if still > after_s]
