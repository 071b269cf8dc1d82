"""The bench's fast-path rows: unguided jobs on a CFG plan, and the step cache.

- `unguided`: one job without guidance (guidance 1) on 1 rank, on a 2-rank CFG plan as
  paradit runs it now (the sequence spread over both ranks, Ulysses 2), and on the same
  plan as before (both CFG halves running the whole step: `PARADIT_UNGUIDED_SPREAD=0`).
- `cache`: the same guided job with and without the step cache (First-Block-Cache) on 1 rank
  and on a 2-rank CFG plan: mean time of the computed steps against the uncached steps (the cache's
  overhead), the job's denoising time, the steps skipped, and the distance of the cached
  output from the uncached one (PSNR of the frames, relative L2 of the final latents). The
  presets have random weights: whether the skipped steps are visible takes trained weights.

All backends of a row stay up together; their jobs run interleaved (A, B, C, A, B, C, ...)
so that drift of the machine's load falls on every backend alike, and the report gives the
median per-step time of each with its min-max over the repeats. CPU ranks get one thread.
"""

from __future__ import annotations

import logging
import statistics
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .stats import fmt_spread, spread

log = logging.getLogger(__name__)

ROWS = ("unguided", "cache")
TARGETS = {
    "unguided_2_vs_1": ("unguided job, 2-rank CFG plan vs 1 rank", ">=", 1.6),
    "cache_overhead": ("step cache, computed step vs uncached step", "<=", 1.03),
}


@dataclass(frozen=True)
class FastPathWorkload:
    """384x384x33 is 5,184 tokens: enough work per step for the sequence split to pay on CPU
    (at 256x256x17, 1,280 tokens, the split's communication ate its gain: 1.0x on a quiet
    machine)."""

    model: str = "tiny-wan"
    width: int = 384
    height: int = 384
    num_frames: int = 33
    num_inference_steps: int = 8
    num_repeats: int = 5
    cache: str = "first-block:0.9"
    """Random weights change a lot from step to step: a threshold near 1 skips some."""

    def body(self, **extra: Any) -> dict[str, Any]:
        return {
            "prompt": "a red fox running through fresh snow, morning light",
            "negative_prompt": "blurry",
            "width": self.width,
            "height": self.height,
            "num_frames": self.num_frames,
            "num_inference_steps": self.num_inference_steps,
            "seed": 7,
            **extra,
        }


FAST = FastPathWorkload()
SMOKE = FastPathWorkload(width=64, height=64, num_frames=5, num_inference_steps=3, num_repeats=1)


def _steps(job: dict[str, Any]) -> list[float]:
    """The job's step times, its first (warm-up) step left out."""
    steps = job["timings"].get("step_s", [])
    return steps[1:] if len(steps) > 1 else steps


def _start(stack: ExitStack, model: str, world_size: int, device: str, log_file: Path, **env: str):
    from ...client.local import LocalBackend
    from ...config import ServeConfig

    config = ServeConfig(
        model=model,
        world_size=world_size,
        device=device,
        threads_per_rank=1 if device == "cpu" else None,
        save_latents=True,
        output_dir=str(log_file.parent / "outputs"),
    )
    backend = LocalBackend(config, start_timeout_s=900.0, log_file=log_file, env=env or None)
    stack.callback(backend.stop)
    return backend.client


def _interleaved(clients: dict[str, Any], bodies: dict[str, dict], repeats: int) -> dict:
    """Every backend's job once per repeat, in turn; each run's finished jobs."""
    jobs: dict[str, list[dict]] = {name: [] for name in clients}
    for name, client in clients.items():  # warm-up, not counted
        client.wait(client.submit(bodies[name]), timeout_s=3600)
    for repeat in range(repeats):
        names = list(clients) if repeat % 2 == 0 else list(reversed(clients))
        for name in names:
            client = clients[name]
            jobs[name].append(client.wait(client.submit(bodies[name]), timeout_s=3600))
    return jobs


def measure_unguided(workload: FastPathWorkload, device: str, log_dir: Path) -> dict[str, Any]:
    body = workload.body(guidance_scale=1.0)
    with ExitStack() as stack:
        clients = {
            "1 rank": _start(stack, workload.model, 1, device, log_dir / "unguided-1.log"),
            "2 ranks, spread": _start(stack, workload.model, 2, device, log_dir / "unguided-2.log"),
            "2 ranks, before": _start(
                stack,
                workload.model,
                2,
                device,
                log_dir / "unguided-2-before.log",
                PARADIT_UNGUIDED_SPREAD="0",
            ),
        }
        jobs = _interleaved(clients, dict.fromkeys(clients, body), workload.num_repeats)
    runs = {}
    for name, done in jobs.items():
        per_job = [statistics.median(_steps(job)) for job in done]
        runs[name] = {
            "step_s": spread(per_job),
            "sequence_layout": done[-1]["timings"].get("sequence_layout"),
        }
    one = [statistics.median(_steps(job)) for job in jobs["1 rank"]]
    ratios = {}
    for name in ("2 ranks, spread", "2 ranks, before"):
        other = [statistics.median(_steps(job)) for job in jobs[name]]
        ratios[name] = spread([a / b for a, b in zip(one, other, strict=True)])
    return {"body": body, "runs": runs, "speedup_vs_1_rank": ratios}


def measure_cache(
    workload: FastPathWorkload, device: str, log_dir: Path, world_size: int
) -> dict[str, Any]:
    from ...request import parse_cache
    from ..equivalence import distances, relative_l2
    from ..verify import decode_png

    plain = workload.body(guidance_scale=5.0)
    cached = {**plain, "cache": parse_cache(workload.cache)}
    with ExitStack() as stack:
        log_file = log_dir / f"cache-{world_size}.log"
        client = _start(stack, workload.model, world_size, device, log_file)
        pair = {"uncached": client, "cached": client}
        jobs = _interleaved(pair, {"uncached": plain, "cached": cached}, workload.num_repeats)
        last = {name: done[-1] for name, done in jobs.items()}
        frames = {
            name: np.stack(
                [decode_png(client.frame(job["id"], i)) for i in range(job["num_frames"])]
            )
            for name, job in last.items()
        }
        latents = {name: client.latents(job["id"]) for name, job in last.items()}
    record = last["cached"]["timings"]["cache"]
    computed_steps, overhead, job_ratio = [], [], []
    for plain_job, cached_job in zip(jobs["uncached"], jobs["cached"], strict=True):
        flags = [step["computed"] for step in cached_job["timings"]["cache"]["steps"]]
        steps = cached_job["timings"]["step_s"]
        computed = [s for index, s in enumerate(steps) if flags[index] and index > 0]
        uncached = statistics.median(_steps(plain_job))
        if computed:
            computed_steps.append(statistics.median(computed))
            overhead.append(statistics.median(computed) / uncached)
        job_ratio.append(sum(plain_job["timings"]["step_s"]) / sum(steps))
    return {
        "world_size": world_size,
        "body": plain,
        "cache": cached["cache"],
        "num_steps": len(record["steps"]),
        "num_skipped": record["num_skipped"],
        "skipped_steps": record["skipped_steps"],
        "metric": [step["metric"] for step in record["steps"]],
        "uncached_step_s": spread([statistics.median(_steps(j)) for j in jobs["uncached"]]),
        "computed_step_s": spread(computed_steps) if computed_steps else None,
        "computed_vs_uncached_step": spread(overhead) if overhead else None,
        "denoise_speedup": spread(job_ratio),
        "frames": distances(frames["uncached"], frames["cached"]),
        "latent_rel_l2": relative_l2(latents["uncached"], latents["cached"]),
    }


def measure(rows: tuple[str, ...], device: str, log_dir: Path, workload: FastPathWorkload = FAST):
    """The fast-path section of the bench summary."""
    log_dir.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    section: dict[str, Any] = {"workload": workload.__dict__, "device": device}
    if "unguided" in rows:
        section["unguided"] = measure_unguided(workload, device, log_dir)
    if "cache" in rows:  # 1 rank: no FSDP; 2 ranks: CFG parallel, skipped blocks still gather
        section["cache"] = [measure_cache(workload, device, log_dir, n) for n in (1, 2)]
    section["wall_s"] = round(time.perf_counter() - began, 1)
    return section


def render(section: dict[str, Any]) -> list[str]:
    """Markdown lines for the section."""
    w = section["workload"]
    lines = [
        "",
        f"### Fast paths ({w['model']} {w['width']}x{w['height']}x{w['num_frames']}, "
        f"{w['num_inference_steps']} steps, {w['num_repeats']} interleaved repeats; "
        "median (min-max))",
    ]
    if "unguided" in section:
        u = section["unguided"]
        lines += [
            "",
            "| unguided job | step | speedup vs 1 rank |",
            "|---|---|---|",
        ]
        for name, run in u["runs"].items():
            ratio = u["speedup_vs_1_rank"].get(name)
            lines.append(
                f"| {name} | {fmt_spread(run['step_s'], ' ms', 1e3)} | "
                f"{fmt_spread(ratio, 'x') if ratio else '1x'} |"
            )
    for c in section.get("cache", []):
        psnr = c["frames"]["psnr"]
        plan = "1 rank" if c["world_size"] == 1 else f"{c['world_size']} ranks (CFG, sharded)"
        lines += [
            "",
            f"| step cache {c['cache']['method']}:{c['cache']['threshold']} on {plan} | value |",
            "|---|---|",
            f"| steps skipped | {c['num_skipped']} of {c['num_steps']} "
            f"(steps {c['skipped_steps']}) |",
            f"| uncached step | {fmt_spread(c['uncached_step_s'], ' ms', 1e3)} |",
            f"| computed step, cached job | {fmt_spread(c['computed_step_s'], ' ms', 1e3)} |",
            f"| computed / uncached step | {fmt_spread(c['computed_vs_uncached_step'], 'x')} |",
            f"| denoising speedup | {fmt_spread(c['denoise_speedup'], 'x')} |",
            f"| cached vs uncached frames | PSNR {psnr:.1f} dB, max abs {c['frames']['max_abs']} |",
            f"| cached vs uncached latents | relative L2 {c['latent_rel_l2']:.3g} |",
        ]
    if "cache" in section:
        lines += [
            "",
            "Random-weight presets: the distance shows the cache acts, not how it looks; "
            "judging visual quality takes trained weights. With sharded weights a skipped "
            "block still gathers its shards (FSDP's hooks run on the block call).",
        ]
    return lines
