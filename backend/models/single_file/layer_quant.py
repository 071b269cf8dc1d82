"""ComfyUI's per-layer quantization records: what format each quantized layer of a file is in.

ComfyUI saves a JSON record per quantized layer, as the bytes of a uint8 tensor `<layer>.
comfy_quant` (and, in some files, all of them in the header's `_quantization_metadata`:
{"layers": {"<layer>": record}}). A record names the layer's `format` (ComfyUI's
`QUANT_ALGOS` names: `float8_e4m3fn`, `int8_tensorwise`, `nvfp4`, `mxfp8`, ...) and that
format's settings, at the top level or under `params` (int8's `convrot` and
`convrot_groupsize`). Layers without a record are told by their tensors' dtypes (an fp8 file
older than the records, a per-tensor int8 layer).

The records are read once per file (a few hundred bytes each, with plain reads) and kept with
its header's identity (path, size, modification time), as the headers are.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

from .header import FileHeader

RECORD_SUFFIX = "comfy_quant"
METADATA_KEY = "_quantization_metadata"
FP8_FORMATS = ("float8_e4m3fn", "float8_e5m2")
W4A8 = "asym_w4a8_int8"
READ_FORMATS = (*FP8_FORMATS, "mxfp8", "int8_tensorwise", "nvfp4", W4A8)
"""The formats a layer may be in and be read here (each its own reader)."""


@dataclass(frozen=True)
class LayerQuant:
    """One quantized layer's record: its `format`, its ConvRot group (0: none; int8 layers
    with `convrot`, W4A8 layers always, 256 unless given) and W4A8's scale `group_size`."""

    format: str
    convrot_group: int = 0
    group_size: int = 0

    def __post_init__(self) -> None:
        if not self.format:
            raise ValueError("a quantized layer's record names its format")
        if self.convrot_group < 0:
            raise ValueError(f"a ConvRot group is positive, got {self.convrot_group}")

    @classmethod
    def parse(cls, record: dict, where: str) -> LayerQuant:
        """A record as ComfyUI writes it (settings at the top level or under `params`)."""
        if not isinstance(record, dict) or not isinstance(record.get("format"), str):
            raise ValueError(f"{where}: a comfy_quant record is a JSON object with a format")
        params = {**record, **(record.get("params") or {})}
        if record["format"] == W4A8:
            group_size = int(params.get("group_size", 16))
            return cls(W4A8, int(params.get("convrot_groupsize", 256)), group_size)
        group = int(params.get("convrot_groupsize", 256)) if params.get("convrot") else 0
        return cls(record["format"], group)


def layer_records(header: FileHeader) -> dict[str, LayerQuant]:
    """Layer key prefix (as the header names it, with its trailing dot) -> its record."""
    if header.format != "safetensors":
        return {}
    stat = Path(header.path).stat()
    records = _file_records(str(header.path), stat.st_size, stat.st_mtime_ns)
    if not header.prefix:
        return records
    return {k[len(header.prefix) :]: v for k, v in records.items() if k.startswith(header.prefix)}


def record_of(header: FileHeader, weight_key: str) -> LayerQuant | None:
    """The record of weight `weight_key`'s layer, if its file has one."""
    if not weight_key.endswith(".weight"):
        return None
    return layer_records(header).get(weight_key[: -len("weight")])


@functools.lru_cache(maxsize=64)
def _file_records(path: str, _size: int, _mtime_ns: int) -> dict[str, LayerQuant]:
    from .header import read_header

    header = read_header(path)
    records: dict[str, LayerQuant] = {}
    text = header.metadata.get(METADATA_KEY)
    if text:
        try:
            layers = json.loads(text).get("layers", {})
        except (json.JSONDecodeError, AttributeError):
            raise ValueError(f"{header.name}: its {METADATA_KEY} is not a JSON object") from None
        for layer, record in layers.items():
            records[layer + "."] = LayerQuant.parse(record, f"{header.name} {layer}")
    keys = [k for k in header.tensors if k.endswith("." + RECORD_SUFFIX)]
    if not keys:
        return records
    with open(path, "rb") as file:
        for key in keys:
            info = header.tensors[key]
            file.seek(info.offset)
            raw = file.read(info.nbytes)
            try:
                record = json.loads(raw.decode())
            except (UnicodeDecodeError, json.JSONDecodeError):
                raise ValueError(f"{header.name}: {key} is not a JSON record") from None
            records[key[: -len(RECORD_SUFFIX)]] = LayerQuant.parse(record, f"{header.name} {key}")
    return records
