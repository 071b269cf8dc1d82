"""The benchmark's model and its in-process baseline (the diffusers pipeline called directly).

The scaling numbers need a DiT whose compute dominates, as it does on GPUs: the built-in
presets are too small (4 heads x 16 dims). `build_model_folder` writes a Wan text-to-video
pipeline with a medium transformer (default 8 heads x 64 dims, 4 layers) and the tiny-wan
text encoder, tokenizer, VAE and scheduler to a diffusers folder, so the benchmark serves it
with `--model FOLDER` exactly as users serve their own models.

`run_direct` is what a user without paradit would do: `from_pretrained` the same folder and
call the pipeline with the prompt, on one thread (CPU) or one device.
"""

from __future__ import annotations

import logging
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

TRANSFORMER_SEED = 300


@dataclass(frozen=True)
class BenchModel:
    """The benchmark DiT (`WanTransformer3DModel`); text dim and latent channels as tiny-wan."""

    num_heads: int = 8
    head_dim: int = 64
    num_layers: int = 4
    ffn_dim: int = 2048

    def __post_init__(self) -> None:
        for name in ("num_heads", "head_dim", "num_layers", "ffn_dim"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")

    @property
    def hidden(self) -> int:
        return self.num_heads * self.head_dim

    def describe(self) -> str:
        return (
            f"Wan DiT {self.num_heads} heads x {self.head_dim} (hidden {self.hidden}), "
            f"{self.num_layers} layers, FFN {self.ffn_dim}"
        )


def num_tokens(width: int, height: int, num_frames: int) -> int:
    """DiT tokens of a Wan job: VAE 8x spatial / 4x temporal, then 1x2x2 patches."""
    return ((num_frames - 1) // 4 + 1) * (height // 16) * (width // 16)


def build_model_folder(spec: BenchModel, folder: Path) -> Path:
    """Write the benchmark pipeline to `folder` (save_pretrained layout); returns it."""
    from diffusers import WanTransformer3DModel

    from ...models.presets import build_preset
    from ...models.tiny_parts import seeded

    def transformer() -> WanTransformer3DModel:
        return WanTransformer3DModel(
            patch_size=(1, 2, 2),
            num_attention_heads=spec.num_heads,
            attention_head_dim=spec.head_dim,
            in_channels=16,
            out_channels=16,
            text_dim=32,
            freq_dim=256,
            ffn_dim=spec.ffn_dim,
            num_layers=spec.num_layers,
            cross_attn_norm=True,
            qk_norm="rms_norm_across_heads",
            rope_max_seq_len=1024,
        )

    started = time.perf_counter()
    pipe = build_preset("tiny-wan")
    pipe.transformer = seeded(TRANSFORMER_SEED, transformer)
    pipe.save_pretrained(folder)
    log.info(
        "bench model (%s) written to %s in %.1fs",
        spec.describe(),
        folder,
        time.perf_counter() - started,
    )
    return folder


class _FirstForward(Exception):
    """Raised by a forward pre-hook to stop a pipeline at its first transformer call."""


@dataclass
class DirectResult:
    """One direct pipeline call: wall time, its steps, and its time before the first step."""

    total_s: float
    step_s: list[float]


def _load(folder: Path, device: str) -> Any:
    import torch
    from diffusers import DiffusionPipeline

    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    pipe = DiffusionPipeline.from_pretrained(str(folder), dtype=dtype)
    pipe.set_progress_bar_config(disable=True)
    return pipe.to(device)


def _sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


class DirectPipeline:
    """The benchmark pipeline loaded in this process, called the way a user calls diffusers."""

    def __init__(self, folder: Path, device: str):
        self.device = device
        self.pipe = _load(folder, device)

    def run(self, body: dict[str, Any]) -> DirectResult:
        """`pipe(prompt=..., ...)` with the job's fields; step times from the step callback."""
        import torch

        marks: list[float] = []

        def on_step(_pipe: Any, _index: int, _t: Any, _kwargs: dict) -> dict:
            _sync(self.device)
            marks.append(time.perf_counter())
            return {}

        _sync(self.device)
        started = time.perf_counter()
        self.pipe(
            prompt=body["prompt"],
            negative_prompt=body.get("negative_prompt", ""),
            width=body["width"],
            height=body["height"],
            num_frames=body["num_frames"],
            num_inference_steps=body["num_inference_steps"],
            guidance_scale=body["guidance_scale"],
            generator=torch.Generator("cpu").manual_seed(body.get("seed", 0)),
            output_type="np",
            callback_on_step_end=on_step,
        )
        _sync(self.device)
        total = time.perf_counter() - started
        points = [started, *marks]
        return DirectResult(total, [b - a for a, b in zip(points, points[1:], strict=False)])

    def setup_seconds(self, body: dict[str, Any], repeats: int = 3) -> float:
        """Median time `pipe(...)` spends before its first transformer call, given embeddings.

        This is the latent setup (timesteps, initial noise) that paradit's `first_step_start_s`
        does not cover: the server marks the step clock just before it calls the pipeline.
        """
        import torch

        with torch.no_grad():
            positive, negative = self.pipe.encode_prompt(
                prompt=body["prompt"],
                negative_prompt=body.get("negative_prompt", ""),
                do_classifier_free_guidance=body["guidance_scale"] > 1.0,
                device=self.device,
            )
        first: list[float] = []

        def stop(_module: Any, _args: Any) -> None:
            _sync(self.device)
            first.append(time.perf_counter())
            raise _FirstForward

        handle = self.pipe.transformer.register_forward_pre_hook(stop)
        samples = []
        try:
            for _ in range(repeats):
                _sync(self.device)
                started = time.perf_counter()
                try:
                    self.pipe(
                        prompt_embeds=positive,
                        negative_prompt_embeds=negative,
                        width=body["width"],
                        height=body["height"],
                        num_frames=body["num_frames"],
                        num_inference_steps=body["num_inference_steps"],
                        guidance_scale=body["guidance_scale"],
                        generator=torch.Generator("cpu").manual_seed(0),
                        output_type="latent",
                    )
                except _FirstForward:
                    samples.append(first[-1] - started)
        finally:
            handle.remove()
        return statistics.median(samples) if samples else 0.0

    def close(self) -> None:
        del self.pipe
        if self.device == "cuda":
            import torch

            torch.cuda.empty_cache()
