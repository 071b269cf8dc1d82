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
from pathlib import Path
from typing import Any

import torch
from fp8_check import linear_stage  # beside this file

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

    def make_layer(weight, device, dtype, dry):
        rows, cols = weight.shape
        group = 64 if dry else GROUP
        layer = QuantLinear(
            cols, rows, False, Stored("int8", torch.int8, group=group), dtype, device
        )
        q, scale = int8.quantize_rows(int8.rotate(weight.float(), group))
        layer.weight.data, layer.weight_scale.data = q, scale
        return layer

    dry = os.environ.get("GPU_CHECK_DRY") == "1"
    refusal = int8_refusal(torch.device("cpu" if dry else "cuda"))
    return linear_stage(
        "int8", refusal, make_layer, lambda layer, device: set_int8_compute([layer])
    )
