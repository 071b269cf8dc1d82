"""Both CFG branches as one batch of 2 on ranks that compute both (one weight gather a step).

On a sharded plan without a CFG split (Ulysses or ring over the whole replica) every rank
computes both branches of a guided job. diffusers pipelines call the transformer twice a step
(conditional, then unconditional), and FSDP2 gathers every block's weights in each call: each
block was gathered twice a step. `PairedBranches` wraps the transformer's forward as
`CfgParallel` does: the first (conditional) call records its inputs and returns a placeholder
shaped like its input; the second runs both as one batch (conditional rows first), fills the
placeholder with the conditional rows and returns the unconditional ones. Each block is then
gathered once a step, and its matmuls see twice the rows. The root's own weights (embeddings,
norms, projections: FSDP2 gathers them around every call of the transformer, the recording
one included) stay gathered from the first call to the end of the second: once a step too.

The two calls are batched when they differ only in their batch rows: the same keyword names,
every tensor whose first dimension is the batch (hidden_states') of the same shape and dtype
in both (concatenated along it), and its masks (arguments named `*mask*`) equal as well, so
that both rows keep the same tokens; every other argument equal in both (passed once: Flux's
`txt_ids`, the attention kwargs). Otherwise (positional arguments, prompts of different
lengths: Qwen-Image's text is not padded, HunyuanVideo 1.5's is padded with masks that
differ) the second call runs the two branches one after the other, as world size 1 does, and
`record()` says why (job.json's `cfg_branches`).
World size 1 and CFG-parallel plans never use this: their branches run as diffusers runs them.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from .cfg import StepPair, _first
from .fsdp import keep_root_gathered

log = logging.getLogger(__name__)

BATCHED, SEPARATE = "batched", "separate"


class PairedBranches(StepPair):
    """Both branches of a step as one batch of 2 on this rank."""

    def __init__(self, transformer: torch.nn.Module):
        self._calls = {BATCHED: 0, SEPARATE: 0}
        self._why: str | None = None
        super().__init__(transformer)

    def begin_job(self, active: bool) -> None:
        super().begin_job(active)
        self._calls = {BATCHED: 0, SEPARATE: 0}
        self._why = None

    def record(self) -> dict[str, Any] | None:
        """The job's steps so far: how many ran both branches as one batch, how many one
        after the other and why (None when the job's branches were never paired)."""
        if not self.active:
            return None
        return {
            "batched_steps": self._calls[BATCHED],
            "separate_steps": self._calls[SEPARATE],
            **({"why_separate": self._why} if self._why else {}),
        }

    def forward(self, *args: Any, **kwargs: Any):
        if not self.active:
            return self._forward(*args, **kwargs)
        if args:  # every wrapped pipeline calls with keywords; anything else runs as it comes
            self._separate("the transformer was called with positional arguments")
            return self._forward(*args, **kwargs)
        if self._pending is None:
            # shaped like the input: see CfgParallel (edit pipelines cut views out of it)
            placeholder = torch.empty_like(kwargs["hidden_states"])
            self._pending = (kwargs, placeholder)
            keep_root_gathered(self._root, True)  # until the end of the next call
            return self._wrap(placeholder, kwargs)
        cond, placeholder = self._pending
        self._pending = None
        keep_root_gathered(self._root, False)  # this call's post-forward reshards it
        both, why = batch_of_two(cond, kwargs)
        if both is None:
            self._separate(why)
            cond_out = _first(self._forward(**cond))
            uncond_out = _first(self._forward(**kwargs))
        else:
            self._calls[BATCHED] += 1
            out = _first(self._forward(**both))
            rows = cond["hidden_states"].shape[0]
            cond_out, uncond_out = out[:rows], out[rows:]
        if placeholder.shape != cond_out.shape:  # a DiT whose output differs from its input
            placeholder.resize_(cond_out.shape)
        placeholder.copy_(cond_out)
        return self._wrap(uncond_out.contiguous(), kwargs)

    def _separate(self, why: str) -> None:
        self._calls[SEPARATE] += 1
        if self._why is None:
            self._why = why
            log.info("CFG branches run one after the other: %s", why)


def batch_of_two(cond: dict[str, Any], uncond: dict[str, Any]) -> tuple[dict | None, str]:
    """The two calls' keyword arguments as one call of twice the batch (conditional rows
    first), or None and the rule that stops it."""
    if cond.keys() != uncond.keys():
        return None, f"the two calls differ in their arguments: {sorted(cond ^ uncond.keys())}"
    batch = cond["hidden_states"].shape[0]
    both: dict[str, Any] = {}
    for name, first in cond.items():
        second = uncond[name]
        rows = torch.is_tensor(first) and first.dim() > 0 and first.shape[0] == batch
        if rows and torch.is_tensor(second):
            if first.shape != second.shape or first.dtype != second.dtype:
                return None, (
                    f"{name} differs in shape or dtype between the branches: "
                    f"{tuple(first.shape)} {first.dtype} and {tuple(second.shape)} {second.dtype}"
                )
            if "mask" in name and not _same(first, second):
                # padding that differs between the rows: a split sequence (HunyuanVideo 1.5's
                # text cut) may need every row to keep the same tokens
                return None, f"{name} differs between the branches (their padding differs)"
            both[name] = torch.cat([first, second])
        elif _same(first, second):
            both[name] = first
        else:
            return None, f"{name} differs between the branches and has no batch dimension"
    return both, ""


def _same(first: Any, second: Any) -> bool:
    """Equal values (tensors equal in shape, dtype and every element; containers item by
    item)."""
    if first is second:
        return True
    if torch.is_tensor(first) or torch.is_tensor(second):
        return (
            torch.is_tensor(first)
            and torch.is_tensor(second)
            and first.shape == second.shape
            and first.dtype == second.dtype
            and first.device == second.device
            and torch.equal(first, second)
        )
    if isinstance(first, (list, tuple)) and isinstance(second, (list, tuple)):
        return (
            type(first) is type(second)
            and len(first) == len(second)
            and all(_same(a, b) for a, b in zip(first, second, strict=True))
        )
    if isinstance(first, dict) and isinstance(second, dict):
        return first.keys() == second.keys() and all(_same(first[k], second[k]) for k in first)
    try:
        return bool(first == second)
    except (TypeError, ValueError, RuntimeError):
        return False
