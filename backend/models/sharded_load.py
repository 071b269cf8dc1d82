"""One host copy at load: each rank reads only its FSDP2 shard of a DiT from safetensors.

Without this every rank loads the whole DiT and then shards it, so N ranks hold N copies at
start-up (4 ranks of Wan 2.2 A14B: ~230 GB of host RAM). Here the DiT is built on the meta
device (`empty_dit`), sharded with `fully_shard` like any other (`parallelize`), given memory
for its shards only, and each rank copies its rows of every weight out of the memory-mapped
safetensors files (`fill_shards`). No rank ever holds more than its shards, and no weight goes
over the network. FSDP2 shards dim 0 of every parameter, so a shard is a contiguous block of
rows, and a contiguous run of bytes in the file: it is read with plain file reads straight into
the shard's memory. (safetensors' own `get_slice` reads through a memory map, and every page it
touches then counts in the rank's resident memory until the file is closed: a second copy of
the rank's share of the model at the worst moment.) The file format is the documented one: an
8-byte header length, a JSON header (dtype, shape, byte offsets per tensor), then the data.

Buffers that are not in the checkpoint (e.g. rotary tables computed in `__init__`) are built
for real: only parameters are on the meta device. Buffers that are in it (CogVideoX 1.0 I2V's
learned positions) are read whole on every rank (FSDP2 shards no buffers).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Protocol

import torch
from torch.distributed.tensor import DTensor
from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

from .casting import cast_model
from .quantized import QuantLinear, logical_parameters, quant_linears, quantize_rows
from .single_file.header import read_header
from .single_file.quant import SAFETENSORS_DTYPES as DTYPES

log = logging.getLogger(__name__)

INDEX_SUFFIX = ".safetensors.index.json"


def empty_dit(folder: str | Path, component: str, dtype: torch.dtype) -> torch.nn.Module:
    """The pipeline's `component` DiT from its config, parameters on the meta device."""
    path = Path(folder) / component
    return empty_from_config(json.loads((path / "config.json").read_text()), dtype)


def empty_from_config(config: dict[str, Any], dtype: torch.dtype) -> torch.nn.Module:
    """A diffusers model from its config (with `_class_name`), parameters on meta."""
    import diffusers
    from accelerate import init_empty_weights

    model_class = getattr(diffusers, config["_class_name"])
    with init_empty_weights(include_buffers=False):
        model = model_class.from_config(config)
    return cast_model(model, dtype).eval()


def checkpoint_files(folder: str | Path) -> dict[str, Path]:
    """Which safetensors file holds each weight of a diffusers model folder. Every file's
    header is checked against its size and its data (`read_header`) here, on every rank,
    before any rank reads: a truncated shard fails the load on all ranks alike, not only on
    the ranks whose rows lie past its end."""
    folder = Path(folder)
    indexes = sorted(folder.glob(f"*{INDEX_SUFFIX}"))
    if indexes:
        weight_map = json.loads(indexes[0].read_text())["weight_map"]
        files = {name: folder / file for name, file in weight_map.items()}
        for file in sorted(set(files.values())):
            read_header(file)
        return files
    files = {}
    for file in sorted(folder.glob("*.safetensors")):
        files.update(dict.fromkeys(read_header(file).tensors, file))
    if not files:
        raise ValueError(f"no safetensors weights in {folder}")
    return files


class SafetensorsFile:
    """Row blocks of the tensors in one safetensors file, read without a memory map."""

    def __init__(self, path: Path):
        self.path = path
        self.header = read_header(path)
        self._file = open(path, "rb")  # noqa: SIM115 - closed by `close`

    def read_rows(self, name: str, start: int, out: torch.Tensor) -> int:
        """Fill `out` with rows start..start+len(out) of tensor `name`; bytes read."""
        info = self.header.tensors[name]
        dtype = DTYPES.get(info.dtype)
        if dtype is None:
            raise ValueError(f"{self.path.name}: {name} has unsupported dtype {info.dtype}")
        row_items = 1
        for size in info.shape[1:]:
            row_items *= size
        rows = out.shape[0] if out.dim() else 1
        item = torch.empty((), dtype=dtype).element_size()
        offset = info.offset + start * row_items * item
        target = out if out.dtype == dtype and out.is_contiguous() and out.is_cpu else None
        block = target if target is not None else torch.empty(out.shape, dtype=dtype)
        raw = block.view(-1).view(torch.uint8).numpy() if block.numel() else None
        if raw is not None:
            self._file.seek(offset)
            if self._file.readinto(raw) != rows * row_items * item:
                raise ValueError(f"{self.path.name}: {name} is truncated")
        if target is None:
            out.copy_(block)
        return rows * row_items * item

    def close(self) -> None:
        self._file.close()


def shard_rows(param: torch.Tensor) -> tuple[int, int, torch.Tensor]:
    """(first row, row count, local tensor) of this rank's part of `param`."""
    if not isinstance(param, DTensor):
        return 0, param.shape[0] if param.dim() else 0, param
    local_shape, offset = compute_local_shape_and_global_offset(
        param.shape, param.device_mesh, param.placements
    )
    rows = local_shape[0] if local_shape else 0
    return offset[0] if offset else 0, rows, param.to_local()


class WeightSource(Protocol):
    """Where `fill_shards` reads weights: rows of a named parameter into a given tensor."""

    def names(self) -> set[str]: ...

    def read_rows(self, name: str, start: int, out: torch.Tensor) -> int: ...

    def close(self) -> None: ...


class FolderWeights:
    """The safetensors files of a diffusers model folder (one component's)."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self.files = checkpoint_files(folder)
        self._readers: dict[Path, SafetensorsFile] = {}

    def names(self) -> set[str]:
        return set(self.files)

    def read_rows(self, name: str, start: int, out: torch.Tensor) -> int:
        file = self.files[name]
        if file not in self._readers:
            self._readers[file] = SafetensorsFile(file)
        return self._readers[file].read_rows(name, start, out)

    def close(self) -> None:
        for reader in self._readers.values():
            reader.close()
        self._readers.clear()


def fill_quantized(layer: QuantLinear, name: str, weights: WeightSource) -> int:
    """This rank's rows of a stored-quantized linear's weight (and its scales): read as the
    file holds them, or read as floats in the compute dtype and quantized per row (`--weights
    fp8`: each row's scale depends on that row alone, so every world size stores the same
    bytes). Only the rank's rows are ever in host memory. Returns the bytes read."""
    start, rows, local = shard_rows(layer.weight)
    if not rows:
        return 0
    scale = shard_rows(layer.weight_scale)[2] if layer.weight_scale is not None else None
    if layer.stored.quantize:  # fp8 or int8 (`quantize_rows` by the stored dtype)
        values = torch.empty((rows, layer.in_features), dtype=layer.compute_dtype)
        read = weights.read_rows(f"{name}.weight", start, values)
        quantized, scales = quantize_rows(values, layer.stored.dtype)
        local.copy_(quantized)
        scale.copy_(scales)
        return read
    read = weights.read_stored(f"{name}.weight", start, local)
    if scale is not None:
        read += weights.read_scales(f"{name}.weight", start, scale)
    return read


def fill_shards(
    model: torch.nn.Module, source: str | Path | WeightSource, device: torch.device
) -> int:
    """Give the sharded meta model memory on `device` and read this rank's rows of every
    weight from `source` (a model folder, or e.g. a single-file checkpoint's
    `models.single_file.DitWeights`). Returns the bytes read."""
    weights = FolderWeights(source) if isinstance(source, (str, Path)) else source
    buffers = {name: buf.detach().clone() for name, buf in model.named_buffers()}
    model.to_empty(device=device)
    with torch.no_grad():
        for name, buf in model.named_buffers():
            buf.copy_(buffers[name])
    names = weights.names()
    missing = [name for name, _ in logical_parameters(model) if name not in names]
    if missing:
        raise ValueError(f"{source} has no weights for {missing[:5]} ({len(missing)} in all)")
    layers = quant_linears(model)
    done = {f"{name}.{kind}" for name in layers for kind in ("weight", "weight_scale")}
    read = 0
    try:
        with torch.no_grad():
            for name, layer in layers.items():
                read += fill_quantized(layer, name, weights)
            for name, param in model.named_parameters():
                if name in done:
                    continue
                start, _, local = shard_rows(param)
                if local.numel():
                    read += weights.read_rows(name, start, local)
            for name, buf in model.named_buffers():
                if name in names and buf.numel():  # a saved (persistent) buffer: all of it
                    read += weights.read_rows(name, 0, buf)
    finally:
        weights.close()
    log.info("read %.1f MiB of %s (this rank's shards)", read / 2**20, source)
    return read
