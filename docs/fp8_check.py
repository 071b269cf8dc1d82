"""The `fp8` stage of docs/gpu_check.py: Wan 2.1 14B's linear layers with their weights stored
in fp8 (a scale per row, `--weights fp8`), at 1280x720x81's tokens on one GPU.

For each of a block's linear shapes (q/k/v/o 5120x5120, FFN 5120->13824 and 13824->5120):
- bf16: `F.linear` on the bf16 weight (what `--weights bf16` runs);
- upcast: the fp8 weight upcast to bf16 in the forward, then `F.linear` (`--weights file|fp8`);
- fp8 compute: `torch._scaled_mm` with the input quantized per row (`--fp8-compute`), or the
  reason it is refused on this device.
Each is timed (median of CUDA-event timings after warm-up) and its output compared with
bf16's (largest and mean absolute difference, relative to bf16's mean magnitude).
GPU_CHECK_DRY=1: tiny sizes on the CPU, to check the stage itself (fp8 compute refused there).
"""

from __future__ import annotations

import os
import statistics
import time
from functools import partial
from pathlib import Path
from typing import Any

import torch

HIDDEN, FFN = 5120, 13824
TOKENS = 21 * 45 * 80  # 81 frames at 1280x720 through the VAE and the 2x2 patches
SHAPES = {"attn (q/k/v/o)": (HIDDEN, HIDDEN), "ffn up": (FFN, HIDDEN), "ffn down": (HIDDEN, FFN)}
DRY_SHAPES = {"attn": (64, 64), "ffn up": (128, 64)}


def _timed(fn: Any, device: torch.device, repeats: int = 5, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / 1000)
        else:
            begin = time.perf_counter()
            fn()
            times.append(time.perf_counter() - begin)
    return statistics.median(times)


def _distance(reference: torch.Tensor, other: torch.Tensor) -> dict[str, float]:
    diff = (other.float() - reference.float()).abs()
    scale = reference.float().abs().mean().item()
    return {
        "max_abs": diff.max().item(),
        "mean_abs": diff.mean().item(),
        "mean_abs_relative": diff.mean().item() / scale if scale else 0.0,
    }


def linear_stage(kind: str, refusal: str | None, make_layer: Any, enable: Any) -> dict[str, Any]:
    """Time and compare one stored format on each linear shape: bf16, the upcast forward and
    (where `refusal` is None) the format's own compute. `make_layer(weight, device, dtype,
    dry)` gives the filled layer; `enable(layer, device)` switches its compute on."""
    dry = os.environ.get("GPU_CHECK_DRY") == "1"
    device = torch.device("cpu" if dry else "cuda")
    dtype = torch.float32 if dry else torch.bfloat16
    tokens = 256 if dry else TOKENS
    result: dict[str, Any] = {"device": str(device), "tokens": tokens, f"{kind}_compute": refusal}
    generator = torch.Generator().manual_seed(0)
    for name, (rows, cols) in (DRY_SHAPES if dry else SHAPES).items():
        weight = (torch.randn(rows, cols, generator=generator) * cols**-0.5).to(device, dtype)
        x = torch.randn(tokens, cols, generator=generator).to(device, dtype)
        with torch.no_grad():
            layer = make_layer(weight, device, dtype, dry)
            reference = torch.nn.functional.linear(x, weight)
            entry: dict[str, Any] = {"shape": [rows, cols]}
            entry["bf16_s"] = _timed(partial(torch.nn.functional.linear, x, weight), device)
            entry["upcast_s"] = _timed(partial(layer, x), device)
            entry["upcast_distance"] = _distance(reference, layer(x))
            if refusal is None:
                enable(layer, device)
                entry[f"{kind}_compute_s"] = _timed(partial(layer, x), device)
                entry[f"{kind}_compute_distance"] = _distance(reference, layer(x))
        result[name] = entry
    return result


def stage_fp8(out: Path) -> dict[str, Any]:
    from paradit.backend.models.quantized import (
        QuantLinear,
        Stored,
        fp8_refusal,
        quantize_rows,
        set_fp8_compute,
    )

    def make_layer(weight, device, dtype, dry):
        rows, cols = weight.shape
        layer = QuantLinear(cols, rows, False, Stored("fp8", torch.float8_e4m3fn), dtype, device)
        layer.weight.data, layer.weight_scale.data = quantize_rows(weight, torch.float8_e4m3fn)
        return layer

    dry = os.environ.get("GPU_CHECK_DRY") == "1"
    refusal = fp8_refusal(torch.device("cpu" if dry else "cuda"))
    return linear_stage(
        "fp8", refusal, make_layer, lambda layer, device: set_fp8_compute([layer], device)
    )
