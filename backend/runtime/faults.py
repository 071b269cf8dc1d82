"""Fault injection for tests: make a chosen rank fail in a chosen way at a chosen moment.

Test-only. Set `PARADIT_FAULT` in the environment of `paradit serve` (every rank inherits it;
each rank it names logs a loud warning at start-up):

    PARADIT_FAULT="rank=1,at=step:2,kind=hang"
    PARADIT_FAULT="rank=1,at=step:2,kind=slow,secs=8,times=1"
    PARADIT_FAULT="rank=all,at=block:3,kind=raise,prompt=f-block"

- `rank`: a rank number, or `all` (every rank fails the same way).
- `at`: where in the rank's work it fires:
  - `join` (at start-up, once every rank has reached the group's store and before the
    process group forms: the others wait in its rendezvous);
  - `load` (while loading the model);
  - `start` (as a job's denoising starts, its LoRAs applied, before the first step);
  - `block:N` (inside the N-th transformer-block forward of a job, counted from 1 over the
    job's steps: in a forward pre-hook, where FSDP2 has gathered the block's weights);
  - `collective:N` (inside the job's N-th FSDP2 all-gather, before it reaches the process
    group: the other ranks already wait in theirs);
  - `step:N` (after denoising step N of a job);
  - `decode` (as the rank starts a job's decode).
- `kind`: `raise` (a RuntimeError), `exit` (the process exits with code 3), `hang` (the rank
  stops progressing but stays alive; its heartbeats go on), `oom` (torch.OutOfMemoryError),
  `stop` (the rank sends itself SIGSTOP: frozen, heartbeat included, as a wedged driver looks
  from outside), `slow` (a long stretch of work: the rank sleeps `secs` seconds, default 10,
  ticking its work counter every 0.25 s as a long step's blocks would; its heartbeats go on).
- `times` (optional, default every time): how many jobs it hits, e.g. `times=1` for the first
  job only (the backend's next jobs then run normally).
- `prompt` (optional): it hits only jobs whose prompt contains this word, so that one backend
  serves many cases in a row, each job choosing its fault by its prompt.
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
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

log = logging.getLogger(__name__)

ENV = "PARADIT_FAULT"
KINDS = ("raise", "exit", "hang", "oom", "stop", "slow")
PLACES = ("join", "load", "start", "block", "collective", "step", "decode")
COUNTED = ("block", "collective", "step")
"""Places that take a number (`at=block:3`)."""
SLOW_SLICE_S = 0.25
GATHERS = ("all_gather_single", "all_gather_into_tensor")
"""torch.distributed's functions FSDP2 all-gathers with (its name changed across torch)."""


class InjectedFault(RuntimeError):
    """The error an injected `raise` fault raises."""


@dataclass
class Fault:
    """One injected fault; `None` from `from_environ` when none is asked for."""

    rank: int | None
    """None: every rank."""
    at: str
    """One of `PLACES`."""
    step: int
    """The step, block or collective number of a counted place (0 for the others)."""
    kind: str
    times: int | None = None
    generation: int = 0
    secs: float = 10.0
    """How long a `slow` fault works."""
    prompt: str = ""
    """Only jobs whose prompt contains this ("" for every job)."""
    hits: int = 0
    tick: Callable[[], None] = lambda: None
    """The rank's work counter (`progress.Progress.tick`), which a `slow` fault ticks."""

    @classmethod
    def parse(cls, text: str) -> Fault:
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        rule = (
            f"{ENV} must look like 'rank=1,at=step:2,kind=hang[,times=1][,gen=0][,secs=10]"
            f"[,prompt=WORD]' with at one of {list(PLACES)}, got {text!r}"
        )
        try:
            rank = None if fields["rank"] == "all" else int(fields["rank"])
            where, _, step = fields["at"].partition(":")
            kind = fields["kind"]
            times = int(fields["times"]) if "times" in fields else None
            generation = int(fields.get("gen", "0"))
            step_number = int(step) if where in COUNTED else 0
            secs = float(fields.get("secs", "10"))
        except (KeyError, ValueError):
            raise ValueError(rule) from None
        if where not in PLACES or kind not in KINDS or secs <= 0:
            raise ValueError(rule)
        if where in COUNTED and step_number < 1:
            raise ValueError(rule)
        prompt = fields.get("prompt", "")
        return cls(rank, where, step_number, kind, times, generation, secs, prompt)

    def at_place(self, place: str) -> None:
        """A start-up place (`join`, `load`)."""
        if self.at == place:
            self._fire({"join": "as the group forms", "load": "while loading"}[place])

    def at_step(self, step: int) -> None:
        if self.at == "step" and step == self.step:
            self._fire(f"after step {step}")

    def at_count(self, place: str, count: int) -> None:
        """The `count`-th block forward or collective of the job (`place`)."""
        if self.at == place and count == self.step:
            self._fire(f"inside {place} {count}")

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
    active: list[Fault] = field(default_factory=list)
    """The running job's faults (those whose `prompt` it matches); none between jobs."""
    counts: dict[str, int] = field(default_factory=dict)
    """The running job's block forwards and collectives so far."""

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
        log.warning("TEST-ONLY FAULT INJECTION IS ON for rank %d (%s=%s)", rank, ENV, text)
        for fault in mine:
            fault.tick = tick
        return cls(mine)

    def watch(self, dits: list[torch.nn.Module]) -> None:
        """Count the block forwards of `dits` (a pre-hook on each item of their top-level
        ModuleLists) and, when a fault asks for it, the FSDP2 all-gathers of this process."""
        places = {fault.at for fault in self.faults}
        if "block" in places:
            for dit in dits:
                for child in dit.children():
                    if isinstance(child, torch.nn.ModuleList):
                        for block in child:
                            block.register_forward_pre_hook(lambda *_: self._count("block"))
        if "collective" in places:
            for name in GATHERS:  # what FSDP2 calls, looked up at call time (torch.distributed)
                original = getattr(dist, name, None)
                if original is not None:
                    setattr(dist, name, self._counted_collective(original))

    def _counted_collective(self, original: Callable) -> Callable:
        def collective(*args: Any, **kwargs: Any) -> Any:
            self._count("collective")
            return original(*args, **kwargs)

        return collective

    def _count(self, place: str) -> None:
        if not self.active:
            return
        self.counts[place] = self.counts.get(place, 0) + 1
        for fault in self.active:
            fault.at_count(place, self.counts[place])

    def begin_job(self, prompt: str) -> None:
        """A job starts denoising (fires `start` faults)."""
        self.active = [f for f in self.faults if f.prompt in prompt]
        self.counts = {}
        for fault in self.active:
            if fault.at == "start":
                fault._fire("as the job starts")

    def end_job(self) -> None:
        self.active = []

    def at_place(self, place: str) -> None:
        """A start-up place: `join` (`runtime/group.py`) or `load` (`runtime/engine.py`)."""
        for fault in self.faults:
            fault.at_place(place)

    def at_step(self, step: int) -> None:
        for fault in self.active:
            fault.at_step(step)

    def at_decode(self) -> None:
        for fault in self.active:
            fault.at_decode()
