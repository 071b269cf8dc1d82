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

`cfg_mode` "norm" is ComfyUI's CFGNorm node on top of the plain combination (`NormCfg`, the
same wrapper): with x the step's input and sigma its noise level (the DiT's `timestep`: the
pipeline hands it t / 1000, its flow level), the guided and the conditional predictions become
denoised images, D = x - sigma P and Dc = x - sigma cond. At each latent pixel, over its
channels, D is scaled by the ratio of the norms |Dc| / (|D| + 1e-8), clamped to at most 1
(scaled down to the conditional norm, never up), and by CFGNorm's `strength`; the velocity the
pipeline gets is (x - D') / sigma. A packed token holds several latent pixels
(`Family.cfg_norm_pixels`: Qwen-Image's 2x2, channel-major): the norm runs over the channels of
each pixel, not over the token. Every rank computes it from the same two whole predictions,
so CFG-parallel ranks agree. The level is the one the DiT is given: the pipeline casts it to
the latents' dtype first (float32 on CPU; in a bfloat16 job about 3 significant digits, the
level the DiT itself is conditioned on), where ComfyUI's sampler keeps its float32 sigma; where
the clamp leaves the scale at 1 the level cancels out exactly.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import torch


class PlainCfg:
    """Wraps `transformer.forward` for one job: two calls a step become one plain CFG."""

    def combine(self, cond: torch.Tensor, uncond: torch.Tensor, call: dict) -> torch.Tensor:
        """The guided prediction of one step (`call`: the conditional call's arguments)."""
        return uncond + self.scale * (cond - uncond)

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
        guided = self.combine(cond, uncond, _call(cond_args, cond_kwargs))
        if placeholder.shape != guided.shape:  # a DiT whose output differs from its input
            placeholder.resize_(guided.shape)
        placeholder.copy_(guided)
        self.steps += 1
        return _wrap(guided.clone(), kwargs)


class NormCfg(PlainCfg):
    """Plain CFG followed by ComfyUI's CFGNorm on the denoised image (module docstring)."""

    def __init__(self, transformer: torch.nn.Module, scale: float, strength: float, pixels: int):
        if pixels < 1:
            raise ValueError(f"CFGNorm needs a packed token's latent pixels (>= 1), got {pixels}")
        super().__init__(transformer, scale)
        self.strength = strength
        self.pixels = pixels

    def combine(self, cond: torch.Tensor, uncond: torch.Tensor, call: dict) -> torch.Tensor:
        guided = super().combine(cond, uncond, call)
        return cfg_norm(call["hidden_states"], call["timestep"], cond, guided, self.strength,
                        self.pixels)  # fmt: skip


def cfg_norm(
    x: torch.Tensor,
    sigma: torch.Tensor,
    cond: torch.Tensor,
    guided: torch.Tensor,
    strength: float,
    pixels: int,
) -> torch.Tensor:
    """CFGNorm on velocities (float32, as ComfyUI's latents): the guided velocity whose denoised
    image is scaled at each latent pixel to at most the conditional one's norm, times
    `strength`. `x`, `cond`, `guided`: [batch, tokens, channels x pixels] (the last axis
    channel-major); `sigma`: one level per batch entry, above 0."""
    if not bool((sigma > 0).all()):
        raise ValueError(f"CFGNorm's denoised image needs a noise level above 0, got {sigma}")
    level = sigma.to(torch.float32).reshape(-1, *(1,) * (x.ndim - 1))
    x = x.to(torch.float32)
    denoised = x - level * guided.to(torch.float32)
    cond_denoised = x - level * cond.to(torch.float32)

    def by_pixel(t: torch.Tensor) -> torch.Tensor:  # [..., channels, pixels]
        return t.unflatten(-1, (-1, pixels))

    cond_norm = torch.linalg.vector_norm(by_pixel(cond_denoised), dim=-2, keepdim=True)
    guided_norm = torch.linalg.vector_norm(by_pixel(denoised), dim=-2, keepdim=True)
    scale = (cond_norm / (guided_norm + 1e-8)).clamp(min=0.0, max=1.0)
    normed = (by_pixel(denoised) * scale * strength).flatten(-2)
    return ((x - normed) / level).to(guided.dtype)


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


@contextlib.contextmanager
def norm_cfg(
    transformers: Sequence[torch.nn.Module], scale: float, strength: float, pixels: int
) -> Iterator[list[NormCfg]]:
    """Plain CFG at `scale` then CFGNorm at `strength` on every transformer for the `with`
    block (`pixels`: latent pixels a packed token holds)."""
    wrappers = [NormCfg(transformer, scale, strength, pixels) for transformer in transformers]
    try:
        yield wrappers
    finally:
        for wrapper in reversed(wrappers):
            wrapper.remove()


def _call(args: tuple, kwargs: dict) -> dict:
    """A DiT call's input and level by name (diffusers' transformers take `hidden_states`
    first, `timestep` by name)."""
    return {"hidden_states": kwargs.get("hidden_states", args[0] if args else None),
            "timestep": kwargs.get("timestep")}  # fmt: skip
