"""Per-step time of a medium CogVideoX at world size 1 and 2 (CFG parallel, Ulysses).

    python -m paradit.backend.tools.bench.cogvideox [--layers 2] [--repeats 3] [--out DIR]

The model: a CogVideoXPipeline folder with the real CogVideoX-2B width (30 heads x 64,
hidden 1920, time embedding 512) and `--layers` blocks, 5B-style rotary positions, seeded
weights; tiny-cogvideox's T5, VAE and scheduler. The job: 320x240, 9 frames (3 latent frames
x 15 x 20 patches = 900 video tokens + 226 text tokens), guidance 6 (a batch of 2 per step).

All three backends are started first (one thread per rank) and kept running; each round runs
the same job on each of them in turn (interleaved, so load changes hit all alike). A job's
per-step time is the median of its `timings.step_s` without the first step; each
configuration reports the median over its jobs and their min-max.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import tempfile
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

CONFIGS: dict[str, tuple[int, tuple[str, ...]]] = {
    "1 rank": (1, ()),
    "2 ranks, CFG parallel": (2, ("--cfg-degree", "2")),
    "2 ranks, Ulysses 2": (2, ("--cfg-degree", "1", "--ulysses-degree", "2")),
}
BODY = {
    "prompt": "a red fox running through fresh snow, morning light",
    "negative_prompt": "blurry, low quality",
    "width": 320,
    "height": 240,
    "num_frames": 9,
    "num_inference_steps": 4,
    "guidance_scale": 6.0,
    "seed": 7,
}


def build_folder(num_layers: int, folder: Path) -> Path:
    from diffusers import CogVideoXTransformer3DModel

    from ...models.presets import build_preset
    from ...models.tiny_parts import seeded

    pipe = build_preset("tiny-cogvideox")
    pipe.transformer = seeded(
        310,
        lambda: CogVideoXTransformer3DModel(
            num_attention_heads=30,
            attention_head_dim=64,
            text_embed_dim=pipe.text_encoder.config.d_model,
            time_embed_dim=512,
            num_layers=num_layers,
            use_rotary_positional_embeddings=True,
        ),
    )
    pipe.save_pretrained(folder)
    return folder


def step_seconds(job: dict[str, Any]) -> float:
    return statistics.median(job["timings"]["step_s"][1:])


def measure(folder: Path, repeats: int, out: Path) -> dict[str, Any]:
    from ...client.local import LocalBackend
    from ...config import ServeConfig

    backends = {}
    try:
        for label, (world_size, flags) in CONFIGS.items():
            config = ServeConfig.from_argv(
                list(flags),
                model=str(folder),
                world_size=world_size,
                device="cpu",
                threads_per_rank=1,
                output_dir=str(out / "outputs"),
                timeout_s=600.0,
            )
            log_file = out / f"{label.replace(' ', '-').replace(',', '')}.log"
            backends[label] = LocalBackend(config, start_timeout_s=900.0, log_file=log_file)
        steps: dict[str, list[float]] = {label: [] for label in CONFIGS}
        plans = {label: backend.client.info()["plan"] for label, backend in backends.items()}
        for backend in backends.values():  # warm-up: one-time costs of the first job
            backend.client.wait(backend.client.submit({**BODY, "num_inference_steps": 1}))
        for round_index in range(repeats):
            for label, backend in backends.items():
                job = backend.client.wait(backend.client.submit(BODY), timeout_s=3600)
                steps[label].append(step_seconds(job))
                log.info("round %d, %s: %.3f s/step", round_index + 1, label, steps[label][-1])
    finally:
        for backend in backends.values():
            backend.stop()
    return {
        label: {
            "median_step_s": statistics.median(values),
            "min_step_s": min(values),
            "max_step_s": max(values),
            "step_s": values,
            "modes": plans[label]["modes"],
        }
        for label, values in steps.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=2, help="transformer blocks (2B has 30)")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--out", default="bench-results/cogvideox", help="logs and JSON")
    args = parser.parse_args(argv)
    if args.layers < 1 or args.repeats < 1:
        parser.error("--layers and --repeats must be >= 1")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="paradit-cogvideox-bench-") as work:
        folder = build_folder(args.layers, Path(work) / "model")
        results = measure(folder, args.repeats, out)
    (out / "cogvideox.json").write_text(json.dumps(results, indent=2))
    base = results["1 rank"]["median_step_s"]
    for label, result in results.items():
        log.info(
            "%-24s %.3f s/step (min %.3f, max %.3f, %d jobs), speed-up %.2fx  [%s]",
            label,
            result["median_step_s"],
            result["min_step_s"],
            result["max_step_s"],
            len(result["step_s"]),
            base / result["median_step_s"],
            "+".join(result["modes"]) or "single",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
