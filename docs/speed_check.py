"""The `speed` stage of docs/gpu_check.py: served step time for every attention kernel x
compile x fp8 setting this build has, against bare diffusers in the same run.

    bash docs/gpu_check.sh OUT speed                       # on a GPU: writes OUT/speed.json
    GPU_CHECK_DRY=1 python docs/gpu_check.py OUT speed     # tiny sizes on the CPU

Cases: random:wan2.1-t2v-14b at 1280x720x81 and random:wan2.1-t2v-1.3b at 832x480x81 (dry:
tiny-wan at 64x64x5). For each case bare diffusers runs first (the pipeline called directly,
`gpu_check.Direct`), then one served backend per setting. A setting this device cannot run
(a CUDA kernel on the CPU, a kernel whose extra is not installed) is recorded with the reason,
without starting a backend; `--compile` and the fp8 switch are tried only when this build's
`ServeConfig` has them (recorded as "not in this build" otherwise). Each row has the median
counted step (the first step is not counted), the speed-up against bare diffusers, and the
distances from bare diffusers and from the served `sdpa` row. `target` judges the issue's
goal: the best row that is exact, or lossy with its distance measured, at most 0.75 of bare
diffusers' step (>= 1.33x faster) for Wan 14B at 720p.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os
import traceback
from pathlib import Path
from typing import Any

from gpu_check import Direct, Served, body, counted_steps, distance, median

log = logging.getLogger("gpu_check.speed")

TARGET_RATIO = 0.75
"""Wan 14B 720p: the served step at most this part of bare diffusers' (issue 40)."""
CASES = {  # name: (model, request size, steps)
    "wan14b-1280x720x81": ("random:wan2.1-t2v-14b", (1280, 720, 81), 3),
    "wan1.3b-832x480x81": ("random:wan2.1-t2v-1.3b", (832, 480, 81), 4),
}
DRY_CASES = {"tiny-wan-64x64x5": ("tiny-wan", (64, 64, 5), 3)}
COMPILE_MODES = ("off", "blocks")
"""`--compile` settings tried when the build has the flag (`ServeConfig.compile`); a dry run
tries `blocks` with the `auto` kernel only (inductor's compile costs minutes of CPU)."""
FP8_FIELD = "fp8_compute"
"""The fp8 matmul switch's `ServeConfig` field (`--fp8-compute`), when the build has it."""


def settings(device: str, dry: bool = False) -> list[dict[str, Any]]:
    """Every attention x compile x fp8 setting, each with the reason it cannot run (or None)."""
    from paradit.backend.config import ServeConfig
    from paradit.backend.kernels import ATTENTION_CHOICES, choose_kernel
    from paradit.backend.parallel.attention import installed

    fields = {f.name for f in dataclasses.fields(ServeConfig)}
    compiles = COMPILE_MODES if "compile" in fields else ("off",)
    fp8s = (False, True) if FP8_FIELD in fields else (False,)
    capability = None
    if device == "cuda":
        import torch

        capability = tuple(torch.cuda.get_device_capability(0))
    rows = []
    for attention, compile_mode, fp8 in itertools.product(ATTENTION_CHOICES, compiles, fp8s):
        row: dict[str, Any] = {"attention": attention, "compile": compile_mode, "fp8": fp8}
        try:
            row["kernel"] = choose_kernel(
                attention, device_type=device, capability=capability, installed=installed
            ).kernel
        except ValueError as exc:
            row["skipped"] = str(exc)
        if fp8 and device != "cuda":
            row["skipped"] = "fp8 matmuls need a CUDA device"
        if dry and compile_mode != "off" and attention != "auto" and "skipped" not in row:
            row["skipped"] = "dry run: --compile blocks is tried with --attention auto only"
        rows.append(row)
    if "compile" not in fields:
        rows.append({"compile": "blocks", "skipped": "--compile is not in this build"})
    if FP8_FIELD not in fields:
        rows.append({"fp8": True, "skipped": "the fp8 matmul switch is not in this build"})
    return rows


def _config(row: dict[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = {"attention": row["attention"]}
    if row["compile"] != "off":
        config["compile"] = row["compile"]
    if row["fp8"]:
        config[FP8_FIELD] = True
        config["weights"] = "fp8"  # the fp8 matmuls need fp8 layers: quantized at load
    return config


def measure_case(out: Path, model: str, size: tuple[int, int, int], steps: int, device: str):
    width, height, frames = size
    request = body(width=width, height=height, num_frames=frames, num_inference_steps=steps)
    dtype = "bfloat16" if device == "cuda" else "float32"
    entry: dict[str, Any] = {"model": model, "request": request, "device": device}
    direct = Direct(model, device)
    try:
        bare = direct.run(request)
    finally:
        direct.close()
    bare_step = median(counted_steps(bare["step_s"]))
    entry["bare_diffusers"] = {"step_s": bare["step_s"], "median_step_s": bare_step}
    rows, sdpa = settings(device, os.environ.get("GPU_CHECK_DRY") == "1"), None
    ran: dict[tuple, dict[str, Any]] = {}
    for row in rows:
        if "skipped" in row:
            continue
        key = (row["kernel"], row["compile"], row["fp8"])
        if key in ran:  # `auto` chose a kernel already run with these settings
            row["same_as"] = ran[key]["attention"]
            continue
        try:
            served = Served(model, out, device=device, **_config(row))
            try:
                run = served.run(request)
            finally:
                served.stop()
            step = median(counted_steps(run["job"]["timings"]["step_s"]))
            row.update(
                step_s=run["job"]["timings"]["step_s"],
                median_step_s=step,
                speedup_vs_bare=bare_step / step if step else None,
                ratio_to_bare=step / bare_step if bare_step else None,
                distance_vs_bare=distance(bare, run, dtype),
                attention_in_force=run["record"].get("attention"),
                compile_in_force=run["record"].get("compile"),
                start_s=getattr(served, "start_s", None),
                timings=run["job"]["timings"],
            )
            if row["kernel"] == "sdpa" and row["compile"] == "off" and not row["fp8"]:
                sdpa = run
            elif sdpa is not None:
                row["distance_vs_sdpa"] = distance(sdpa, run, dtype)
            ran[key] = row
        except Exception as exc:  # recorded; the other settings go on
            row["error"] = traceback.format_exc()[-2000:]
            log.error("%s %s: %s", model, row, exc)
    entry["rows"] = rows
    entry["best"] = _best(rows)
    return entry


def _best(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The fastest row that is exact, or lossy with its distance measured."""
    from paradit.backend.kernels import KERNELS

    def usable(row: dict[str, Any]) -> bool:
        if row.get("median_step_s") is None:
            return False
        lossy = KERNELS[row["kernel"]].lossy or row["fp8"]
        return not lossy or "distance_vs_sdpa" in row

    candidates = [row for row in rows if usable(row)]
    if not candidates:
        return None
    best = min(candidates, key=lambda row: row["median_step_s"])
    return {k: best.get(k) for k in ("attention", "kernel", "compile", "fp8", "ratio_to_bare")}


def stage_speed(out: Path) -> dict[str, Any]:
    dry = os.environ.get("GPU_CHECK_DRY") == "1"
    device = "cpu" if dry else "cuda"
    cases = DRY_CASES if dry else CASES
    results: dict[str, Any] = {"device": device, "dry_run": dry, "cases": {}}
    for name, (model, size, steps) in cases.items():
        try:
            results["cases"][name] = measure_case(out, model, size, steps, device)
        except Exception as exc:  # recorded; the next case goes on
            results["cases"][name] = {"error": traceback.format_exc()[-3000:]}
            log.error("%s: %s", name, exc)
    judged = results["cases"].get("wan14b-1280x720x81", {}).get("best")
    results["target"] = {
        "goal": f"Wan 14B 720p step <= {TARGET_RATIO} x bare diffusers",
        "best": judged,
        "met": None if not judged else judged["ratio_to_bare"] <= TARGET_RATIO,
    }
    return results
