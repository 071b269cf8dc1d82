"""The `int8` stage of docs/gpu_check.py: Wan 2.1 14B's linear layers with their weights stored
as ComfyUI's int8_convrot files hold them (ConvRot groups of 256, a scale per row), at
1280x720x81's tokens on one GPU.

For each of a block's linear shapes (q/k/v/o 5120x5120, FFN 5120->13824 and 13824->5120):
- bf16: `F.linear` on the bf16 weight (what `--weights bf16` runs);
- upcast: the int8 weight dequantized and un-rotated to bf16 in the forward, then `F.linear`
  (`--weights file|int8` on an int8_convrot file);
- int8 compute: W8A8 with `torch._int_mm` (`--int8-compute`), or the reason it is refused on
  this device.
Each is timed (median of CUDA-event timings after warm-up) and its output compared with
bf16's (largest and mean absolute difference, relative to bf16's mean magnitude).
GPU_CHECK_DRY=1: tiny sizes on the CPU, to check the stage itself (int8 compute refused there).
"""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path
from typing import Any

import torch
from fp8_check import DRY_SHAPES, SHAPES, TOKENS, _distance, _timed  # beside this file

GROUP = 256
"""ConvRot's group in every published int8_convrot file."""


def stage_int8(out: Path) -> dict[str, Any]:
    from paradit.backend.models import int8
    from paradit.backend.models.quantized import (
        QuantLinear,
        Stored,
        int8_refusal,
        set_int8_compute,
    )

    dry = os.environ.get("GPU_CHECK_DRY") == "1"
    device = torch.device("cpu" if dry else "cuda")
    dtype = torch.float32 if dry else torch.bfloat16
    tokens = 256 if dry else TOKENS
    group = 64 if dry else GROUP
    refusal = int8_refusal(device)
    result: dict[str, Any] = {"device": str(device), "tokens": tokens, "int8_compute": refusal}
    generator = torch.Generator().manual_seed(0)
    for name, (rows, cols) in (DRY_SHAPES if dry else SHAPES).items():
        weight = (torch.randn(rows, cols, generator=generator) * cols**-0.5).to(device, dtype)
        x = torch.randn(tokens, cols, generator=generator).to(device, dtype)
        stored = Stored("int8", torch.int8, group=group)
        layer = QuantLinear(cols, rows, False, stored, dtype, device)
        with torch.no_grad():
            q, scale = int8.quantize_rows(int8.rotate(weight.float(), group))
            layer.weight.data, layer.weight_scale.data = q, scale
            reference = torch.nn.functional.linear(x, weight)
            entry: dict[str, Any] = {"shape": [rows, cols]}
            entry["bf16_s"] = _timed(partial(torch.nn.functional.linear, x, weight), device)
            entry["upcast_s"] = _timed(partial(layer, x), device)
            entry["upcast_distance"] = _distance(reference, layer(x))
            if refusal is None:
                set_int8_compute([layer])
                entry["int8_compute_s"] = _timed(partial(layer, x), device)
                entry["int8_compute_distance"] = _distance(reference, layer(x))
        result[name] = entry
    return result
