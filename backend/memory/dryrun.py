"""Peak memory of a module's forward, found by running it on the meta device.

Every op runs on `meta` tensors (shapes and dtypes, no data, no compute), under a dispatch
mode that counts the bytes of every storage the ops create and drops them when the storage is
freed: the high-water mark is the peak of live activation memory the real run would allocate,
exact up to the allocator's rounding. Attention is the one exception: on `meta`,
`scaled_dot_product_attention` would take the math path and materialise the full score
matrix, which no fused kernel does (flash / memory-efficient on CUDA, the blocked flash
kernel on CPU), so it is replaced by its output alone.

The weights are not counted (they live on `meta` already); the caller adds them.
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


class _LiveBytes(TorchDispatchMode):
    """Counts live storage bytes created by ops; `peak` is the high-water mark."""

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self._sizes: dict[int, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
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


def peak_bytes(run: Callable[[], Any]) -> int:
    """Peak bytes of activations `run()` allocates; `run` works on meta tensors only."""
    tracker = _LiveBytes()
    with torch.no_grad(), _FusedAttention(), tracker:
        result = run()
        del result
    return tracker.peak
