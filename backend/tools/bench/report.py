"""The bench's results as one JSON-able summary, a markdown report and a PNG plot."""

from __future__ import annotations

import json
import logging
import platform
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .lora_switch import render as render_lora_switch
from .stats import fmt_spread, spread
from .throughput import render as render_throughput

if TYPE_CHECKING:
    from .model import DirectResult
    from .workload import RunResult, Workload

TARGETS = {
    "cfg_speedup_x2": ("CFG parallel, 2 ranks vs 1", ">=", 1.9),
    "sequence_speedup_x2": ("sequence parallel (Ulysses), 2 ranks vs 1", ">=", 1.8),
    "overhead_ratio": ("paradit 1 rank / diffusers direct", "<=", 1.03),
    "warm_first_step_ms": ("warm submit -> first step (ms)", "<=", 100.0),
}
MIB = 1024 * 1024

log = logging.getLogger(__name__)


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def _scaling(results: list[RunResult]) -> list[dict[str, Any]]:
    base = results[0]
    base_step, base_e2e = base.step_s, base.e2e_s
    if base_step is None:
        return []
    modes = sorted({r.spec.mode for r in results[1:]}) or ["baseline"]
    rows = []
    for result in results:
        step, e2e = result.step_s, result.e2e_s
        if step is None:
            continue
        paired = [a / b for a, b in zip(base.job_steps_s, result.job_steps_s, strict=False)]
        for mode in modes if result is base else [result.spec.mode]:
            speedup = base_step / step
            rows.append(
                {
                    "mode": mode,
                    "world_size": result.spec.world_size,
                    "sharded": result.spec.sharded and result.spec.world_size > 1,
                    "label": result.spec.label,
                    "step_s": round(step, 4),
                    "speedup": round(speedup, 3),
                    "efficiency": round(speedup / result.spec.world_size, 3),
                    "e2e_s": _round(e2e),
                    "e2e_speedup": _round(base_e2e / e2e if base_e2e and e2e else None, 3),
                    "step_spread": _rounded(spread(result.job_steps_s)),
                    "speedup_spread": _rounded(spread(paired), 3) if paired else None,
                    "phases": result.phases,
                }
            )
    return rows


def _rounded(values: dict[str, float], digits: int = 4) -> dict[str, float]:
    return {key: round(value, digits) for key, value in values.items()}


def _overhead(base: RunResult, direct: list[DirectResult]) -> dict[str, Any]:
    direct_e2e = _median([d.total_s for d in direct])
    direct_step = _median([s for d in direct for s in d.step_s[1:]])
    paradit_e2e, paradit_step = base.e2e_s, base.step_s
    return {
        "paradit_e2e_s": _round(paradit_e2e),
        "direct_e2e_s": _round(direct_e2e),
        "paradit_step_s": _round(paradit_step),
        "direct_step_s": _round(direct_step),
        "e2e_ratio": _round(paradit_e2e / direct_e2e if paradit_e2e and direct_e2e else None),
        "step_ratio": _round(paradit_step / direct_step if paradit_step and direct_step else None),
    }


def _latency(results: list[RunResult], setup_s: float) -> list[dict[str, Any]]:
    rows = []
    for result in results:
        if not result.latency_ms:
            continue
        served = statistics.median(result.latency_ms)
        rows.append(
            {
                "label": result.spec.label,
                "world_size": result.spec.world_size,
                "cold_start_s": round(result.cold_start_s, 2),
                "warm_first_step_ms": round(served + setup_s * 1e3, 2),
                "parts_ms": {
                    **{k: round(v, 2) for k, v in result.latency_parts_ms.items()},
                    "pipeline_setup_ms": round(setup_s * 1e3, 2),
                },
            }
        )
    return rows


def _memory(results: list[RunResult]) -> list[dict[str, Any]]:
    return [
        {
            "label": r.spec.label,
            "world_size": r.spec.world_size,
            "sharded": r.spec.sharded and r.spec.world_size > 1,
            "modes": r.plan.get("modes", []),
            "ranks": r.ranks,
        }
        for r in results
        if r.ranks
    ]


def _param_bytes(results: list[RunResult]) -> dict[str, int]:
    """{world size: the largest per-rank DiT parameter bytes} with the default (sharded) plan."""
    out: dict[str, int] = {}
    for result in results:
        if result.ranks and result.spec.sharded and str(result.spec.world_size) not in out:
            out[str(result.spec.world_size)] = max(r["dit_param_bytes"] for r in result.ranks)
    return out


def _targets(scaling: list[dict], overhead_ratio: float | None, warm_ms: float | None) -> dict:
    def speedup(mode: str, sharded: bool) -> float | None:
        for row in scaling:
            if row["mode"] == mode and row["world_size"] == 2 and row["sharded"] == sharded:
                return row["speedup"]
        return None

    values = {
        "cfg_speedup_x2": (speedup("cfg", True), speedup("cfg", False)),
        "sequence_speedup_x2": (speedup("sequence", True), speedup("sequence", False)),
        "overhead_ratio": (overhead_ratio, None),
        "warm_first_step_ms": (warm_ms, None),
    }
    out = {}
    for key, (what, op, goal) in TARGETS.items():
        value, no_shard = values[key]
        met = None if value is None else (value >= goal if op == ">=" else value <= goal)
        met_no_shard = None if no_shard is None else no_shard >= goal
        out[key] = {
            "what": what,
            "row": "scaling",
            "target": f"{op} {goal}",
            "value": value,
            "met": met,
            "value_no_shard": no_shard,
            "met_no_shard": met_no_shard,
        }
    return out


def summarize(
    *,
    workload: Workload,
    results: list[RunResult],
    direct: list[DirectResult],
    setup_s: float,
    device: str,
    num_devices: int,
    quick: bool,
    load_avg: dict[str, list[float]],
    wall_s: float,
) -> dict[str, Any]:
    """Everything the report shows, JSON-able; the keys of the issue are at the top level."""
    scaling = _scaling(results)
    overhead = _overhead(results[0], direct)
    latency = _latency(results, setup_s)
    warm = max((row["warm_first_step_ms"] for row in latency), default=None)
    cold = max((row["cold_start_s"] for row in latency), default=None)
    return {
        "scaling": scaling,
        "overhead_ratio": overhead["e2e_ratio"],
        "warm_first_step_ms": warm,
        "cold_start_s": cold,
        "param_bytes_per_rank": _param_bytes(results),
        "overhead": overhead,
        "latency": latency,
        "memory": _memory(results),
        "targets": _targets(scaling, overhead["e2e_ratio"], warm),
        "errors": [f"{r.spec.label}: {r.error}" for r in results if r.error],
        "setup": {
            **_setup_common(device, num_devices, quick, load_avg, wall_s),
            "model": workload.model.describe(),
            "tokens": workload.tokens,
            "job": workload.body(),
            "measured_jobs_per_backend": workload.num_jobs,
            "step_time": (
                "median over the jobs of each job's median timings.step_s (first step "
                "skipped); jobs interleaved over the backends; (min-max) over the jobs, "
                "speed-up paired job by job"
            ),
        },
    }


def _setup_common(
    device: str, num_devices: int, quick: bool, load_avg: dict, wall_s: float
) -> dict[str, Any]:
    from .... import __version__

    return {
        "command": "paradit bench" + (" --quick" if quick else ""),
        "device": device,
        "num_devices": num_devices,
        "threads_per_rank": 1 if device == "cpu" else None,
        "load_avg": load_avg,
        "wall_s": round(wall_s, 1),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "platform": platform.platform(),
        "cpu": platform.processor() or platform.machine(),
        "paradit": __version__,
    }


def summarize_throughput_only(
    *, device: str, num_devices: int, quick: bool, load_avg: dict, wall_s: float
) -> dict[str, Any]:
    """The summary of a run without the scaling rows (`--rows throughput`)."""
    setup = _setup_common(device, num_devices, quick, load_avg, wall_s)
    return {"targets": {}, "errors": [], "setup": setup}


def add_throughput(summary: dict[str, Any], section: dict[str, Any]) -> None:
    """Put the throughput section, its targets and errors into `summary`."""
    summary["throughput"] = section
    summary["targets"].update(section["targets"])
    summary["errors"] += section["errors"]


def add_lora_switch(summary: dict[str, Any], section: dict[str, Any]) -> None:
    """Put the LoRA switch section and its errors into `summary`."""
    summary["lora_switch"] = section
    summary["errors"] += section["errors"]


def judge_load(summary: dict[str, Any], loads: dict[str, dict[str, Any]]) -> None:
    """Record each row's load window; a target of a noisy row gets no verdict (`met` None)."""
    summary["load"] = loads
    for target in summary["targets"].values():
        if loads.get(target.get("row"), {}).get("noisy"):
            target.update(noisy=True, met=None, met_no_shard=None)


def write_json(summary: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=2) + "\n")


# -- markdown ---------------------------------------------------------------------------------


def _fmt(value: Any, pattern: str = "{:.2f}") -> str:
    return "-" if value is None else pattern.format(value)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def render_markdown(summary: dict[str, Any]) -> str:
    from .load import describe as describe_load

    setup = summary["setup"]
    if "scaling" in summary:
        lines = _render_scaling(summary)
    else:
        lines = [
            f"## `{setup['command']}` — {setup['date']}",
            "",
            f"{setup['num_devices']} {setup['device']} device(s), one thread per rank"
            if setup["device"] == "cpu"
            else f"{setup['num_devices']} {setup['device']} device(s)",
        ]
        lines[-1] += (
            f"; load average {setup['load_avg'].get('start')} -> "
            f"{setup['load_avg'].get('end')}; {setup['wall_s']:.0f} s in all."
        )
    if "throughput" in summary:
        lines += render_throughput(summary["throughput"])
    if "lora_switch" in summary:
        lines += render_lora_switch(summary["lora_switch"])
    rows = []
    for target in summary["targets"].values():
        extra = ""
        if target["value_no_shard"] is not None:
            judged = {True: "met", False: "not met", None: "not judged"}[target["met_no_shard"]]
            extra = f" (no-shard: {target['value_no_shard']:.2f}, {judged})"
        met = {True: "met", False: "NOT met", None: "-"}[target["met"]]
        if target.get("noisy"):
            met = "noisy: not judged"
        rows.append([target["what"], target["target"], _fmt(target["value"]) + extra, met])
    if summary.get("load"):
        lines += ["", "### Load", ""]
        lines += [f"- {row}: {describe_load(window)}" for row, window in summary["load"].items()]
    if rows:  # rows without targets (image, unguided, cache, lora) leave the heading out
        lines += ["", "### Targets", "", *_table(["target", "goal", "measured", ""], rows)]
    if summary["errors"]:
        lines += ["", "### Errors", ""] + [f"- {e}" for e in summary["errors"]]
    return "\n".join(lines) + "\n"


def _render_scaling(summary: dict[str, Any]) -> list[str]:
    setup = summary["setup"]
    job = setup["job"]
    lines = [
        f"## `{setup['command']}` — {setup['date']}",
        "",
        f"{setup['num_devices']} {setup['device']} device(s)"
        + (", one thread per rank" if setup["device"] == "cpu" else "")
        + f"; {setup['model']}; {setup['tokens']} tokens ({job['width']}x{job['height']}, "
        f"{job['num_frames']} frame(s)), {job['num_inference_steps']} steps, guidance "
        f"{job['guidance_scale']} (two DiT passes per step); load average "
        f"{setup['load_avg'].get('start')} -> {setup['load_avg'].get('end')}; "
        f"{setup['wall_s']:.0f} s in all.",
        "",
        "### Scaling (step time: " + setup["step_time"] + ")",
        "",
    ]
    rows = [
        [
            r["mode"],
            str(r["world_size"]),
            "sharded" if r["sharded"] else "full",
            fmt_spread(r.get("step_spread"), " s") if r.get("step_spread") else _fmt(r["step_s"]),
            fmt_spread(r.get("speedup_spread"), "x")
            if r.get("speedup_spread")
            else _fmt(r["speedup"], "{:.2f}x"),
            _fmt(r["efficiency"], "{:.0%}"),
            _fmt(r["e2e_s"]),
            _fmt(r["e2e_speedup"], "{:.2f}x"),
        ]
        for r in summary["scaling"]
    ]
    lines += _table(
        [
            "mode",
            "ranks",
            "DiT weights",
            "step (s)",
            "speedup",
            "efficiency",
            "job (s)",
            "job speedup",
        ],
        rows,
    )
    lines += render_phases(summary["scaling"])
    over = summary["overhead"]
    lines += ["", "### Overhead: paradit (1 rank) vs the diffusers pipeline called directly", ""]
    lines += _table(
        ["", "paradit", "diffusers", "ratio"],
        [
            [
                "job, encode to frames (s)",
                _fmt(over["paradit_e2e_s"], "{:.3f}"),
                _fmt(over["direct_e2e_s"], "{:.3f}"),
                _fmt(over["e2e_ratio"], "{:.3f}"),
            ],
            [
                "step (s)",
                _fmt(over["paradit_step_s"], "{:.3f}"),
                _fmt(over["direct_step_s"], "{:.3f}"),
                _fmt(over["step_ratio"], "{:.3f}"),
            ],
        ],
    )
    lines += ["", "### Latency", ""]
    rows = []
    for row in summary["latency"]:
        parts = row["parts_ms"]
        rows.append(
            [
                row["label"],
                _fmt(row["cold_start_s"], "{:.1f}"),
                _fmt(row["warm_first_step_ms"], "{:.1f}"),
                *(
                    _fmt(parts[k], "{:.1f}")
                    for k in (
                        "http_submit_ms",
                        "queue_ms",
                        "encode_ms",
                        "broadcast_ms",
                        "pipeline_setup_ms",
                    )
                ),
            ]
        )
    lines += _table(
        [
            "backend",
            "cold start (s)",
            "warm submit -> first step (ms)",
            "HTTP submit",
            "queue",
            "encode",
            "spec + broadcast",
            "latent setup",
        ],
        rows,
    )
    lines += ["", "### Memory per rank", ""]
    rows = []
    for run in summary["memory"]:
        for rank in run["ranks"]:
            gpu = rank.get("gpu_bytes")
            rows.append(
                [
                    run["label"],
                    str(rank["rank"]),
                    _fmt(rank["dit_param_bytes"] / MIB, "{:.1f}"),
                    _fmt(
                        None if rank["peak_rss_bytes"] is None else rank["peak_rss_bytes"] / MIB,
                        "{:.0f}",
                    ),
                    _fmt(None if gpu is None else gpu / MIB, "{:.0f}"),
                ]
            )
    lines += _table(["backend", "rank", "DiT params (MiB)", "peak RSS (MiB)", "GPU (MiB)"], rows)
    return lines


PHASE_COLUMNS = ("attention", "linear", "gathers", "all_to_alls", "hooks", "other")


def render_phases(scaling: list[dict[str, Any]]) -> list[str]:
    """The per-phase table of the profiled step (rank 0), one line per backend."""
    rows, seen = [], set()
    for row in scaling:
        phases = row.get("phases")
        if not phases or row["label"] in seen:
            continue
        seen.add(row["label"])
        calls = phases["calls"]
        rows.append(
            [
                row["label"],
                _fmt(phases["step_s"], "{:.3f}"),
                *(_fmt(phases["seconds"].get(name), "{:.3f}") for name in PHASE_COLUMNS),
                f"{calls.get('all_gather', 0)} / {calls.get('all_to_all', 0)}",
                _fmt(phases.get("cpu_s"), "{:.3f}"),
                _fmt(phases.get("cpu_wait_s"), "{:.3f}"),
            ]
        )
    if not rows:
        return []
    return [
        "",
        "### Phases of one step (rank 0, the last step of each job profiled; median over "
        "the jobs; seconds)",
        "",
        *_table(
            [
                "backend",
                "step",
                *(name.replace("_", "-") for name in PHASE_COLUMNS),
                "all-gathers / all-to-alls",
                "CPU",
                "waiting for a CPU",
            ],
            rows,
        ),
    ]


# -- plot -------------------------------------------------------------------------------------


def write_plot(summary: dict[str, Any], path: Path) -> None:
    """Speedup against ranks per mode (with the ideal), and the step time of every backend."""
    try:
        import matplotlib
    except ImportError:
        log.warning("no plot: matplotlib is not installed (pip install matplotlib)")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    lines: dict[str, list[tuple[int, float]]] = {}
    for row in summary["scaling"]:
        if row["world_size"] == 1:
            for sharded in ("", " no-shard"):
                lines.setdefault(row["mode"] + sharded, []).append((1, row["speedup"]))
        else:
            key = row["mode"] + ("" if row["sharded"] else " no-shard")
            lines.setdefault(key, []).append((row["world_size"], row["speedup"]))
    top = max([ws for pts in lines.values() for ws, _s in pts], default=2)
    left.plot([1, top], [1, top], "k:", label="ideal")
    for name, points in sorted(lines.items()):
        if len(points) > 1:
            xs, ys = zip(*sorted(points), strict=True)
            left.plot(xs, ys, "o-" if "no-shard" not in name else "s--", label=name)
    left.set_xlabel("ranks")
    left.set_ylabel("speedup per step")
    left.set_title("scaling (one job, median step)")
    left.legend(fontsize=8)
    left.grid(alpha=0.3)
    seen, labels, steps = set(), [], []
    for row in summary["scaling"]:
        if row["label"] not in seen:
            seen.add(row["label"])
            labels.append(row["label"])
            steps.append(row["step_s"])
    right.barh(labels, steps, color="tab:blue")
    right.invert_yaxis()
    right.set_xlabel("seconds per step")
    right.set_title(f"{summary['setup']['tokens']} tokens, {summary['setup']['device']}")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
