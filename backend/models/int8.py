"""int8 weights as ComfyUI saves them (`int8_tensorwise`, with or without ConvRot), and W8A8.

A layer's weight is int8 values [out, in] and float32 scales, one per tensor or one per row:
the value is `q * scale`. With ConvRot (arXiv 2512.03673; ComfyUI's `convrot: true`,
`convrot_groupsize` G, 256 in every published file) the rows were first rotated group by group
(each run of G input columns) by the regular Hadamard matrix of size G: the Kronecker power
of the 4x4 regular Hadamard matrix [[1,1,1,-1],[1,1,-1,1],[1,-1,1,1],[-1,1,1,1]], divided by
sqrt(G). That matrix is symmetric and orthogonal, so it is its own inverse: the file's rows
times it, group by group, are the weight in its original basis (`dequantize`).

`dequantize` is the one arithmetic both the load-time dequantization (`single_file.quant`) and
a resident int8 layer's forward (`quantized.QuantLinear`) use: float32 `q * scale`, un-rotated
in float32, rounded once to the compute dtype by the caller. `quantize_rows` is `--weights
int8`'s: one scale per row (the row's largest magnitude over 127), no rotation.

`int8_linear` (`--int8-compute`): ComfyUI's W8A8 product: the input rotated by the same matrix
(so that x_rot . w_rot = x . w), quantized per token (one scale a row, its largest magnitude
over 127), multiplied int8 x int8 -> int32 (`torch._int_mm`), then times the token's and the
weight row's scales. As ComfyUI's eager path does, the rotation and the division by the
token's scale run in the input's dtype (bf16 on a GPU: no float32 copy of the activations),
the scales in float32.
"""

from __future__ import annotations

import functools

import torch

INT8_MAX = 127
PRODUCT_BYTES = 256 * 2**20
"""`int8_linear`: the most bytes of int32 product (and of its float32 rescaling) at a time."""
REGULAR_4 = ((1, 1, 1, -1), (1, 1, -1, 1), (1, -1, 1, 1), (-1, 1, 1, 1))
"""The 4x4 regular Hadamard matrix (every row and column sums to 2) ConvRot builds on."""


def is_power_of_4(size: int) -> bool:
    return size >= 4 and size & (size - 1) == 0 and (size.bit_length() - 1) % 2 == 0


@functools.lru_cache(maxsize=16)
def _hadamard(size: int, device: str, dtype: torch.dtype) -> torch.Tensor:
    matrix = torch.tensor(REGULAR_4, dtype=torch.float64)
    while matrix.shape[0] < size:
        matrix = torch.kron(matrix, torch.tensor(REGULAR_4, dtype=torch.float64))
    return (matrix / size**0.5).to(device=device, dtype=dtype)


def hadamard(
    size: int, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """The normalized regular Hadamard matrix of `size` (a power of 4), its entries +-1/sqrt
    (size) exact in any float dtype; made once per device and dtype (a constant: every layer's
    forward uses it)."""
    if not is_power_of_4(size):
        raise ValueError(f"a ConvRot group is a power of 4 (4, 16, 64, 256...), got {size}")
    return _hadamard(size, str(torch.device(device)), dtype)


def rotate(values: torch.Tensor, group: int) -> torch.Tensor:
    """Each run of `group` values of the last dimension times the group's Hadamard matrix
    (its own inverse: rotating a rotated row gives the row back)."""
    width = values.shape[-1]
    if width % group:
        raise ValueError(f"a ConvRot group of {group} does not divide rows of {width} values")
    grouped = values.reshape(*values.shape[:-1], width // group, group)
    return (grouped @ hadamard(group, values.device, values.dtype)).reshape(values.shape)


def dequantize(q: torch.Tensor, scale: torch.Tensor, group: int = 0) -> torch.Tensor:
    """int8 rows [rows, in] with their scales (one, or one a row) as float32 values, un-rotated
    when `group` (ConvRot's group size; 0: no rotation)."""
    values = q.to(torch.float32) * scale.to(torch.float32).reshape(-1, 1)
    return rotate(values, group) if group else values


def quantize_rows(values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Float rows as int8 with one float32 scale per row (symmetric: the row's largest
    magnitude maps to 127; an all-zero row gets scale 1)."""
    flat = values.reshape(values.shape[0], -1).to(torch.float32)
    amax = flat.abs().amax(dim=1)
    scale = torch.where(amax > 0, amax / INT8_MAX, torch.ones_like(amax))
    q = (flat / scale[:, None]).round().clamp(-INT8_MAX - 1, INT8_MAX).to(torch.int8)
    return q.reshape(values.shape), scale


def quantize_tokens(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Activation rows as int8 with a float32 scale each (largest magnitude / 127, at least
    1e-30), divided in the rows' own dtype (a scale that is 0 there divides by its dtype's
    smallest normal: an all-zero row stays zero)."""
    scale = (rows.abs().amax(dim=1).to(torch.float32) / INT8_MAX).clamp(min=1e-30)
    divisor = scale.to(rows.dtype)
    divisor = torch.where(divisor == 0, torch.finfo(rows.dtype).tiny, divisor)
    divided = rows / divisor[:, None]
    return divided.round().clamp(-INT8_MAX - 1, INT8_MAX).to(torch.int8), scale


def int8_linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    weight_scale: torch.Tensor,
    bias: torch.Tensor | None = None,
    group: int = 0,
) -> torch.Tensor:
    """`x @ dequantize(weight, weight_scale, group).T + bias` as int8 matmuls, the result in
    `x`'s dtype (module docstring). Tokens go through in blocks of rows whose int32 product
    and its float32 rescaling take at most `PRODUCT_BYTES` each (at 75k tokens x 13824
    outputs the whole product would be 4 GiB twice). `torch._int_mm` needs more than 16 rows
    and sizes that divide by 8: a block's rows are padded with zeros to 17 and a multiple
    of 8."""
    shape = x.shape
    rows = x.reshape(-1, shape[-1])
    if group:
        rows = rotate(rows, group)
    count, outputs = rows.shape[0], weight.shape[0]
    out = torch.empty(count, outputs, dtype=x.dtype, device=x.device)
    w_scale = weight_scale.to(torch.float32).reshape(1, -1)
    step = max(32, PRODUCT_BYTES // 4 // max(outputs, 1) // 8 * 8)
    for begin in range(0, count, step):
        q, x_scale = quantize_tokens(rows[begin : begin + step])
        taken = q.shape[0]
        padded = max(17, -(-taken // 8) * 8)
        if padded != taken:
            q = torch.cat([q, q.new_zeros(padded - taken, q.shape[1])])
        product = torch._int_mm(q, weight.t())[:taken]  # noqa: SLF001 - torch's int8 matmul
        out[begin : begin + taken] = product.to(torch.float32) * (x_scale[:, None] * w_scale)
    if bias is not None:
        out = out + bias.to(out.dtype)
    return out.reshape(*shape[:-1], outputs)
