"""Rows of a file tensor, as plain floating-point values: upcast, scaled or dequantized.

Formats read: safetensors F32/F16/BF16 (and integers), F8_E4M3/F8_E5M2 (`fp8_e4m3fn` files:
upcast), ComfyUI's `fp8_scaled` in both its layouts (fp8 weights times their layer's scale:
the older `scale_weight` with a `scaled_fp8` marker, and the current one ComfyUI converts that
to and saves: `weight_scale`, with a `comfy_quant` JSON per quantized layer; Lightricks' fp8
checkpoints name it `weight_scale` too; the
`scale_input`/`input_scale` tensors are only for fp8 matrix products and are not needed once
the weight is dequantized), and GGUF tensors of every type the `gguf`
package dequantizes (F32, F16, BF16, Q8_0, Q4_0/1, Q5_0/1, Q2_K..Q6_K, IQ*: the GGUF node
pack's files), ComfyUI's mxfp8 layers (E8M0 block scales), and its `int8_tensorwise` layers
(int8 times one float scale per tensor or per row, un-rotated when the layer's `comfy_quant`
record says `convrot`: `models/int8.py`), its `nvfp4` layers (with AWQ's `pre_quant_scale`:
`models/fp4.py`) and its `asym_w4a8_int8` layers (`models/w4a8.py`), those two described by
their headers as the values they hold (`header.PACKED_FP4`, `header.PACKED_W4A8`). A layer
whose record names a format no reader here reads is refused naming that format
(`layer_quant.READ_FORMATS`).

Each rank dequantizes the rows of its FSDP2 shard to the compute dtype as it reads them
(`read_rows`), except the layers `--weights file`/`fp8`/`int8` keep as the file holds them
(`stored_of`, `read_stored`, `read_scales`: fp8 or int8 rows with their per-row scales, GGUF
blocks as bytes; `models/quantized.py` upcasts them in the forward with the same arithmetic).

Rows are read with plain file reads, never through a memory map (see models/sharded_load.py:
mapped pages count in the rank's resident memory until the file closes).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .. import fp4, int8, w4a8
from ..quantized import FP8_DTYPES, Stored, gguf_upcastable
from .header import PACKED_FP4, PACKED_W4A8, FileHeader, TensorInfo
from .layer_quant import READ_FORMATS, W4A8, LayerQuant, layer_records, record_of

SAFETENSORS_DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "F8_E4M3": torch.float8_e4m3fn,
    "F8_E5M2": torch.float8_e5m2,
    "F8_E8M0": torch.float8_e8m0fnu,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}
FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)
GGUF_PLAIN = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}
SCALED_FP8_MARKER = "scaled_fp8"
WEIGHT_SCALES = ("scale_weight", "weight_scale")
"""A quantized layer's weight scale: the older fp8_scaled name, and ComfyUI's current one
(also Lightricks' fp8 checkpoints' name, `ltx-2-19b-dev-fp8`)."""
W4A8_PARTS = ("s_rel", "s_channel", "correction", "codebook")
"""A W4A8 layer's tensors besides its weight: `weight_<part>`."""
SCALE_SUFFIXES = (
    *(f".{name}" for name in WEIGHT_SCALES),
    ".scale_input",
    ".input_scale",
    ".comfy_quant",
    ".weight_scale_2",
    ".pre_quant_scale",
    *(f".weight_{name}" for name in W4A8_PARTS),
)
"""Tensors that describe a quantized layer's weight, read with it and never as weights."""
NVFP4_SCALES = (".weight_scale_2", ".pre_quant_scale")
"""nvfp4's second-level (per-tensor) scale and AWQ's per-input-column one: only of an nvfp4
weight (`header.PACKED_FP4`)."""
_FLOAT_SCALES = ("F32", "F16", "BF16")
_EXPONENT_SCALES = ("U8", "F8_E8M0")
MX_BLOCK = 32
"""mxfp8: values per block scale (OCP Microscaling Formats (MX) Specification v1.0, 5.1)."""


def _roundup(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def is_mxfp8(weight: TensorInfo, scale: TensorInfo) -> bool:
    """An mxfp8 layer as ComfyUI saves one: E4M3 values, one E8M0 exponent per 32 values of a
    row, the exponents in cuBLAS's block-scaling layout (tiles of 128 rows x 4 blocks, padded
    to whole tiles: `unswizzle_blocks`)."""
    if weight.dtype != "F8_E4M3" or len(weight.shape) != 2 or scale.dtype not in _EXPONENT_SCALES:
        return False
    rows, cols = weight.shape
    padded = _roundup(rows, 128) * _roundup(cols // MX_BLOCK, 4)
    return cols % MX_BLOCK == 0 and scale.numel == padded


def unswizzle_blocks(blocked: torch.Tensor, rows: int, blocks: int) -> torch.Tensor:
    """Block scales in cuBLAS's 1D block-scaling-factor layout -> (rows, blocks), row-major.
    The layout (NVIDIA cuBLAS documentation, "1D Block Scaling Factors Layout"): the
    (rows x blocks) matrix padded to whole 128 x 4 tiles, tiles stored row by row, and inside
    a tile the scale of (row r, block c) at byte (r % 32) * 16 + (r // 32) * 4 + c."""
    tiles_m, tiles_k = _roundup(rows, 128) // 128, _roundup(blocks, 4) // 4
    tiles = blocked.reshape(tiles_m, tiles_k, 32, 4, 4)  # tile, tile, r % 32, r // 32, c
    full = tiles.permute(0, 3, 2, 1, 4).reshape(tiles_m * 128, tiles_k * 4)
    return full[:rows, :blocks]


def e8m0_values(exponents: torch.Tensor) -> torch.Tensor:
    """E8M0 scales as float32: 2^(e - 127), 255 is NaN (OCP MX Specification v1.0, 5.4.1)."""
    values = torch.exp2(exponents.to(torch.float32) - 127.0)
    return torch.where(exponents == 255, torch.full_like(values, float("nan")), values)


def _layer_scale(header: FileHeader, key: str) -> TensorInfo | None:
    """The weight scale tensor of weight `key`'s layer, if it has one."""
    if not key.endswith(".weight"):
        return None
    layer = key[: -len("weight")]
    return next(
        (header.tensors[layer + n] for n in WEIGHT_SCALES if layer + n in header.tensors), None
    )


def is_scale_key(key: str) -> bool:
    """A fp8_scaled scale, `comfy_quant` description or marker (under any key prefix)."""
    return (
        key == SCALED_FP8_MARKER
        or key.endswith("." + SCALED_FP8_MARKER)
        or key.endswith(SCALE_SUFFIXES)
    )


def is_quantized_weight(header: FileHeader, key: str) -> bool:
    """An integer tensor that is a quantized layer's weight (it has a weight scale), not data
    such as a tokenizer's bytes."""
    return _layer_scale(header, key) is not None


def is_fp8_scaled(header: FileHeader) -> bool:
    """ComfyUI's fp8_scaled: the `scaled_fp8` marker, or per-layer weight scales."""
    return any(is_scale_key(k) for k in header.tensors)


def quantization(header: FileHeader) -> str:
    """A one-word summary of a file's weight format: bf16, fp8_e4m3fn, fp8_scaled, Q8_0..."""
    counts: dict[str, int] = {}
    for info in header.tensors.values():
        counts[info.dtype] = counts.get(info.dtype, 0) + info.numel
    if not counts:
        return "empty"
    main = max(counts, key=counts.__getitem__)
    quantized = {k: v for k, v in counts.items() if k not in ("F32", "F16", "BF16")}
    if header.format == "gguf" and quantized:
        return max(quantized, key=quantized.__getitem__)
    layers = _layer_formats(header) if header.format == "safetensors" else {}
    if layers:  # by the layers' weights: one format, or the mix largest first
        names = sorted(layers, key=layers.__getitem__, reverse=True)
        return names[0] if len(names) == 1 else "mixed:" + "+".join(names)
    if header.format == "safetensors" and main.startswith("F8"):
        return "fp8_scaled" if is_fp8_scaled(header) else "fp8_e4m3fn"
    return main.lower() if header.format == "safetensors" else main


LAYER_FORMAT_NAMES = {
    "float8_e4m3fn": "fp8_scaled",
    "float8_e5m2": "fp8_scaled",
    "asym_w4a8_int8": "w4a8",
}
"""`paradit models`' name of a layer format where it differs from ComfyUI's record's."""


def layer_format(header: FileHeader, key: str) -> str | None:
    """The quantized format of weight `key`'s layer as `paradit models` names it (int8,
    int8_convrot, nvfp4, nvfp4_awq, fp8_scaled, mxfp8, w4a8), None for a float weight or one
    of a file without per-layer formats (fp8 without records, GGUF: `quantization`)."""
    record = record_of(header, key)
    info = header.tensors.get(key)
    if info is not None and info.dtype == PACKED_W4A8:
        return "w4a8"
    if info is not None and info.dtype == PACKED_FP4:
        awq = key[: -len("weight")] + "pre_quant_scale" in header.tensors
        return "nvfp4_awq" if awq else "nvfp4"
    if record is None:
        return "int8" if info is not None and is_int8_weight(header, key) else None
    if record.format == "int8_tensorwise":
        return "int8_convrot" if record.convrot_group else "int8"
    return LAYER_FORMAT_NAMES.get(record.format, record.format)


def is_int8_weight(header: FileHeader, key: str) -> bool:
    info = header.tensors[key]
    rows = info.shape[0] if info.shape else 1
    return info.dtype == "I8" and _int8_scale(_layer_scale(header, key), rows)


def _layer_formats(header: FileHeader) -> dict[str, int]:
    """Values held in each layer format (`layer_format`) of a file that has any."""
    counts: dict[str, int] = {}
    for key, info in header.tensors.items():
        name = layer_format(header, key) if key.endswith(".weight") else None
        if name is not None:
            counts[name] = counts.get(name, 0) + info.numel
    if "int8_convrot" in counts and "int8" in counts:  # narrow layers are never rotated
        counts["int8_convrot"] += counts.pop("int8")
    return counts


def is_quantized(header: FileHeader) -> bool:
    """The file holds fp8, int8 or GGUF-quantized tensors (what `--weights auto` keeps as they
    are)."""
    if header.format == "safetensors":
        return any(
            info.dtype.startswith("F8") or (info.dtype == "I8" and _layer_scale(header, key))
            for key, info in header.tensors.items()
        )
    plain = ("F32", "F16", "BF16", "F64")
    return any(info.dtype not in plain for info in header.tensors.values())


def stored_of(header: FileHeader, key: str) -> Stored | None:
    """How file tensor `key` can stay in memory as its file holds it: fp8 rows (with their
    layer's scales), or GGUF blocks of a type with a torch dequantizer; None: read as floats."""
    info = header.tensors[key]
    if header.format == "safetensors":
        dtype = FP8_DTYPES.get(info.dtype)
        scale = _layer_scale(header, key)
        rows = info.shape[0] if info.shape else 1
        if info.dtype == "I8" and len(info.shape) == 2 and _int8_scale(scale, rows):
            return Stored("int8", torch.int8, group=int8_group(header, key))
        if scale is not None and (scale.dtype not in _FLOAT_SCALES or scale.numel not in (1, rows)):
            return None  # mxfp8's block scales: dequantized at load
        return None if dtype is None or len(info.shape) != 2 else Stored("fp8", dtype)
    if info.dtype in GGUF_PLAIN or len(info.shape) != 2 or not gguf_upcastable(info.dtype):
        return None
    return Stored("gguf", qtype=info.dtype)


def int8_group(header: FileHeader, key: str) -> int:
    """ConvRot's group size of int8 weight `key` (0: not rotated)."""
    record = record_of(header, key)
    return record.convrot_group if record is not None else 0


def _int8_scale(scale: TensorInfo | None, rows: int) -> bool:
    """An int8 layer's scale: float, one per tensor or one per row."""
    return scale is not None and scale.dtype in _FLOAT_SCALES and scale.numel in (1, rows)


def check_readable(header: FileHeader) -> None:
    """ValueError naming the file and tensor if any tensor has a type we cannot read, or a
    layer's record a format we do not read."""
    for layer, record in layer_records(header).items():
        _check_record(header, layer, record)
    for key, info in header.tensors.items():
        if header.format == "safetensors":
            if info.dtype not in (*SAFETENSORS_DTYPES, PACKED_FP4, PACKED_W4A8):
                raise ValueError(
                    f"{header.name}: tensor {key} has dtype {info.dtype}, which is not read "
                    f"(readable: {', '.join(SAFETENSORS_DTYPES)})"
                )
            _check_scale(header, key, info)
            record = record_of(header, key) if info.dtype == PACKED_W4A8 else None
            if info.dtype == PACKED_W4A8 and (record is None or record.format != W4A8):
                raise ValueError(
                    f"{header.name}: {key} holds packed 4- or 6-bit codes (I8 with a "
                    f"weight_s_rel) but its layer has no {W4A8} comfy_quant record telling "
                    "their group size: not read"
                )
        else:
            _gguf_type(header, key, info)


def _check_record(header: FileHeader, layer: str, record: LayerQuant) -> None:
    """A layer's record must name a format read here, and an int8 layer's weight and scale
    must be what that format holds."""
    if record.format not in READ_FORMATS:
        raise ValueError(
            f"{header.name}: layer {layer.rstrip('.')} is quantized as {record.format}, which "
            f"is not read (read: {', '.join(READ_FORMATS)}): use the file in bf16, fp16 or fp8"
        )
    weight = header.tensors.get(layer + "weight")
    if record.format == "nvfp4" and (weight is None or weight.dtype != PACKED_FP4):
        raise ValueError(
            f"{header.name}: layer {layer.rstrip('.')} is nvfp4 but has no U8 weight of two "
            "E2M1 values a byte with a weight_scale_2: not read"
        )
    if record.format == W4A8:
        _check_w4a8(header, layer, record, weight)
    if record.format != "int8_tensorwise":
        return
    if weight is None or weight.dtype != "I8" or len(weight.shape) != 2:
        found = "none" if weight is None else f"{weight.dtype} {list(weight.shape)}"
        raise ValueError(
            f"{header.name}: layer {layer.rstrip('.')} is int8_tensorwise but its weight is "
            f"{found}, not a 2-dim I8 tensor"
        )
    if not _int8_scale(_layer_scale(header, layer + "weight"), weight.shape[0]):
        raise ValueError(
            f"{header.name}: int8 layer {layer.rstrip('.')} needs a float weight_scale, one "
            "per tensor or one per row"
        )
    group = record.convrot_group
    if group and (not int8.is_power_of_4(group) or weight.shape[1] % group):
        raise ValueError(
            f"{header.name}: int8 layer {layer.rstrip('.')} is ConvRot-rotated in groups of "
            f"{group}, which must be a power of 4 dividing its {weight.shape[1]} input columns"
        )


def _check_w4a8(
    header: FileHeader, layer: str, record: LayerQuant, weight: TensorInfo | None
) -> None:
    """A W4A8 layer: packed codes whose width and `s_rel` give the record's group size, its
    ConvRot group dividing the width, and its other tensors in their shapes."""
    name = layer.rstrip(".")
    tensors = header.tensors
    if weight is None or weight.dtype != PACKED_W4A8 or layer + "weight_s_channel" not in tensors:
        raise ValueError(
            f"{header.name}: layer {name} is {W4A8} but has no I8 weight of packed 4- or 6-bit "
            "codes with its weight_s_rel and weight_s_channel: not read"
        )
    rows, width = weight.shape
    groups = tensors[layer + "weight_s_rel"].shape[1]
    shapes = {
        "s_rel": (rows, width // record.group_size),
        "s_channel": (rows,),
        "correction": (width // record.group_size, rows),
        "codebook": (16,),
    }
    wrong = [
        part
        for part, shape in shapes.items()
        if layer + f"weight_{part}" in tensors
        and tensors[layer + f"weight_{part}"].numel != math.prod(shape)
    ]
    group = record.convrot_group
    if (
        width != groups * record.group_size
        or wrong
        or not int8.is_power_of_4(group)
        or width % group
    ):
        raise ValueError(
            f"{header.name}: {W4A8} layer {name} (packed {weight.nbytes // max(rows, 1)} bytes "
            f"a row, {groups} scale groups) does not fit its record (group_size "
            f"{record.group_size}, convrot_groupsize {group})"
            + (f": {', '.join(wrong)} of the wrong size" if wrong else "")
            + ": not read"
        )


def _check_scale(header: FileHeader, key: str, info: TensorInfo) -> None:
    """A weight scale of a quantized weight must scale an fp8 one, one value per tensor or per
    row: ComfyUI's other quantized layers (int8, nvfp4, block-scaled mxfp8) would read as wrong
    values."""
    for name in NVFP4_SCALES:
        if key.endswith(name):
            _check_nvfp4_scale(header, key, info, header.tensors.get(key[: -len(name)] + ".weight"))
    for name in WEIGHT_SCALES:
        if not key.endswith("." + name):
            continue
        weight = header.tensors.get(key[: -len(name)] + "weight")
        if weight is None or weight.dtype in _FLOAT_SCALES:
            continue  # a float weight is read as it is (as before: the scale is for fp8 only)
        if weight.dtype == PACKED_FP4:
            _check_nvfp4_scale(header, key, info, weight)
            continue
        rows = weight.shape[0] if weight.shape else 1
        if weight.dtype == "I8" and _int8_scale(info, rows):
            continue  # int8 tensorwise: int8 values times one float scale per tensor or row
        if is_mxfp8(weight, info):
            continue  # mxfp8: E8M0 block scales in cuBLAS's layout
        if weight.dtype in ("F8_E4M3", "F8_E5M2") and info.dtype in _EXPONENT_SCALES:
            raise ValueError(
                f"{header.name}: {key} ({info.dtype}, shape {list(info.shape)}) holds E8M0 "
                f"exponents for a {weight.dtype} weight of shape {list(weight.shape)}, but not "
                "one per 32 values of a row in cuBLAS's block-scaling layout (padded to tiles "
                "of 128 rows x 4 blocks) as ComfyUI's mxfp8 layers have them: not read"
            )
        if (
            weight.dtype not in ("F8_E4M3", "F8_E5M2")
            or info.dtype not in _FLOAT_SCALES
            or info.numel not in (1, rows)
        ):
            raise ValueError(
                f"{header.name}: {key} ({info.dtype}, shape {list(info.shape)}) scales a "
                f"{weight.dtype} weight of shape {list(weight.shape)}: only fp8 and int8 weights "
                "with one float scale per tensor or per row are read (ComfyUI's fp8_scaled, "
                "int8 tensorwise), with mxfp8's block exponents: other block-scaled layers are "
                "not: use the file in bf16, fp16 or fp8"
            )


def _check_nvfp4_scale(
    header: FileHeader, key: str, info: TensorInfo, weight: TensorInfo | None
) -> None:
    """nvfp4's scales: E4M3 block scales, one per 16 values of a row in cuBLAS's layout
    (padded to tiles of 128 rows x 4 blocks); one float `weight_scale_2`; AWQ's float
    `pre_quant_scale`, one per input column."""
    if weight is None or weight.dtype != PACKED_FP4:
        raise ValueError(
            f"{header.name}: {key} is an nvfp4 scale (a second-level or AWQ scale of 4-bit "
            "E2M1 weights) but its layer's weight is not two 4-bit values a byte (U8): not read"
        )
    rows, cols = weight.shape
    if key.endswith(".weight_scale_2"):
        good = info.dtype in _FLOAT_SCALES and info.numel == 1
    elif key.endswith(".pre_quant_scale"):
        good = info.dtype in _FLOAT_SCALES and info.numel == cols
    else:
        padded = _roundup(rows, 128) * _roundup(cols // fp4.BLOCK, 4)
        good = info.dtype == "F8_E4M3" and cols % fp4.BLOCK == 0 and info.numel == padded
    if not good:
        raise ValueError(
            f"{header.name}: {key} ({info.dtype}, shape {list(info.shape)}) does not fit an "
            f"nvfp4 weight of {rows} x {cols} values: its block scales are E4M3, one per 16 "
            "values of a row in cuBLAS's layout (padded to tiles of 128 rows x 4 blocks), "
            "weight_scale_2 one float, pre_quant_scale one float per input column"
        )


def _gguf_type(header: FileHeader, key: str, info: TensorInfo):
    import gguf
    from gguf import quants

    qtype = gguf.GGMLQuantizationType[info.dtype]
    if info.dtype not in GGUF_PLAIN and qtype not in quants._type_traits:  # noqa: SLF001
        raise ValueError(
            f"{header.name}: tensor {key} is quantized as {info.dtype}, which the gguf package "
            "cannot dequantize"
        )
    return qtype


class RowReader:
    """Reads row blocks of one file's tensors, dequantized, into caller-given tensors."""

    def __init__(self, header: FileHeader):
        self.header = header
        self._file = open(header.path, "rb")  # noqa: SIM115 - closed by `close`
        self._scales: dict[str, torch.Tensor] = {}

    def close(self) -> None:
        self._file.close()

    def read_rows(self, key: str, start: int, out: torch.Tensor) -> int:
        """Fill `out` (rows start..start+len(out) of tensor `key`, converted to out's dtype);
        returns the bytes read."""
        info = self.header.tensors[key]
        rows = out.shape[0] if out.dim() else 1
        row_items = math.prod(info.shape[1:]) if info.shape else 1
        if out.numel() != rows * row_items:
            raise ValueError(
                f"{self.header.name}: {key} has shape {list(info.shape)}; "
                f"the model expects rows of {out.numel() // max(rows, 1)} values"
            )
        if self.header.format == "gguf":
            values, read = self._gguf_rows(key, info, start * row_items, rows * row_items)
        elif info.dtype == PACKED_FP4:
            values, read = self._nvfp4_rows(key, info, start, rows)
        elif info.dtype == PACKED_W4A8:
            values, read = self._w4a8_rows(key, info, start, rows)
        else:
            values, read = self._safetensors_rows(key, info, start, rows, row_items)
        with torch.no_grad():
            out.copy_(values.reshape(out.shape))
        return read

    def read_stored(self, key: str, start: int, out: torch.Tensor) -> int:
        """Fill `out` with rows start..start+len(out) of tensor `key` as the file holds them
        (fp8 values, or GGUF blocks as bytes: `stored_of`); returns the bytes read."""
        info = self.header.tensors[key]
        rows = out.shape[0]
        row_items = math.prod(info.shape[1:])
        stored = stored_of(self.header, key)
        if stored is None or not stored.holds(row_items):
            raise ValueError(f"{self.header.name}: {key} ({info.dtype}) is not stored quantized")
        row_bytes = stored.row_bytes(row_items)
        if out.numel() * out.element_size() != rows * row_bytes:
            raise ValueError(
                f"{self.header.name}: {key} has rows of {row_bytes} bytes; the layer holds "
                f"{out.numel() * out.element_size() // max(rows, 1)}"
            )
        target = out if out.is_contiguous() and out.is_cpu else torch.empty_like(out, device="cpu")
        raw = target.view(-1).view(torch.uint8).numpy()
        self._file.seek(info.offset + start * row_bytes)
        if rows and self._file.readinto(raw) != rows * row_bytes:
            raise ValueError(f"{self.header.name} is truncated (a read ran past its end)")
        if target is not out:
            out.copy_(target)
        return rows * row_bytes

    def read_scales(self, key: str, start: int, out: torch.Tensor) -> int:
        """Fill `out` (float32, one value a row) with the scales of rows start..start+len(out)
        of fp8 weight `key`: its layer's per-row scales, a per-tensor scale on every row, or 1
        when the layer has none (plain fp8_e4m3fn); returns the bytes read."""
        scale = self._scale(key)
        rows = out.shape[0]
        if scale is None:
            out.fill_(1.0)
        else:
            out.copy_(_scale_rows(scale, start, rows).expand(rows, 1).reshape(rows))
        return 0 if scale is None else scale.numel() * 4

    def _read(self, offset: int, nbytes: int) -> np.ndarray:
        raw = np.empty(nbytes, dtype=np.uint8)
        self._file.seek(offset)
        if nbytes and self._file.readinto(raw) != nbytes:
            raise ValueError(f"{self.header.name} is truncated (a read ran past its end)")
        return raw

    def _safetensors_rows(
        self, key: str, info: TensorInfo, start: int, rows: int, row_items: int
    ) -> tuple[torch.Tensor, int]:
        dtype = SAFETENSORS_DTYPES[info.dtype]
        item = torch.empty((), dtype=dtype).element_size()
        nbytes = rows * row_items * item
        raw = self._read(info.offset + start * row_items * item, nbytes)
        values = torch.from_numpy(raw).view(dtype)
        scale = self._scale(key) if dtype in (*FP8, torch.int8) else None
        if dtype == torch.int8 and scale is not None:  # int8 tensorwise, maybe rotated
            group = int8_group(self.header, key)
            return int8.dequantize(
                values.view(rows, row_items), _scale_rows(scale, start, rows), group
            ), nbytes
        if dtype in FP8 or scale is not None:  # fp8, or int8 tensorwise: times its scale
            values = values.to(torch.float32)
            if scale is not None and scale.dim() == 2:  # mxfp8: a scale per block of 32
                blocks = scale[start : start + rows, :, None]
                values = (values.view(rows, -1, MX_BLOCK) * blocks).reshape(rows, row_items)
            elif scale is not None:
                values = values.view(rows, row_items) * _scale_rows(scale, start, rows)
        return values, nbytes

    def _nvfp4_rows(
        self, key: str, info: TensorInfo, start: int, rows: int
    ) -> tuple[torch.Tensor, int]:
        """Rows start..start+rows of nvfp4 weight `key`, dequantized (`models/fp4.py`)."""
        width = info.shape[1]
        raw = self._read(info.offset + start * width // 2, rows * width // 2)
        layer = key[: -len("weight")]
        blocks, tensor_scale, pre = self._nvfp4_scales(layer, info.shape)
        values = fp4.dequantize(
            torch.from_numpy(raw).view(rows, width // 2),
            blocks[start : start + rows],
            tensor_scale,
            pre,
        )
        return values, raw.nbytes

    def _w4a8_rows(
        self, key: str, info: TensorInfo, start: int, rows: int
    ) -> tuple[torch.Tensor, int]:
        """Rows start..start+rows of W4A8 weight `key`, dequantized (`models/w4a8.py`)."""
        row_bytes = info.nbytes // info.shape[0]
        raw = self._read(info.offset + start * row_bytes, rows * row_bytes)
        record = record_of(self.header, key)
        if record is None or record.format != W4A8:
            raise ValueError(f"{self.header.name}: {key} is packed W4A8 but has no such record")
        parts = {
            part: self._float(key + "_" + part)
            for part in W4A8_PARTS
            if key + "_" + part in self.header.tensors
        }
        correction = parts.get("correction")
        values = w4a8.dequantize(
            torch.from_numpy(raw).view(rows, row_bytes),
            parts["s_rel"].view(info.shape[0], -1)[start : start + rows],
            parts["s_channel"].reshape(-1)[start : start + rows],
            group_size=record.group_size,
            convrot_group=record.convrot_group,
            codebook=parts.get("codebook"),
            correction=None
            if correction is None
            else correction.view(-1, info.shape[0])[:, start : start + rows],
        )
        return values, raw.nbytes

    def _nvfp4_scales(
        self, layer: str, shape: tuple[int, ...]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """nvfp4 layer `layer`'s block scales (rows, blocks) row-major, tensor scale and AWQ
        scale (None: not AWQ), float32, read once."""
        if layer not in self._scales:
            rows, cols = shape
            tiled = self._float(layer + "weight_scale")
            self._scales[layer] = unswizzle_blocks(tiled, rows, cols // fp4.BLOCK)
            self._scales[layer + "weight_scale_2"] = self._float(layer + "weight_scale_2")
            if layer + "pre_quant_scale" in self.header.tensors:
                self._scales[layer + "pre_quant_scale"] = self._float(layer + "pre_quant_scale")
        pre = self._scales.get(layer + "pre_quant_scale")
        return self._scales[layer], self._scales[layer + "weight_scale_2"], pre

    def _float(self, key: str) -> torch.Tensor:
        """A (small) float tensor of the file, whole, as float32, read once."""
        if key not in self._scales:
            info = self.header.tensors[key]
            raw = torch.from_numpy(self._read(info.offset, info.nbytes))
            self._scales[key] = raw.view(SAFETENSORS_DTYPES[info.dtype]).to(torch.float32)
        return self._scales[key]

    def _scale(self, key: str) -> torch.Tensor | None:
        """fp8_scaled: the layer's `scale_weight` or `weight_scale` (float32), read once."""
        if not key.endswith(".weight"):
            return None
        layer = key[: -len("weight")]
        scale_key = next(
            (layer + n for n in WEIGHT_SCALES if layer + n in self.header.tensors), None
        )
        if scale_key is None:
            return None
        if scale_key not in self._scales:
            info = self.header.tensors[scale_key]
            raw = self._read(info.offset, info.nbytes)
            if info.dtype in _EXPONENT_SCALES:  # mxfp8: (rows, blocks) of 2^(e - 127)
                rows, cols = self.header.tensors[key].shape
                exponents = unswizzle_blocks(torch.from_numpy(raw), rows, cols // MX_BLOCK)
                self._scales[scale_key] = e8m0_values(exponents)
            else:
                dtype = SAFETENSORS_DTYPES[info.dtype]
                self._scales[scale_key] = torch.from_numpy(raw).view(dtype).to(torch.float32)
        return self._scales[scale_key]

    def _gguf_rows(
        self, key: str, info: TensorInfo, first: int, count: int
    ) -> tuple[torch.Tensor, int]:
        """Elements first..first+count of a GGUF tensor (row-major), dequantized."""
        import gguf
        from gguf import quants

        qtype = _gguf_type(self.header, key, info)
        block, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
        begin, end = first // block, -(-(first + count) // block)
        raw = self._read(info.offset + begin * block_bytes, (end - begin) * block_bytes)
        if info.dtype in GGUF_PLAIN:
            values = torch.from_numpy(raw).view(GGUF_PLAIN[info.dtype])
        else:
            dequantized = quants.dequantize(raw.reshape(end - begin, block_bytes), qtype)
            values = torch.from_numpy(np.ascontiguousarray(dequantized, dtype=np.float32))
        skip = first - begin * block
        return values.reshape(-1)[skip : skip + count], raw.nbytes


def _scale_rows(scale: torch.Tensor, start: int, rows: int) -> torch.Tensor:
    """A per-tensor scale as is; a per-row (per output channel) scale cut to the rows read."""
    if scale.numel() == 1:
        return scale.reshape(1, 1)
    return scale.reshape(-1)[start : start + rows].reshape(rows, 1)
