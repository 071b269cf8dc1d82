"""Time `paradit batch` end to end (start-up included) on 2 replicas against 1 rank.

Runs each configuration `--repeats` times, interleaved (the order rotates every repeat), each
run a fresh `paradit batch` that starts its own backend, and prints median (min-max) wall
times, the speedups and the load average around every run. The issue's batch: tiny-wan,
256x256, 17 frames, 10 steps, seeds 0-7 of one prompt.

    python docs/measure_batch.py --repeats 3 [--model tiny-flux --frames 1] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONFIGS = {
    "1 rank x 1 thread": ["--world-size", "1", "--threads", "1"],
    "2 replicas x 1 thread": ["--world-size", "2", "--dp-degree", "2", "--threads", "1"],
    "1 rank x 2 threads": ["--world-size", "1", "--threads", "2"],
}
BASE = "1 rank x 1 thread"
REPLICAS = "2 replicas x 1 thread"


def run_once(args: argparse.Namespace, flags: list[str], work: Path, name: str) -> dict:
    prompts = work / "prompts.txt"
    prompts.write_text("a red fox running through fresh snow, morning light\n")
    out = work / name
    cmd = [
        sys.executable,
        "-m",
        "paradit",
        "batch",
        "--prompts",
        str(prompts),
        "--seeds",
        f"0-{args.jobs - 1}",
        "--model",
        args.model,
        "--width",
        str(args.size),
        "--height",
        str(args.size),
        "--frames",
        str(args.frames),
        "--steps",
        str(args.steps),
        "--device",
        "cpu",
        "--out",
        str(out),
        *flags,
    ]
    load_before = os.getloadavg()[0]
    began = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"{name}: exit {done.returncode}\n{done.stderr[-2000:]}")
    replicas = [
        json.loads((out / d / "job.json").read_text())["replica"]
        for d in os.listdir(out)
        if (out / d / "job.json").is_file()
    ]
    return {
        "wall_s": round(wall, 2),
        "load_before": round(load_before, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "jobs_per_replica": {str(r): replicas.count(r) for r in sorted(set(replicas))},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--model", default="tiny-wan")
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--frames", type=int, default=17)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated names")
    parser.add_argument("--json", help="write every run here")
    args = parser.parse_args()
    names = [n.strip() for n in args.configs.split(",")]
    runs: dict[str, list[dict]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory(prefix="paradit-measure-batch-") as tmp:
        for repeat in range(args.repeats):
            order = names[repeat % len(names) :] + names[: repeat % len(names)]
            for name in order:
                work = Path(tmp) / f"{repeat}"
                work.mkdir(exist_ok=True)
                run = run_once(args, CONFIGS[name], work, name.replace(" ", "-"))
                run["repeat"] = repeat
                runs[name].append(run)
                print(f"repeat {repeat} {name}: {run}", flush=True)
    print(
        f"\n{args.model} {args.size}x{args.size}, {args.frames} frames, {args.steps} steps, "
        f"{args.jobs} jobs; wall time of `paradit batch` (start-up included), "
        f"median (min-max) of {args.repeats}"
    )
    medians = {}
    for name, mine in runs.items():
        walls = [r["wall_s"] for r in mine]
        medians[name] = statistics.median(walls)
        loads = [r["load_before"] for r in mine]
        print(
            f"| {name} | {medians[name]:.1f} ({min(walls):.1f}-{max(walls):.1f}) s | "
            f"load {min(loads):.1f}-{max(loads):.1f} |"
        )
    if BASE in runs and REPLICAS in runs:
        ratios = [
            a["wall_s"] / b["wall_s"] for a, b in zip(runs[BASE], runs[REPLICAS], strict=True)
        ]
        print(
            f"speedup {REPLICAS} vs {BASE}: {medians[BASE] / medians[REPLICAS]:.2f}x of "
            f"medians; per repeat {', '.join(f'{r:.2f}' for r in ratios)}"
        )
    other = "1 rank x 2 threads"
    if other in runs and REPLICAS in runs:
        print(f"speedup {REPLICAS} vs {other}: {medians[other] / medians[REPLICAS]:.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
