"""paradit's samplers on MiniMax H3 as ComfyUI runs them (`minimax_h3/sampling.py`): the
video stream on the video levels, the audio carried onto them (comfy/model_sampling.py
`ModelSamplingAV`, comfy/model_base.py `MiniMaxH3`, comfy/ldm/minimax/model.py `forward`).

- `euler` is H3's own two Euler schedulers (diffusers' `MiniMaxH3Scheduler`, shifts 12 and
  3) step for step: the carry cancels.
- `res_multistep` is ComfyUI's RES multistep on the packed latent (video, carried audio),
  written here from ComfyUI's behaviour, and not H3's own Euler.
- A tiny-minimax-h3 job's denoise with paradit's `euler` gives its own schedulers' latents;
  with `res_multistep` others, and the pipeline's schedulers are back after the call.

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import math

import pytest
import torch
from diffusers import MiniMaxH3Scheduler

from paradit.backend.models.families.minimax_h3.sampling import (
    H3Levels,
    H3StreamSampler,
    shifted_level,
)
from paradit.backend.sampling.schedules import levels

STEPS = 20  # the templates' BasicScheduler steps (turbo off)
TINY_STEPS = 4


def velocity(x: torch.Tensor, sigma: float, stream: str) -> torch.Tensor:
    """A made-up data-ward velocity (x_0 = x + σ·v) that depends on x and σ, per stream."""
    return torch.sin(3 * x + (0.5 if stream == "audio" else 0.0)) * (1 + sigma) - x


def start() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.randn(7, 5, generator=g), torch.randn(6, 4, generator=g)


def run_pair(video_scheduler, audio_scheduler, points: int):
    video_scheduler.set_timesteps(points)
    audio_scheduler.set_timesteps(points)
    x, a = start()
    for i in range(points - 1):
        sv, sa = float(video_scheduler.sigmas[i]), float(audio_scheduler.sigmas[i])
        tv, ta = video_scheduler.timesteps[i], audio_scheduler.timesteps[i]
        x = video_scheduler.step(velocity(x, sv, "video"), tv, x, return_dict=False)[0]
        a = audio_scheduler.step(velocity(a, sa, "audio"), ta, a, return_dict=False)[0]
    return x, a


def ours(sampler: str, steps: int = STEPS):
    h3 = H3Levels(tuple(levels("simple", steps, 12.0)))
    pair = (H3StreamSampler(sampler, h3, s, 0, {}) for s in ("video", "audio"))
    return run_pair(*pair, steps + 1)


def h3_own(steps: int = STEPS):
    return run_pair(MiniMaxH3Scheduler(shift=12.0), MiniMaxH3Scheduler(shift=3.0), steps + 1)


def comfy_res_multistep(steps: int = STEPS):
    """ComfyUI's run, from what its code does: one packed latent (video rows, then the audio
    carried as (σ_v/σ_a)·x_a) on BasicScheduler(simple)'s levels of ModelSamplingAV (shift 12);
    the model sees each stream's own latent at its own level and the sampler gets the denoised
    pack (D_v, (12/3)·D_a); k-diffusion's res_multistep (eta 0): Euler at the first step and
    into 0, else x' = e^{-h}·x + h·(b1·D + b2·D_prev) with t = −log σ; the audio is y/4 at
    the end."""
    sig = levels("simple", steps, 12.0)
    k = 12.0 / 3.0
    x, a = start()
    n = x.numel()
    y = torch.cat([x.flatten(), a.flatten()])  # σ_v = σ_a = 1 at the start: carry 1
    old = None
    for i in range(steps):
        s, s_next = sig[i], sig[i + 1]
        sa = shifted_level(s, 12.0, 3.0)
        xv, xa = y[:n].view_as(x), y[n:].view_as(a) * (sa / s)
        dv = xv + s * velocity(xv, s, "video")
        da = xa + sa * velocity(xa, sa, "audio")
        denoised = torch.cat([dv.flatten(), k * da.flatten()])
        if s_next == 0 or old is None:
            y = y + (s_next - s) * (y - denoised) / s
        else:
            t, t_next, t_prev = -math.log(s), -math.log(s_next), -math.log(sig[i - 1])
            h = t_next - t
            c2 = (t_prev - t) / h
            phi1 = math.expm1(-h) / -h
            phi2 = (phi1 - 1) / -h
            y = math.exp(-h) * y + h * ((phi1 - phi2 / c2) * denoised + (phi2 / c2) * old)
        old = denoised
    return y[:n].view_as(x), y[n:].view_as(a) / k


@pytest.mark.fast
def test_levels_are_h3s_grid_for_steps_that_divide_1000():
    """BasicScheduler(simple) at shift 12 on 20 steps is H3's own video grid (21 points of
    linspace(1, 0)); the audio levels ComfyUI's DiT derives are the audio scheduler's."""
    h3 = H3Levels(tuple(levels("simple", STEPS, 12.0)))
    video, audio = MiniMaxH3Scheduler(shift=12.0), MiniMaxH3Scheduler(shift=3.0)
    video.set_timesteps(STEPS + 1)
    audio.set_timesteps(STEPS + 1)
    assert torch.allclose(torch.tensor(h3.video).float(), video.sigmas, atol=1e-6)
    assert torch.allclose(torch.tensor(h3.audio).float(), audio.sigmas, atol=1e-6)
    assert h3.carry[0] == 1.0 and h3.carry[-1] == 4.0


@pytest.mark.fast
def test_euler_is_h3s_own_two_schedulers():
    x, a = ours("euler")
    x_own, a_own = h3_own()
    assert torch.allclose(x, x_own, atol=1e-5) and torch.allclose(a, a_own, atol=1e-5)


@pytest.mark.fast
def test_res_multistep_is_comfyuis_and_not_h3s_euler():
    x, a = ours("res_multistep")
    x_ref, a_ref = comfy_res_multistep()
    assert torch.allclose(x, x_ref, atol=1e-5) and torch.allclose(a, a_ref, atol=1e-5)
    x_own, a_own = h3_own()
    assert (x - x_own).abs().max() > 1e-3 and (a - a_own).abs().max() > 1e-3


@pytest.mark.fast
def test_levels_are_checked():
    with pytest.raises(ValueError, match="end in 0"):
        H3Levels((1.0, 0.5))
    with pytest.raises(ValueError, match="decrease"):
        H3Levels((0.5, 1.0, 0.0))
    with pytest.raises(ValueError, match="grid points"):
        H3StreamSampler("euler", H3Levels((1.0, 0.5, 0.0)), "video", 0, {}).set_timesteps(4)


@pytest.fixture(scope="module")
def tiny():
    from paradit.backend.models.families import family_of
    from paradit.backend.models.presets import build_preset

    pipe = build_preset("tiny-minimax-h3")
    return pipe, family_of(pipe)


def denoise(tiny, sampler: str | None):
    """The tiny job's final (video, audio) latents, run as the engine runs a job
    (`image_jobs.run_here`): with `sampler` on `simple` levels at shift 12, else H3's own
    schedulers."""
    from image_jobs import run_here

    from paradit.backend.models.families.minimax_h3.tiny_job import BODY

    pipe, _ = tiny
    body = {**BODY, "num_inference_steps": TINY_STEPS}
    if sampler is not None:
        body.update(sampler=sampler, scheduler="simple", shift=12.0)
    with torch.no_grad():
        _, result = run_here(pipe, body)
    assert type(pipe.scheduler) is MiniMaxH3Scheduler
    assert type(pipe.audio_scheduler) is MiniMaxH3Scheduler
    return result.outputs[0], result.outputs[1]


def test_a_jobs_euler_is_its_own_schedulers_and_res_multistep_is_not(tiny):
    """4 steps (res_multistep's second order acts on the middle two) at shift 12: simple's
    levels are H3's grid of 5 points."""
    own_video, own_audio = denoise(tiny, None)
    video, audio = denoise(tiny, "euler")
    assert torch.allclose(video, own_video, atol=1e-5)
    assert torch.allclose(audio, own_audio, atol=1e-5)
    res_video, res_audio = denoise(tiny, "res_multistep")
    assert not torch.allclose(res_video, own_video, atol=1e-4)
    assert not torch.allclose(res_audio, own_audio, atol=1e-4)
