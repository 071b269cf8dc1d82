"""A rank's real peak memory during one job, for job.json beside the prediction.

CUDA: the caching allocator's peak of allocated bytes (`max_memory_allocated`), reset at the
start of the job. CPU: the process's resident high-water mark (`VmHWM`), reset by writing 5
to /proc/self/clear_refs (Linux); `above_start` is that peak minus the resident memory the
process had before it loaded the model (the interpreter, torch and diffusers), which is what
the plan predicts.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

import torch


def resident_bytes(field: str = "VmRSS") -> int | None:
    """This process's resident memory (or its high-water mark, `VmHWM`); None off Linux."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


TREE_FIELDS = {"rss": ("status", "VmRSS:"), "pss": ("smaps_rollup", "Pss:")}


def tree_bytes(marker: str, kind: str = "rss") -> int:
    """Summed memory of every process whose command line mentions `marker` (a backend and its
    ranks): "rss" (resident) or "pss" (proportional: pages the forked ranks share with rank 0
    count once in the sum). Linux; 0 elsewhere."""
    file, prefix = TREE_FIELDS[kind]
    total = 0
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            if marker not in (entry / "cmdline").read_text():
                continue
            for line in (entry / file).read_text().splitlines():
                if line.startswith(prefix):
                    total += int(line.split()[1]) * 1024
        except OSError:
            continue
    return total


@dataclass
class PeakMeter:
    """Reset at a job's start, read at its end."""

    device: torch.device
    start_rss: int | None = None
    """Resident bytes before the model was loaded (CPU)."""

    def reset(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
            return
        with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as f:
            f.write("5")

    def read(self) -> dict[str, int | str] | None:
        if self.device.type == "cuda":
            return {
                "kind": "cuda max_memory_allocated",
                "peak_bytes": int(torch.cuda.max_memory_allocated(self.device)),
            }
        peak = resident_bytes("VmHWM")
        if peak is None:
            return None
        reading: dict[str, int | str] = {"kind": "resident (VmHWM)", "peak_bytes": peak}
        if self.start_rss is not None:
            reading["above_start_bytes"] = peak - self.start_rss
        return reading
