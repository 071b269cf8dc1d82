"""CFG parallelism: the conditional and unconditional branches on two halves of the group.

diffusers pipelines call the transformer twice per step: first with the prompt, then with the
negative prompt, and combine the two results afterwards. We wrap the transformer's forward:
the first call only records its inputs and returns an empty tensor; on the second call the
first half of the group runs the recorded (conditional) inputs while the second half runs the
unconditional ones, an all-gather swaps the results, and the empty tensor from the first call
is filled in place before the pipeline combines them. Each branch computes exactly what a
single process would, so the output is the same; every rank enters the same collectives in
the same order (FSDP's gathers included) because every rank computes on the second call.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist


class CfgParallel:
    """Wraps `transformer.forward` on every rank; `active` is set per job."""

    def __init__(self, transformer: torch.nn.Module, group: dist.ProcessGroup, cfg_rank: int):
        self.group = group
        self.cfg_rank = cfg_rank
        self.active = False
        self._forward = transformer.forward
        self._pending: tuple[tuple, dict, torch.Tensor] | None = None
        transformer.forward = self.forward

    def begin_job(self, active: bool) -> None:
        self.active = active
        self._pending = None

    def forward(self, *args: Any, **kwargs: Any):
        if not self.active:
            return self._forward(*args, **kwargs)
        if self._pending is None:
            ref = kwargs.get("hidden_states", args[0] if args else None)
            placeholder = torch.empty(0, device=ref.device, dtype=ref.dtype)
            self._pending = (args, kwargs, placeholder)
            return self._wrap(placeholder, kwargs)
        cond_args, cond_kwargs, placeholder = self._pending
        self._pending = None
        mine = (
            self._forward(*cond_args, **cond_kwargs)
            if self.cfg_rank == 0
            else (self._forward(*args, **kwargs))
        )
        mine_t = _first(mine).contiguous()
        both = [torch.empty_like(mine_t) for _ in range(2)]
        dist.all_gather(both, mine_t, group=self.group)
        placeholder.resize_(both[0].shape).copy_(both[0])
        return self._wrap(both[1], kwargs)

    @staticmethod
    def _wrap(tensor: torch.Tensor, kwargs: dict):
        if kwargs.get("return_dict", True):
            from diffusers.models.modeling_outputs import Transformer2DModelOutput

            return Transformer2DModelOutput(sample=tensor)
        return (tensor,)


def _first(output: Any) -> torch.Tensor:
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, tuple):
        return output[0]
    return output.sample
