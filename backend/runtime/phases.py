"""Where one denoising step's time goes, per phase: a rank profiles one step of each job.

With `PARADIT_PHASES=1` in its environment (`paradit bench` sets it for its scaling rows), a
rank runs `torch.profiler` (CPU events, no shapes or stacks) over the last step of every job
with at least two steps, from the step clock's mark before it to the one after it, and adds
`phases` to the job's timings:

- `seconds`: the step's wall time split into `attention` (SDPA kernels), `linear` (matrix
  multiplies), `gathers` (FSDP2's weight all-gathers with their copies and waits, the
  sequence gather after the output projection, any other all-gather), `all_to_alls` (Ulysses
  attention without its kernel: the all-to-alls, their reshuffling copies and waits),
  `hooks` (FSDP2's per-block pre/post-forward hooks without the gathers they start or wait
  for) and `other` (the rest: norms, modulation, RoPE, elementwise work, the scheduler, the
  step callback, Python). Each profiled event's own time (events of the step's own thread;
  gloo's threads record their transfers too) counts in the phase of its nearest
  named ancestor, so nothing counts twice and the phases add up to the step.
- `calls`: collectives and hook runs in the step (all-gathers, all-to-alls, all-reduces,
  broadcasts, FSDP pre-forwards): counts that do not depend on the machine's load.
- `cpu_s` / `cpu_wait_s`: the main thread's CPU time in the step and its time waiting for a
  CPU (`/proc/thread-self/schedstat`; absent elsewhere). A large wait means other work took
  the cores: the step's time says more about the machine than about the code.

Unset, nothing is profiled and a job's timings carry no `phases`.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from typing import Any

PHASES_ENV = "PARADIT_PHASES"

PHASES = ("attention", "linear", "gathers", "all_to_alls", "hooks", "other")

# Profiler event name prefixes per phase; an event's own time counts in the phase of the
# nearest event (itself or an ancestor) whose name has one of them, else in "other".
PREFIXES: dict[str, tuple[str, ...]] = {
    "attention": (
        "aten::scaled_dot_product_attention",
        "aten::_scaled_dot_product_flash_attention",
        "aten::_scaled_dot_product_efficient_attention",
        "aten::_scaled_dot_product_cudnn_attention",
    ),
    "linear": ("aten::linear", "aten::addmm", "aten::mm", "aten::bmm", "aten::matmul"),
    "gathers": (
        "FSDP::all_gather",  # FSDP2: the gather, its copy-in and copy-out
        "AllGatherAnythingFunction",  # diffusers: the sequence gather after proj_out
        "c10d::allgather",
        "c10d::_allgather_base",
        "_c10d_functional::all_gather",
    ),
    "all_to_alls": (
        "TemplatedUlyssesAnythingAttention",
        "TemplatedUlyssesAttention",
        "c10d::alltoall",
        "_c10d_functional::all_to_all",
    ),
    "hooks": (
        "FSDP::pre_forward",
        "FSDP::post_forward",
        "FSDP::root_pre_forward",
        "FSDP::cast_forward",
        "FSDP::inputs_to_device",
    ),
}

# Events counted in `calls` (by name prefix): one count per event.
CALLS: dict[str, tuple[str, ...]] = {
    "all_gather": ("c10d::allgather_", "c10d::_allgather_base_"),
    "all_to_all": ("c10d::alltoall",),
    "all_reduce": ("c10d::allreduce",),
    "broadcast": ("c10d::broadcast",),
    "fsdp_pre_forward": ("FSDP::pre_forward",),
}


def phase_of(name: str) -> str | None:
    """The phase an event of this name starts, None when it names none."""
    for phase, prefixes in PREFIXES.items():
        if name.startswith(prefixes):
            return phase
    return None


def main_thread(events: Any) -> list[Any]:
    """The events of the thread that recorded most of them: the step's own thread (gloo's
    threads record their `gloo:*` transfers too, which overlap the main thread's waits)."""
    events = list(events)
    threads = Counter(getattr(event, "thread", 0) for event in events)
    if not threads:
        return []
    main = threads.most_common(1)[0][0]
    return [event for event in events if getattr(event, "thread", 0) == main]


def split_phases(events: Any, step_s: float) -> dict[str, float]:
    """Seconds per phase of a step `step_s` long, from the profiler's events of that step.

    Each event's own time (its time less its children's) goes to the phase of its nearest
    named ancestor-or-self; `other` is the step's time that no named event covers, so the
    phases add up to `step_s` (`other` is never below 0).
    """
    seconds = dict.fromkeys(PHASES, 0.0)
    for event in main_thread(events):
        phase, node = None, event
        while node is not None and phase is None:
            phase = phase_of(node.name)
            node = node.cpu_parent
        if phase is not None:
            seconds[phase] += event.self_cpu_time_total / 1e6
    named = sum(seconds.values())
    seconds["other"] = max(0.0, step_s - named)
    return {phase: round(value, 4) for phase, value in seconds.items()}


def count_calls(events: Any) -> dict[str, int]:
    """How many collectives (and FSDP pre-forward hooks) the profiled events hold."""
    counts: Counter[str] = Counter()
    for event in main_thread(events):
        for kind, prefixes in CALLS.items():
            if event.name.startswith(prefixes):
                counts[kind] += 1
    return {kind: counts[kind] for kind in CALLS}


def _thread_schedstat() -> tuple[float, float] | None:
    """(CPU seconds, seconds waiting for a CPU) of the calling thread; None where /proc has
    no schedstat."""
    try:
        with open("/proc/thread-self/schedstat") as file:
            run_ns, wait_ns, _slices = file.read().split()
    except (OSError, ValueError):
        return None
    return int(run_ns) / 1e9, int(wait_ns) / 1e9


class PhaseClock:
    """Profiles the last step of each job (when `PARADIT_PHASES` is on); see the module doc.

    `at_mark(index, total)` is called right after the step clock marks the end of step
    `index` (0-based) of `total`; `take()` at the job's end hands over the profiled step's
    phases (and forgets them: nothing of a job stays on the clock).
    """

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self._profiler: Any = None
        self._began = 0.0
        self._sched: tuple[float, float] | None = None
        self._result: dict[str, Any] | None = None

    @classmethod
    def from_env(cls) -> PhaseClock:
        return cls(os.environ.get(PHASES_ENV, "0") not in ("", "0"))

    def begin_job(self) -> None:
        self.stop()
        self._result = None

    def at_mark(self, index: int, total: int) -> None:
        if not self.enabled or total < 2:
            return
        if index == total - 2:
            self._start()
        elif index == total - 1 and self._profiler is not None:
            self._finish(index)

    def _start(self) -> None:
        import torch

        self._profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
        self._profiler.__enter__()
        self._sched = _thread_schedstat()
        self._began = time.perf_counter()

    def _finish(self, index: int) -> None:
        step_s = time.perf_counter() - self._began
        sched = _thread_schedstat()
        self._profiler.__exit__(None, None, None)
        events = self._profiler.events()
        self._profiler = None
        result: dict[str, Any] = {
            "step": index,
            "step_s": round(step_s, 4),
            "seconds": split_phases(events, step_s),
            "calls": count_calls(events),
        }
        if sched is not None and self._sched is not None:
            result["cpu_s"] = round(sched[0] - self._sched[0], 4)
            result["cpu_wait_s"] = round(sched[1] - self._sched[1], 4)
        self._result = result

    def stop(self) -> None:
        """End a profile left open (a job that stopped between the two marks)."""
        if self._profiler is not None:
            self._profiler.__exit__(None, None, None)
            self._profiler = None

    def take(self) -> dict[str, Any] | None:
        """The job's profiled step (None: none was profiled), forgotten here."""
        result, self._result = self._result, None
        return result
