"""TEST-ONLY: deliberately broken parallel plans, to prove the equivalence measure can fail.

`paradit verify` and tests/parallel/test_equivalence.py judge a parallel run by its distance
from world size 1. A measure that never says `different` proves nothing, so this module breaks
a plan on purpose when the environment variable PARADIT_BREAK_PLAN names a kind:

  cfg-swap         the CFG halves swap branches: the conditional prediction comes back as
                   the unconditional one and vice versa (needs CFG parallel and guidance).
  drop-shard       when the sequence is gathered, the last rank's shard is replaced by zeros
                   (needs sequence parallel: Ulysses or ring).
  dup-shard        when the sequence is gathered, rank 1's shard is replaced by rank 0's.
  text-other-rank  ranks other than 0 condition on other text: their copy of the broadcast
                   text (and image) embeddings is rolled by one along the feature dimension.
  cache-alone      the last rank takes its step-cache skip decisions from its own shard's
                   metric instead of the replica's (the check after each decision must stop
                   the job on every rank).

It is applied from outside the normal code paths, by one call at the end of loading
(`break_plan_from_env`), which does nothing when the variable is unset. A backend started with
it logs a loud warning and computes wrong results: never set it outside tests.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

import torch

log = logging.getLogger(__name__)

ENV = "PARADIT_BREAK_PLAN"


def break_plan_from_env(runtime: Any) -> str | None:
    """Break `runtime`'s plan as PARADIT_BREAK_PLAN says; returns the kind (None if unset).

    ValueError for an unknown kind, so a typo fails the start-up instead of testing nothing.
    """
    kind = os.environ.get(ENV, "").strip()
    if not kind:
        return None
    breaker = BREAKERS.get(kind)
    if breaker is None:
        raise ValueError(f"{ENV}={kind!r} is not a known kind; use one of {sorted(BREAKERS)}")
    log.warning(
        "%s=%s: rank %d DELIBERATELY COMPUTES WRONG RESULTS (a test-only switch; unset it)",
        ENV,
        kind,
        runtime.group.rank,
    )
    if not breaker(runtime):
        log.warning("%s=%s has no effect on the plan %s", ENV, kind, runtime.plan.to_dict())
    return kind


def _cfg_swap(runtime: Any) -> bool:
    """Each CFG half computes the other half's branch; the gather then returns them swapped."""
    for wrapper in runtime.parallel.cfg:
        wrapper.cfg_rank = 1 - wrapper.cfg_rank
    return bool(runtime.parallel.cfg)


def _shard_bounds(length: int, world: int) -> list[tuple[int, int]]:
    """(start, size) of each rank's shard: `tensor_split`'s division, as diffusers shards."""
    base, extra = divmod(length, world)
    bounds, start = [], 0
    for rank in range(world):
        size = base + (1 if rank < extra else 0)
        bounds.append((start, size))
        start += size
    return bounds


def _broken_gather(kind: str, gather: Callable) -> Callable:
    def gather_broken(tensor: torch.Tensor, dim: int, group: Any) -> torch.Tensor:
        full = gather(tensor, dim, group)
        world = torch.distributed.get_world_size(group=group)
        bounds = _shard_bounds(full.shape[dim], world)
        full = full.clone()
        if kind == "drop-shard":
            start, size = bounds[-1]
            full.narrow(dim, start, size).zero_()
        else:  # dup-shard: rank 0's tokens where rank 1's should be
            (first, first_size), (second, second_size) = bounds[0], bounds[1]
            size = min(first_size, second_size)
            full.narrow(dim, second, size).copy_(full.narrow(dim, first, size))
        return full

    return gather_broken


def _shard_breaker(kind: str) -> Callable[[Any], bool]:
    def apply(runtime: Any) -> bool:
        if runtime.plan.sequence_degree == 1:
            return False
        from diffusers.hooks import context_parallel

        # Wraps whatever gathers the sequence now (diffusers' own, or our gloo-safe one).
        context_parallel._all_gather_anything = _broken_gather(
            kind, context_parallel._all_gather_anything
        )
        return True

    return apply


def _text_other_rank(runtime: Any) -> bool:
    if runtime.group.rank == 0:
        return runtime.group.world_size > 1
    share = runtime.rank_model.share

    def share_other_text(*args: Any, **kwargs: Any) -> dict[str, torch.Tensor]:
        tensors = share(*args, **kwargs)
        return {
            name: t.roll(1, dims=-1) if t.is_floating_point() else t for name, t in tensors.items()
        }

    runtime.rank_model.share = share_other_text
    return True


def _cache_alone(runtime: Any) -> bool:
    """The replica's last rank takes its step-cache decisions from its own shard alone."""
    runtime.rank_model.cache_alone = runtime.group.rank == runtime.group.world_size - 1
    return runtime.group.replica_size > 1


BREAKERS: dict[str, Callable[[Any], bool]] = {
    "cache-alone": _cache_alone,
    "cfg-swap": _cfg_swap,
    "drop-shard": _shard_breaker("drop-shard"),
    "dup-shard": _shard_breaker("dup-shard"),
    "text-other-rank": _text_other_rank,
}
