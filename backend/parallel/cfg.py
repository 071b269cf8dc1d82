"""CFG parallelism: the conditional and unconditional branches on two halves of the group.

diffusers pipelines call the transformer twice per step: first with the prompt, then with the
negative prompt, and combine the two results afterwards. We wrap the transformer's forward:
the first call only records its inputs and returns an empty tensor; on the second call the
first half of the group runs the recorded (conditional) inputs while the second half runs the
unconditional ones, an all-gather swaps the results, and the empty tensor from the first call
is filled in place before the pipeline combines them (the empty tensor is shaped like the
input, so a pipeline that cuts the reference tokens out of the first result before the second
call, as the edit pipelines do, sees the fill through its view). Each branch computes exactly what a
single process would, so the output is the same; every rank enters the same collectives in
the same order (FSDP's gathers included) because every rank computes on the second call.

Some pipelines (CogVideoX) instead call the transformer once per step with both branches as
one batch of 2 (unconditional first). `BatchedCfgParallel` wraps that forward: each half of
the group runs its own row of every batched input (batch 1), an all-gather brings the two
rows together, and the pipeline gets the batch of 2 it asked for, in its order. A call at batch
1 in a guided step (LTX-2's spatio-temporal and modality-isolation passes, on the conditional
inputs) runs whole on each half: both halves compute the same, as a single process would.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import torch.distributed as dist

from .fsdp import keep_root_gathered, release_root


class StepPair:
    """Wraps `transformer.forward` on every rank to run a step's two branch calls together;
    `active` is set per job. A subclass's `forward` keeps the first call in `_pending`."""

    def __init__(self, transformer: torch.nn.Module):
        self.active = False
        self._forward = transformer.forward
        self._pending: tuple | None = None
        self._root = transformer

        def forward(*args: Any, **kwargs: Any):
            return self.forward(*args, **kwargs)

        # keeps the wrapped forward's signature (`__wrapped__`): a pipeline that passes only
        # the arguments the transformer names (MiniMax H3's blocks) still finds them
        transformer.forward = functools.update_wrapper(forward, self._forward)

    def forward(self, *args: Any, **kwargs: Any):
        raise NotImplementedError

    def begin_job(self, active: bool) -> None:
        keep_root_gathered(self._root, False)
        if self._pending is not None:  # a job stopped between a step's two calls
            release_root(self._root)
        self.active = active
        self._pending = None

    @staticmethod
    def _wrap(tensor: torch.Tensor, kwargs: dict):
        """The transformer's output as the pipeline asked for it."""
        if kwargs.get("return_dict", True):
            from diffusers.models.modeling_outputs import Transformer2DModelOutput

            return Transformer2DModelOutput(sample=tensor)
        return (tensor,)


class CfgParallel(StepPair):
    """Each CFG rank runs its own branch; the pair is exchanged over `group`."""

    def __init__(self, transformer: torch.nn.Module, group: dist.ProcessGroup, cfg_rank: int):
        self.group = group
        self.cfg_rank = cfg_rank
        super().__init__(transformer)

    def forward(self, *args: Any, **kwargs: Any):
        if not self.active:
            return self._forward(*args, **kwargs)
        if self._pending is None:
            ref = kwargs.get("hidden_states", args[0] if args else None)
            # Shaped like the input: the edit pipelines (Qwen-Image-Edit, Flux.2 with
            # references) cut the output tokens out of this prediction before the second call,
            # and a view of it sees the fill only if the fill keeps its storage.
            placeholder = torch.empty_like(ref)
            self._pending = (args, kwargs, placeholder)
            # the root's own weights (FSDP2 gathers them around every call, this one too)
            # stay gathered until the end of the second call: once a step
            keep_root_gathered(self._root, True)
            return self._wrap(placeholder, kwargs)
        cond_args, cond_kwargs, placeholder = self._pending
        self._pending = None
        keep_root_gathered(self._root, False)
        mine = (
            self._forward(*cond_args, **cond_kwargs)
            if self.cfg_rank == 0
            else (self._forward(*args, **kwargs))
        )
        mine_t = _first(mine).contiguous()
        both = [torch.empty_like(mine_t) for _ in range(2)]
        dist.all_gather(both, mine_t, group=self.group)
        if placeholder.shape != both[0].shape:  # a DiT whose output differs from its input
            placeholder.resize_(both[0].shape)
        placeholder.copy_(both[0])
        return self._wrap(both[1], kwargs)


def _first(output: Any) -> torch.Tensor:
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, tuple):
        return output[0]
    return output.sample


BATCHED_INPUTS = (
    *("hidden_states", "encoder_hidden_states", "timestep", "timestep_cond", "ofs"),
    # LTX-2: the audio stream, its text and both masks, the per-modality sigmas, positions
    *("audio_hidden_states", "audio_encoder_hidden_states", "audio_timestep"),
    *("sigma", "audio_sigma", "encoder_attention_mask", "audio_encoder_attention_mask"),
    *("video_coords", "audio_coords"),
)
"""Keyword arguments cut along the batch when their first dimension is the batch (CogVideoX
I2V's `ofs` is a single value for both rows and stays whole)."""


class BatchedCfgParallel(CfgParallel):
    """Wraps `transformer.forward` for pipelines that batch cond and uncond together."""

    def forward(self, *args: Any, **kwargs: Any):
        if not self.active:
            return self._forward(*args, **kwargs)
        if args:
            raise TypeError("batched CFG parallel needs the transformer called with keywords")
        batch = kwargs["hidden_states"].shape[0]
        if batch == 1:  # a pass beside the pair (LTX-2's STG or modality call): whole here
            return self._forward(**kwargs)
        if batch != 2:
            raise ValueError(f"batched CFG parallel needs a batch of 2 (uncond, cond), got {batch}")
        row = slice(self.cfg_rank, self.cfg_rank + 1)
        mine = {
            name: value[row]
            if name in BATCHED_INPUTS and torch.is_tensor(value) and value.shape[:1] == (batch,)
            else value
            for name, value in kwargs.items()
        }
        output = self._forward(**mine)
        if isinstance(output, tuple) and len(output) > 1:  # LTX-2: (video, audio)
            return tuple(self._both_rows(part) for part in output)
        return self._wrap(self._both_rows(_first(output)), kwargs)

    def _both_rows(self, mine: torch.Tensor) -> torch.Tensor:
        """This half's row and the other's, as the batch of 2 (uncond, cond)."""
        mine = mine.contiguous()
        rows = [torch.empty_like(mine) for _ in range(2)]
        dist.all_gather(rows, mine, group=self.group)
        return torch.cat(rows, dim=0)
