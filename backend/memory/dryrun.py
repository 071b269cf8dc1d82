"""Peak memory of a module's forward, found by running it on the meta device.

Every op runs on `meta` tensors (shapes and dtypes, no data, no compute), under a dispatch
mode that counts the bytes of every storage the ops create and drops them when the storage is
freed: the high-water mark is the peak of live activation memory the real run would allocate,
exact up to the allocator's rounding. Attention is the one exception: on `meta`,
`scaled_dot_product_attention` would take the math path and materialise the full score
matrix, which no fused kernel does (flash / memory-efficient on CUDA, the blocked flash
kernel on CPU), so it is replaced by its output alone.

The weights are not counted (they live on `meta` already); the caller adds them.

Most of a dry run's time is torch's meta functions, which are Python (about a millisecond an
op in torch 2.13) and run again for every tile, frame and block of the same shapes. As
torch's FakeTensor dispatch cache does, the output's metadata of an op that makes new tensors
(no view, no in-place) is kept by its inputs' metadata: an op seen before allocates its
outputs directly (`torch.empty_strided`, C++). The bytes counted are the same: a cached output
has the shape, strides, dtype and storage size the meta function gave.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

_Output = tuple[tuple[int, ...], tuple[int, ...], torch.dtype]
"""A new tensor an op returned: (shape, strides, dtype); its storage starts at 0."""
_OUTPUTS: dict[tuple, tuple[type, tuple[_Output, ...]] | None] = {}
"""What the ops of dry runs returned, by op and inputs' metadata: the container (a tensor, a
tuple or a list) and each new tensor's metadata, or None: call the op. A bounded memo of a pure
function of metadata (`_MAX_OUTPUTS`), shared by the dry runs of a process."""
_MAX_OUTPUTS = 50_000
_ALWAYS_CALLED = frozenset({torch.ops.aten._unsafe_view.default})
"""Ops whose output shares its input's storage though the schema does not say so."""


def _signature(value: Any) -> Any:
    """A hashable stand-in for an op's argument, a tensor by its metadata (a new output does
    not depend on where its inputs start in their storage); TypeError when there is none."""
    if isinstance(value, torch.Tensor):
        return (value.device.type, value.dtype, tuple(value.shape), value.stride())
    if isinstance(value, (list, tuple)):
        return (type(value), tuple(_signature(v) for v in value))
    hash(value)
    return (type(value), value)


def _makes_new_tensors(func: Any) -> bool:
    """An op whose outputs are new tensors: no view, nothing mutated, no shape that depends
    on the data (its meta function is a function of the inputs' metadata alone)."""
    schema = func._schema
    if func in _ALWAYS_CALLED or schema.is_mutable:
        return False
    if any(r.alias_info is not None for r in schema.returns):
        return False
    tags = set(func.tags)
    return not tags & {torch.Tag.data_dependent_output, torch.Tag.dynamic_output_shape}


def _remade(out: Any, args: tuple, kwargs: dict) -> tuple[type, tuple[_Output, ...]] | None:
    """`out` as `_OUTPUTS` keeps it, when it is meta tensors in storages of their own (no
    input's) that `torch.empty_strided` remakes byte for byte; None otherwise."""
    inputs = {
        t.untyped_storage()._cdata
        for t in tree_flatten((args, kwargs))[0]
        if isinstance(t, torch.Tensor)
    }
    kind = type(out) if isinstance(out, (tuple, list)) else torch.Tensor
    found = []
    for tensor in out if kind is not torch.Tensor else (out,):
        if type(tensor) is not torch.Tensor or tensor.device.type != "meta":
            return None
        storage = tensor.untyped_storage()
        if tensor.storage_offset() != 0 or storage._cdata in inputs:
            return None
        shape, stride = tuple(tensor.shape), tensor.stride()
        made = torch.empty_strided(shape, stride, dtype=tensor.dtype, device="meta")
        if made.untyped_storage().nbytes() != storage.nbytes():
            return None
        found.append((shape, stride, tensor.dtype))
    return kind, tuple(found)


def _run(func: Any, args: tuple, kwargs: dict) -> Any:
    """`func(*args, **kwargs)` on meta tensors; an op run before on inputs of the same
    metadata makes its outputs from `_OUTPUTS` instead of calling its meta function."""
    try:
        key = (func, torch.get_default_dtype(), _signature(args), _signature([*kwargs.items()]))
    except TypeError:  # an argument that is no key
        return func(*args, **kwargs)
    known = _OUTPUTS.get(key, False)
    if known is False:
        out = func(*args, **kwargs)
        if len(_OUTPUTS) >= _MAX_OUTPUTS:
            _OUTPUTS.clear()
        _OUTPUTS[key] = _remade(out, args, kwargs) if _makes_new_tensors(func) else None
        return out
    if known is None:
        return func(*args, **kwargs)
    kind, outputs = known
    made = [torch.empty_strided(s, st, dtype=d, device="meta") for s, st, d in outputs]
    return made[0] if kind is torch.Tensor else kind(made)


class _LiveBytes(TorchDispatchMode):
    """Counts live storage bytes created by ops; `peak` is the high-water mark."""

    def __init__(self, reuse: bool = True) -> None:
        super().__init__()
        self.reuse = reuse
        self.live = 0
        self.peak = 0
        self._sizes: dict[int, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = _run(func, args, kwargs) if self.reuse else func(*args, **kwargs)
        returns = func._schema.returns
        outputs = out if isinstance(out, (tuple, list)) and len(returns) > 1 else (out,)
        for result, schema in zip(outputs, returns, strict=False):
            if schema.alias_info is not None:  # a view or an in-place result: nothing new
                continue
            for tensor in tree_flatten(result)[0]:
                if isinstance(tensor, torch.Tensor):
                    self._track(tensor.untyped_storage())
        return out

    def _track(self, storage: torch.UntypedStorage) -> None:
        key = id(storage)
        if key in self._sizes:
            return
        size = storage.nbytes()
        self._sizes[key] = size
        self.live += size
        self.peak = max(self.peak, self.live)
        weakref.finalize(storage, self._free, key)

    def _free(self, key: int) -> None:
        self.live -= self._sizes.pop(key, 0)


class _FusedAttention(TorchFunctionMode):
    """`scaled_dot_product_attention` as a fused kernel allocates it: the output only."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.scaled_dot_product_attention:
            query = args[0] if args else kwargs["query"]
            value = args[2] if len(args) > 2 else kwargs["value"]
            return query.new_empty((*query.shape[:-1], value.shape[-1]))
        return func(*args, **kwargs)


def peak_bytes(run: Callable[[], Any], *, reuse: bool = True) -> int:
    """Peak bytes of activations `run()` allocates; `run` works on meta tensors only.
    `reuse`: ops seen before make their outputs from `_OUTPUTS` (False: every op's meta
    function runs; the same bytes, slower)."""
    tracker = _LiveBytes(reuse)
    with torch.no_grad(), _FusedAttention(), tracker:
        result = run()
        del result
    return tracker.peak
