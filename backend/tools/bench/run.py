"""`paradit bench`: what users pay for, measured on whatever devices this machine has.

One run measures
- scaling: the same job at world size 1 and 2 (4, 8 where devices allow) per parallel mode
  (sequence parallel only, CFG parallel only, both from world size 4), with and without
  weight sharding; per-step time is the median over the jobs of each job's median
  `timings.step_s` (the server's step clock, each job's first step skipped), the jobs of all
  backends interleaved; each job's last step profiled by phase (`runtime/phases.py`);
- overhead: paradit at world size 1 against the diffusers pipeline called directly in this
  process on the same model folder (one thread on CPU), paired job by job;
- latency: submit -> first denoising step on a warm server, and cold start (serve -> ready);
- memory: per-rank DiT parameter bytes (`/v1/info`) and peak RSS (VmHWM of each rank's pid);
- with `--rows throughput`: a batch on data-parallel replicas against one rank (throughput.py).

CPU ranks get one thread each (`--threads 1`); CUDA ranks get one device each. Every backend
is a real `paradit serve` process group started with `LocalBackend`; the scaling rows' backends
are started one at a time and stay up together while their jobs run in turn.
"""

from __future__ import annotations

import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...runtime.phases import PHASES_ENV
from . import image as image_row
from . import lora_switch
from .fastpaths import ROWS as FAST_ROWS
from .fastpaths import FastPathWorkload
from .fastpaths import measure as measure_fast_paths
from .fastpaths import render as render_fast_paths
from .load import LoadWindow, load_avg, num_cores, watch
from .model import DirectPipeline, DirectResult, build_model_folder
from .throughput import THROUGHPUT, ThroughputWorkload
from .throughput import measure as measure_throughput
from .throughput import summarize as summarize_throughput
from .workload import FULL, QUICK, RunResult, RunSpec, Workload, plan_runs

log = logging.getLogger(__name__)


def detect_devices() -> tuple[str, int]:
    """("cuda", GPUs) when there are CUDA devices, else ("cpu", cores): one rank per device."""
    import torch

    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        return "cuda", torch.cuda.device_count()
    return "cpu", num_cores()


def peak_rss_bytes(pid: int) -> int | None:
    """VmHWM (peak resident set) of a local process, None where /proc cannot tell."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def gpu_memory_bytes() -> dict[int, int]:
    """pid -> GPU memory in use now (the caching allocator keeps its peak), via nvidia-smi."""
    import subprocess

    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    usage = {}
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            usage[int(parts[0])] = int(parts[1]) * 1024 * 1024
    return usage


def _timed_job(client: Any, body: dict[str, Any], poll_s: float) -> tuple[dict, float]:
    """Run a job; returns it and its submit -> pipeline-call latency in milliseconds."""
    submitted = time.time()
    job = client.wait(client.submit(body), poll_s=poll_s, timeout_s=3600)
    started = job["started"] + job["timings"]["first_step_start_s"]
    job["_submitted"] = submitted
    return job, (started - submitted) * 1e3


def _latency_parts(job: dict[str, Any]) -> dict[str, float]:
    timings = job["timings"]
    return {
        "http_submit_ms": (job["created"] - job["_submitted"]) * 1e3,
        "queue_ms": (job["started"] - job["created"]) * 1e3,
        "encode_ms": timings["encode_s"] * 1e3,
        "broadcast_ms": (timings["first_step_start_s"] - timings["encode_s"]) * 1e3,
    }


class Bench:
    """Starts the plan's backends (one after another, each left up), then runs their measured
    jobs interleaved; rank 0 of each serves on localhost."""

    def __init__(self, workload: Workload, model: str, device: str, work_dir: Path, log_dir: Path):
        self.workload, self.model, self.device = workload, model, device
        self.work_dir, self.log_dir = work_dir, log_dir
        self.direct: list[DirectResult] = []

    def start(self, stack: ExitStack, spec: RunSpec) -> tuple[RunResult, Any]:
        """Start `spec`'s backend (stopped when `stack` closes), take its cold start, info and
        warm latency; the result and its client (None when it failed)."""
        from ...client.local import LocalBackend
        from ...config import ServeConfig

        result = RunResult(spec)
        local = ServeConfig.from_argv(
            list(spec.serve_args()),
            model=self.model,
            world_size=spec.world_size,
            device=self.device,
            output_dir=str(self.work_dir / "outputs"),
            timeout_s=600.0,
            threads_per_rank=1 if self.device == "cpu" else None,
        )
        log_file = self.log_dir / f"{spec.label.replace(' ', '-')}.log"
        log.info("%s: starting `paradit serve` (%s)", spec.label, " ".join(spec.serve_args()))
        env = {**os.environ, PHASES_ENV: "1"}  # the last step of each job profiled by phase
        started = time.perf_counter()
        try:
            backend = LocalBackend(local, start_timeout_s=900.0, log_file=log_file, env=env)
        except Exception as exc:  # recorded in the report; the other runs go on
            result.error = f"start failed: {exc} (see {log_file})"
            log.error("%s: %s", spec.label, result.error)
            return result, None
        stack.callback(backend.stop)
        result.cold_start_s = time.perf_counter() - started
        try:
            self._probe(backend.client, result)
        except Exception as exc:  # recorded in the report; the other runs go on
            result.error = f"{type(exc).__name__}: {exc} (see {log_file})"
            log.error("%s: %s", spec.label, result.error)
            return result, None
        return result, backend.client

    def _probe(self, client: Any, result: RunResult) -> None:
        info = client.info()
        result.plan = info["plan"]
        result.ranks = list(info["ranks"])
        workload = self.workload
        _timed_job(client, workload.probe_body(), 0.05)  # the first job pays one-time costs
        warm = []
        for _ in range(workload.num_probes - 1):
            time.sleep(workload.idle_s)  # a warm but idle server: workers poll slowly
            warm.append(_timed_job(client, workload.probe_body(), 0.05))
        result.latency_ms = [latency for _job, latency in warm]
        parts = [_latency_parts(job) for job, _latency in warm]
        result.latency_parts_ms = {k: statistics.median(p[k] for p in parts) for k in parts[0]}

    def job(self, client: Any, result: RunResult, repeat: int) -> None:
        """One measured job of `result`'s backend (its `repeat`-th); errors go to the result."""
        try:
            job, _latency = _timed_job(client, self.workload.body(), 0.25)
        except Exception as exc:  # recorded in the report; the other runs go on
            result.error = f"{type(exc).__name__}: {exc}"
            log.error("%s: %s", result.spec.label, result.error)
            return
        result.jobs.append(job["timings"])
        log.info(
            "%s: job %d/%d, steps %s",
            result.spec.label,
            repeat + 1,
            self.workload.num_jobs,
            job["timings"].get("step_s"),
        )

    def direct_pair(
        self, client: Any, result: RunResult, direct: DirectPipeline, repeat: int
    ) -> None:
        """The 1-rank job and the direct pipeline call, their order alternating by repeat."""
        if repeat % 2 == 0:
            self.direct.append(direct.run(self.workload.body()))
        self.job(client, result, repeat)
        if repeat % 2 == 1:
            self.direct.append(direct.run(self.workload.body()))

    def finish(self, result: RunResult) -> None:
        """Each rank's peak memory after the backend's jobs (while it is still up)."""
        gpu = gpu_memory_bytes() if self.device == "cuda" else {}
        result.ranks = [
            {
                "rank": rank["rank"],
                "pid": rank["pid"],
                "dit_param_bytes": rank["dit_param_bytes"],
                "peak_rss_bytes": peak_rss_bytes(rank["pid"]),
                "gpu_bytes": gpu.get(rank["pid"]),
            }
            for rank in result.ranks
        ]


# -- the whole run ----------------------------------------------------------------------------


ROWS = ("scaling", "throughput", "lora", "image", *FAST_ROWS)


def run_bench(
    quick: bool = False,
    json_path: str | None = None,
    out_dir: str = "bench-results",
    *,
    rows: tuple[str, ...] = ("scaling",),
    repeats: int | None = None,
    workload: Workload | None = None,
    throughput: ThroughputWorkload | None = None,
    fast_paths: FastPathWorkload | None = None,
    lora: lora_switch.LoraWorkload | None = None,
    image: image_row.ImageWorkload | None = None,
) -> int:
    """The `paradit bench` command: measure, write table/plot/JSON, print the table.

    `rows`: "scaling" (scaling, overhead, latency, memory) and/or "throughput" (a batch on
    data-parallel replicas against one rank, `repeats` interleaved runs of each), "unguided"
    and "cache" (fastpaths.py: an unguided job on a 2-rank CFG plan, the step cache), "lora"
    (switching LoRAs between jobs against a reload, `lora_switch.py`), "image" (a Qwen-Image
    job at 2048x2048 on 1 rank, CFG 2 and Ulysses 2, `image.py`; 1024x1024 with `quick`).
    `workload` / `throughput` / `fast_paths` / `lora` / `image` override the built-in
    workloads (tests use the SMOKE ones).
    Returns 0 when every backend ran.
    """
    from .report import (
        add_lora_switch,
        add_throughput,
        judge_load,
        render_markdown,
        summarize,
        summarize_throughput_only,
        write_json,
        write_plot,
    )

    unknown = set(rows) - set(ROWS)
    if unknown or not rows:
        raise ValueError(f"bench rows must be some of {', '.join(ROWS)}, got {', '.join(rows)}")
    throughput = throughput or THROUGHPUT
    if repeats is not None:
        throughput = replace(throughput, num_repeats=repeats)
    workload = workload or (QUICK if quick else FULL)
    if repeats is not None:
        workload = replace(workload, num_jobs=repeats)
    out = Path(out_dir)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    device, num_devices = detect_devices()
    load_start = load_avg()
    log.info(
        "bench (%s) on %d %s device(s), load average %s",
        ", ".join(rows),
        num_devices,
        device,
        load_start,
    )
    if device == "cpu" and load_start and load_start[0] > num_devices / 2:
        log.warning(
            "load average %.1f on %d cores: other work will add noise to the timings",
            load_start[0],
            num_devices,
        )
    began = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="paradit-bench-"))
    results, setup_s, direct, batch_runs, fast, switching = [], 0.0, [], [], None, None
    images = None
    windows: dict[str, LoadWindow] = {}  # row -> the load average around it
    try:
        if "scaling" in rows:
            with watch() as windows["scaling"]:
                folder = build_model_folder(workload.model, work / "model")
                bench = Bench(workload, str(folder), device, work, out / "logs")
                results, setup_s = _run_all(bench, plan_runs(workload, num_devices), folder, device)
                direct = bench.direct
        if "throughput" in rows:
            with watch() as windows["throughput"]:
                batch_runs = measure_throughput(throughput, device, num_devices, work, out / "logs")
        fast_rows = tuple(row for row in rows if row in FAST_ROWS)
        if fast_rows:
            if fast_paths is None and repeats is not None:
                fast_paths = replace(FastPathWorkload(), num_repeats=repeats)
            with watch() as windows["fast_paths"]:
                fast = measure_fast_paths(
                    fast_rows, device, work / "fast-paths", fast_paths or FastPathWorkload()
                )
        if "lora" in rows:
            workload_lora = lora or lora_switch.LORA
            with watch() as windows["lora"]:
                switching = lora_switch.measure(
                    workload_lora, device, num_devices, work, out / "logs"
                )
        if "image" in rows:
            if image is None:
                image = image_row.QUICK if quick else image_row.IMAGE
                if repeats is not None:
                    image = replace(image, num_repeats=repeats)
            with watch() as windows["image"]:
                images = image_row.measure(image, device, num_devices, out / "logs")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    common = {
        "device": device,
        "num_devices": num_devices,
        "quick": quick,
        "load_avg": {"start": load_start, "end": load_avg()},
        "wall_s": time.perf_counter() - began,
    }
    if results:
        summary = summarize(
            workload=workload, results=results, direct=direct, setup_s=setup_s, **common
        )
    else:
        summary = summarize_throughput_only(**common)
    if "throughput" in rows:
        add_throughput(summary, summarize_throughput(throughput, batch_runs))
    if fast is not None:
        summary["fast_paths"] = fast
    if switching is not None:
        add_lora_switch(summary, switching)
    if images is not None:
        summary["image"] = images
    if rows != ("scaling",):
        summary["setup"]["command"] += " --rows " + ",".join(rows)
    judge_load(summary, {row: window.to_json() for row, window in windows.items()})
    table = render_markdown(summary)
    if fast is not None:
        table += "\n".join(render_fast_paths(fast)) + "\n"
    if images is not None:
        table += "\n".join(image_row.render(images)) + "\n"
    (out / "bench.md").write_text(table)
    write_json(summary, out / "bench.json")
    if json_path:
        write_json(summary, Path(json_path))
    if results:
        write_plot(summary, out / "bench.png")
    sys.stdout.write(table)
    log.info("bench finished in %.0fs; wrote %s", time.perf_counter() - began, out)
    return 0 if not summary["errors"] else 1


def _run_all(
    bench: Bench, runs: list[RunSpec], folder: Path, device: str
) -> tuple[list[RunResult], float]:
    """Every backend started and left up; then `num_jobs` repeats, each running one measured
    job per backend in turn (the order reversed every other repeat), so a change in the
    machine's load falls on every row alike; world size 1 pairs each job with a direct call."""
    import torch

    threads = torch.get_num_threads()
    if device == "cpu":
        torch.set_num_threads(1)
    try:
        direct = DirectPipeline(folder, device)
        setup_s = direct.setup_seconds(bench.workload.body())
        direct.run(bench.workload.probe_body())  # the same warm-up as the backends get
        with ExitStack() as stack:
            started = [bench.start(stack, spec) for spec in runs]
            live = [(result, client) for result, client in started if client is not None]
            for repeat in range(bench.workload.num_jobs):
                order = live if repeat % 2 == 0 else live[::-1]
                for result, client in order:
                    if result.error is not None:
                        continue
                    if result.spec.world_size == 1:
                        bench.direct_pair(client, result, direct, repeat)
                    else:
                        bench.job(client, result, repeat)
            for result, _client in live:
                bench.finish(result)
        direct.close()
    finally:
        torch.set_num_threads(threads)
    return [result for result, _client in started], setup_s
