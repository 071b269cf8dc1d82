"""Fault injection for tests: make a chosen rank fail in a chosen way at a chosen moment.

Test-only. Set `PARADIT_FAULT` in the environment of `paradit serve` (every rank inherits it):

    PARADIT_FAULT="rank=1,at=step:2,kind=hang"
    PARADIT_FAULT="rank=1,at=step:2,kind=slow,secs=8,times=1"

- `rank`: a rank number, or `all` (every rank fails the same way).
- `at`: `load` (while loading the model), `step:N` (after denoising step N of a job) or
  `decode` (as the rank starts a job's decode).
- `kind`: `raise` (a RuntimeError), `exit` (the process exits with code 3), `hang` (the rank
  stops progressing but stays alive; its heartbeats go on), `oom` (torch.OutOfMemoryError),
  `stop` (the rank sends itself SIGSTOP: frozen, heartbeat included, as a wedged driver looks
  from outside), `slow` (a long stretch of work: the rank sleeps `secs` seconds, default 10,
  ticking its work counter every 0.25 s as a long step's blocks would; its heartbeats go on).
- `times` (optional, default every time): how many jobs it hits, e.g. `times=1` for the first
  job only (the backend's next jobs then run normally).
- `gen` (optional, default 0): the incarnation of the group it hits. A group rebuilt after a
  lost rank is generation 1, 2, ...: by default it comes up healthy, so tests can watch the
  recovery; `at=load,gen=1` makes the first rebuild fail.

Several faults: separate them with `;`.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch

log = logging.getLogger(__name__)

ENV = "PARADIT_FAULT"
KINDS = ("raise", "exit", "hang", "oom", "stop", "slow")
PLACES = ("load", "step", "decode")
SLOW_SLICE_S = 0.25


class InjectedFault(RuntimeError):
    """The error an injected `raise` fault raises."""


@dataclass
class Fault:
    """One injected fault; `None` from `from_environ` when none is asked for."""

    rank: int | None
    """None: every rank."""
    at: str
    """"load", "step" or "decode"."""
    step: int
    kind: str
    times: int | None = None
    generation: int = 0
    secs: float = 10.0
    """How long a `slow` fault works."""
    hits: int = 0
    tick: Callable[[], None] = lambda: None
    """The rank's work counter (`progress.Progress.tick`), which a `slow` fault ticks."""

    @classmethod
    def parse(cls, text: str) -> Fault:
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        rule = (
            f"{ENV} must look like 'rank=1,at=step:2,kind=hang[,times=1][,gen=0][,secs=10]', "
            f"got {text!r}"
        )
        try:
            rank = None if fields["rank"] == "all" else int(fields["rank"])
            where, _, step = fields["at"].partition(":")
            kind = fields["kind"]
            times = int(fields["times"]) if "times" in fields else None
            generation = int(fields.get("gen", "0"))
            step_number = int(step) if where == "step" else 0
            secs = float(fields.get("secs", "10"))
        except (KeyError, ValueError):
            raise ValueError(rule) from None
        if where not in PLACES or kind not in KINDS or secs <= 0:
            raise ValueError(rule)
        return cls(rank, where, step_number, kind, times, generation, secs)

    def at_load(self) -> None:
        if self.at == "load":
            self._fire("while loading")

    def at_step(self, step: int) -> None:
        if self.at == "step" and step == self.step:
            self._fire(f"after step {step}")

    def at_decode(self) -> None:
        if self.at == "decode":
            self._fire("at the decode")

    def _fire(self, when: str) -> None:
        if self.times is not None and self.hits >= self.times:
            return
        self.hits += 1
        message = f"injected fault ({self.kind}) {when}"
        log.warning(message)
        if self.kind == "raise":
            raise InjectedFault(message)
        if self.kind == "oom":
            raise torch.OutOfMemoryError(f"{message}: out of memory")
        if self.kind == "exit":
            os._exit(3)
        if self.kind == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)  # frozen until someone kills it
            return
        if self.kind == "slow":
            deadline = time.monotonic() + self.secs
            while time.monotonic() < deadline:
                time.sleep(SLOW_SLICE_S)
                self.tick()
            return
        while True:  # hang: alive, never progressing
            time.sleep(3600)


@dataclass
class Faults:
    """This rank's injected faults in this generation of the group (tests only)."""

    faults: list[Fault]

    @classmethod
    def from_environ(
        cls,
        rank: int,
        generation: int,
        env: Mapping[str, str] | None = None,
        tick: Callable[[], None] = lambda: None,
    ) -> Faults | None:
        """None unless `PARADIT_FAULT` names this rank and generation; `tick` is the rank's
        work counter."""
        text = (os.environ if env is None else env).get(ENV, "")
        faults = [Fault.parse(part) for part in text.split(";") if part.strip()]
        mine = [f for f in faults if f.rank in (None, rank) and f.generation == generation]
        if not mine:
            return None
        log.warning("test-only fault injection is on for this rank: %s", text)
        for fault in mine:
            fault.tick = tick
        return cls(mine)

    def at_load(self) -> None:
        for fault in self.faults:
            fault.at_load()

    def at_step(self, step: int) -> None:
        for fault in self.faults:
            fault.at_step(step)

    def at_decode(self) -> None:
        for fault in self.faults:
            fault.at_decode()
