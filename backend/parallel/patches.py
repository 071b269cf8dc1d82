"""Two fixes to diffusers' context parallelism ("anything" modes), installed when needed.

1. Any head count. diffusers 0.42 pads the heads up to a multiple of the Ulysses degree but
puts all padding on the last rank and asserts it holds fewer padding heads than real ones.
That refuses common cases: Wan 1.3B's 12 heads on 8 ranks, 40 heads on 16, or 4 heads on 3.
The fix keeps the padding (zero heads, appended at the end of the head dimension) through the
attention instead of stripping it on one rank: attention over an all-zero query/key/value
head yields zeros, the real heads see exactly what they would see unpadded, and the padding is
dropped after the reverse all-to-all. Only three helpers change; the all-to-alls stay
diffusers' own.

2. Uneven sequence shards on gloo. `ulysses_anything` splits 175 tokens over 3 ranks as
59/58/58 and gathers them back with an uneven `all_gather`, which NCCL accepts and gloo
refuses. On gloo we pad every shard to the largest, gather, and cut the padding off again.

Both replace module functions of diffusers (looked up at call time), once per process, and
only when a plan needs them; the names they touch are checked against
`diffusers_internals.INTERNALS` then, not at import. Remove them when diffusers handles these
cases itself.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable

import torch
import torch.distributed as dist
import torch.nn.functional as F

from ..diffusers_internals import INTERNALS, require

log = logging.getLogger(__name__)


def _head_padding(num_heads: int, group: dist.ProcessGroup) -> int:
    world = dist.get_world_size(group=group)
    return (-num_heads) % world


def _pad_qkv_heads(x: torch.Tensor, num_heads: int, group: dist.ProcessGroup):
    """(B, S_LOCAL, H, D) -> (B, S_LOCAL, H + pad, D); the padding heads are zeros."""
    pad = _head_padding(num_heads, group)
    if pad:
        x = F.pad(x, (0, 0, 0, pad)).contiguous()
    return x, pad


def _keep_qkv_heads(x: torch.Tensor, _pad: int, _group: dist.ProcessGroup) -> torch.Tensor:
    """Keep the zero heads: every rank then attends over H_LOCAL heads, padding included."""
    return x.contiguous()


def _output_head_padding(x: torch.Tensor, num_heads: int | None, group: dist.ProcessGroup):
    """The output already carries its padding heads; just report how many there are."""
    return x, 0 if num_heads is None else _head_padding(num_heads, group)


def _installed(key: str, ours: Callable) -> bool:
    try:
        return INTERNALS[key].lookup() is ours
    except (ImportError, AttributeError):
        return False


def _replace(feature: str, replacements: dict[str, Callable], *also_needs: str) -> bool:
    """Swap diffusers functions (keys of INTERNALS) for ours; False if ours are already in."""
    if all(_installed(key, ours) for key, ours in replacements.items()):
        return False
    originals = require(feature, *replacements, *also_needs)
    for key, original in zip(replacements, originals, strict=False):
        if getattr(original, "__module__", None) != INTERNALS[key].module:
            raise RuntimeError(f"diffusers' {key} was already replaced by someone else")
    for key, ours in replacements.items():
        target = INTERNALS[key]
        setattr(importlib.import_module(target.module), target.name, ours)
    return True


def install_any_head_count() -> None:
    """Let diffusers' Ulysses-anything attention run with any head count (idempotent)."""
    replacements = {
        "attention_dispatch._maybe_pad_qkv_head": _pad_qkv_heads,
        "attention_dispatch._maybe_unpad_qkv_head": _keep_qkv_heads,
        "attention_dispatch._maybe_pad_o_head": _output_head_padding,
    }
    if _replace("Ulysses patch", replacements, "attention_dispatch._maybe_unpad_o_head"):
        log.info("Ulysses: zero-head padding kept through attention (any head count)")


def needs_any_head_count(num_heads: int, degree: int) -> bool:
    """True when diffusers' own padding would refuse `num_heads` on `degree` ranks."""
    pad = (-num_heads) % degree
    return pad > 0 and pad >= (num_heads + pad) // degree


def _all_gather_padded(tensor: torch.Tensor, dim: int, group: dist.ProcessGroup) -> torch.Tensor:
    """Gather shards of different lengths along `dim` with equal-sized (gloo-safe) messages."""
    tensor = tensor.contiguous()
    gather_sizes = INTERNALS["attention_dispatch.gather_size_by_comm"].lookup()  # checked
    sizes = gather_sizes(tensor.shape[dim], group)
    longest = max(sizes)
    if tensor.shape[dim] < longest:
        pad_shape = list(tensor.shape)
        pad_shape[dim] = longest - tensor.shape[dim]
        tensor = torch.cat([tensor, tensor.new_zeros(pad_shape)], dim=dim)
    parts = [torch.empty_like(tensor) for _ in sizes]
    dist.all_gather(parts, tensor, group=group)
    return torch.cat(
        [part.narrow(dim, 0, size) for part, size in zip(parts, sizes, strict=True)], dim=dim
    )


def install_uneven_gather() -> None:
    """Make diffusers' uneven sequence gather work on gloo (idempotent)."""
    replacements = {"context_parallel._all_gather_anything": _all_gather_padded}
    if _replace("uneven-gather patch", replacements, "attention_dispatch.gather_size_by_comm"):
        log.info("context parallel: uneven shards gathered with padding (gloo)")
