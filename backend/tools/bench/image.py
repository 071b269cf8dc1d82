"""The bench's image row: a Qwen-Image text-to-image job at its real token count, on 1 and 2 ranks.

The DiT is tiny in width (`tiny-qwen-image`: 4 heads x 16 dims, 2 layers) but the job has the
real sequence: 2048x2048 is 16,384 image tokens (VAE 8x spatial, then 2x2 patches), so the
attention, quadratic in the tokens, dominates each step as it does on real weights. Qwen-Image
uses true CFG: a guided step runs the DiT twice. The row serves three plans:

- 1 rank: both CFG halves one after the other;
- CFG 2 (`--cfg-degree 2`): each rank runs one half;
- Ulysses 2 (`--cfg-degree 1 --ulysses-degree 2`): both ranks run both halves, each on half
  of the sequence (two all-to-alls per attention).

All backends stay up together; their jobs run interleaved (A, B, C, C, B, A, ...) so that drift
of the machine's load falls on every plan alike. Per plan: the median and min-max over the
repeats of each job's median step time (its first step left out), the speed-up against 1 rank
paired by repeat, and the fraction of linear (speed-up / ranks). CPU ranks get one thread.
Published figures to compare with: Qwen-Image at 2048x2048 on 8 GPUs reaches ~46% of linear
(vLLM-Omni), Flux.1 ~66-77% on 4 (xDiT, cache-dit).
"""

from __future__ import annotations

import logging
import statistics
import time
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .stats import fmt_spread, spread

log = logging.getLogger(__name__)

PLANS: tuple[tuple[str, int, tuple[str, ...]], ...] = (
    ("1 rank", 1, ()),
    ("CFG 2", 2, ("--cfg-degree", "2", "--ulysses-degree", "1")),
    ("Ulysses 2", 2, ("--cfg-degree", "1", "--ulysses-degree", "2")),
)
PUBLISHED = (
    "Published: Qwen-Image 2048x2048 on 8 GPUs ~46% of linear (vLLM-Omni); "
    "Flux.1 ~66-77% on 4 (xDiT, cache-dit)."
)


@dataclass(frozen=True)
class ImageWorkload:
    model: str = "tiny-qwen-image"
    width: int = 2048
    height: int = 2048
    num_inference_steps: int = 4
    guidance_scale: float = 4.0
    num_repeats: int = 3

    def __post_init__(self) -> None:
        for side in ("width", "height"):
            value = getattr(self, side)
            if not 16 <= value <= 2048 or value % 16:
                raise ValueError(f"{side} must be a multiple of 16 in 16..2048, got {value}")
        if self.num_inference_steps < 2:
            raise ValueError(
                f"num_inference_steps must be >= 2 (the first step is left out), "
                f"got {self.num_inference_steps}"
            )
        if self.num_repeats < 1:
            raise ValueError(f"num_repeats must be >= 1, got {self.num_repeats}")
        if self.guidance_scale <= 1.0:
            raise ValueError(f"guidance_scale must be > 1 (true CFG), got {self.guidance_scale}")

    @property
    def tokens(self) -> int:
        """Image tokens of the DiT: VAE 8x spatial, then 2x2 patches."""
        return (self.width // 16) * (self.height // 16)

    def body(self) -> dict[str, Any]:
        return {
            "prompt": "a lighthouse on a cliff at dusk, waves breaking below, oil painting",
            "negative_prompt": "blurry, low quality",
            "width": self.width,
            "height": self.height,
            "num_inference_steps": self.num_inference_steps,
            "guidance_scale": self.guidance_scale,
            "seed": 11,
        }


IMAGE = ImageWorkload()
QUICK = ImageWorkload(width=1024, height=1024, num_inference_steps=3, num_repeats=2)
SMOKE = ImageWorkload(width=64, height=64, num_inference_steps=2, num_repeats=1)


def plans(num_devices: int) -> tuple[tuple[str, int, tuple[str, ...]], ...]:
    """The plans this machine can serve: 2-rank plans need 2 devices."""
    return tuple(plan for plan in PLANS if plan[1] <= num_devices)


def _job_step_s(job: dict[str, Any]) -> float:
    """A job's median step time, its first (warm-up) step left out."""
    steps = job["timings"]["step_s"]
    return statistics.median(steps[1:] if len(steps) > 1 else steps)


def interleaved(clients: dict[str, Any], body: dict[str, Any], repeats: int) -> dict[str, list]:
    """One warm-up job per backend (not counted), then each backend's job once per repeat,
    in turn, the order reversed every other repeat; each backend's finished jobs."""
    for client in clients.values():
        client.wait(client.submit(body), timeout_s=3600)
    jobs: dict[str, list[dict]] = {name: [] for name in clients}
    for repeat in range(repeats):
        names = list(clients) if repeat % 2 == 0 else list(reversed(clients))
        for name in names:
            client = clients[name]
            job = client.wait(client.submit(body), timeout_s=3600)
            jobs[name].append(job)
            log.info("image %s: repeat %d, steps %s", name, repeat + 1, job["timings"]["step_s"])
    return jobs


def summarize(
    workload: ImageWorkload,
    jobs: dict[str, list[dict[str, Any]]],
    world_sizes: dict[str, int],
    modes: dict[str, list[str]],
) -> dict[str, Any]:
    """The row's section: per plan the step time, the speed-up against "1 rank" paired by
    repeat and the fraction of linear."""
    one = [_job_step_s(job) for job in jobs["1 rank"]]
    runs = []
    for name, done in jobs.items():
        steps = [_job_step_s(job) for job in done]
        run: dict[str, Any] = {
            "label": name,
            "world_size": world_sizes[name],
            "modes": modes[name],
            "step_s": spread(steps),
            "sequence_layout": done[-1]["timings"].get("sequence_layout"),
        }
        if name != "1 rank":
            speedup = spread([a / b for a, b in zip(one, steps, strict=True)])
            run["speedup_vs_1_rank"] = speedup
            run["fraction_of_linear"] = {k: v / world_sizes[name] for k, v in speedup.items()}
        runs.append(run)
    return {"workload": {**asdict(workload), "tokens": workload.tokens}, "runs": runs}


def _start(
    stack: ExitStack,
    model: str,
    world_size: int,
    flags: tuple[str, ...],
    device: str,
    log_file: Path,
) -> Any:
    from ...client.local import LocalBackend
    from ...config import ServeConfig

    config = ServeConfig.from_argv(
        list(flags),
        model=model,
        world_size=world_size,
        device=device,
        threads_per_rank=1 if device == "cpu" else None,
        output_dir=str(log_file.parent / "image-outputs"),
        timeout_s=3600.0,
    )
    backend = LocalBackend(config, start_timeout_s=900.0, log_file=log_file)
    stack.callback(backend.stop)
    return backend.client


def measure(
    workload: ImageWorkload, device: str, num_devices: int, log_dir: Path
) -> dict[str, Any]:
    """Serve every plan this machine can, run the interleaved jobs; the summarized section."""
    log_dir.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    chosen = plans(num_devices)
    with ExitStack() as stack:
        clients, modes = {}, {}
        for name, world_size, flags in chosen:
            log_file = log_dir / f"image-{name.replace(' ', '-')}.log"
            log.info("image %s: starting `paradit serve` (%s)", name, " ".join(flags))
            clients[name] = _start(stack, workload.model, world_size, flags, device, log_file)
            modes[name] = clients[name].info()["plan"]["modes"]
        jobs = interleaved(clients, workload.body(), workload.num_repeats)
    section = summarize(workload, jobs, {name: ws for name, ws, _ in chosen}, modes)
    section["device"] = device
    section["wall_s"] = round(time.perf_counter() - began, 1)
    return section


def render(section: dict[str, Any]) -> list[str]:
    """Markdown lines for the section."""
    w = section["workload"]
    lines = [
        "",
        f"### Image ({w['model']} {w['width']}x{w['height']}, {w['tokens']:,} image tokens, "
        f"{w['num_inference_steps']} steps, true CFG {w['guidance_scale']:g}, "
        f"{w['num_repeats']} interleaved repeats; median (min-max))",
        "",
        "| plan | ranks | modes | step | speed-up vs 1 rank | of linear |",
        "|---|---|---|---|---|---|",
    ]
    for run in section["runs"]:
        speedup = run.get("speedup_vs_1_rank")
        linear = run.get("fraction_of_linear")
        lines.append(
            f"| {run['label']} | {run['world_size']} | {', '.join(run['modes']) or '-'} | "
            f"{fmt_spread(run['step_s'], ' s')} | "
            f"{fmt_spread(speedup, 'x') if speedup else '1x'} | "
            f"{fmt_spread(linear, '%', 100) if linear else '-'} |"
        )
    lines += ["", PUBLISHED]
    return lines
