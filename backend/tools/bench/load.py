"""Whether a bench figure can be trusted: the machine's load around the row that measured it.

A speedup measured while other work shares the cores is not a figure (a row once read 1.99x at
a load average of 7-14 and 0.998x on a quiet machine). Every row records the 1-minute load
average before and after it; a row whose load exceeded the machine's core count is `noisy`:
its figures are printed, marked so, and its targets get no verdict.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


def num_cores() -> int:
    """The cores this process may run on (its affinity), else the machine's count."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def load_avg() -> list[float]:
    """The 1-, 5- and 15-minute load averages ([] where the platform has none)."""
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else []


@dataclass
class LoadWindow:
    """The load average before and after one row, and the cores it is judged against."""

    cores: int
    start: list[float] = field(default_factory=list)
    end: list[float] = field(default_factory=list)

    @property
    def peak(self) -> float | None:
        """The larger 1-minute load average of the two readings (None where unknown)."""
        ones = [reading[0] for reading in (self.start, self.end) if reading]
        return max(ones) if ones else None

    @property
    def noisy(self) -> bool:
        """True when the load exceeded the core count: the row's figures are not to be trusted."""
        return self.peak is not None and self.peak > self.cores

    def to_json(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end, "cores": self.cores, "noisy": self.noisy}


@contextmanager
def watch(cores: int | None = None) -> Iterator[LoadWindow]:
    """Record the load average around the `with` body."""
    window = LoadWindow(cores=cores or num_cores(), start=load_avg())
    try:
        yield window
    finally:
        window.end = load_avg()


def describe(window: dict[str, Any]) -> str:
    """`load average 0.6 -> 1.3 (2 cores)`, with the noisy mark where it applies."""
    start, end = window.get("start") or ["?"], window.get("end") or ["?"]
    text = f"load average {start[0]} -> {end[0]} ({window.get('cores')} cores)"
    if window.get("noisy"):
        text += " — NOISY: the load exceeded the core count; figures shown, no verdict"
    return text
