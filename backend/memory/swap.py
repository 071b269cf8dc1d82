"""Experts one at a time (memory level 4): a two-expert model keeps one expert on the device.

Wan 2.2 A14B runs its high-noise expert for the first steps and its low-noise one for the
rest. Under the layout `planner.SWAP` only the expert that runs is on the device; the other
waits in host memory. A forward pre-hook on each expert, run before every other hook (FSDP2's
all-gather, the sequence-parallel and step-cache hooks), brings it in when its first forward
comes and sends the other out: at the switch step, and at the next job's first step. Nothing
else needs to know which step switches: whatever the job's `switch_step`, the expert that is
called is on the device.

- One rank (the experts unsharded): each expert's parameters have a host copy for the life
  of the model (pinned on CUDA, so the copy in is a DMA); bringing one in copies its host
  copy to the device, sending one out points its parameters back at the host copy and drops
  the device copy. The weights never change between jobs (LoRAs are refused on this layout:
  a job's rows would be patched into a device copy that a swap drops), so nothing is copied
  back. On a CPU device the "device copy" is a copy in host memory: the same steps run.
- Sharded (FSDP2): the expert's shards move with `module.to` (FSDP2 re-registers its
  sharded parameters after a move); on a CPU device that is no move.

Each swap's time (CUDA: synchronised) goes to job.json's `expert_swaps`.
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Any

import torch
from torch.distributed.fsdp import FSDPModule

log = logging.getLogger(__name__)


class ExpertSwap:
    """Keeps one of `experts` (name -> DiT, in the order they run) on `device` at a time."""

    def __init__(self, experts: dict[str, torch.nn.Module], device: torch.device):
        if len(experts) < 2:
            raise ValueError(f"swapping experts needs two or more, got {list(experts)}")
        self.experts = experts
        self.device = device
        self.active: str | None = None
        self.record: list[dict[str, Any]] = []
        """This job's swaps: {"step", "expert", "seconds", "bytes"}."""
        self._step = lambda: 0
        self._host: dict[str, dict[str, torch.Tensor]] = {}
        for name, dit in experts.items():
            if isinstance(dit, FSDPModule):
                self._send_out(name)
            else:  # each parameter's host copy replaces it at once: one extra tensor at a time
                self._host[name] = {}
                with torch.no_grad():
                    for key, param in dit.named_parameters():
                        self._host[name][key] = param.data = _host_copy(param.data, device)
            dit.register_forward_pre_hook(functools.partial(self._before, name), prepend=True)
        first = next(iter(experts))
        self._bring_in(first)
        self.active = first

    def begin_job(self, step: Any) -> None:
        """A new job: an empty record; `step()` gives the step a swap happens at."""
        self.record = []
        self._step = step

    def end_job(self) -> dict[str, Any]:
        """The job's swaps (job.json's `expert_swaps`), forgotten here with the job's step
        counter: nothing of a job stays on the swap but which expert is resident."""
        swaps = self.to_dict()
        self.record = []
        self._step = lambda: 0
        return swaps

    def to_dict(self) -> dict[str, Any]:
        """job.json's `expert_swaps`."""
        return {
            "swaps": list(self.record),
            "seconds": round(sum(swap["seconds"] for swap in self.record), 6),
            "resident": self.active,
        }

    def _before(self, name: str, _module: torch.nn.Module, _args: Any) -> None:
        if name == self.active:
            return
        started = time.perf_counter()
        if self.active is not None:
            self._send_out(self.active)
        moved = self._bring_in(name)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        seconds = time.perf_counter() - started
        self.active = name
        self.record.append(
            {"step": self._step(), "expert": name, "seconds": round(seconds, 6), "bytes": moved}
        )
        log.info("expert %s in (%.2f s, %.2f GiB)", name, seconds, moved / 2**30)

    def _bring_in(self, name: str) -> int:
        dit = self.experts[name]
        if isinstance(dit, FSDPModule):
            dit.to(self.device)
            return _local_bytes(dit)
        moved = 0
        with torch.no_grad():
            for key, param in dit.named_parameters():
                host = self._host[name][key]
                param.data = (
                    host.clone() if self.device.type == "cpu" else host.to(self.device, True)
                )
                moved += host.numel() * host.element_size()
        return moved

    def _send_out(self, name: str) -> None:
        dit = self.experts[name]
        if isinstance(dit, FSDPModule):
            dit.to("cpu")
            return
        for key, param in dit.named_parameters():
            param.data = self._host[name][key]
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    def is_resident(self, name: str) -> bool:
        """Whether expert `name`'s parameters are device copies (not its host copy)."""
        dit = self.experts[name]
        if isinstance(dit, FSDPModule):
            return name == self.active
        host = self._host[name]
        return all(
            param.data.data_ptr() != host[key].data_ptr() for key, param in dit.named_parameters()
        )


def _host_copy(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A tensor's copy in host memory, pinned when the device is a GPU (the host tensor
    itself on a CPU device)."""
    if device.type != "cuda":
        return tensor.to("cpu")
    pinned = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
    pinned.copy_(tensor)
    return pinned


def _local_bytes(dit: torch.nn.Module) -> int:
    from ..parallel.fsdp import local_param_bytes

    return local_param_bytes(dit)
