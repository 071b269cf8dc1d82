"""The bench's throughput row: a batch of jobs on D data-parallel replicas against one rank.

Each backend is a real `paradit serve` group (one thread per rank on CPU). Per backend and
repeat: start-up (serve started -> ready), then every job of the batch submitted at once
(per-job seeds, batch size 1) and "jobs alone" = first submit -> last job finished (the
server's clock, same host); "with start-up" adds the two. The two backends run interleaved,
their order alternating from repeat to repeat, so slow drift of the machine's load falls on
both; the report gives medians with min-max, and the speedup both as the ratio of medians
and as the spread of the per-repeat ratios. The ranks' CPU seconds during the jobs are kept
too: on a shared machine they show how much of the cores the run actually got.
"""

from __future__ import annotations

import logging
import os
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .stats import fixed_spread

log = logging.getLogger(__name__)

TARGETS = {
    "throughput_jobs": ("batch throughput, replicas vs 1 rank, jobs alone", ">=", 1.8),
    "throughput_with_startup": ("batch throughput, replicas vs 1 rank, with start-up", ">=", 1.4),
}


@dataclass(frozen=True)
class ThroughputWorkload:
    """The batch each backend runs, and how often."""

    model: str = "tiny-wan"
    width: int = 256
    height: int = 256
    num_frames: int = 17
    num_inference_steps: int = 10
    num_jobs: int = 8
    """Jobs in the batch (seeds 0 .. num_jobs - 1, one prompt)."""
    dp_degree: int = 2
    """Replicas of one rank each, against one rank."""
    num_repeats: int = 3
    """Runs of each backend, interleaved."""

    def __post_init__(self) -> None:
        if self.num_jobs < 1 or self.num_repeats < 1:
            raise ValueError("num_jobs and num_repeats must be >= 1")
        if self.dp_degree < 2:
            raise ValueError("dp_degree must be >= 2 (it is compared with one rank)")

    def bodies(self) -> list[dict[str, Any]]:
        return [
            {
                "prompt": "a red fox running through fresh snow, morning light",
                "width": self.width,
                "height": self.height,
                "num_frames": self.num_frames,
                "num_inference_steps": self.num_inference_steps,
                "seed": seed,
            }
            for seed in range(self.num_jobs)
        ]


THROUGHPUT = ThroughputWorkload()
"""The issue's batch: tiny-wan, 256x256, 17 frames, 10 steps, 8 jobs, 2 replicas x 1 core."""
THROUGHPUT_SMOKE = ThroughputWorkload(
    width=64, height=64, num_frames=5, num_inference_steps=2, num_jobs=4, num_repeats=1
)
"""Seconds of compute: for testing the row itself, not for numbers."""


@dataclass
class ThroughputRun:
    """One backend's batch, once."""

    label: str
    world_size: int
    dp_degree: int
    repeat: int
    start_s: float = 0.0
    jobs_s: float = 0.0
    cpu_s: list[float | None] = field(default_factory=list)
    """Each rank's CPU seconds (user + system) from the first submit to the last finish."""
    jobs_per_replica: dict[str, int] = field(default_factory=dict)
    load_avg: list[float] = field(default_factory=list)
    error: str | None = None

    @property
    def total_s(self) -> float:
        return self.start_s + self.jobs_s


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a local process so far, None where /proc cannot tell."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _serve_config(workload: ThroughputWorkload, dp_degree: int, device: str, work_dir: Path):
    from ...config import ServeConfig

    return ServeConfig.from_argv(
        ["--dp-degree", str(dp_degree)],
        model=workload.model,
        world_size=dp_degree,
        device=device,
        output_dir=str(work_dir / "outputs"),
        timeout_s=600.0,
        threads_per_rank=1 if device == "cpu" else None,
    )


def run_once(
    workload: ThroughputWorkload, dp_degree: int, repeat: int, device: str, work_dir: Path, logs
) -> ThroughputRun:
    """Start a backend of `dp_degree` one-rank replicas, run the batch, stop it."""
    from ...client.local import LocalBackend

    label = "1 rank" if dp_degree == 1 else f"{dp_degree} replicas"
    run = ThroughputRun(label, dp_degree, dp_degree, repeat)
    log_file = Path(logs) / f"throughput-{label.replace(' ', '-')}-{repeat}.log"
    started = time.perf_counter()
    try:
        backend = LocalBackend(
            _serve_config(workload, dp_degree, device, work_dir),
            start_timeout_s=900.0,
            log_file=log_file,
        )
    except Exception as exc:  # recorded in the report; the other runs go on
        run.error = f"start failed: {exc} (see {log_file})"
        return run
    run.start_s = time.perf_counter() - started
    try:
        _run_batch(backend.client, workload, run)
    except Exception as exc:  # recorded in the report; the other runs go on
        run.error = f"{type(exc).__name__}: {exc} (see {log_file})"
    finally:
        backend.stop()
    log.info(
        "throughput %s, repeat %d: start-up %.1fs, jobs %.1fs",
        label,
        repeat,
        run.start_s,
        run.jobs_s,
    )
    return run


def _run_batch(client: Any, workload: ThroughputWorkload, run: ThroughputRun) -> None:
    pids = [rank["pid"] for rank in client.info()["ranks"]]
    cpu_before = [cpu_seconds(pid) for pid in pids]
    first_submit = time.time()
    ids = [client.submit(body) for body in workload.bodies()]
    jobs = [client.wait(job_id, poll_s=0.25, timeout_s=3600) for job_id in ids]
    run.jobs_s = max(job["finished"] for job in jobs) - first_submit
    run.cpu_s = [
        None if a is None or b is None else round(b - a, 2)
        for a, b in zip(cpu_before, (cpu_seconds(pid) for pid in pids), strict=True)
    ]
    for job in jobs:
        key = str(job.get("replica", 0))
        run.jobs_per_replica[key] = run.jobs_per_replica.get(key, 0) + 1
    run.load_avg = [round(x, 2) for x in os.getloadavg()]


def measure(
    workload: ThroughputWorkload, device: str, num_devices: int, work_dir: Path, logs: Path
) -> list[ThroughputRun]:
    """Every repeat runs both backends, the order alternating (1 rank first in even repeats)."""
    if num_devices < workload.dp_degree:
        run = ThroughputRun(f"{workload.dp_degree} replicas", workload.dp_degree, 0, 0)
        run.error = f"needs {workload.dp_degree} devices, found {num_devices}"
        return [run]
    runs = []
    for repeat in range(workload.num_repeats):
        order = (1, workload.dp_degree) if repeat % 2 == 0 else (workload.dp_degree, 1)
        for dp_degree in order:
            runs.append(run_once(workload, dp_degree, repeat, device, work_dir, logs))
    return runs


# -- report -----------------------------------------------------------------------------------


def _spread(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"median": None, "min": None, "max": None}
    return {
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
    }


def _ratios(base: list[ThroughputRun], other: list[ThroughputRun], key: str) -> list[float]:
    """Per repeat: 1 rank's time / the replicas' time."""
    theirs = {run.repeat: getattr(run, key) for run in other}
    return [getattr(run, key) / theirs[run.repeat] for run in base if theirs.get(run.repeat)]


def summarize(workload: ThroughputWorkload, runs: list[ThroughputRun]) -> dict[str, Any]:
    """The throughput section of the bench JSON (and its two targets)."""
    good = [run for run in runs if run.error is None]
    rows = []
    for label in dict.fromkeys(run.label for run in good):
        mine = [run for run in good if run.label == label]
        cpu = [sum(c for c in run.cpu_s if c is not None) for run in mine]
        rows.append(
            {
                "label": label,
                "world_size": mine[0].world_size,
                "dp_degree": mine[0].dp_degree,
                "start_s": _spread([run.start_s for run in mine]),
                "jobs_s": _spread([run.jobs_s for run in mine]),
                "total_s": _spread([run.total_s for run in mine]),
                "cpu_s": _spread(cpu),
                "cores_used": _spread([c / run.jobs_s for c, run in zip(cpu, mine, strict=True)]),
                "jobs_per_min": round(
                    60 * workload.num_jobs / statistics.median([run.jobs_s for run in mine]), 2
                ),
            }
        )
    base = [run for run in good if run.dp_degree == 1]
    other = [run for run in good if run.dp_degree == workload.dp_degree]
    speedup = {}
    for key, attr in (("jobs", "jobs_s"), ("with_startup", "total_s")):
        ratios = _ratios(base, other, attr)
        medians = (
            statistics.median(getattr(r, attr) for r in base)
            / statistics.median(getattr(r, attr) for r in other)
            if base and other
            else None
        )
        speedup[key] = {
            "of_medians": None if medians is None else round(medians, 3),
            "per_repeat": [round(r, 3) for r in ratios],
            **{k: v for k, v in _spread(ratios).items() if k != "median"},
        }
    targets = {}
    for name, (what, op, goal) in TARGETS.items():
        value = speedup["jobs" if name == "throughput_jobs" else "with_startup"]["of_medians"]
        targets[name] = {
            "what": what,
            "row": "throughput",
            "target": f"{op} {goal}",
            "value": value,
            "met": None if value is None else value >= goal,
            "value_no_shard": None,
            "met_no_shard": None,
        }
    return {
        "workload": asdict(workload),
        "rows": rows,
        "speedup": speedup,
        "targets": targets,
        "runs": [{**asdict(run), "total_s": round(run.total_s, 3)} for run in runs],
        "errors": [
            f"throughput {run.label} #{run.repeat}: {run.error}" for run in runs if run.error
        ],
    }


def _fmt(spread: dict[str, float | None]) -> str:
    return fixed_spread(spread, 1)


def render(section: dict[str, Any]) -> list[str]:
    """Markdown lines of the throughput section."""
    w = section["workload"]
    lines = [
        "",
        f"### Throughput: a batch of {w['num_jobs']} on {w['dp_degree']} replicas x 1 rank "
        "against 1 rank",
        "",
        f"{w['model']}, {w['width']}x{w['height']}, {w['num_frames']} frame(s), "
        f"{w['num_inference_steps']} steps, seeds 0-{w['num_jobs'] - 1}, all submitted at once; "
        f"{w['num_repeats']} interleaved repeats, median (min-max). Jobs alone: first submit "
        "-> last job finished; with start-up: plus serve -> ready. CPU: the ranks' CPU seconds "
        "during the jobs; cores used: those over the jobs' wall time (less than the ranks: "
        "other work had the cores).",
        "",
        "| backend | start-up (s) | jobs alone (s) | with start-up (s) | jobs/min | rank CPU (s) "
        "| cores used |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in section["rows"]:
        cores = row["cores_used"]
        lines.append(
            f"| {row['label']} | {_fmt(row['start_s'])} | {_fmt(row['jobs_s'])} | "
            f"{_fmt(row['total_s'])} | {row['jobs_per_min']:.2f} | {_fmt(row['cpu_s'])} | "
            + ("-" if cores["median"] is None else f"{cores['median']:.2f}")
            + " |"
        )
    for key, what in (("jobs", "jobs alone"), ("with_startup", "with start-up")):
        s = section["speedup"][key]
        if s["of_medians"] is not None:
            per = ", ".join(f"{r:.2f}" for r in s["per_repeat"])
            lines.append("")
            lines.append(
                f"Speedup {what}: **{s['of_medians']:.2f}x** (ratio of medians; per repeat {per})."
            )
    return lines
