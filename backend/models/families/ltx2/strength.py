"""LTX-2's start image at a strength below 1, sampled as ComfyUI samples it (request
`image_strength`; ComfyUI's LTX-2.3 and 2.5 image-to-video templates write it at 0.7).

ComfyUI, as read (comfy_extras/nodes_lt.py `LTXVImgToVideoInplace`: the image's latent in the
first frame under a noise mask m = 1 - strength; comfy/samplers.py `KSAMPLER.sample` and
`KSamplerX0Inpaint`; comfy/model_base.py `LTXAV`: per-token timestep m x sigma, the inpaint
latent the clean one): the sampler's state x starts at sigma_0 noise + (1 - sigma_0) latent;
each step the model is given m x + (1 - m) clean at timestep m sigma on the image's tokens, its
x0 there is m (input - sigma v) + (1 - m) clean, the sampler moves x with that x0, and the
last step's x is the output (no blend after it).

diffusers' `LTX2ConditionPipeline` with the first frame at that strength (its conditioning
mask c = strength on those tokens) has the same per-token timestep, the same x0 blend and the
same first input, but its latents y are the model's input and its scheduler moves y. So the
pipeline runs here with its scheduler wrapped (`ComfyState`): the wrapper keeps ComfyUI's
state x beside y (x = (y - c clean) / (1 - c) at the first step: y elsewhere), takes the x0
the pipeline hands its scheduler (x0 = y - sigma v'), steps x with the job's sampler (the
wrapped scheduler: paradit's `FlowSampler` or the model's own, its noise on x) and hands the
pipeline (1 - c) x + c clean, the next model input; the last step hands back x. The loop
holds the whole latents on every rank (the sequence plan splits the DiT's tokens only), so
every rank keeps the same state.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import torch


class ComfyState:
    """The pipeline's video scheduler, stepping ComfyUI's sampler state instead of the model's
    input (see the module's docstring). `mask`: the pipeline's packed conditioning mask c
    (batch, tokens, 1), strength on the image's tokens and 0 elsewhere; `clean`: its clean
    latents (the image's latent there, 0 elsewhere). Every other attribute is the wrapped
    scheduler's."""

    def __init__(self, inner: Any, mask: torch.Tensor, clean: torch.Tensor):
        if float(mask.max()) >= 1.0:
            raise ValueError("ComfyState needs a strength below 1 (a mask of 1 keeps no state)")
        self.inner = inner
        self.mask = mask.to(torch.float32)
        self.clean = clean.to(torch.float32)
        self.state: torch.Tensor | None = None
        self._index = 0

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (copy's probe): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)

    def set_timesteps(
        self,
        num_inference_steps: int | None = None,
        device: Any = None,
        sigmas: Any = None,
        mu: Any = None,
        timesteps: Any = None,
        **kwargs: Any,
    ) -> Any:
        """The wrapped scheduler's, with the arguments `retrieve_timesteps` checks for."""
        self.state, self._index = None, 0
        given = {"sigmas": sigmas, "mu": mu, "timesteps": timesteps, **kwargs}
        given = {name: value for name, value in given.items() if value is not None}
        return self.inner.set_timesteps(num_inference_steps, device, **given)

    def step(
        self,
        model_output: torch.Tensor,
        timestep: Any,
        sample: torch.Tensor,
        return_dict: bool = True,
        **kwargs: Any,
    ) -> Any:
        i = self._index
        sigma = float(self.inner.sigmas[i])
        y = sample.to(torch.float32)
        denoised = y - sigma * model_output.to(torch.float32)  # the pipeline's x0 blend
        c, clean = self.mask[: y.shape[0]], self.clean[: y.shape[0]]
        if self.state is None:  # the first input is m x + (1 - m) clean: ComfyUI's x from it
            self.state = (y - c * clean) / (1 - c)
        x = self.state
        velocity = (x - denoised) / sigma  # the same x0, seen from ComfyUI's state
        moved = self.inner.step(velocity.to(sample.dtype), timestep, x.to(sample.dtype), **kwargs)
        x = (moved.prev_sample if hasattr(moved, "prev_sample") else moved[0]).to(torch.float32)
        self.state, self._index = x, i + 1
        last = self._index >= len(self.inner.timesteps)
        out = (x if last else (1 - c) * x + c * clean).to(sample.dtype)
        if return_dict:
            return _Output(out)
        return (out,)


class _Output:
    def __init__(self, prev_sample: torch.Tensor):
        self.prev_sample = prev_sample


@functools.cache
def pipeline_class() -> type:
    """`LTX2ConditionPipeline` whose video scheduler is wrapped in `ComfyState` once its
    latents are prepared (the conditioning mask and clean latents are made there); the audio
    keeps its own copy of the unwrapped scheduler, as the pipeline copies it. One class, built
    on first use (diffusers is imported lazily; `same_components_as` compares classes)."""
    from diffusers import LTX2ConditionPipeline

    class LTX2ComfyStrengthPipeline(LTX2ConditionPipeline):
        """`LTX2ConditionPipeline` sampling its first frame's strength as ComfyUI does."""

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            if kwargs.get("noise_scale") is None and kwargs.get("sigmas") is None:
                levels = getattr(self.scheduler, "levels", None)  # paradit's sampler's levels
                if levels:  # ComfyUI's noise_scaling at sigma_0 (the pipeline's own: 1)
                    kwargs["noise_scale"] = float(levels[0])
            return super().__call__(*args, **kwargs)

        def prepare_latents(self, *args: Any, **kwargs: Any) -> Any:
            latents, mask, clean, coords = super().prepare_latents(*args, **kwargs)
            inner = self.scheduler
            if isinstance(inner, ComfyState):  # a second call: wrap the pipeline's own
                inner = inner.inner
            if self.audio_scheduler is None:  # the pipeline's own copy, before the wrap
                self.__dict__["audio_scheduler"] = copy.deepcopy(inner)
            # not `self.scheduler = ...`: the pipeline would record the class in its config
            self.__dict__["scheduler"] = ComfyState(inner, mask, clean)
            return latents, mask, clean, coords

    return LTX2ComfyStrengthPipeline
