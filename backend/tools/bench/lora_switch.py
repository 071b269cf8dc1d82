"""The bench's LoRA row: switching LoRAs between jobs against reloading the model.

What a user pays to change LoRAs. Peers that reload the model on every LoRA change pay a
full start (serve -> ready: read the weights, shard them). paradit applies a job's LoRAs to
each rank's own weight rows before its first step and restores the saved rows after it; the
job's `timings` carry rank 0's `lora_apply_s` and `lora_remove_s` (every rank does its share at
the same time). Per world size, one backend of a ~1 GB DiT (float32: 16 blocks of width 1024,
as tests/memory/test_memory.py's) runs a plain job, then jobs alternating between two LoRAs
(ComfyUI/Kohya format, every attention and FFN layer of every block) and no LoRA. Reported: start-up
(= a reload), the first use of a LoRA (parse + check at submit; later uses hit the cache),
apply and remove (median, min-max), and the job with and without a LoRA.
"""

from __future__ import annotations

import logging
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .stats import fixed_spread

log = logging.getLogger(__name__)

COMFY_LAYERS = {
    "self_attn.q": "attn1.to_q",
    "self_attn.k": "attn1.to_k",
    "self_attn.v": "attn1.to_v",
    "self_attn.o": "attn1.to_out.0",
    "cross_attn.q": "attn2.to_q",
    "cross_attn.k": "attn2.to_k",
    "cross_attn.v": "attn2.to_v",
    "cross_attn.o": "attn2.to_out.0",
    "ffn.0": "ffn.net.0.proj",
    "ffn.2": "ffn.net.2",
}
"""ComfyUI's Wan layer names -> diffusers' (every linear layer of a block)."""


@dataclass(frozen=True)
class LoraWorkload:
    """The DiT, its LoRAs, and the jobs each backend runs."""

    num_layers: int = 16
    num_heads: int = 8
    head_dim: int = 128
    ffn_dim: int = 4096
    rank: int = 32
    """The LoRAs' rank (the Wan distillation LoRAs use 32-128)."""
    world_sizes: tuple[int, ...] = (1, 2)
    num_switches: int = 3
    """Rounds of (LoRA a, LoRA b, no LoRA) after the first plain job."""
    width: int = 64
    height: int = 64
    num_frames: int = 5
    num_inference_steps: int = 2

    def __post_init__(self) -> None:
        if self.num_switches < 1 or not self.world_sizes or min(self.world_sizes) < 1:
            raise ValueError("num_switches and every world size must be >= 1")

    def body(self, loras: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        body = {
            "prompt": "a paper lantern drifting over a lake at night",
            "width": self.width,
            "height": self.height,
            "num_frames": self.num_frames,
            "num_inference_steps": self.num_inference_steps,
            "guidance_scale": 1.0,
            "seed": 1,
        }
        return {**body, "loras": loras} if loras else body


LORA = LoraWorkload()
"""A ~1 GB DiT (float32), rank-32 LoRAs on its 160 linear layers, world sizes 1 and 2."""
LORA_SMOKE = LoraWorkload(
    num_layers=2, num_heads=2, head_dim=32, ffn_dim=128, rank=4, world_sizes=(1,), num_switches=1
)
"""Seconds of compute: for testing the row itself, not for numbers."""


@dataclass
class SwitchRun:
    """One backend's jobs."""

    world_size: int
    start_s: float = 0.0
    first_use_s: float = 0.0
    apply_s: list[float] = field(default_factory=list)
    apply_cpu_s: list[float] = field(default_factory=list)
    remove_s: list[float] = field(default_factory=list)
    job_lora_s: list[float] = field(default_factory=list)
    job_plain_s: list[float] = field(default_factory=list)
    dit_bytes: int = 0
    error: str | None = None


def write_model_and_loras(workload: LoraWorkload, work: Path) -> tuple[Path, Path, int]:
    """The DiT folder and a folder with LoRAs `a` and `b`; returns them and the LoRA bytes."""
    import torch
    from safetensors.torch import save_file

    from .model import BenchModel, build_model_folder

    spec = BenchModel(workload.num_heads, workload.head_dim, workload.num_layers, workload.ffn_dim)
    folder = build_model_folder(spec, work / "lora-model")
    loras = work / "loras"
    loras.mkdir(parents=True, exist_ok=True)
    shapes = {
        "self_attn": (spec.hidden, spec.hidden),
        "cross_attn": (spec.hidden, spec.hidden),
        "ffn.0": (workload.ffn_dim, spec.hidden),
        "ffn.2": (spec.hidden, workload.ffn_dim),
    }
    size = 0
    for seed, name in enumerate(("a", "b")):
        generator = torch.Generator().manual_seed(seed)
        tensors = {}
        for block in range(workload.num_layers):
            for layer in COMFY_LAYERS:
                out_f, in_f = shapes[layer.rsplit(".", 1)[0] if "attn" in layer else layer]
                key = f"diffusion_model.blocks.{block}.{layer}"
                down = torch.randn(workload.rank, in_f, generator=generator) * 0.01
                tensors[f"{key}.lora_down.weight"] = down.to(torch.bfloat16)
                up = torch.randn(out_f, workload.rank, generator=generator) * 0.01
                tensors[f"{key}.lora_up.weight"] = up.to(torch.bfloat16)
                tensors[f"{key}.alpha"] = torch.tensor(float(workload.rank))
        save_file(tensors, str(loras / f"{name}.safetensors"))
        size = (loras / f"{name}.safetensors").stat().st_size
    return folder, loras, size


def run_once(
    workload: LoraWorkload,
    world_size: int,
    folder: Path,
    loras: Path,
    device: str,
    work: Path,
    log_dir: Path,
) -> SwitchRun:
    from ...client.local import LocalBackend
    from ...config import ServeConfig

    run = SwitchRun(world_size)
    config = ServeConfig(
        model=str(folder),
        world_size=world_size,
        device=device,
        lora_dirs=(str(loras),),
        output_dir=str(work / f"outputs-lora-{world_size}"),
        timeout_s=600.0,
        threads_per_rank=1 if device == "cpu" else None,
    )
    log_file = log_dir / f"lora-switch-ws{world_size}.log"
    started = time.perf_counter()
    try:
        backend = LocalBackend(config, start_timeout_s=900.0, log_file=log_file)
    except Exception as exc:  # recorded in the report; the other runs go on
        run.error = f"start failed: {exc} (see {log_file})"
        return run
    run.start_s = time.perf_counter() - started
    try:
        _jobs(backend.client, workload, run)
    except Exception as exc:  # recorded in the report
        run.error = f"{type(exc).__name__}: {exc} (see {log_file})"
    finally:
        backend.stop()
    log.info("LoRA switch, world size %d: %s", world_size, run)
    return run


def _jobs(client: Any, workload: LoraWorkload, run: SwitchRun) -> None:
    run.dit_bytes = sum(rank["dit_param_bytes"] for rank in client.info()["ranks"])
    plain = workload.body()
    client.wait(client.submit(plain), timeout_s=3600)  # the first job pays one-time costs
    begin = time.perf_counter()
    first = client.submit(workload.body([{"name": "a"}]))  # parsed and checked at submit
    run.first_use_s = time.perf_counter() - begin
    pending = [first]
    for _ in range(workload.num_switches):
        for name in ("b", "a"):
            pending.append(client.submit(workload.body([{"name": name}])))
        pending.append(client.submit(plain))
    for job_id in pending:
        job = client.wait(job_id, timeout_s=3600)
        timings = job["timings"]
        if job["request"]["loras"]:
            run.apply_s.append(timings["lora_apply_s"])
            run.apply_cpu_s.append(timings["lora_apply_cpu_s"])
            run.remove_s.append(timings["lora_remove_s"])
            run.job_lora_s.append(timings["total_s"])
        else:
            run.job_plain_s.append(timings["total_s"])


def _spread(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"median": None, "min": None, "max": None}
    return {
        "median": round(statistics.median(values), 4),
        "min": round(min(values), 4),
        "max": round(max(values), 4),
    }


def measure(
    workload: LoraWorkload, device: str, num_devices: int, work: Path, log_dir: Path
) -> dict[str, Any]:
    """The row's section of the report (`summarize` of every world size that fits)."""
    folder, loras, lora_bytes = write_model_and_loras(workload, work)
    runs = [
        run_once(workload, ws, folder, loras, device, work, log_dir)
        for ws in workload.world_sizes
        if ws <= num_devices
    ]
    return summarize(workload, runs, lora_bytes)


def summarize(workload: LoraWorkload, runs: list[SwitchRun], lora_bytes: int) -> dict[str, Any]:
    rows = []
    for run in runs:
        if run.error:
            continue
        switch = [a + r for a, r in zip(run.apply_s, run.remove_s, strict=True)]
        median_switch = statistics.median(switch) if switch else None
        rows.append(
            {
                "world_size": run.world_size,
                "dit_bytes": run.dit_bytes,
                "reload_s": round(run.start_s, 3),
                "first_use_s": round(run.first_use_s, 3),
                "apply_s": _spread(run.apply_s),
                "apply_cpu_s": _spread(run.apply_cpu_s),
                "remove_s": _spread(run.remove_s),
                "switch_s": _spread(switch),
                "job_lora_s": _spread(run.job_lora_s),
                "job_plain_s": _spread(run.job_plain_s),
                "reload_over_switch": round(run.start_s / median_switch, 1)
                if median_switch
                else None,
            }
        )
    return {
        "workload": asdict(workload),
        "lora_file_bytes": lora_bytes,
        "rows": rows,
        "errors": [f"lora ws{run.world_size}: {run.error}" for run in runs if run.error],
    }


def _fmt(spread: dict[str, float | None], digits: int = 3) -> str:
    return fixed_spread(spread, digits)


def render(section: dict[str, Any]) -> list[str]:
    """Markdown lines of the LoRA section."""
    w = section["workload"]
    lines = [
        "",
        "### LoRA switch against a reload",
        "",
        f"Wan DiT {w['num_layers']} blocks x {w['num_heads'] * w['head_dim']} wide, FFN "
        f"{w['ffn_dim']}; two rank-{w['rank']} LoRAs on every linear layer "
        f"({section['lora_file_bytes'] / 2**20:.0f} MiB each, bf16, ComfyUI format); jobs "
        f"{w['width']}x{w['height']}, {w['num_frames']} frame(s), {w['num_inference_steps']} "
        f"steps, alternating LoRA a, LoRA b and none ({w['num_switches']} rounds). Reload: "
        "serve -> ready (what reloading the model per LoRA change costs). Switch: apply + "
        "remove on rank 0 (median, min-max); apply CPU: the CPU seconds of applying (on a "
        "loaded machine the wall time also counts other processes' turns). First use: the "
        "submit that parses and checks the LoRA (later uses come from the cache).",
        "",
        "| world size | DiT (GiB) | reload (s) | first use (s) | apply (s) | apply CPU (s) "
        "| remove (s) | switch (s) | reload / switch | job with LoRA (s) | job without (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in section["rows"]:
        ratio = row["reload_over_switch"]
        lines.append(
            f"| {row['world_size']} | {row['dit_bytes'] / 2**30:.2f} | {row['reload_s']:.1f} | "
            f"{row['first_use_s']:.2f} | {_fmt(row['apply_s'])} | {_fmt(row['apply_cpu_s'])} | "
            f"{_fmt(row['remove_s'])} | "
            f"{_fmt(row['switch_s'])} | {'-' if ratio is None else f'{ratio:.0f}x'} | "
            f"{_fmt(row['job_lora_s'], 2)} | {_fmt(row['job_plain_s'], 2)} |"
        )
    return lines
