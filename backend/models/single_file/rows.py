"""Row maps: which rows of which file tensors make each diffusers parameter (no tensor is
read), and the row traces that read one off a diffusers state-dict converter. The families'
key mappings (`families/<family>/single_file.py`) build them; `convert.py` picks the
family's."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

_ROW_BITS = 32


@dataclass(frozen=True)
class Segment:
    """Rows start..start+rows of file tensor `key`."""

    key: str
    start: int
    rows: int

    def __post_init__(self) -> None:
        if self.start < 0 or self.rows < 0:
            raise ValueError(f"segment rows must be >= 0, got {self.start}+{self.rows}")


RowMap = dict[str, tuple[Segment, ...]]


def rows_of(shape: tuple[int, ...]) -> int:
    """The rows of a tensor of `shape` (a scalar is one)."""
    return shape[0] if shape else 1


def trace_converter(converter, keys: Mapping[str, tuple[int, ...]]) -> RowMap:
    """Run a diffusers state-dict converter on row traces of `keys` and read off its row map."""
    names = sorted(keys)
    traces = {
        name: torch.arange(rows_of(keys[name]), dtype=torch.float64) + (i << _ROW_BITS)
        for i, name in enumerate(names)
    }
    converted = converter(dict(traces))
    mapping: RowMap = {}
    for new_name, trace in converted.items():
        mapping[new_name] = _segments(trace, names)
    return mapping


def _segments(values: torch.Tensor, names: list[str]) -> tuple[Segment, ...]:
    """Runs of consecutive rows of one tensor in a trace (vectorised: a 14B DiT has millions
    of rows)."""
    values = values.reshape(-1).to(torch.int64)
    if not values.numel():
        return ()
    breaks = torch.nonzero(values[1:] - values[:-1] != 1).reshape(-1) + 1
    starts = [0, *breaks.tolist()]
    ends = [*breaks.tolist(), values.numel()]
    mask = (1 << _ROW_BITS) - 1
    segments = []
    for begin, end in zip(starts, ends, strict=True):
        first = int(values[begin])
        segments.append(Segment(names[first >> _ROW_BITS], first & mask, end - begin))
    return tuple(segments)
