"""What a checkpoint file holds, read from its header alone: names, dtypes, shapes, offsets.

Two formats: safetensors (an 8-byte little-endian header length, a JSON header, then the data)
and GGUF (read with the `gguf` package, whose reader maps the file without reading tensor
data). Nothing here reads a weight, so a 14B checkpoint is described in milliseconds, and a
header can be tested without any weights behind it (`read_header(..., check_size=False)`).
A file too short for the offsets its header names is refused here: truncated downloads are
the commonest bad file. So is a safetensors header that does not describe its data (a
tensor's byte range shorter or longer than its dtype and shape need, ranges that overlap or
leave gaps), as the safetensors library refuses it: such a tensor would be read from its
neighbour's bytes.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SAFETENSORS_SUFFIXES = (".safetensors", ".sft")
GGUF_SUFFIX = ".gguf"
GGUF_ORIG_SHAPE = "comfy.gguf.orig_shape."
"""ComfyUI-GGUF's metadata key prefix for tensors stored with a different (<= 4-dim) shape."""
_MAX_HEADER = 100 * 2**20  # safetensors' own limit on the JSON header
HEADERS_KEPT = 64
"""Headers a process keeps (a model is at most a dozen files; a folder listing more)."""
SAFETENSORS_BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32, "I64": 64, "U64": 64, "F64": 64, "C64": 64,
    "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "NVFP4": 4, "W4A8": 4,
}  # fmt: skip
"""Bits per element of each safetensors dtype (the format's own table; and `PACKED_FP4`)."""
PACKED_FP4 = "NVFP4"
"""The dtype a header gives a ComfyUI nvfp4 weight: the file says U8 [out, in/2] (two E2M1
values a byte, its layer has a `weight_scale_2`); the header describes the values it holds,
[out, in] at 4 bits each (`models/fp4.py` reads them), so that shapes read as the model's."""
PACKED_W4A8 = "W4A8"
"""Likewise a ComfyUI W4A8 weight (`models/w4a8.py`): the file says I8 [out, in * bits / 8]
with a `weight_s_rel` [out, groups] beside it; described as [out, in], `in` the reading (4 or
6 bits) whose group size is one W4A8 takes, the layer's `comfy_quant` record's `group_size`
deciding when both are (`quant.check_readable` checks every layer against its record)."""


@dataclass(frozen=True)
class TensorInfo:
    """One tensor as its file stores it."""

    dtype: str
    """safetensors dtype ("BF16", "F8_E4M3", ...) or GGUF type name ("Q8_0", "F16", ...)."""
    shape: tuple[int, ...]
    """The logical shape (GGUF: numpy order, ComfyUI-GGUF's original shape where it gave one)."""
    offset: int
    """Absolute byte offset of the data in the file."""
    nbytes: int

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class FileHeader:
    """A checkpoint's tensors and metadata, without their data."""

    path: Path
    format: str
    """"safetensors" or "gguf"."""
    tensors: dict[str, TensorInfo]
    metadata: dict[str, Any] = field(default_factory=dict)
    prefix: str = ""
    """The key prefix this header is a view of (`view`): "" for a whole file, e.g.
    "text_encoders.t5xxl.transformer." for the T5 inside an all-in-one checkpoint."""

    def __post_init__(self) -> None:
        if self.format not in ("safetensors", "gguf"):
            raise ValueError(f"format must be safetensors or gguf, got {self.format!r}")

    def view(self, prefix: str) -> FileHeader:
        """The tensors under `prefix`, keys without it (offsets unchanged: the same file is
        read): one part of an all-in-one checkpoint, read as if it were a file of its own."""
        if not prefix:
            raise ValueError("a view needs a non-empty key prefix")
        tensors = {k[len(prefix) :]: v for k, v in self.tensors.items() if k.startswith(prefix)}
        return FileHeader(self.path, self.format, tensors, self.metadata, self.prefix + prefix)

    def reshaped(self, shapes: Mapping[str, tuple[int, ...]]) -> FileHeader:
        """The same tensors with those of `shapes` read in another shape of as many elements
        (the same bytes: a flat vector read as rows); ValueError naming the tensor otherwise."""
        tensors = dict(self.tensors)
        for key, shape in shapes.items():
            info = tensors[key]
            if math.prod(shape) != info.numel:
                raise ValueError(
                    f"{self.name}: {key} of shape {list(info.shape)} cannot be read as "
                    f"{list(shape)}"
                )
            tensors[key] = TensorInfo(info.dtype, tuple(shape), info.offset, info.nbytes)
        return FileHeader(self.path, self.format, tensors, self.metadata, self.prefix)

    @property
    def name(self) -> str:
        return self.path.name

    def shape(self, key: str) -> tuple[int, ...] | None:
        info = self.tensors.get(key)
        return None if info is None else info.shape


def read_header(path: str | Path, *, check_size: bool = True) -> FileHeader:
    """The header of a .safetensors or .gguf file; ValueError naming the file when it is not
    one, or is shorter than its header says (`check_size=False`: headers written alone).

    Read once per process: a file whose size and modification time are unchanged gives the
    same `FileHeader` again (detection, checks and loading each ask for it)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    stat = path.stat()
    return _read_header(path.absolute(), stat.st_size, stat.st_mtime_ns, check_size)


@functools.lru_cache(maxsize=HEADERS_KEPT)
def _read_header(path: Path, _size: int, _mtime_ns: int, check_size: bool) -> FileHeader:
    """`read_header`'s reading, kept per (file, size, modification time)."""
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic == b"GGUF":
        return _gguf_header(path, check_size)
    if path.suffix.lower() == GGUF_SUFFIX:
        raise ValueError(f"{path.name}: not a GGUF file (it does not start with 'GGUF')")
    return _safetensors_header(path, check_size)


def _safetensors_header(path: Path, check_size: bool) -> FileHeader:
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        length = int.from_bytes(head, "little") if len(head) == 8 else -1
        if 0 < length <= _MAX_HEADER and length > size - 8 and f.read(1) == b"{":
            raise ValueError(
                f"{path.name} is truncated: its JSON header alone takes {length} bytes, the "
                f"file has {size} (an interrupted download?)"
            )
        if not 0 < length <= min(_MAX_HEADER, size - 8):
            raise ValueError(
                f"{path.name}: not a safetensors file (expected an 8-byte header length and a "
                f"JSON header; the file has {size} bytes)"
            )
        try:
            raw = json.loads(f.read(length))
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ValueError(
                f"{path.name}: not a safetensors file (its header is not JSON)"
            ) from None
    if not isinstance(raw, dict):
        raise ValueError(f"{path.name}: not a safetensors file (its header is not a table)")
    data_start = 8 + length
    metadata = raw.pop("__metadata__", None) or {}
    tensors: dict[str, TensorInfo] = {}
    end = 0
    for name, entry in raw.items():
        try:
            begin, stop = (int(x) for x in entry["data_offsets"])
            tensors[name] = TensorInfo(
                str(entry["dtype"]),
                tuple(int(s) for s in entry["shape"]),
                data_start + begin,
                stop - begin,
            )
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{path.name}: malformed safetensors header entry {name!r}") from None
        if not 0 <= begin <= stop or any(s < 0 for s in tensors[name].shape):
            raise ValueError(f"{path.name}: malformed safetensors header entry {name!r}")
        end = max(end, data_start + stop)
    _check_layout(path, tensors, data_start)
    _describe_packed(path, tensors)
    if check_size and end > size:
        raise ValueError(
            f"{path.name} is truncated: its header names {end} bytes of data, the file has "
            f"{size} (an interrupted download?)"
        )
    return FileHeader(path, "safetensors", tensors, dict(metadata))


def _describe_packed(path: Path, tensors: dict[str, TensorInfo]) -> None:
    """nvfp4 and W4A8 weights (`PACKED_FP4`, `PACKED_W4A8`) described by the values they hold,
    in place."""
    for key, info in tensors.items():
        layer = key[: -len("weight")]
        if (
            key.endswith(".weight")
            and info.dtype == "U8"
            and len(info.shape) == 2
            and layer + "weight_scale_2" in tensors
        ):
            rows, packed = info.shape
            tensors[key] = TensorInfo(PACKED_FP4, (rows, packed * 2), info.offset, info.nbytes)
        rel = tensors.get(key + "_s_rel")
        if info.dtype == "I8" and len(info.shape) == 2 and rel is not None and len(rel.shape) == 2:
            rows, packed = info.shape
            groups = max(rel.shape[1], 1)
            widths = [w for w in (packed * 2, packed * 8 // 6) if _w4a8_group(w, groups)]
            if len(widths) > 1:  # both 4 and 6 bits fit: the record's group size tells
                size = _record_group_size(path, tensors.get(key[: -len("weight")] + "comfy_quant"))
                widths = [w for w in widths if w == groups * size] or widths
            width = widths[0] if widths else packed * 2
            tensors[key] = TensorInfo(PACKED_W4A8, (rows, width), info.offset, info.nbytes)


def _record_group_size(path: Path, record: TensorInfo | None) -> int:
    """A W4A8 layer's `group_size` from its `comfy_quant` record (16 when it says none)."""
    if record is None or record.nbytes > 4096:
        return 16
    with open(path, "rb") as f:
        f.seek(record.offset)
        try:
            fields = json.loads(f.read(record.nbytes).decode())
        except (UnicodeDecodeError, json.JSONDecodeError):
            return 16  # refused by layer_quant, which reads every record
    if not isinstance(fields, dict):
        return 16
    params = {**fields, **(fields.get("params") or {})}
    try:
        return int(params.get("group_size", 16))
    except (TypeError, ValueError):
        return 16


def _w4a8_group(width: int, groups: int) -> bool:
    """Whether `width` columns in `groups` groups make a W4A8 group size (>= 4, dividing 16 or
    a multiple of it)."""
    size = width // groups
    return width % groups == 0 and size >= 4 and (16 % size == 0 or size % 16 == 0)


def _check_layout(path: Path, tensors: dict[str, TensorInfo], data_start: int) -> None:
    """Each tensor's byte range holds exactly its dtype and shape, and the ranges follow one
    another from the start of the data without overlap or gap (the safetensors library's
    rules): otherwise a tensor would be read from another's bytes."""
    for name, info in tensors.items():
        bits = SAFETENSORS_BITS.get(info.dtype)
        if bits is not None and info.numel * bits != 8 * info.nbytes:
            raise ValueError(
                f"{path.name}: tensor {name!r} ({info.dtype}, shape {list(info.shape)}) needs "
                f"{info.numel * bits / 8:g} bytes but its data_offsets give {info.nbytes}: "
                "the header does not match the data (the safetensors library refuses it too)"
            )
    expected = data_start
    for name, info in sorted(tensors.items(), key=lambda item: (item[1].offset, item[1].nbytes)):
        if info.offset != expected:
            raise ValueError(
                f"{path.name}: tensor {name!r}'s data starts at byte {info.offset - data_start} "
                f"of the data, where the tensors before it end at {expected - data_start}: "
                "overlapping or missing bytes (the safetensors library refuses it too)"
            )
        expected = info.offset + info.nbytes


def _gguf_header(path: Path, check_size: bool) -> FileHeader:
    try:
        import gguf
    except ImportError:  # a declared dependency; say so rather than a bare ImportError
        raise ValueError(f"{path.name}: reading GGUF files needs the `gguf` package") from None
    try:
        reader = gguf.GGUFReader(path, "r")
    except (ValueError, IndexError, OSError) as exc:
        size = path.stat().st_size
        raise ValueError(
            f"{path.name}: unreadable GGUF file of {size} bytes (truncated or damaged: {exc})"
        ) from None
    metadata: dict[str, Any] = {}
    for key, fld in reader.fields.items():
        if key.startswith(GGUF_ORIG_SHAPE) or key in ("general.architecture",):
            metadata[key] = fld.contents()
    tensors: dict[str, TensorInfo] = {}
    size = path.stat().st_size
    for t in reader.tensors:
        shape = tuple(int(s) for s in reversed(t.shape.tolist()))
        orig = metadata.get(GGUF_ORIG_SHAPE + t.name)
        if orig:
            shape = tuple(int(s) for s in orig)
        info = TensorInfo(t.tensor_type.name, shape, int(t.data_offset), int(t.n_bytes))
        if check_size and info.offset + info.nbytes > size:
            raise ValueError(f"{path.name} is truncated: tensor {t.name} runs past the end")
        tensors[t.name] = info
    return FileHeader(path, "gguf", tensors, metadata)
