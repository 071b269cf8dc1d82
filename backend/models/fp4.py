"""nvfp4 weights as ComfyUI saves them (`nvfp4` layers, with AWQ's `pre_quant_scale` in the
`nvfp4_awq` files and among other formats in the `fp4_mixed` ones), dequantized to floats.

A layer holds its [out, in] values as bytes of two E2M1 codes each, the row's earlier value in
the high nibble (E2M1: 1 sign, 2 exponent, 1 mantissa bit; magnitudes 0, 0.5, 1, 1.5, 2, 3, 4,
6: OCP Microscaling Formats v1.0, 5.3.3); one E4M3 scale per 16 values of a row, in cuBLAS's
block-scaling layout (`single_file.quant.unswizzle_blocks`); and one float32 scale for the
whole tensor (`weight_scale_2`). A value is code x block scale x tensor scale. AWQ's layers
multiply their input by `pre_quant_scale` (one per input column) before the product, which is
the same as multiplying the weight's columns by it: the dequantized weight includes it.

Order of the float32 arithmetic: code x block scale (exact: 2 and 4 significant bits), times
the tensor scale (one rounding), times the column's AWQ scale (one more).
"""

from __future__ import annotations

import torch

BLOCK = 16
"""Values per E4M3 block scale."""
E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def _table() -> torch.Tensor:
    return torch.tensor([*E2M1, *(-v for v in E2M1)], dtype=torch.float32)


def e2m1_values(packed: torch.Tensor) -> torch.Tensor:
    """Bytes [rows, n] of two E2M1 codes (high nibble first) -> float32 values [rows, 2n]."""
    codes = torch.stack([packed >> 4, packed & 0x0F], dim=-1).reshape(packed.shape[0], -1)
    return _table()[codes.long()]


def dequantize(
    packed: torch.Tensor,
    block_scales: torch.Tensor,
    tensor_scale: torch.Tensor,
    pre_quant_scale: torch.Tensor | None = None,
) -> torch.Tensor:
    """Rows of an nvfp4 weight as float32: `packed` [rows, in/2] bytes, `block_scales` [rows,
    in/16] (float32, row-major), `tensor_scale` one value, `pre_quant_scale` [in] or None."""
    values = e2m1_values(packed)
    rows, width = values.shape
    blocks = block_scales.to(torch.float32).reshape(rows, width // BLOCK, 1)
    values = (values.reshape(rows, -1, BLOCK) * blocks).reshape(rows, width)
    values = values * tensor_scale.to(torch.float32).reshape(())
    if pre_quant_scale is not None:
        values = values * pre_quant_scale.to(torch.float32).reshape(1, width)
    return values
