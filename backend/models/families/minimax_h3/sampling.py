"""paradit's samplers on H3 as ComfyUI runs them, in place of H3's two Euler schedulers.

What ComfyUI does (read in comfy/model_sampling.py `ModelSamplingAV`, comfy/model_base.py
`MiniMaxH3`, comfy/ldm/minimax/model.py `MiniMaxH3Model.forward`): its sampler steps one
packed latent on the *video* levels σ_v (the model's `shift` 12, `BasicScheduler`'s
spacing). The audio stream is carried scaled onto them: the sampler holds
y = (σ_v/σ_a)·x_a, where σ_a = S_a·b/(1 + (S_a − 1)·b) is the audio level on the same base
grid b as σ_v (shift S_a 3); since σ/(1 − σ) = S·b/(1 − b), y = (1 − σ_v)·k·a_0 + σ_v·ε with
k = S_v/S_a: an ordinary flow latent on the video levels whose clean value is k·a_0. The
model undoes the carry before the DiT and turns its velocity into the carried one, so the
sampler's denoised audio is k·D_a. At the end the audio is y/k.

So a sampler step is paradit's `Method` on σ_v for the video rows, and for the audio rows
the same `Method` on y with denoised k·D_a, mapped back by the carry of the next level.
For `euler` that is H3's own per-stream Euler exactly (the carry cancels); for
`res_multistep` it is not (its coefficients are the video levels', not the audio's).

H3's DiT predicts a data-ward velocity (x_0 = x_t + σ·v) and takes t = 1 − σ: the two
`H3StreamSampler`s are called as diffusers' `MiniMaxH3Scheduler`s are (`set_timesteps` with
the grid's points, the terminal 0 included; `timesteps` 1 − σ; `step`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ....sampling.samplers import Method, make_method

VIDEO_SHIFT, AUDIO_SHIFT = 12.0, 3.0
"""H3's flow shifts (the released schedulers'; ComfyUI's `MiniMaxH3` sampling_settings)."""


def shifted_level(sigma: float, from_shift: float, to_shift: float) -> float:
    """The level of the same base-grid point under `to_shift`: σ = s·b/(1 + (s − 1)·b)
    inverted at `from_shift`, then shifted by `to_shift`."""
    base = sigma / (from_shift + sigma * (1.0 - from_shift))
    return to_shift * base / (1.0 + (to_shift - 1.0) * base)


@dataclass(frozen=True)
class H3Levels:
    """The video levels a job samples on and the audio levels and carry they give."""

    video: tuple[float, ...]
    video_shift: float = VIDEO_SHIFT
    audio_shift: float = AUDIO_SHIFT

    def __post_init__(self) -> None:
        if len(self.video) < 2 or self.video[-1] != 0:
            raise ValueError(f"levels must end in 0 after at least one level, got {self.video}")
        if not all(a > b for a, b in zip(self.video, self.video[1:], strict=False)):
            raise ValueError(f"levels must decrease, got {self.video}")
        if self.video_shift <= 0 or self.audio_shift <= 0:
            raise ValueError("shifts must be above 0")

    @property
    def scale(self) -> float:
        """k = S_v/S_a: the carried audio's clean value is k·a_0 (ComfyUI's audio_scale)."""
        return self.video_shift / self.audio_shift

    @property
    def audio(self) -> tuple[float, ...]:
        return tuple(shifted_level(s, self.video_shift, self.audio_shift) for s in self.video)

    @property
    def carry(self) -> tuple[float, ...]:
        """σ_v/σ_a per level (k at level 0, its limit)."""
        pairs = zip(self.video, self.audio, strict=True)
        return tuple(v / a if a > 0 else self.scale for v, a in pairs)


@dataclass
class _Output:
    prev_sample: torch.Tensor


class H3StreamSampler:
    """One stream's scheduler (`video` or `audio`) of a job on paradit's `sampler`."""

    order = 1

    def __init__(
        self,
        sampler: str,
        levels: H3Levels,
        stream: str,
        seed: int,
        config: Any,
        own_scheduler: Any = None,
    ):
        if stream not in ("video", "audio"):
            raise ValueError(f"stream must be video or audio, got {stream!r}")
        self.sampler, self.levels, self.stream, self.seed = sampler, levels, stream, seed
        self.config = config
        self.own_scheduler = own_scheduler
        own = levels.video if stream == "video" else levels.audio
        self.own = [float(s) for s in own]
        self.carry = [1.0] * len(own) if stream == "video" else list(levels.carry)
        self.scale = 1.0 if stream == "video" else levels.scale
        self.set_timesteps()

    @property
    def shift(self) -> float:
        return self.levels.video_shift if self.stream == "video" else self.levels.audio_shift

    @property
    def step_index(self) -> int:
        return self._step_index

    def set_timesteps(self, num_inference_steps: int | None = None, device: Any = None, **_: Any):
        """The job's levels; `num_inference_steps` is H3's count, the grid's points."""
        points = len(self.own)
        if num_inference_steps is not None and num_inference_steps != points:
            raise ValueError(
                f"the pipeline asks for {num_inference_steps} grid points; the job's levels "
                f"are {points}"
            )
        self.sigmas = torch.tensor(self.own, dtype=torch.float32, device=device)
        self.timesteps = (1.0 - self.sigmas[:-1]).to(device=device)
        self.num_inference_steps = points - 1
        self._method: Method = make_method(self.sampler, list(self.levels.video), self.seed)
        self._step_index = 0

    def scale_noise(self, sample: torch.Tensor, timestep: Any, noise: torch.Tensor) -> torch.Tensor:
        """The keyframes' noising at their fixed level (diffusers' fl2va blocks call it on the
        video scheduler): the stream's own scheduler's, which reads no schedule."""
        if self.own_scheduler is None:
            raise ValueError("scale_noise needs the stream's own scheduler (stream_samplers)")
        return self.own_scheduler.scale_noise(sample, timestep, noise)

    def step(self, model_output: torch.Tensor, timestep: Any, sample: torch.Tensor,
             return_dict: bool = True, **_: Any) -> Any:  # fmt: skip
        i = self._step_index
        x = sample.to(torch.float32)
        denoised = x + self.own[i] * model_output.to(torch.float32)  # data-ward velocity
        carried = self._method.step(i, self.carry[i] * x, self.scale * denoised)
        out = (carried / self.carry[i + 1]).to(sample.dtype)
        self._step_index += 1
        return _Output(out) if return_dict else (out,)


def stream_samplers(
    sampler: str, video_levels: tuple[float, ...], seed: int, pipe: Any
) -> dict[str, H3StreamSampler]:
    """The two schedulers (`scheduler`, `audio_scheduler`) of a job on `sampler` over the
    video levels, with the pipeline's shifts and configs."""
    levels = H3Levels(
        tuple(video_levels),
        float(pipe.scheduler.config.shift),
        float(pipe.audio_scheduler.config.shift),
    )
    return {
        "scheduler": H3StreamSampler(
            sampler, levels, "video", seed, pipe.scheduler.config, pipe.scheduler
        ),
        "audio_scheduler": H3StreamSampler(
            sampler, levels, "audio", seed, pipe.audio_scheduler.config, pipe.audio_scheduler
        ),
    }
