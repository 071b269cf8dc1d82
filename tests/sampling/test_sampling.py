"""Sampling per job (backend/sampling): ComfyUI's noise levels for every (sampler, scheduler)
pair, each sampler against a reference integration written from its paper
(tests/sampling_refs.py), the request fields' rules, recipes, a tiny model's job against the
reference integration with the same model calls, HunyuanVideo 1.5's samplers through its
wrapper runner, LTX-2's on its video and audio latents, and the 4-step Wan 2.2 recipe on 1, 2
and 4 ranks.

Cost: about 29 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import numpy as np
import pytest
import torch
from conftest import REFERENCE_FLAGS, run_job
from image_jobs import encoded, run_here
from sampling_refs import integrate, ref_levels, sigma_of

from paradit.backend.contract import Limits
from paradit.backend.models.presets import build_preset
from paradit.backend.request import JobRequest
from paradit.backend.runtime.job import JobHooks, RankModel, RankResult
from paradit.backend.sampling import recipes
from paradit.backend.sampling.job import boundary_ratio
from paradit.backend.sampling.names import DROPS_PENULTIMATE, SAMPLERS, SCHEDULERS
from paradit.backend.sampling.rules import resolve
from paradit.backend.sampling.samplers import FlowSampler
from paradit.backend.sampling.schedules import FLOW_LEVELS, levels

CPU = torch.device("cpu")
SHIFTS = (1.0, 3.1, 5.0, 8.0)
STEPS = (1, 2, 3, 4, 7, 8, 20, 30)


# -- noise levels ---------------------------------------------------------------------------------


@pytest.mark.fast
@pytest.mark.parametrize("table", FLOW_LEVELS)
@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_levels_equal_the_formulas_for_every_pair(scheduler, table):
    """Every sampler (its UniPC rule: one step more, the next-to-last level dropped) with
    every scheduler, at several steps and shifts, on ModelSamplingDiscreteFlow's table of
    1000 levels and ModelSamplingFlux's of 10000, equals the formula to 1e-6."""
    for sampler in SAMPLERS:
        drop = sampler in DROPS_PENULTIMATE
        for shift in SHIFTS:
            for steps in STEPS:
                got = levels(scheduler, steps, shift, drop_penultimate=drop, table=table)
                want = ref_levels(scheduler, steps, shift, drop, table)
                assert len(got) == len(want), (sampler, scheduler, shift, steps)
                assert np.allclose(got, want, rtol=0, atol=1e-6), (sampler, scheduler, shift, steps)
                assert got[-1] == 0.0 and all(a > b for a, b in zip(got, got[1:], strict=False))


@pytest.mark.fast
def test_the_flux_table_by_hand():
    """30 steps of `simple` at Qwen-Image 2.1's shift e^0.69: ModelSamplingFlux's table of
    10000 picks its second level at index -(1 + floor(10000/30)) = -334, t = 9667/10000;
    ModelSamplingDiscreteFlow's of 1000 at -(1 + floor(1000/30)) = -34, t = 967/1000
    (exp(mu) / (exp(mu) + 1/t - 1), comfy/model_sampling.py's flux_time_shift). At 20 steps
    the two tables give the same levels."""
    shift = math.exp(0.69)
    flux = levels("simple", 30, shift, table=10000)
    flow = levels("simple", 30, shift)
    assert flux[1] == pytest.approx(shift / (shift + 10000 / 9667 - 1), abs=1e-12)
    assert flow[1] == pytest.approx(shift / (shift + 1000 / 967 - 1), abs=1e-12)
    assert abs(flux[1] - flow[1]) > 1e-4
    assert levels("simple", 20, shift, table=10000) == pytest.approx(levels("simple", 20, shift))
    assert levels("sgm_uniform", 20, shift, table=10000)[-2] != pytest.approx(
        levels("sgm_uniform", 20, shift)[-2], abs=1e-6
    )  # σ_min: σ(1/10000), not σ(1/1000)


@pytest.mark.fast
def test_a_request_runs_and_records_its_flow_levels():
    body = {"prompt": "x", "sampler": "euler", "scheduler": "simple", "shift": 2.0}
    body |= {"num_inference_steps": 30}
    for table in FLOW_LEVELS:
        choice = resolve(JobRequest.from_body({**body, "flow_levels": table}, FLOW), FLOW)
        assert choice.sigmas == tuple(levels("simple", 30, 2.0, table=table))
        assert choice.to_dict()["flow_levels"] == table
    plain = resolve(JobRequest.from_body(body, FLOW), FLOW)
    assert plain.to_dict()["flow_levels"] == 1000 and plain.sigmas == tuple(
        levels("simple", 30, 2.0)
    )


@pytest.mark.fast
def test_levels_of_the_wan22_template_recipes():
    """The issue's cases by hand: 4 steps at shift 5 (σ = 5t/(1+4t) at t = 1, 3/4, 1/2, 1/4),
    UniPC's 4 steps (5 computed: t = 1, .8, .6, .4, .2, the last dropped), 20 at shift 8;
    diffusers' FlowMatchEuler spacing [1, 0.910, 0.717, 0.024] is not it."""
    assert np.allclose(levels("simple", 4, 5.0), [1, 0.9375, 5 / 6, 0.625, 0], atol=1e-12)
    unipc = levels("simple", 4, 5.0, drop_penultimate=True)
    assert np.allclose(unipc, [1, 20 / 21, 15 / 17, 10 / 13, 0], atol=1e-12)
    twenty = levels("simple", 20, 8.0)
    assert len(twenty) == 21 and twenty[0] == 1.0 and twenty[-1] == 0.0
    assert np.allclose(twenty[:-1], [sigma_of(1 - k / 20, 8.0) for k in range(20)], atol=1e-12)
    assert abs(twenty[1] - 7.6 / 7.65) < 1e-12 and abs(twenty[10] - 4 / 4.5) < 1e-12
    assert not np.allclose(levels("simple", 4, 5.0)[:4], [1, 0.910, 0.717, 0.024], atol=1e-2)


# -- samplers against their reference integrations ------------------------------------------------


def _toy_velocity():
    torch.manual_seed(0)
    weight, target = torch.randn(6, 6) * 0.3, torch.randn(2, 6)
    return lambda x, s: torch.tanh(x.to(torch.float32) @ weight) * (1 + s) - 0.5 * target


def _run_sampler(sampler: str, velocity, noise: torch.Tensor, sigmas: list[float], seed: int):
    """As a pipeline calls a scheduler: set_timesteps, then one `step` per timestep."""
    scheduler = FlowSampler(sampler, sigmas, seed)
    scheduler.set_timesteps(len(sigmas) - 1)
    x = noise.clone()
    for t in scheduler.timesteps:
        x = scheduler.step(velocity(x, float(t) / 1000), t, x, return_dict=False)[0]
    return x


@pytest.mark.fast
@pytest.mark.parametrize("sampler", SAMPLERS)
def test_each_sampler_equals_its_reference_integration(sampler):
    velocity, noise = _toy_velocity(), torch.randn(2, 6, generator=torch.Generator().manual_seed(1))
    for scheduler, steps, shift in (("simple", 4, 5.0), ("beta", 8, 8.0), ("normal", 3, 3.1)):
        sigmas = levels(scheduler, steps, shift, drop_penultimate=sampler in DROPS_PENULTIMATE)
        got = _run_sampler(sampler, velocity, noise, sigmas, seed=7)
        want = integrate(sampler, velocity, noise, sigmas, seed=7)
        assert torch.allclose(got.double(), want, atol=2e-6), (sampler, scheduler, steps)
    # The methods differ: a sampler equal to another would pass the above for the wrong one.
    others = {
        name: _run_sampler(name, velocity, noise, levels("simple", 4, 5.0), 7)
        for name in SAMPLERS
        if name != sampler
    }
    mine = _run_sampler(sampler, velocity, noise, levels("simple", 4, 5.0), 7)
    assert all((mine - other).abs().max() > 1e-4 for other in others.values())


@pytest.mark.fast
def test_euler_ancestral_by_hand():
    """ComfyUI's flow Euler ancestral (`comfy/k_diffusion/sampling.py`,
    `sample_euler_ancestral_RF`, eta 1) from 1 to 0.5 with D = 0 at x = 1: σ_d = 0.5²/1 =
    0.25, the Euler step gives x_d = 0.25, the re-noise scales it by (1 − 0.5)/(1 − 0.25) =
    2/3 and adds √(0.25 − 0.25²·(2/3)²) = √2/3 of the job's noise (seed + 1): 1/6 + (√2/3)·ε;
    into 0 the step returns D."""
    x = torch.ones(2, 3)
    scheduler = FlowSampler("euler_ancestral", [1.0, 0.5, 0.0], seed=7)
    scheduler.set_timesteps(2)
    first = scheduler.step(x, 1000.0, x, return_dict=False)[0]  # v = x: D = x − 1·v = 0
    noise = torch.randn((2, 3), generator=torch.Generator().manual_seed(8))
    assert torch.allclose(first, 1 / 6 + math.sqrt(2) / 3 * noise, atol=1e-6)
    velocity = torch.full((2, 3), 0.25)
    last = scheduler.step(velocity, 500.0, first, return_dict=False)[0]
    assert torch.allclose(last, first - 0.5 * velocity, atol=1e-6)
    again = FlowSampler("euler_ancestral", [1.0, 0.5, 0.0], seed=7)  # the same seed, the same draw
    assert torch.equal(again.step(x, 1000.0, x, return_dict=False)[0], first)


# -- the request fields' rules and recipes --------------------------------------------------------

VIDEO = {"task": "text-to-video", "size_multiple": 16, "min_size": 16, "max_size": 2048}
VIDEO.update(frame_multiple=4, max_frames=81)
FLOW = Limits(**VIDEO, samplers=SAMPLERS, schedulers=SCHEDULERS, default_shift=3.0)
A14B = dataclasses.replace(FLOW, two_experts=True)
OWN_ONLY = Limits(**VIDEO)


@pytest.mark.fast
@pytest.mark.parametrize(
    ("limits", "body", "rule"),
    [
        (FLOW, {"sampler": "heun"}, "sampler must be one of default, euler"),
        (FLOW, {"scheduler": "karras"}, "scheduler must be one of default, simple"),
        (FLOW, {"shift": 0}, "shift must be above 0"),
        (FLOW, {"shift": -2}, "shift must be between 0"),
        (FLOW, {"sigmas": [1, 0.5, 0.6, 0]}, "strictly decreasing"),
        (FLOW, {"sigmas": [0.9, 0.5, 0]}, "the first must be 1"),
        (FLOW, {"sigmas": [1, 0.5]}, "the last 0"),
        (FLOW, {"sigmas": [1, 0.5, 0], "num_inference_steps": 4}, "len\\(sigmas\\) - 1 = 2"),
        (FLOW, {"sigmas": [1, 0.5, 0], "shift": 3}, "leave shift out"),
        (FLOW, {"sigmas": [1, 0.5, 0], "flow_levels": 10000}, "leave flow_levels out"),
        (FLOW, {"flow_levels": 5000}, "flow_levels must be one of 1000, 10000"),
        (OWN_ONLY, {"flow_levels": 10000}, "runs only its own scheduler"),
        (FLOW, {"sampler": "uni_pc", "num_inference_steps": 1}, "at least 2 steps"),
        (FLOW, {"switch_step": 1}, "only to models with a high- and a low-noise expert"),
        (FLOW, {"guidance_scale_low": 2}, "only to models with a high- and a low-noise"),
        (A14B, {"switch_step": 5, "num_inference_steps": 4}, "between 0 and num_inference_steps"),
        (A14B, {"guidance_scale": 1, "guidance_scale_low": 3}, "needs guidance_scale above 1"),
        (OWN_ONLY, {"sampler": "euler"}, "runs only its own scheduler"),
        (OWN_ONLY, {"shift": 5}, "runs only its own scheduler"),
        (OWN_ONLY, {"recipe": "wan2.1"}, "set by recipe wan2.1"),
        (
            FLOW,
            {"recipe": "wan2.2-a14b-4step"},
            "applies only to models with a high- .* recipe wan2.2-a14b-4step",
        ),
        (FLOW, {"recipe": "nope"}, "recipe must be one of .*wan2.2-a14b-4step"),
    ],
)
def test_each_field_is_refused_with_its_rule(limits, body, rule):
    with pytest.raises(ValueError, match=rule):
        JobRequest.from_body({"prompt": "x", **body}, limits)


@pytest.mark.fast
def test_a_body_with_nulls_and_no_recipe_is_taken():
    request = JobRequest.from_body({"prompt": "x", "cache": None, "shift": None}, FLOW)
    assert request.recipe == "" and request.shift is None and request.cache is None


@pytest.mark.fast
def test_recipes_fill_what_the_request_leaves_out():
    four = JobRequest.from_body({"prompt": "x", "recipe": "wan2.2-a14b-4step"}, A14B)
    assert (four.num_inference_steps, four.guidance_scale, four.guidance_scale_low) == (4, 1, 1)
    choice = resolve(four, A14B)
    assert (choice.sampler, choice.scheduler, choice.shift, choice.switch_step) == (
        "euler",
        "simple",
        5.0,
        2,
    )
    assert np.allclose(choice.sigmas, [1, 0.9375, 5 / 6, 0.625, 0])
    mine = JobRequest.from_body(
        {"prompt": "x", "recipe": "wan2.2-a14b-20step", "shift": 6, "num_inference_steps": 10},
        A14B,
    )
    assert (mine.shift, mine.num_inference_steps, mine.switch_step, mine.guidance_scale) == (
        6.0,
        10,
        10,
        3.5,
    )
    # Left at default: the model's own scheduler; a shift alone: ComfyUI's euler/simple.
    assert resolve(JobRequest.from_body({"prompt": "x"}, FLOW), FLOW) is None
    shifted = resolve(JobRequest.from_body({"prompt": "x", "shift": 5}, FLOW), FLOW)
    assert (shifted.sampler, shifted.scheduler, shifted.shift) == ("euler", "simple", 5.0)
    own_shift = resolve(JobRequest.from_body({"prompt": "x", "sampler": "lcm"}, FLOW), FLOW)
    assert own_shift.shift == 3.0 and own_shift.scheduler == "simple"
    manual = JobRequest.from_body({"prompt": "x", "sigmas": [1, 0.75, 0.5, 0]}, FLOW)
    assert manual.num_inference_steps == 3 and resolve(manual, FLOW).sigmas == (1, 0.75, 0.5, 0)
    assert "wan2.2-a14b-4step" in recipes.recipes_table()


@pytest.mark.fast
def test_the_boundary_hands_over_at_the_switch_step():
    sigmas = tuple(levels("simple", 4, 5.0))
    times = torch.tensor([s * 1000 for s in sigmas[:-1]], dtype=torch.float32)
    for switch in range(5):
        boundary = boundary_ratio(sigmas, switch) * 1000
        experts = ["high" if t >= boundary else "low" for t in times]
        assert experts == ["high"] * switch + ["low"] * (4 - switch)


# -- a tiny model's job against the reference integration ------------------------------------------

JOB = {"prompt": "a red fox", "seed": 11, "width": 64, "height": 64, "num_frames": 5}
JOB.update(num_inference_steps=4, guidance_scale=1.0)


def _preset(name: str) -> tuple[Any, Limits]:
    """A tiny preset's pipeline and the limits its jobs run under (`run_here`'s)."""
    pipe = build_preset(name)
    pipe.set_progress_bar_config(disable=True)
    return pipe, RankModel.here(pipe).limits


@pytest.fixture(scope="module")
def tiny_wan():
    return _preset("tiny-wan")[0]


def _job(pipe, body, tensors=None, hooks=None) -> tuple[RankResult, dict]:
    """`body` through the engine's `run_on_rank` (`image_jobs.run_here`): the rank's result
    and the sampling that ran (job.json's `sampling`)."""
    _, result = run_here(pipe, body, tensors, hooks=hooks)
    return result, result.clock.notes["sampling"]


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_a_tiny_models_job_equals_the_reference_integration(tiny_wan, sampler):
    """The same model calls (the DiT at σ·1000 on the job's text), the same levels, the
    sampler written independently: equal to float32 rounding; the model's own scheduler is
    back after the job."""
    pipe = tiny_wan
    own = pipe.scheduler
    body = {**JOB, "sampler": sampler, "shift": 5.0}
    tensors = encoded(pipe, body)  # rank 0's text: the reference's too
    result, record = _job(pipe, body, tensors)
    latents = result.latents
    assert pipe.scheduler is own
    sigmas = levels("simple", 4, 5.0, drop_penultimate=sampler in DROPS_PENULTIMATE)
    assert record == {
        "sampler": sampler,
        "scheduler": "simple",
        "shift": 5.0,
        "flow_levels": 1000,
        "sigmas": pytest.approx(sigmas, abs=1e-8),
    }

    def velocity(x, sigma):
        with torch.no_grad():
            return pipe.transformer(
                hidden_states=x.to(torch.float32),
                timestep=torch.tensor([sigma * 1000], dtype=torch.float32),
                encoder_hidden_states=tensors["prompt_embeds"],
                return_dict=False,
            )[0]

    noise = pipe.prepare_latents(
        1, 16, 64, 64, 5, torch.float32, CPU, torch.Generator().manual_seed(JOB["seed"])
    )
    want = integrate(sampler, velocity, noise, sigmas, JOB["seed"])
    assert torch.allclose(latents.double(), want, rtol=1e-4, atol=1e-5)


def test_the_models_own_scheduler_is_recorded_as_it_ran(tiny_wan):
    pipe = tiny_wan
    _, record = _job(pipe, JOB)
    assert record["sampler"] == record["scheduler"] == "default"
    assert record["shift"] == pipe.scheduler.config.flow_shift
    assert len(record["sigmas"]) == 5 and record["sigmas"][-1] == 0.0


def test_the_switch_step_picks_the_expert_of_each_step():
    """Wan 2.2 A14B: the expert per step follows switch_step (the model's boundary 0.9 would
    give the 4-step shift-5 levels two high steps whatever the switch), the low-noise guidance
    reaches the pipeline, and the model's boundary is back after the job."""
    pipe, _ = _preset(A14B_MODEL)
    calls = []
    for name in ("transformer", "transformer_2"):
        getattr(pipe, name).register_forward_hook(lambda *_, name=name: calls.append(name))
    body = {**RECIPE_JOB, "switch_step": 1, "guidance_scale": 2.0, "guidance_scale_low": 3.0}
    _, record = _job(pipe, body)
    assert record["experts"] == ["high", "low", "low", "low"]
    assert calls == ["transformer"] * 2 + ["transformer_2"] * 6  # two branches a step
    assert pipe.config.boundary_ratio == 0.9 and pipe._guidance_scale_2 == 3.0


# -- served: the Wan 2.2 4-step recipe on 1, 2 and 4 ranks -----------------------------------------

A14B_MODEL = "tiny-wan2.2-i2v-a14b"


def _start_png() -> str:
    import base64
    import io

    from PIL import Image

    ramp = np.linspace(0, 255, 64 * 64 * 3).reshape(64, 64, 3).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(ramp).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


RECIPE_JOB = {"prompt": "a lighthouse", "seed": 3, "width": 64, "height": 64, "num_frames": 5}
RECIPE_JOB.update(recipe="wan2.2-a14b-4step", image=_start_png())


@pytest.mark.parametrize("world_size", [2, 4])
def test_the_4step_recipe_spreads_over_the_ranks(backends, references, world_size):
    """cfg 1: every rank works on the one branch; the same levels, the same switch at step 2,
    the output equal to world size 1 within rounding."""
    one_job, one_frames, one_latents = references.get(A14B_MODEL, RECIPE_JOB)
    client = backends.get(A14B_MODEL, world_size, *REFERENCE_FLAGS)
    job, frames = run_job(client, RECIPE_JOB)
    one = backends.get(A14B_MODEL, 1, *REFERENCE_FLAGS)
    for record in (one.record(one_job["id"]), client.record(job["id"])):  # job.json
        sampling = record["sampling"]
        assert sampling["experts"] == ["high", "high", "low", "low"]
        assert np.allclose(sampling["sigmas"], [1, 0.9375, 0.8333333, 0.625, 0], atol=1e-6)
        assert (sampling["sampler"], sampling["scheduler"], sampling["shift"]) == (
            "euler",
            "simple",
            5.0,
        )
    latents = client.latents(job["id"])
    assert np.abs(np.asarray(latents) - np.asarray(one_latents)).max() < 1e-4


# Each sampler guided (two branches: CFG-parallel on 2 ranks), and with the step cache; the
# expert switch at step 2 of 4 with shift 5 (the recipe's spacing). Random weights move the
# first block's output a lot between steps (tests/parallel/test_step_cache.py): 8 steps and a
# threshold near 1 make the cache skip some.
GUIDED = {**RECIPE_JOB, "recipe": "", "guidance_scale": 3.5, "num_inference_steps": 4}
GUIDED.update(shift=5.0, switch_step=2)
CACHED = {**GUIDED, "num_inference_steps": 8, "switch_step": 4}
CACHED["cache"] = {"method": "first-block", "threshold": 0.95}


def _parallel_job(client, references, body: dict) -> tuple[dict, dict, bool]:
    """Run `body`: (its record, world size 1's record, whether frames and latents are
    byte-identical); fails unless within rounding."""
    one_job, one_frames, one_latents = references.get(A14B_MODEL, body)
    job, frames = run_job(client, body)
    latents = np.asarray(client.latents(job["id"]))
    assert np.abs(latents - np.asarray(one_latents)).max() < 1e-4, body["sampler"]
    one = references.pool.get(A14B_MODEL, 1, *REFERENCE_FLAGS).record(one_job["id"])
    same = frames == one_frames and np.array_equal(latents, np.asarray(one_latents))
    return client.record(job["id"]), one, same


def test_every_sampler_in_parallel_equals_world_size_1(backends, references):
    """Guided on 4 ranks, CFG x Ulysses: within rounding of world size 1; the same levels and
    switch step on every rank. (On 2 ranks, CFG-parallel, byte-identical: every sampler's
    cached job in the next test, whose computed steps run as an uncached job's, and lcm's
    skip none.)"""
    client = backends.get(A14B_MODEL, 4, *REFERENCE_FLAGS)
    for sampler in SAMPLERS:
        record, one, _ = _parallel_job(client, references, {**GUIDED, "sampler": sampler})
        assert record["sampling"] == one["sampling"], sampler
        assert record["sampling"]["experts"] == ["high", "high", "low", "low"], sampler
        assert record["plan"]["cfg_degree"] == 2


def test_the_step_cache_works_with_every_sampler(backends, references):
    """A skipped step still gives the sampler an output (the first block's, plus the cached
    residual of the others): a multistep sampler's history holds it as any other step's. Every
    rank takes world size 1's skips; the output is CFG-parallel's byte-identical one, with
    world size 1's levels and switch step, for every sampler (so every sampler in parallel on
    2 ranks equals world size 1: one job a sampler proves both)."""
    client = backends.get(A14B_MODEL, 2, *REFERENCE_FLAGS)
    for sampler in SAMPLERS:
        record, one, same = _parallel_job(client, references, {**CACHED, "sampler": sampler})
        assert record["sampling"] == one["sampling"], sampler
        assert record["plan"]["cfg_degree"] == 2
        skipped = record["cache"]["skipped_steps"]
        assert skipped == one["cache"]["skipped_steps"], (sampler, record["cache"])
        # lcm re-noises every step with fresh noise: its inputs change too much to skip here
        assert skipped or sampler == "lcm", (sampler, record["cache"])
        assert record["sampling"]["experts"] == ["high"] * 4 + ["low"] * 4
        assert same, sampler


def test_bad_values_are_refused_and_the_next_job_is_unchanged(backends, references):
    from paradit.backend.client.http import BackendError

    client = backends.get(A14B_MODEL, 1, *REFERENCE_FLAGS)
    limits = client.info()["limits"]
    assert (limits["samplers"], limits["schedulers"]) == (list(SAMPLERS), list(SCHEDULERS))
    assert limits["two_experts"] and limits["default_shift"] > 0
    before = client.jobs()
    for bad, rule in (
        ({"sampler": "heun"}, "sampler must be one of default, euler"),
        ({"shift": -1}, "shift must be"),
        ({"sigmas": [1, 0.7, 0.8, 0]}, "strictly decreasing"),
        ({"switch_step": 9}, "switch_step must be between 0 and num_inference_steps"),
    ):
        with pytest.raises(BackendError, match=rule) as refused:
            client.submit({**RECIPE_JOB, **bad})
        assert refused.value.status == 422
    assert client.jobs() == before  # nothing was queued
    job, frames = run_job(client, RECIPE_JOB)
    assert frames == references.frames(A14B_MODEL, RECIPE_JOB)


def test_the_4step_recipe_with_two_loras_from_every_frontend(backends, tmp_path):
    """ComfyUI's 4-step path with a LoRA per expert (high 1.0 / low 1.0) from HTTP, the node's
    request (steps and cfg widgets at the node's defaults: the recipe sets them), the web
    form's and the command line: one job, the same frames; job.json: the levels, the experts
    high, high, low, low, and the LoRAs."""
    import base64
    import os

    from lora_files import comfy_wan_lora

    from paradit.backend.request import lora_item
    from paradit.nodes.params import IMAGE_TO_VIDEO
    from paradit.nodes.run import build_request
    from paradit.web.forms import job_body

    pipe = build_preset(A14B_MODEL)
    names = ("lightx2v_4steps_high.safetensors", "lightx2v_4steps_low.safetensors")
    experts = (pipe.transformer, pipe.transformer_2)
    for name, expert, seed in zip(names, experts, (21, 22), strict=True):
        comfy_wan_lora(backends.lora_dir / name, expert, seed=seed)
    loras = [lora_item(names[0], 1.0, "high"), lora_item(names[1], 1.0, "low")]
    client = backends.get(A14B_MODEL, 1, *REFERENCE_FLAGS)
    http = {**RECIPE_JOB, "loras": loras}

    image = tmp_path / "start.png"
    image.write_bytes(base64.b64decode(RECIPE_JOB["image"]))
    shape = {"width": 64, "height": 64}
    widgets = {p.name: p.default for p in IMAGE_TO_VIDEO.params}
    widgets.update(shape, prompt=RECIPE_JOB["prompt"], frames=5, seed=3)
    widgets["recipe"] = RECIPE_JOB["recipe"]
    assert (widgets["steps"], widgets["guidance"]) == (30, 5.0)  # the node's, not the recipe's
    node = {**build_request(IMAGE_TO_VIDEO, widgets, image.read_bytes()), "loras": loras}
    form_values = {**shape, "prompt": RECIPE_JOB["prompt"], "num_frames": 5, "seed": 3}
    form_values.update(num_inference_steps=30, guidance_scale=5.0, image=str(image))
    form_values.update(loras=loras, sampler="default", scheduler="", recipe=RECIPE_JOB["recipe"])
    form = job_body(limits=client.info()["limits"], **form_values)

    runs = {}
    for label, body in (("http", http), ("node", node), ("form", form)):
        job, frames = run_job(client, body)
        runs[label] = (client.record(job["id"]), frames)
    out = tmp_path / "cli"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PARADIT_LOG": "WARNING"}
    result = backends.paradit(
        "generate", RECIPE_JOB["prompt"], "--server", client.url, "--out", str(out),
        "--recipe", RECIPE_JOB["recipe"], "--image", str(image), "--width", "64",
        "--height", "64", "--frames", "5", "--seed", "3",
        "--lora", f"{names[0]}:1,0", "--lora", f"{names[1]}:0,1",
        env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    cli_frames = [(out / "frames" / f"{i:06d}.png").read_bytes() for i in range(5)]
    runs["cli"] = (json.loads((out / "job.json").read_text()), cli_frames)

    plain = run_job(client, RECIPE_JOB)[1]
    for label, (record, frames) in runs.items():
        sampling = record["sampling"]
        assert sampling["experts"] == ["high", "high", "low", "low"], label
        assert np.allclose(sampling["sigmas"], [1, 0.9375, 0.8333333, 0.625, 0], atol=1e-6)
        assert record["request"]["num_inference_steps"] == 4, label
        assert record["request"]["guidance_scale"] == 1.0, label
        applied = [(item["name"], item["high"], item["low"]) for item in record["loras"]]
        assert applied == [(names[0], 1.0, 0.0), (names[1], 0.0, 1.0)], label
        assert frames == runs["http"][1], label
    assert runs["http"][1] != plain  # the LoRAs took part


@pytest.mark.parametrize(
    ("preset", "recipe"),
    [("tiny-qwen-image", "qwen-image"), ("tiny-z-image", "z-image-turbo"), ("tiny-flux", "")],
)
def test_the_image_families_run_the_samplers(preset, recipe):
    """Qwen-Image, Z-Image and Flux call paradit's scheduler as their FlowMatch Euler one:
    euler on the levels the model's own scheduler ran gives its output (to float32
    rounding); their template recipe runs. Flux's shift follows the image size: a sampler
    needs a shift."""
    pipe, limits = _preset(preset)
    assert limits.samplers == SAMPLERS and not limits.two_experts
    body = {"prompt": "a red fox", "seed": 4, "num_inference_steps": 4}
    own, record = _job(pipe, body)
    assert record["sampler"] == "default" and record["sigmas"][0] == 1.0
    body_euler = {**body, "sampler": "euler", "sigmas": record["sigmas"]}
    mine, record_euler = _job(pipe, body_euler)
    assert record_euler["scheduler"] == "manual"
    assert torch.allclose(mine.latents, own.latents, rtol=1e-5, atol=1e-5)
    if recipe:
        _, record = _job(pipe, {**body, "recipe": recipe})
        fields = recipes.find_recipe(recipe).fields
        assert (record["sampler"], record["shift"]) == (fields["sampler"], fields["shift"])
    else:
        assert limits.default_shift == 0.0
        with pytest.raises(ValueError, match="give shift"):
            JobRequest.from_body({**body, "sampler": "euler"}, limits)


def test_hunyuan_video15_runs_the_samplers_through_its_wrapper():
    """HunyuanVideo 1.5's runner is a wrapper (its step callbacks) around the pipeline: the
    job's sampler is set on the pipeline it calls. euler on the levels the model's own
    scheduler ran gives its output (to float32 rounding); euler/simple at shift 7 (the shift
    of ComfyUI's HunyuanVideo 1.5 template) runs the DiT at σ·1000 for σ = 7t / (1 + 6t),
    t = 1, 3/4, 1/2, 1/4 (the static flow shift of Esser et al. 2024, "Scaling Rectified
    Flow Transformers", eq. 23, as ComfyUI's simple scheduler spaces it), the step callback
    after each step, and the model's own scheduler (FlowMatch Euler at its config's shift,
    `limits.default_shift`) is back after every job."""
    pipe, limits = _preset("tiny-hunyuanvideo1.5")
    assert limits.samplers == SAMPLERS and limits.default_shift == pipe.scheduler.config.shift
    own_scheduler = pipe.scheduler
    times = []
    pipe.transformer.register_forward_pre_hook(
        lambda _m, _a, kwargs: times.append(float(kwargs["timestep"][0])), with_kwargs=True
    )
    body = {"prompt": "a red fox", "seed": 4, "num_inference_steps": 4, "guidance_scale": 1.0}
    body.update(width=32, height=32, num_frames=1)
    own, record = _job(pipe, body)
    assert record["sampler"] == "default" and record["shift"] == limits.default_shift
    mine, record_euler = _job(pipe, {**body, "sigmas": record["sigmas"]})
    assert record_euler["sampler"] == "euler" and record_euler["scheduler"] == "manual"
    assert torch.allclose(mine.latents, own.latents, rtol=1e-5, atol=1e-5)
    assert pipe.scheduler is own_scheduler
    times.clear()
    steps = []
    # the engine's step callback, as the leader's hooks see it: (step, total) after each
    # step; `step - 1` is the pipeline's index of the step
    hooks = JobHooks(on_step=lambda step, _total: steps.append(step - 1) or False)
    shifted, record = _job(pipe, {**body, "sampler": "euler", "shift": 7.0}, hooks=hooks)
    sigmas = [7 * t / (1 + 6 * t) for t in (1.0, 0.75, 0.5, 0.25)]
    assert record["sigmas"] == pytest.approx([*sigmas, 0.0], abs=1e-6)
    assert times == pytest.approx([s * 1000 for s in sigmas], abs=1e-3)
    assert steps == [0, 1, 2, 3] and not torch.allclose(shifted.latents, own.latents, atol=1e-3)
    assert pipe.scheduler is own_scheduler and "step" not in vars(own_scheduler)


def _ltxv_levels(steps: int, tokens: int, terminal: float) -> list[float]:
    """LTX-2's noise levels as Lightricks' LTX-Video schedule makes them (ComfyUI's
    LTXVScheduler node names its parameters: max_shift 2.05, base_shift 0.95, stretch,
    terminal): t = 1, 1 - 1/steps, ..., 1/steps; mu linear in the video latent's token count
    from base_shift at 1024 tokens to max_shift at 4096; σ = e^mu / (e^mu + 1/t - 1); then
    1 - σ scaled so that the last level is `terminal`; and 0."""
    mu = 0.95 + (2.05 - 0.95) * (tokens - 1024) / (4096 - 1024)
    shifted = [math.exp(mu) / (math.exp(mu) + 1 / (1 - k / steps) - 1) for k in range(steps)]
    scale = (1 - shifted[-1]) / (1 - terminal)
    return [round(1 - (1 - s) / scale, 10) for s in shifted] + [0.0]


def test_ltx2_runs_the_samplers_on_its_video_and_audio_latents():
    """LTX-2's own scheduler spaces its levels as ComfyUI's LTXVScheduler at its defaults (the
    tiny job's video latent: 2 frames of 2x2 tokens, terminal 0.1); euler on them gives the
    pipeline's own video and audio latents (to float32 rounding: the pipeline steps both
    with copies of the job's sampler); levels stretched to another terminal (an
    LTXVScheduler's explicit `sigmas`) run the DiT at σ·1000, and the model's own scheduler
    is back after the job."""
    pipe, limits = _preset("tiny-ltx2")
    assert limits.samplers == SAMPLERS and limits.default_shift == 0.0  # token-dependent
    own_scheduler = pipe.scheduler
    body = {"prompt": "a drum", "seed": 3, "num_inference_steps": 4, "guidance_scale": 1.0}
    body.update(width=64, height=64, num_frames=9)  # latent: 2 frames of 2x2 tokens
    own, record = _job(pipe, body)
    assert record["sampler"] == "default"
    assert record["sigmas"] == pytest.approx(_ltxv_levels(4, 8, 0.1), abs=1e-6)
    sigmas = _ltxv_levels(4, 8, 0.2)
    times = []
    pipe.transformer.register_forward_pre_hook(
        lambda _m, _a, kwargs: times.append(float(kwargs["timestep"].flatten()[0])),
        with_kwargs=True,
    )
    for given, same in ((record["sigmas"], True), (sigmas, False)):
        times.clear()
        body_euler = {**body, "sigmas": given}
        mine, record_euler = _job(pipe, body_euler)
        assert len(mine.outputs) == 2  # the video's latents and the audio's
        assert record_euler["sampler"] == "euler"
        assert record_euler["sigmas"] == pytest.approx(given, abs=1e-8)
        assert times == pytest.approx([s * 1000 for s in given[:-1]], abs=1e-3)
        for got, want in zip(own.outputs, mine.outputs, strict=True):
            assert torch.allclose(got, want, rtol=1e-5, atol=1e-5) == same
        assert pipe.scheduler is own_scheduler


@pytest.mark.fast
def test_the_nodes_append_the_sampling_widgets_at_the_models_default():
    """Appended after the widgets saved workflows hold (optional), each at a value that
    leaves its field out; a picked recipe sets the node's steps and cfg."""
    from paradit.nodes.params import TASK_NODES
    from paradit.nodes.run import build_request

    appended = ["sampler_name", "scheduler", "shift", "cfg_low", "switch_step", "recipe"]
    for node in TASK_NODES:
        params = node.params
        assert [p.name for p in params[-6:]] == appended
        assert all(p.optional for p in params[-6:])
        assert params[-6].choices == ("default", *SAMPLERS) and params[-6].kind == "combo"
        assert params[-5].choices == ("default", *SCHEDULERS)
        values = {p.name: p.default for p in params} | {"prompt": "x"}
        body = build_request(node, values, b"png" if node.needs_image else None)
        assert not {"sampler", "scheduler", "shift", "guidance_scale_low", "switch_step"} & set(
            body
        )
        assert "recipe" not in body and body["num_inference_steps"] == values["steps"]
        picked = build_request(
            node, {**values, "recipe": "wan2.2-a14b-4step", "shift": 6.0}, b"png"
        )
        assert picked["recipe"] == "wan2.2-a14b-4step" and picked["shift"] == 6.0
        assert "num_inference_steps" not in picked and "guidance_scale" not in picked
