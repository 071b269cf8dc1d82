"""Plain classifier-free guidance on a pipeline that combines its branches its own way.

ComfyUI's samplers (KSampler, CFGGuider) combine the two branches plainly: uncond + scale x
(cond - uncond). Some diffusers pipelines do more after that combination: Qwen-Image's rescale
the guided prediction to the conditional one's norm over each packed token. A job with
`cfg_mode` "plain" runs ComfyUI's combination on such a pipeline without copying its loop:
for the job's time `PlainCfg` wraps the transformer's forward (outside every parallel wrapper).
The pipeline's first (conditional) call records its inputs and gets a placeholder; the second
(unconditional) call runs both calls on the forward underneath, in the pipeline's order, and
hands the pipeline the plainly guided prediction P = uncond + scale x (cond - uncond) as both
branches (the placeholder filled in place). The pipeline's own combination of two equal
branches is P again, exactly: P + scale x (P - P) = P, and a rescale to the conditional
branch's norm multiplies by |P| / |P| = 1. A family declares that its pipeline's combination
is of that kind (`Family.plain_cfg`); its loaded model then takes the field (`Limits.plain_cfg`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import torch


class PlainCfg:
    """Wraps `transformer.forward` for one job: two calls a step become one plain CFG."""

    def __init__(self, transformer: torch.nn.Module, scale: float):
        self.scale = scale
        self._transformer = transformer
        self._forward = transformer.forward
        self._own = transformer.__dict__.get("forward")  # a wrapper already on the instance
        self._pending: tuple[tuple, dict, torch.Tensor] | None = None
        self.steps = 0
        transformer.forward = self.forward

    def remove(self) -> None:
        """Give the transformer back its forward (as it was before this job)."""
        if self._own is None:
            del self._transformer.forward
        else:
            self._transformer.forward = self._own

    def forward(self, *args: Any, **kwargs: Any):
        if self._pending is None:
            ref = kwargs.get("hidden_states", args[0] if args else None)
            # shaped like the input, filled in place: a pipeline may keep a view of it
            placeholder = torch.empty_like(ref)
            self._pending = (args, kwargs, placeholder)
            return _wrap(placeholder, kwargs)
        cond_args, cond_kwargs, placeholder = self._pending
        self._pending = None
        # the forward underneath sees the pipeline's two calls, in its order (CFG parallel
        # and the paired branches keep their own protocol); the first result is filled in by
        # the time the second returns
        cond = _first(self._forward(*cond_args, **cond_kwargs))
        uncond = _first(self._forward(*args, **kwargs))
        guided = uncond + self.scale * (cond - uncond)
        if placeholder.shape != guided.shape:  # a DiT whose output differs from its input
            placeholder.resize_(guided.shape)
        placeholder.copy_(guided)
        self.steps += 1
        return _wrap(guided.clone(), kwargs)


@contextlib.contextmanager
def plain_cfg(transformers: Sequence[torch.nn.Module], scale: float) -> Iterator[list[PlainCfg]]:
    """Plain CFG at `scale` on every transformer for the time of the `with` block."""
    wrappers = [PlainCfg(transformer, scale) for transformer in transformers]
    try:
        yield wrappers
    finally:
        for wrapper in reversed(wrappers):
            wrapper.remove()


def _first(output: Any) -> torch.Tensor:
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, tuple):
        return output[0]
    return output.sample


def _wrap(tensor: torch.Tensor, kwargs: dict):
    """The tensor as the transformer returns its output (`return_dict` as the call asks)."""
    if kwargs.get("return_dict", True):
        from diffusers.models.modeling_outputs import Transformer2DModelOutput

        return Transformer2DModelOutput(sample=tensor)
    return (tensor,)
