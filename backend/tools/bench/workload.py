"""What `paradit bench` runs and what one run measured (shared by the runner and the report)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace
from typing import Any

from .model import BenchModel, num_tokens


@dataclass(frozen=True)
class Workload:
    """What one bench run measures and how many times."""

    model: BenchModel
    width: int
    height: int
    num_frames: int
    num_inference_steps: int
    """Steps of the measured job; the first step of every job is not counted."""
    num_jobs: int
    """Measured jobs per backend (and direct pipeline calls at world size 1): the repeats,
    interleaved over the backends, which stay up together."""
    num_probes: int
    """Small jobs per backend for the warm-latency median (the first one warms up and is
    not counted; each other one is submitted to an idle server)."""
    no_shard_modes: tuple[str, ...]
    """Modes also run at world size 2 with `--no-shard`."""
    max_world_size: int
    guidance_scale: float = 5.0
    idle_s: float = 1.5
    """Pause before each latency probe, longer than the workers' 1 s fast-polling window."""

    def __post_init__(self) -> None:
        if self.num_inference_steps < 2:
            raise ValueError("num_inference_steps must be >= 2 (the first step is not counted)")
        if self.num_jobs < 1 or self.num_probes < 2:
            raise ValueError("num_jobs must be >= 1 and num_probes >= 2")

    @property
    def tokens(self) -> int:
        return num_tokens(self.width, self.height, self.num_frames)

    def body(self) -> dict[str, Any]:
        return {
            "prompt": "a red fox running through fresh snow, morning light",
            "negative_prompt": "blurry, low quality",
            "width": self.width,
            "height": self.height,
            "num_frames": self.num_frames,
            "num_inference_steps": self.num_inference_steps,
            "guidance_scale": self.guidance_scale,
            "seed": 7,
        }

    def probe_body(self) -> dict[str, Any]:
        """A short job for latency: what it measures ends before the first step."""
        return {**self.body(), "width": 64, "height": 64, "num_frames": 1, "num_inference_steps": 1}


# 640 x 512, one frame: 32 x 40 patches = 1280 tokens.
QUICK = Workload(
    BenchModel(),
    640,
    512,
    1,
    num_inference_steps=5,
    num_jobs=3,
    num_probes=3,
    no_shard_modes=("sequence",),
    max_world_size=4,
)
FULL = Workload(
    BenchModel(),
    640,
    512,
    1,
    num_inference_steps=8,
    num_jobs=2,
    num_probes=6,
    no_shard_modes=("sequence", "cfg"),
    max_world_size=8,
)
SMOKE = Workload(
    BenchModel(num_heads=4, head_dim=16, num_layers=2, ffn_dim=128),
    64,
    64,
    5,
    num_inference_steps=2,
    num_jobs=1,
    num_probes=2,
    no_shard_modes=(),
    max_world_size=2,
    idle_s=0.0,
)
"""A few seconds of compute in all: for testing the benchmark itself, not for numbers (so no
idle pause before its latency probes either)."""


@dataclass(frozen=True)
class RunSpec:
    """One backend configuration."""

    mode: str
    """"baseline" (world size 1), "sequence", "cfg" or "cfg+sequence"."""
    world_size: int
    cfg_degree: int = 1
    ulysses_degree: int = 1
    sharded: bool = True

    @property
    def label(self) -> str:
        name = "1 rank" if self.world_size == 1 else f"{self.mode} x{self.world_size}"
        return name if self.sharded or self.world_size == 1 else f"{name} no-shard"

    def serve_args(self) -> tuple[str, ...]:
        args = ("--cfg-degree", str(self.cfg_degree), "--ulysses-degree", str(self.ulysses_degree))
        return args if self.sharded else (*args, "--no-shard")


def plan_runs(workload: Workload, max_ranks: int) -> list[RunSpec]:
    """World size 1, then each mode at 2, 4, 8 ranks as devices allow, then no-shard runs."""
    runs = [RunSpec("baseline", 1)]
    world_size = 2
    while world_size <= min(max_ranks, workload.max_world_size):
        runs.append(RunSpec("sequence", world_size, 1, world_size))
        if world_size == 2:
            runs.append(RunSpec("cfg", 2, 2, 1))
        else:
            runs.append(RunSpec("cfg+sequence", world_size, 2, world_size // 2))
        world_size *= 2
    if max_ranks >= 2:
        for run in list(runs):
            if run.world_size == 2 and run.mode in workload.no_shard_modes:
                runs.append(replace(run, sharded=False))
    return runs


@dataclass
class RunResult:
    spec: RunSpec
    cold_start_s: float = 0.0
    plan: dict[str, Any] = field(default_factory=dict)
    ranks: list[dict[str, Any]] = field(default_factory=list)
    jobs: list[dict[str, Any]] = field(default_factory=list)
    """Timings of the measured jobs (the server's `timings`)."""
    latency_ms: list[float] = field(default_factory=list)
    """Submit -> pipeline call of every warm job, client clock to server clock (same host)."""
    latency_parts_ms: dict[str, float] = field(default_factory=dict)
    error: str | None = None

    @property
    def job_steps_s(self) -> list[float]:
        """Each measured job's median step (its first step left out), in job order."""
        steps = [measured_steps(job.get("step_s", [])) for job in self.jobs]
        return [statistics.median(s) for s in steps if s]

    @property
    def step_s(self) -> float | None:
        """The median of the jobs' median steps."""
        steps = self.job_steps_s
        return statistics.median(steps) if steps else None

    @property
    def phases(self) -> dict[str, Any] | None:
        """rank 0's profiled step by phase (`runtime/phases.py`), the median of each phase
        over the jobs; the collective counts, CPU and CPU wait of the last job; None when no
        job carries phases."""
        profiled = [job["phases"] for job in self.jobs if job.get("phases")]
        if not profiled:
            return None
        last = profiled[-1]
        seconds = {
            phase: round(statistics.median(p["seconds"][phase] for p in profiled), 4)
            for phase in last["seconds"]
        }
        out = {
            "step_s": round(statistics.median(p["step_s"] for p in profiled), 4),
            "seconds": seconds,
            "calls": last["calls"],
        }
        for key in ("cpu_s", "cpu_wait_s"):
            if all(key in p for p in profiled):
                out[key] = round(statistics.median(p[key] for p in profiled), 4)
        return out

    @property
    def e2e_s(self) -> float | None:
        """Median job time on rank 0, without writing the output files."""
        times = [job["total_s"] - job.get("write_s", 0.0) for job in self.jobs if "total_s" in job]
        return statistics.median(times) if times else None


def measured_steps(steps: list[float]) -> list[float]:
    """Every step but the first (warm-up), or all of them when there is only one."""
    return list(steps[1:]) if len(steps) > 1 else list(steps)
