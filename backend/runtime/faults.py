"""Fault injection for tests: make a chosen rank fail in a chosen way at a chosen moment.

Test-only. Set `PARADIT_FAULT` in the environment of `paradit serve` (every rank inherits it):

    PARADIT_FAULT="rank=1,at=step:2,kind=hang"

- `rank`: a rank number, or `all` (every rank fails the same way).
- `at`: `load` (while loading the model) or `step:N` (after denoising step N of a job).
- `kind`: `raise` (a RuntimeError), `exit` (the process exits with code 3), `hang` (the rank
  stops progressing but stays alive; its heartbeats go on), `oom` (torch.OutOfMemoryError).
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
import time
from collections.abc import Mapping
from dataclasses import dataclass

import torch

log = logging.getLogger(__name__)

ENV = "PARADIT_FAULT"
KINDS = ("raise", "exit", "hang", "oom")


class InjectedFault(RuntimeError):
    """The error an injected `raise` fault raises."""


@dataclass
class Fault:
    """One injected fault; `None` from `from_environ` when none is asked for."""

    rank: int | None
    """None: every rank."""
    at: str
    """"load" or "step"."""
    step: int
    kind: str
    times: int | None = None
    generation: int = 0
    hits: int = 0

    @classmethod
    def parse(cls, text: str) -> Fault:
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        rule = f"{ENV} must look like 'rank=1,at=step:2,kind=hang[,times=1][,gen=0]', got {text!r}"
        try:
            rank = None if fields["rank"] == "all" else int(fields["rank"])
            where, _, step = fields["at"].partition(":")
            kind = fields["kind"]
            times = int(fields["times"]) if "times" in fields else None
            generation = int(fields.get("gen", "0"))
            step_number = int(step) if where == "step" else 0
        except (KeyError, ValueError):
            raise ValueError(rule) from None
        if where not in ("load", "step") or kind not in KINDS:
            raise ValueError(rule)
        return cls(rank, where, step_number, kind, times, generation)

    def at_load(self) -> None:
        if self.at == "load":
            self._fire("while loading")

    def at_step(self, step: int) -> None:
        if self.at == "step" and step == self.step:
            self._fire(f"after step {step}")

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
        while True:  # hang: alive, never progressing
            time.sleep(3600)


@dataclass
class Faults:
    """This rank's injected faults in this generation of the group (tests only)."""

    faults: list[Fault]

    @classmethod
    def from_environ(
        cls, rank: int, generation: int, env: Mapping[str, str] | None = None
    ) -> Faults | None:
        """None unless `PARADIT_FAULT` names this rank and generation."""
        text = (os.environ if env is None else env).get(ENV, "")
        faults = [Fault.parse(part) for part in text.split(";") if part.strip()]
        mine = [f for f in faults if f.rank in (None, rank) and f.generation == generation]
        if not mine:
            return None
        log.warning("test-only fault injection is on for this rank: %s", text)
        return cls(mine)

    def at_load(self) -> None:
        for fault in self.faults:
            fault.at_load()

    def at_step(self, step: int) -> None:
        for fault in self.faults:
            fault.at_step(step)
