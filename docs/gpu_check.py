"""The checks of a first CUDA run, one stage at a time, each writing `OUT/<stage>.json`.

    bash docs/gpu_check.sh OUT [STAGE ...]      # installs carried wheels, then runs this
    python docs/gpu_check.py OUT env tiny real  # the stages, in order

Stages (docs/gpu.md holds the figures they gave):
- env       GPU, driver, CUDA, torch and diffusers versions.
- tiny      tiny-wan, tiny-flux, tiny-cogvideox served on `--device cuda` at world size 1
            (bfloat16, the NCCL group, the job record's memory), each compared with the
            diffusers pipeline called directly on the same GPU in bfloat16, and with that
            pipeline on each of PyTorch's attention kernels: the legitimate bfloat16 distances
            that set `equivalence.BFLOAT16`.
- real      random:wan2.1-t2v-1.3b at 832x480x81: served per-step time against bare diffusers
            (the overhead ratio), the memory plan's predicted peak against the measured one,
            the warm submit-to-first-step latency, and served against direct (distance).
- big       the same for random:wan2.1-t2v-14b at 1280x720x81.
- fallback  random:wan2.1-t2v-14b at 1280x720x81 with `--gpu-memory 24` and `12`: the plan's
            offload and tiling, step times, and the measured peak against the budget.
- experts   random:wan2.2-t2v-a14b at 832x480x81 (3 steps, the switch at step 2) served with
            `--offload experts` (level 4: one expert on the GPU at a time) against both experts
            resident: each swap's seconds and bytes (job.json `expert_swaps`), the predicted
            peak against the measured one, and the distance (byte-identical expected).
- kernels   one Wan 14B block at 1280x720x81: attention backends, regional torch.compile, and
            the per-rank work of 8 GPUs (projected scaling).
- speed     Wan 2.1 14B at 1280x720x81 and 1.3B at 832x480x81 served with every attention
            kernel x compile (off, blocks) x fp8 setting this build has, against bare
            diffusers in the same run: step times, speed-ups and distances (`speed_check.py`;
            GPU_CHECK_DRY=1: tiny sizes on the CPU, to check the stage itself).
- fp8       Wan 14B's linear shapes at 1280x720x81's tokens, weights stored fp8 with a scale
            per row: bf16, the per-layer upcast (`--weights file|fp8`) and `--fp8-compute`
            (`torch._scaled_mm`), timed, with their distance to bf16 (`fp8_check.py`;
            GPU_CHECK_DRY=1: tiny sizes on the CPU, fp8 compute refused there).
- int8      the same shapes, weights stored as int8_convrot files hold them (ConvRot groups of
            256, a scale per row): bf16, the per-layer upcast (`--weights file|int8`) and
            `--int8-compute` (W8A8, `torch._int_mm`), timed, with their distance to bf16
            (`int8_check.py`; GPU_CHECK_DRY=1: tiny sizes on the CPU, int8 compute refused).

Steps: each served job's first step is not counted (it pays one-time costs); the served and
direct runs of one model alternate, so drift falls on both.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np
import torch

from paradit.backend.tools.equivalence import compare, json_safe, tolerance_for
from paradit.backend.tools.verify import decode_png

log = logging.getLogger("gpu_check")

PROMPT = "a red fox running through fresh snow, morning light"
NEGATIVE = "blurry, low quality"
ATTENTION_KERNELS = ("_native_flash", "_native_efficient", "_native_cudnn", "_native_math")
"""PyTorch's SDPA kernels as diffusers names them; the reference is "native" (its choice)."""
TINY = {  # model: its request's size
    "tiny-wan": {"width": 64, "height": 64, "num_frames": 9, "num_inference_steps": 4},
    "tiny-flux": {"width": 64, "height": 64, "num_frames": 1, "num_inference_steps": 4},
    "tiny-cogvideox": {"width": 64, "height": 64, "num_frames": 9, "num_inference_steps": 4},
}


def body(**fields: Any) -> dict[str, Any]:
    return {
        "prompt": PROMPT,
        "negative_prompt": NEGATIVE,
        "guidance_scale": 5.0,
        "seed": 7,
        **fields,
    }


# -- served: `paradit serve --device cuda` at world size 1 ------------------------------------


class Served:
    """A local `paradit serve` on the GPU, kept for several jobs."""

    def __init__(self, model: str, out: Path, *, device: str = "cuda", **config: Any):
        from paradit.backend.client.local import LocalBackend
        from paradit.backend.config import ServeConfig

        self.config = ServeConfig(
            model=model,
            world_size=1,
            device=device,
            output_dir=str(out / "outputs"),
            save_latents=True,
            timeout_s=1800.0,
            **config,
        )
        started = time.perf_counter()
        log_file = out / f"serve-{model.replace(':', '_')}-{len(list(out.glob('serve-*')))}.log"
        self.backend = LocalBackend(self.config, start_timeout_s=1800.0, log_file=log_file)
        self.start_s = time.perf_counter() - started
        self.client = self.backend.client
        self.info = self.client.info()

    def run(self, request: dict[str, Any]) -> dict[str, Any]:
        submitted = time.time()
        job = self.client.wait(self.client.submit(request), poll_s=0.05, timeout_s=3600)
        record = self.client.record(job["id"])
        pngs = [self.client.frame(job["id"], i) for i in range(job["num_frames"])]
        frames = np.stack([decode_png(png) for png in pngs])
        first_step = job["started"] + job["timings"]["first_step_start_s"]
        return {
            "job": job,
            "record": record,
            "frames": frames,
            "latents": self.client.latents(job["id"]),
            "submit_to_first_step_ms": (first_step - submitted) * 1e3,
        }

    def stop(self) -> None:
        self.backend.stop()


def memory_summary(record: dict[str, Any]) -> dict[str, Any]:
    memory = record.get("memory") or {}
    measured = (memory.get("measured") or {}).get("0", {})
    predicted = (memory.get("predicted_bytes") or {}).get("rank0")
    peak = measured.get("peak_bytes")
    return {
        "offload": memory.get("offload"),
        "dit": memory.get("dit"),
        "vae_tiling": memory.get("vae_tiling"),
        "decode": memory.get("decode"),
        "budget": memory.get("budget"),
        "predicted_gib": predicted / 2**30 if predicted else None,
        "measured_gib": peak / 2**30 if peak else None,
        "measured_kind": measured.get("kind"),
        "predicted_over_measured": predicted / peak if predicted and peak else None,
        "parts_gib": {k: v / 2**30 for k, v in (memory.get("parts_bytes") or {}).items()},
    }


# -- direct: the diffusers pipeline as a user calls it ----------------------------------------


class Direct:
    """The same model's pipeline loaded in this process on the GPU in bfloat16."""

    def __init__(self, model: str, device: str = "cuda"):
        from paradit.backend.models.loading import ModelSource, align_cpu_weights, load_pipeline

        started = time.perf_counter()
        self.device = device
        dtype = torch.bfloat16 if device == "cuda" else torch.float32  # as a served rank
        self.pipe = load_pipeline(ModelSource.parse(model), dtype=dtype).to(device)
        if device == "cpu":
            align_cpu_weights(self.pipe)  # as a served rank: results must match its layout
        self.pipe.set_progress_bar_config(disable=True)
        self.load_s = time.perf_counter() - started
        self.kind = type(self.pipe).__name__

    def run(self, request: dict[str, Any]) -> dict[str, Any]:
        marks: list[float] = []
        last: dict[str, Any] = {}

        cuda = self.device == "cuda"

        def on_step(_pipe: Any, _index: int, _t: Any, kwargs: dict) -> dict:
            if cuda:
                torch.cuda.synchronize()
            marks.append(time.perf_counter())
            last["latents"] = kwargs["latents"]
            return {}

        args = {
            "prompt": request["prompt"],
            "negative_prompt": request["negative_prompt"],
            "width": request["width"],
            "height": request["height"],
            "num_inference_steps": request["num_inference_steps"],
            "generator": torch.Generator("cpu").manual_seed(request["seed"]),
            "output_type": "np",
            "callback_on_step_end": on_step,
        }
        if self.kind.startswith("Flux"):  # the tiny Flux is not guidance-distilled: true CFG
            args["true_cfg_scale"] = request["guidance_scale"]
        else:
            args["guidance_scale"] = request["guidance_scale"]
            args["num_frames"] = request["num_frames"]
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        started = time.perf_counter()
        with torch.no_grad():
            output = self.pipe(**args)
        if cuda:
            torch.cuda.synchronize()
        images = output.images if hasattr(output, "images") else output.frames[0]
        frames = np.asarray(images)
        if frames.ndim == 3:
            frames = frames[None]
        from paradit.backend.serving.outputs import to_uint8

        points = [started, *marks]
        return {
            "frames": to_uint8(frames),
            "latents": last["latents"].float().cpu().numpy(),
            "step_s": [b - a for a, b in zip(points, points[1:], strict=False)],
            "total_s": time.perf_counter() - started,
            "peak_gib": torch.cuda.max_memory_allocated() / 2**30 if cuda else None,
        }

    def set_attention(self, backend: str) -> None:
        for name in ("transformer", "transformer_2"):
            module = getattr(self.pipe, name, None)
            if module is not None:
                module.set_attention_backend(backend)

    def close(self) -> None:
        # `set_attention_backend` also sets diffusers' process-wide active backend: put back
        # the default, or every later model in this process runs the last kernel tried.
        self.set_attention("native")
        del self.pipe
        if self.device == "cuda":
            torch.cuda.empty_cache()


def distance(
    reference: dict[str, Any], other: dict[str, Any], dtype: str = "bfloat16"
) -> dict[str, Any]:
    result = compare(
        reference["frames"],
        other["frames"],
        tolerance_for(dtype),
        reference["latents"],
        np.asarray(other["latents"]).reshape(np.shape(reference["latents"])),
    )
    overall = result.overall
    return {
        "verdict": result.verdict,
        "max_abs": overall.get("max_abs"),
        "min_frame_psnr": overall.get("min_frame_psnr"),
        "latent_rel_l2": result.latent_rel_l2,
    }


def counted_steps(step_s: list[float]) -> list[float]:
    return step_s[1:] if len(step_s) > 1 else step_s


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


# -- stages -----------------------------------------------------------------------------------


def stage_env(out: Path) -> dict[str, Any]:
    import diffusers

    import paradit

    smi = subprocess.run(
        ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    props = torch.cuda.get_device_properties(0)
    return {
        "nvidia_smi": smi,
        "gpu": props.name,
        "gpu_memory_gib": props.total_memory / 2**30,
        "sm_count": props.multi_processor_count,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "nccl": ".".join(map(str, torch.cuda.nccl.version())),
        "diffusers": diffusers.__version__,
        "paradit": paradit.__version__,
        "python": sys.version.split()[0],
    }


def stage_tiny(out: Path) -> dict[str, Any]:
    results: dict[str, Any] = {}
    chosen = [m for m in os.environ.get("GPU_CHECK_TINY", "").split(",") if m] or list(TINY)
    for model in chosen:
        size = TINY[model]
        request = body(**size)
        entry: dict[str, Any] = {"request": request}
        results[model] = entry
        try:
            served = Served(model, out)
            try:
                first = served.run(request)
                again = served.run(request)
            finally:
                served.stop()
            entry["served"] = {
                "start_s": served.start_s,
                "plan": served.info["plan"],
                "device": first["job"].get("device"),
                "step_s": first["job"]["timings"]["step_s"],
                "memory": memory_summary(first["record"]),
                "repeat_identical": bool(np.array_equal(first["frames"], again["frames"])),
            }
            direct = Direct(model)
            try:
                reference = direct.run(request)
                entry["served_vs_direct"] = distance(reference, first)
                kernels = {}
                for kernel in ATTENTION_KERNELS:
                    try:
                        direct.set_attention(kernel)
                        kernels[kernel] = distance(reference, direct.run(request))
                    except Exception as exc:  # a kernel this GPU or shape lacks: recorded
                        kernels[kernel] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
                entry["direct_native_vs_kernel"] = kernels
            finally:
                direct.close()
        except Exception as exc:  # recorded; the other models go on
            entry["error"] = traceback.format_exc()[-3000:]
            log.error("%s: %s", model, exc)
    return results


def measure_real(
    out: Path, model: str, size: dict[str, int], steps: int, jobs: int = 2
) -> dict[str, Any]:
    """Served against direct on one GPU: steps, memory, latency, distance (first run each
    pays one-time costs; then served, direct, served, direct)."""
    request = body(**size, num_inference_steps=steps)
    probe = body(width=size["width"], height=size["height"], num_frames=1, num_inference_steps=1)
    entry: dict[str, Any] = {"model": model, "request": request}
    served = Served(model, out)
    entry["serve_start_s"] = served.start_s
    entry["plan"] = served.info["plan"]
    try:
        served.run(probe)  # warm-up
        latencies = []
        for _ in range(3):
            time.sleep(1.5)  # an idle server: the workers poll slowly
            latencies.append(served.run(probe)["submit_to_first_step_ms"])
        entry["warm_submit_to_first_step_ms"] = {"median": median(latencies), "all": latencies}
        runs = [served.run(request) for _ in range(jobs)]
        entry["memory"] = memory_summary(runs[0]["record"])
    finally:
        served.stop()
    served_steps = [s for r in runs for s in counted_steps(r["job"]["timings"]["step_s"])]
    direct = Direct(model)
    try:
        entry["direct_load_s"] = direct.load_s
        direct_runs = [direct.run(request) for _ in range(jobs)]
    finally:
        direct.close()
    direct_steps = [s for r in direct_runs for s in counted_steps(r["step_s"])]
    entry["served_step_s"] = served_steps
    entry["direct_step_s"] = direct_steps
    entry["direct_peak_gib"] = direct_runs[0]["peak_gib"]
    entry["overhead_ratio"] = median(served_steps) / median(direct_steps)
    entry["served_timings"] = runs[0]["job"]["timings"]
    entry["served_vs_direct"] = distance(direct_runs[0], runs[0])
    return entry


def stage_real(out: Path) -> dict[str, Any]:
    size = {"width": 832, "height": 480, "num_frames": 81}
    return measure_real(out, "random:wan2.1-t2v-1.3b", size, steps=4)


def stage_big(out: Path) -> dict[str, Any]:
    size = {"width": 1280, "height": 720, "num_frames": 81}
    return measure_real(out, "random:wan2.1-t2v-14b", size, steps=3, jobs=1)


def stage_fallback(out: Path, budgets: tuple[float, ...] = (24.0, 12.0)) -> dict[str, Any]:
    budgets = (
        tuple(float(b) for b in os.environ.get("GPU_CHECK_BUDGETS", "").split(",") if b) or budgets
    )
    request = body(width=1280, height=720, num_frames=81, num_inference_steps=3)
    results = {}
    for gib in budgets:
        entry: dict[str, Any] = {}
        results[f"{gib:g} GiB"] = entry
        try:
            served = Served("random:wan2.1-t2v-14b", out, gpu_memory_gib=gib)
            try:
                entry["start_s"] = served.start_s
                run = served.run(request)
            finally:
                served.stop()
            entry["memory"] = memory_summary(run["record"])
            entry["step_s"] = run["job"]["timings"]["step_s"]
            entry["timings"] = run["job"]["timings"]
            peak = entry["memory"]["measured_gib"]
            entry["under_budget"] = peak is not None and peak <= gib
        except Exception as exc:  # recorded; the next budget goes on
            entry["error"] = traceback.format_exc()[-3000:]
            log.error("%g GiB: %s", gib, exc)
    return results


def stage_experts(out: Path) -> dict[str, Any]:
    """Experts one at a time against both resident: two jobs each (the second one's first
    step brings the high-noise expert back), the swaps' times and the frames' distance."""
    request = body(width=832, height=480, num_frames=81, num_inference_steps=3, switch_step=2)
    results: dict[str, Any] = {}
    runs = {}
    for label, offload in (("swapping", "experts"), ("resident", "none")):
        entry: dict[str, Any] = {}
        results[label] = entry
        try:
            served = Served("random:wan2.2-t2v-a14b", out, offload=offload)
            try:
                entry["start_s"] = served.start_s
                jobs = [served.run(request) for _ in range(2)]
            finally:
                served.stop()
            runs[label] = jobs[-1]
            entry["memory"] = memory_summary(jobs[-1]["record"])
            entry["step_s"] = [run["job"]["timings"]["step_s"] for run in jobs]
            entry["expert_swaps"] = [run["record"].get("expert_swaps") for run in jobs]
        except Exception as exc:  # recorded; the other layout goes on
            entry["error"] = traceback.format_exc()[-3000:]
            log.error("%s: %s", label, exc)
    for swaps in results.get("swapping", {}).get("expert_swaps") or []:
        for swap in (swaps or {}).get("swaps", []):
            swap["gb_per_s"] = swap["bytes"] / max(swap["seconds"], 1e-9) / 1e9
    if len(runs) == 2:
        results["distance"] = distance(runs["resident"], runs["swapping"])
    return results


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    out, stages = Path(argv[0]), argv[1:] or ["env", "tiny", "real"]
    work = Path(os.environ.get("GPU_CHECK_WORK") or out / "work")  # outputs and serve logs
    work.mkdir(parents=True, exist_ok=True)
    from fp8_check import stage_fp8  # beside this file
    from int8_check import stage_int8
    from kernels_check import stage_kernels
    from speed_check import stage_speed

    known = {
        "env": stage_env,
        "tiny": stage_tiny,
        "real": stage_real,
        "big": stage_big,
        "fallback": stage_fallback,
        "experts": stage_experts,
        "kernels": stage_kernels,
        "speed": stage_speed,
        "fp8": stage_fp8,
        "int8": stage_int8,
    }
    failed = 0
    for name in stages:
        log.info("stage %s", name)
        started = time.perf_counter()
        try:
            result = known[name](work)
        except Exception:
            result = {"error": traceback.format_exc()[-3000:]}
            failed += 1
        result = {"stage": name, "seconds": time.perf_counter() - started, **result}
        (out / f"{name}.json").write_text(json.dumps(json_safe(result), indent=1))
        log.info("stage %s done in %.0f s", name, result["seconds"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main(sys.argv[1:]))
