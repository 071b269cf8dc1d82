"""Test file writers for ComfyUI's int8 and 4-bit layer formats, written from the formats'
published definitions (comfy-kitchen 0.2.40, Apache-2.0: `tensor/int8.py`, `int8_utils.py`,
`tensor/nvfp4.py`, `float_utils.py`; NVIDIA cuBLAS's "1D Block Scaling Factors Layout"), in
numpy and float64, independently of the readers under test.

- int8_tensorwise with ConvRot (`int8_convrot` files): a layer's rows are rotated group by
  group (each run of G input columns times the regular Hadamard matrix of size G: the
  Kronecker power of [[1,1,1,-1],[1,1,-1,1],[1,-1,1,1],[-1,1,1,1]], over sqrt(G)), then
  quantized per row (scale = the row's largest magnitude / 127, q = round(value / scale));
  saved as `weight` (I8 [out, in]), `weight_scale` (F32 [out, 1]) and `comfy_quant` (the JSON
  record's bytes: {"format": "int8_tensorwise", "convrot": true, "convrot_groupsize": G}, or
  its settings under "params"). A layer whose width G does not divide is plain per-row int8.
- nvfp4: two E2M1 codes a byte (the first value in the high nibble), one E4M3 scale per 16
  values laid out in cuBLAS's tiles (128 rows x 4 blocks, padded), a per-tensor F32
  `weight_scale_2`; nvfp4_awq adds `pre_quant_scale` (F32, one per input column, what the
  layer's input is multiplied by: folded into the weight's columns).

Each writer returns the values the file holds, dequantized in float64 and rounded to float32
once per product (a code times its block's scale is exact; times the tensor's scale rounds once,
AWQ's column scale once more).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file

H4 = np.array([[1, 1, 1, -1], [1, 1, -1, 1], [1, -1, 1, 1], [-1, 1, 1, 1]], dtype=np.float64)
E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
"""E2M1's eight magnitudes by code (OCP Microscaling Formats v1.0, table 5); bit 3 is the
sign."""


def regular_hadamard(size: int) -> np.ndarray:
    """The normalized regular Hadamard matrix of `size` (a power of 4), float64."""
    matrix = H4
    while matrix.shape[0] < size:
        matrix = np.kron(matrix, H4)
    assert matrix.shape[0] == size, size
    return matrix / np.sqrt(size)


def _record(record: dict) -> torch.Tensor:
    return torch.frombuffer(bytearray(json.dumps(record).encode()), dtype=torch.uint8).clone()


def int8_layer(
    value: torch.Tensor, group: int, *, nested: bool = False
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """One linear weight as an int8_tensorwise layer (ConvRot in groups of `group` when it
    divides the width; 0: never): its tensors by suffix and the values it holds."""
    weight = value.detach().double().numpy()
    rotated = group and weight.shape[1] % group == 0
    if rotated:
        h = regular_hadamard(group)
        groups = weight.reshape(weight.shape[0], -1, group)
        weight = np.einsum("rgi,ji->rgj", groups, h).reshape(weight.shape)  # W_g @ H.T
    amax = np.abs(weight).max(axis=1, keepdims=True)
    scale = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
    q = np.clip(np.round(weight / scale.astype(np.float64)), -128, 127).astype(np.int8)
    held = q.astype(np.float64) * scale.astype(np.float64)
    if rotated:  # H is symmetric and orthogonal: its own inverse
        held = (held.reshape(q.shape[0], -1, group) @ regular_hadamard(group)).reshape(q.shape)
    settings = {"convrot": True, "convrot_groupsize": group} if rotated else {}
    record = {"format": "int8_tensorwise"}
    record |= {"params": settings} if nested and settings else settings
    tensors = {
        "weight": torch.from_numpy(q),
        "weight_scale": torch.from_numpy(scale),
        "comfy_quant": _record(record),
    }
    return tensors, torch.from_numpy(held.astype(np.float32))


def write_int8(
    path: Path,
    original: dict[str, torch.Tensor],
    quantizable,
    prefix: str = "",
    group: int = 256,
) -> dict[str, torch.Tensor]:
    """A file of `original` (file key -> float tensor) whose `quantizable(name, tensor)` linear
    weights are int8_tensorwise layers (`int8_layer`; every other one's record has its settings
    under "params"), the rest bf16; returns the values it holds, by `original`'s keys."""
    tensors: dict[str, torch.Tensor] = {}
    held: dict[str, torch.Tensor] = {}
    count = 0
    for name, value in original.items():
        if quantizable(name, value):
            layer = prefix + name[: -len("weight")]
            parts, held[name] = int8_layer(value, group, nested=count % 2 == 1)
            tensors.update({layer + suffix: t for suffix, t in parts.items()})
            count += 1
        else:
            tensors[prefix + name] = value.detach().to(torch.bfloat16).contiguous()
            held[name] = tensors[prefix + name].float()
    save_file(tensors, str(path))
    return held


def _e2m1_codes(values: np.ndarray) -> np.ndarray:
    """The nearest E2M1 code of each value (in E2M1's range)."""
    magnitudes = np.array(E2M1)
    codes = np.abs(np.abs(values)[..., None] - magnitudes).argmin(axis=-1)
    return (codes | np.where(values < 0, 8, 0)).astype(np.uint8)


def cublas_tiles(scales: np.ndarray) -> np.ndarray:
    """A (rows, blocks) scale matrix in cuBLAS's block-scaling layout: padded to 128 x 4
    tiles, tiles row-major, and inside a tile the scale of (row r, block c) at byte
    (r % 32) * 16 + (r // 32) * 4 + c. Returned as (padded rows, padded blocks)."""
    rows, blocks = scales.shape
    padded_rows, padded_blocks = -(-rows // 128) * 128, -(-blocks // 4) * 4
    full = np.zeros((padded_rows, padded_blocks), dtype=scales.dtype)
    full[:rows, :blocks] = scales
    out = np.zeros(padded_rows * padded_blocks, dtype=scales.dtype)
    tiles_k = padded_blocks // 4
    for r in range(padded_rows):
        for c in range(padded_blocks):
            tile = (r // 128) * tiles_k + c // 4
            inner = (r % 32) * 16 + ((r % 128) // 32) * 4 + c % 4
            out[tile * 512 + inner] = full[r, c]
    return out.reshape(padded_rows, padded_blocks)


def nvfp4_layer(
    value: torch.Tensor, *, awq: bool = False, seed: int = 0
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """One linear weight as an nvfp4 layer (`awq`: with a `pre_quant_scale`): its tensors by
    suffix and the values it holds."""
    weight = value.detach().double().numpy()
    rows, cols = weight.shape
    assert cols % 16 == 0, cols
    pre = None
    if awq:  # the file's weight is W / s per column; the input is multiplied by s
        pre = np.random.default_rng(seed).uniform(0.5, 2.0, cols).astype(np.float32)
        weight = weight / pre.astype(np.float64)
    scale_2 = np.float32(np.abs(weight).max() / (6.0 * 448.0) or 1.0)
    blocks = weight.reshape(rows, cols // 16, 16)
    block_scale = np.abs(blocks).max(axis=-1) / 6.0 / np.float64(scale_2)
    block_fp8 = torch.from_numpy(block_scale.astype(np.float32)).to(torch.float8_e4m3fn)
    block_real = block_fp8.double().numpy()
    total = np.where(block_real > 0, block_real * np.float64(scale_2), 1.0)
    codes = _e2m1_codes(np.clip(blocks / total[..., None], -6, 6)).reshape(rows, cols)
    packed = (codes[:, 0::2] << 4) | codes[:, 1::2]
    magnitudes = np.array(E2M1)[codes & 7] * np.where(codes & 8, -1.0, 1.0)
    held = (magnitudes.reshape(rows, cols // 16, 16) * block_real[..., None]).reshape(rows, cols)
    held = (held * np.float64(scale_2)).astype(np.float32)  # code x block scale is exact
    tiled = cublas_tiles(block_fp8.view(torch.uint8).numpy())
    tensors = {
        "weight": torch.from_numpy(packed.astype(np.uint8)),
        "weight_scale": torch.from_numpy(tiled).view(torch.float8_e4m3fn),
        "weight_scale_2": torch.tensor(scale_2),
        "comfy_quant": _record({"format": "nvfp4"}),
    }
    if pre is not None:
        tensors["pre_quant_scale"] = torch.from_numpy(pre)
        held = (held.astype(np.float64) * pre.astype(np.float64)[None, :]).astype(np.float32)
    return tensors, torch.from_numpy(held.astype(np.float32))


def write_fp4_mixed(
    path: Path, original: dict[str, torch.Tensor], quantizable, prefix: str = ""
) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """A file of `original` whose `quantizable` linear weights take turns as nvfp4,
    nvfp4_awq and fp8 (`float8_e4m3fn` with a per-tensor float32 `weight_scale` and its
    record: ComfyUI's fp4_mixed files), the rest bf16; returns the values it holds and each
    quantized weight's format."""
    tensors: dict[str, torch.Tensor] = {}
    held: dict[str, torch.Tensor] = {}
    formats: dict[str, str] = {}
    turn = ("nvfp4", "nvfp4_awq", "fp8")
    for name, value in original.items():
        layer = prefix + name[: -len("weight")]
        if not quantizable(name, value):
            tensors[prefix + name] = value.detach().to(torch.bfloat16).contiguous()
            held[name] = tensors[prefix + name].float()
            continue
        fmt = formats[name] = turn[len(formats) % 3]
        if fmt == "fp8":
            scale = np.float32(value.abs().max() / 448.0)
            stored = (value.detach().double() / np.float64(scale)).float().to(torch.float8_e4m3fn)
            parts = {
                "weight": stored,
                "weight_scale": torch.tensor(scale),
                "comfy_quant": _record({"format": "float8_e4m3fn"}),
            }
            held[name] = (stored.double() * np.float64(scale)).float()
        else:
            parts, held[name] = nvfp4_layer(value, awq=fmt == "nvfp4_awq", seed=len(formats))
        tensors.update({layer + suffix: t for suffix, t in parts.items()})
    save_file(tensors, str(path))
    return held, formats


LLOYD_MAX_16 = (
    -0.980602, -0.794529, -0.638165, -0.500986, -0.377321, -0.263187, -0.155210, -0.050720,
    0.052541, 0.156985, 0.265284, 0.379533, 0.502636, 0.638953, 0.794876, 0.980671,
)  # fmt: skip
"""The 16-level codebook of comfy-kitchen's W4A8 files (Lloyd-Max levels of a normalized
Gaussian); any sorted 16 levels are valid: the file carries its own."""


def w4a8_layer(
    value: torch.Tensor,
    *,
    convrot: int = 256,
    group_size: int = 16,
    bits: int = 4,
    codebook: bool = True,
    correction: bool = False,
    seed: int = 0,
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """One linear weight as an `asym_w4a8_int8` layer, from the format's definition: rotated
    by ConvRot, each row's scale `s_channel` (largest rotated magnitude / 127), each group's
    E4M3 `s_rel` so its largest level reaches that row's int8 grid, codes the nearest level
    (`codebook`: 16 levels, 4 bits only; else uniform `code - 2^(bits-1)`), packed (even column
    in the low nibble; 6 bits: a plane of the codes' top 2 bits after); `correction`: a
    per-group offset of each row (asymmetric layers). Returns its tensors by suffix and the
    values it holds."""
    weight = value.detach().double().numpy()
    rows, cols = weight.shape
    h = regular_hadamard(convrot)
    rotated = np.einsum("rgi,ji->rgj", weight.reshape(rows, -1, convrot), h).reshape(rows, cols)
    groups = cols // group_size
    rng = np.random.default_rng(seed)
    offsets = rng.normal(0, 0.01, (groups, rows)).astype(np.float32) if correction else None
    target = rotated - (offsets.T.repeat(group_size, axis=1) if correction else 0.0)
    s_channel = (np.abs(target).max(axis=1) / 127.0).astype(np.float32)
    grid = target / s_channel.astype(np.float64)[:, None]  # on the int8 grid, |x| <= 127
    if codebook:
        levels = np.array(LLOYD_MAX_16, dtype=np.float32)
    else:
        levels = (np.arange(2**bits) - 2 ** (bits - 1)).astype(np.float32)
    grouped = grid.reshape(rows, groups, group_size)
    s_rel = np.abs(grouped).max(axis=-1) / np.abs(levels).max()
    s_rel = torch.from_numpy(np.maximum(s_rel, 1e-3).astype(np.float32)).to(torch.float8_e4m3fn)
    s_rel_real = s_rel.float().numpy()
    normalized = grouped / s_rel_real.astype(np.float64)[..., None]
    codes = np.abs(normalized[..., None] - levels.astype(np.float64)).argmin(axis=-1)
    if not codebook:
        codes = np.clip(codes, 1, 2**bits - 1)  # symmetric: the lowest code is never used
    codes = codes.reshape(rows, cols).astype(np.int64)
    step = (levels[codes].reshape(rows, groups, group_size) * s_rel_real[..., None]).astype(
        np.float32
    )  # float32, as the definition multiplies
    held = np.clip(np.round(step), -127, 127).astype(np.float64) * s_channel[:, None, None]
    held = held.astype(np.float32).astype(np.float64)
    if correction:
        held = (held + offsets.T[..., None].astype(np.float64)).astype(np.float32)
    held = held.astype(np.float64).reshape(rows, cols)
    held = (held.reshape(rows, -1, convrot) @ h).reshape(rows, cols)
    low = (codes[:, 0::2] & 0xF) | ((codes[:, 1::2] & 0xF) << 4)
    packed = low
    if bits == 6:
        high = np.zeros((rows, cols // 4), dtype=np.int64)
        for j in range(4):
            high |= ((codes[:, j::4] >> 4) & 0x3) << (2 * j)
        packed = np.concatenate([low, high], axis=1)
    record = {"format": "asym_w4a8_int8", "group_size": group_size, "convrot_groupsize": convrot}
    tensors = {
        "weight": torch.from_numpy(packed.astype(np.uint8).view(np.int8).copy()),
        "weight_s_rel": s_rel,
        "weight_s_channel": torch.from_numpy(s_channel),
        "comfy_quant": _record(record),
    }
    if codebook:
        tensors["weight_codebook"] = torch.from_numpy(levels)
    if correction:
        tensors["weight_correction"] = torch.from_numpy(offsets)
    return tensors, torch.from_numpy(held.astype(np.float32))


def write_w4a8(
    path: Path, original: dict[str, torch.Tensor], quantizable, prefix: str = "", convrot: int = 256
) -> dict[str, torch.Tensor]:
    """A file of `original` whose `quantizable` linear weights are W4A8 layers taking turns
    as 4-bit with a codebook and corrections, uniform 4-bit and uniform 6-bit (`w4a8_layer`),
    the rest bf16; returns the values it holds."""
    layouts = (
        {"bits": 4, "codebook": True, "correction": True},
        {"bits": 4, "codebook": False},
        {"bits": 6, "codebook": False},
    )
    tensors: dict[str, torch.Tensor] = {}
    held: dict[str, torch.Tensor] = {}
    count = 0
    for name, value in original.items():
        if quantizable(name, value):
            layout = layouts[count % 3]
            parts, held[name] = w4a8_layer(value, convrot=convrot, seed=count, **layout)
            layer = prefix + name[: -len("weight")]
            tensors.update({layer + suffix: t for suffix, t in parts.items()})
            count += 1
        else:
            tensors[prefix + name] = value.detach().to(torch.bfloat16).contiguous()
            held[name] = tensors[prefix + name].float()
    save_file(tensors, str(path))
    return held
