"""ComfyUI's `asym_w4a8_int8` weights (W4A8, and its 6-bit variant), dequantized to floats.

A layer's [out, in] weight was rotated by ConvRot (`int8.rotate`, groups of
`convrot_groupsize`, 256 by default) and stored as codes, 4 or 6 bits each, in an int8 tensor
[out, in * bits / 8]: a plane of in/2 bytes of two codes each (the even column in the low
nibble), followed at 6 bits by a plane of in/4 bytes holding each code's top 2 bits (column c
in byte c // 4 at bit 2 * (c % 4)). The bit depth is the one the row width implies. Each code
becomes a level: `codebook[code]` (`weight_codebook`, 16 levels) at 4 bits with a codebook,
else `code - 2^(bits - 1)`; levels are scaled per group of `group_size` columns by `s_rel`
(`weight_s_rel` [out, in / group_size], E4M3 or float32) and rounded to the int8 grid
(clamped to +-127); that int8 value times the row's `s_channel` (`weight_s_channel` [out]),
plus the group's `correction` (`weight_correction` [in / group_size, out], asymmetric layers),
is the rotated weight; rotated back (the Hadamard matrix is its own inverse), the weight.

All in float32, rounded once to the compute dtype by the caller.
"""

from __future__ import annotations

import torch

from . import int8

BITS = (4, 6)


def bits_of(row_bytes: int, in_features: int) -> int:
    """The code width a packed row of `row_bytes` for `in_features` values implies."""
    for bits in BITS:
        if in_features * bits == row_bytes * 8:
            return bits
    raise ValueError(
        f"a W4A8 row of {row_bytes} bytes holds neither 4- nor 6-bit codes of {in_features}"
    )


def unpack_codes(packed: torch.Tensor, in_features: int) -> torch.Tensor:
    """Packed rows [rows, in * bits / 8] (int8 or uint8) -> codes [rows, in] (int64)."""
    raw = packed.view(torch.uint8).to(torch.int64)
    bits = bits_of(raw.shape[1], in_features)
    low = raw[:, : in_features // 2]
    codes = torch.stack([low & 0x0F, low >> 4], dim=-1).reshape(raw.shape[0], in_features)
    if bits == 6:
        high = raw[:, in_features // 2 :]
        shifts = torch.tensor([0, 2, 4, 6])
        codes = codes | (((high[..., None] >> shifts) & 0x3).reshape(raw.shape[0], -1) << 4)
    return codes


def dequantize(
    packed: torch.Tensor,
    s_rel: torch.Tensor,
    s_channel: torch.Tensor,
    *,
    group_size: int,
    convrot_group: int,
    codebook: torch.Tensor | None = None,
    correction: torch.Tensor | None = None,
) -> torch.Tensor:
    """Rows of a W4A8 weight as float32 (module docstring): `s_rel` [rows, groups],
    `s_channel` [rows], `correction` [groups, rows] or None, `codebook` [16] or None."""
    rows, groups = s_rel.shape
    in_features = groups * group_size
    codes = unpack_codes(packed, in_features)
    bits = bits_of(packed.shape[1], in_features)
    if codebook is not None and bits == 4:
        levels = codebook.to(torch.float32)[codes]
    else:
        levels = codes.to(torch.float32) - float(1 << (bits - 1))
    grid = levels.reshape(rows, groups, group_size) * s_rel.to(torch.float32)[..., None]
    grid = grid.round().clamp(-127, 127)
    values = grid * s_channel.to(torch.float32).reshape(rows, 1, 1)
    if correction is not None:
        values = values + correction.to(torch.float32).t()[..., None]
    return int8.rotate(values.reshape(rows, in_features), convrot_group)
