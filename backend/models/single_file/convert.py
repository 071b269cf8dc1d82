"""ComfyUI/Wan and Black Forest Labs key names to diffusers', as row maps (no tensor is read).

A row map says, for every diffusers parameter, which rows of which file tensors make it up
(in order, stacked along dim 0): a rename is one segment, Flux's fused q/k/v is three row
ranges of one tensor, its final modulation is two halves swapped. A rank that holds rows
a..b of a parameter (its FSDP2 shard) reads just those rows from the file.

For Wan the map is diffusers' own converter (`convert_wan_transformer_to_diffusers`) run on
*row traces*: every file tensor is replaced by a 1-D float64 tensor whose values number its
rows, the converter renames/splits them as it would the weights, and the values that come out
say which rows went where. Flux's converter hard-codes the 12B model's width, so the BFL
layout is mapped for any width (the tiny test model's included). Each family's mapping is its
spec's (`FileSpec.dit_row_map`, in `families/<family>/single_file.py`); this module picks it
by the detection's family and maps diffusers' own layout as it is.
"""

from __future__ import annotations

import dataclasses

from .detection import Detection
from .header import FileHeader
from .quant import is_scale_key
from .rows import RowMap, Segment, rows_of
from .spec import FILES
from .vocabulary import Part

__all__ = ["RowMap", "Segment", "dit_part", "dit_row_map", "unused_keys", "weight_keys"]


def weight_keys(header: FileHeader, prefix: str) -> dict[str, tuple[int, ...]]:
    """The file's weight tensors (prefix stripped), without fp8_scaled's scales and marker."""
    # the marker sits under the DiT's prefix in an all-in-one checkpoint
    return {
        key[len(prefix) :]: info.shape
        for key, info in header.tensors.items()
        if key.startswith(prefix) and not is_scale_key(key[len(prefix) :])
    }


def dit_row_map(header: FileHeader, detection: Detection) -> RowMap:
    """Diffusers parameter name -> the file rows that make it (keys keep the file's prefix)."""
    keys = weight_keys(header, detection.prefix)
    if detection.layout == "diffusers":
        mapping = {k: (Segment(k, 0, rows_of(s)),) for k, s in keys.items()}
    else:
        spec = _file_spec(detection)
        if spec is None:
            raise ValueError(f"{header.name}: no key conversion for {detection.describe()}")
        mapping = spec.dit_row_map(keys, detection.config)
    return {
        name: tuple(Segment(detection.prefix + s.key, s.start, s.rows) for s in segments)
        for name, segments in mapping.items()
    }


def dit_part(part: Part) -> Part:
    """`part` with the DiT's tensors in the shapes its family reads them in (`FileSpec.
    dit_shapes`: a flat vector read as rows), so that every row is one of the parameter's."""
    spec = _file_spec(part.detection)
    if spec is None or spec.dit_shapes is None:
        return part
    prefix = part.detection.prefix
    shapes = spec.dit_shapes(weight_keys(part.header, prefix))
    header = part.header.reshaped({prefix + k: s for k, s in shapes.items()})
    return dataclasses.replace(part, header=header)


def _file_spec(detection: Detection):
    """The family spec whose single-file key mapping reads `detection`'s DiT (its
    `file_family`); None when no family maps that layout."""
    for spec in FILES:
        if spec.family == detection.family and spec.dit_row_map is not None:
            return spec
    return None


def unused_keys(header: FileHeader, detection: Detection, row_map: RowMap) -> list[str]:
    """File weights the row map never reads (a sign the architecture was misread)."""
    used = {s.key for segments in row_map.values() for s in segments}
    spec = _file_spec(detection)
    dropped = () if spec is None else spec.dropped_keys
    keys = weight_keys(header, detection.prefix)
    if spec is not None and spec.dit_keys is not None:  # LTX-2: not its connectors
        keys = spec.dit_keys(keys)
    return sorted(
        detection.prefix + k for k in keys if detection.prefix + k not in used and k not in dropped
    )
