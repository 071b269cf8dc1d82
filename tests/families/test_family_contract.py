"""The family contract: one suite run over every registered family spec (`families.SPECS`;
a family registered gets it), each on its smallest job (`FamilySpec.tiny_job`: its tiny
preset, size, steps and guidance, and diffusers' pipeline called for it):

1. world size 1 equals diffusers' own pipeline called directly, byte for byte;
2. CFG parallel (where the job guides) and Ulysses at 2, 3 and 4 ranks equal world size 1
   (CFG halves alone byte for byte unless the family batches its branches, a split sequence
   within rounding), in one gloo group of 4; a plan for another number of ranks is refused;
3. families with a step cache: its decisions at 4 ranks are world size 1's, from the same
   metrics (the ranks agree, or the job fails); the others: a `cache` request is refused
   with the rule;
4. a LoRA job equals the same model with diffusers' `fuse_lora` applied: the DiT's weights
   byte for byte, and the image against diffusers' pipeline called with them.

Jobs run as a rank runs them (`runtime.job.run_on_rank` through tests/image_jobs.py: the
family encodes and prepares, the pipeline stops at the latents, the VAE decodes tile by tile,
the tiles dealt to the ranks), judged with `paradit verify`'s measure (tools/equivalence.py,
float32 thresholds, frames and final latents). What a family adds beyond the contract (image
and video inputs, audio, experts, odd token counts, served backends) stays in its own file.

Cost: about 70 s (in the suite's two-worker run on 2 cores).
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import numpy as np
import pytest
import torch
from conftest import spawn_gloo
from image_jobs import CPU, encoded, preset_pipeline, rank_groups, run_here
from lora_files import diffusers_fused, dit_patcher, lora_items, peft_lora

from paradit.backend.models.families import SPECS
from paradit.backend.models.family_spec import FamilySpec, TinyJob
from paradit.backend.parallel import parallelize
from paradit.backend.parallel.plan import ParallelPlan
from paradit.backend.request import NO_STEP_CACHE, JobRequest
from paradit.backend.serving.outputs import to_uint8
from paradit.backend.tools.equivalence import (
    DIFFERENT,
    FLOAT32,
    IDENTICAL,
    WITHIN_ROUNDING,
    compare,
)

FAMILIES = [pytest.param(spec, id=spec.name) for spec in SPECS]
LORA = "contract"
LORA_STRENGTH = 0.8


def _job(spec: FamilySpec) -> TinyJob:
    assert spec.tiny_job is not None, f"{spec.name} declares no tiny job"
    return spec.tiny_job


@dataclasses.dataclass
class WorldSize1:
    """A family's tiny job at world size 1, one thread: the pipeline it ran on (tiles on),
    rank 0's encoded text, the frames (uint8) and final latents, and the cached job's."""

    pipe: Any
    plain_dit: Any
    """A copy of the DiT before `parallelize` hooked it (diffusers' LoRA reference starts
    from it: a deep copy of a hooked module still runs the original's forward)."""
    family: Any
    parallel: Any
    tensors: dict
    frames: np.ndarray
    latents: np.ndarray
    guided: bool
    cached: tuple[np.ndarray, np.ndarray, dict] | None


def _world_size_1(spec: FamilySpec) -> WorldSize1:
    job = _job(spec)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        pipe, family = preset_pipeline(job.preset, job.tile)
        plain_dit = copy.deepcopy(pipe.transformer)
        # the DiT as a rank holds it at world size 1 (the step cache's hooks installed)
        parallel = parallelize([pipe.transformer], ParallelPlan(1, 1, 1, False, False), CPU)
        limits = family.limits(pipe, tiny=True)
        body = dict(job.body)
        guided = family.uses_cfg(pipe, JobRequest.from_body(body, limits))
        tensors = encoded(pipe, body)
        frames, result = run_here(pipe, body, tensors, parallel=parallel)
        cached = None
        if limits.step_cache:
            cached_frames, cached_result = run_here(
                pipe, job.cached_body(), tensors, parallel=parallel
            )
            cached = (cached_frames, cached_result.latents.numpy(), cached_result.cache)
    finally:
        torch.set_num_threads(threads)
    return WorldSize1(
        pipe, plain_dit, family, parallel, tensors, frames, result.latents.numpy(), guided, cached
    )


@pytest.fixture(scope="module")
def world_size_1():
    """Each family's `WorldSize1`, made on first use and kept for the module."""
    done: dict[str, WorldSize1] = {}

    def get(spec: FamilySpec) -> WorldSize1:
        if spec.name not in done:
            done[spec.name] = _world_size_1(spec)
        return done[spec.name]

    return get


def _summary(result) -> str:
    return f"{result.verdict}: {result.overall} latent_rel_l2 {result.latent_rel_l2}"


@pytest.mark.fast
def test_the_suite_runs_on_every_registered_family():
    """The parameters are the registry, in its order; every spec declares its tiny job on one
    of its tiny presets (the spec checks that itself)."""
    assert [param.id for param in FAMILIES] == [spec.name for spec in SPECS]
    for spec in SPECS:
        job = _job(spec)
        assert job.preset in spec.tiny_presets
        with pytest.raises(ValueError, match="not one of its tiny presets"):
            dataclasses.replace(spec, tiny_jobs=(dataclasses.replace(job, preset="tiny-none"),))


# -- 1. world size 1 against diffusers called directly -----------------------------------------


@pytest.mark.parametrize("spec", FAMILIES)
def test_world_size_1_equals_diffusers_called_directly(world_size_1, spec):
    """The family's pipeline as a user calls it (its guidance under its own name; the VAE's
    own tiled decode at the job's tile size) gives the same frames, bit for bit."""
    ref = world_size_1(spec)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        direct = to_uint8(np.asarray(_job(spec).direct(ref.pipe, dict(_job(spec).body))))
    finally:
        torch.set_num_threads(threads)
    result = compare(ref.frames, direct, FLOAT32)
    assert result.verdict == IDENTICAL, f"{spec.name}: {_summary(result)}"


# -- 2 and 3. CFG and Ulysses at 2, 3 and 4 ranks; the step cache's decisions -------------------


def _plan(size: int, guided: bool) -> ParallelPlan:
    """On n ranks: CFG halves of Ulysses n/2 where the job guides and n is even, else
    Ulysses over all n."""
    cfg = 2 if guided and size % 2 == 0 else 1
    return ParallelPlan(cfg, size // cfg, 1, True, True)


def _decisions(record: dict) -> list[bool]:
    return [step["computed"] for step in record["steps"]]


def _same_decisions(one: dict, other: dict, where: str) -> None:
    """World size 1's step cache record and another plan's: the same decisions, from the same
    metrics (each branch's, where a CFG plan's halves take their own: both absent at a step,
    e.g. the first, or equal within float rounding)."""
    assert _decisions(other) == _decisions(one), (where, one, other)
    for a, b in zip(one["steps"], other["steps"], strict=True):
        for key in ("metric", "metric_uncond"):
            assert (a.get(key) is None) == (b.get(key) is None), (where, key, a, b)
            if a.get(key) is not None:
                assert a[key] == pytest.approx(b[key], rel=1e-4), (where, key, a, b)


def _check_group(rank: int, world_size: int, name: str, reference: dict) -> None:
    """One rank: the tiny job on 4, 3 and 2 ranks (largest first), FSDP2 over them, the
    decode's tiles dealt to them, from rank 0's encoded text; on 4 the cached job too."""
    spec = next(spec for spec in SPECS if spec.name == name)
    job = _job(spec)
    for size, group in rank_groups(rank, world_size, (4, 3, 2)):
        if size == 3:  # a plan for another number of ranks than the group's is refused
            with pytest.raises(ValueError, match="the plan needs 2 ranks, the group has 3"):
                parallelize([torch.nn.Linear(1, 1)], ParallelPlan(1, 2), CPU, group=group)
        plan = _plan(size, reference["guided"])
        pipe, family = preset_pipeline(job.preset, job.tile, encoders=False)
        parallel = parallelize(
            [pipe.transformer], plan, CPU, batched_cfg=family.batched_cfg, group=group
        )
        jobs = [("plain", dict(job.body))]
        if size == 4 and reference["cached"] is not None:
            jobs.append(("cached", job.cached_body()))
        for label, body in jobs:
            frames, result = run_here(
                pipe, body, reference["tensors"], parallel=parallel, group=group
            )
            where = f"{name} {label} on {plan.to_dict()['modes']} ({size} ranks)"
            expected = (reference["frames"], reference["latents"])
            if label == "cached":  # every rank: the decisions agreed over the group
                *expected, record = reference["cached"]
                _same_decisions(record, result.cache, where)
            latents = result.latents.numpy()
            if rank != 0:
                assert frames is None
                continue
            measured = compare(expected[0], frames, FLOAT32, expected[1], latents)
            # CFG halves alone run each branch as world size 1 runs it: batch 1, the same
            # shapes, unless the family batches its branches (world size 1's batch of 2)
            exact = plan.sequence_degree == 1 and not family.batched_cfg
            verdicts = {IDENTICAL} if exact else {IDENTICAL, WITHIN_ROUNDING}
            assert measured.verdict in verdicts, f"{where}: {_summary(measured)}"


@pytest.mark.parametrize("spec", FAMILIES)
def test_cfg_and_ulysses_on_2_3_and_4_ranks_equal_world_size_1(world_size_1, spec):
    """One gloo group of 4 processes: 4 ranks (CFG 2 x Ulysses 2 for a guided job, else
    Ulysses 4; the step cache's decisions there too), 3 (Ulysses 3: uneven tokens and heads)
    and 2 (CFG halves, or Ulysses 2)."""
    ref = world_size_1(spec)
    reference = {
        "guided": ref.guided,
        "tensors": ref.tensors,
        "frames": ref.frames,
        "latents": ref.latents,
        "cached": ref.cached,
    }
    spawn_gloo(4, _check_group, spec.name, reference)


@pytest.mark.parametrize("spec", FAMILIES)
def test_step_cache_skips_steps_or_is_refused(world_size_1, spec):
    """A family with a step cache skips some of the cached job's steps at world size 1 (so
    the decisions compared at 4 ranks mean something) and stays near the plain job; one
    without refuses a request's `cache` with the rule, and its limits say so."""
    ref = world_size_1(spec)
    limits = ref.family.limits(ref.pipe, tiny=True)
    assert limits.step_cache == all(a.step_cache for a in spec.adapters), spec.name
    if not limits.step_cache:
        assert ref.cached is None
        with pytest.raises(ValueError, match=NO_STEP_CACHE):
            JobRequest.from_body(_job(spec).cached_body(), limits)
        return
    record = ref.cached[2]
    decisions = _decisions(record)
    assert decisions[0] and not all(decisions), (spec.name, record)
    request = JobRequest.from_body(_job(spec).cached_body(), limits)
    if ref.family.uses_cfg(ref.pipe, request):  # both branches measured (4 ranks: each half)
        assert any("metric_uncond" in step for step in record["steps"]), record


# -- 4. a LoRA job against diffusers' fuse_lora ------------------------------------------------


def _query_projections(transformer: torch.nn.Module) -> tuple[str, ...]:
    """The attention query projections (`...to_q`) in a block of the DiT's first block list,
    relative to the block: where every family's LoRAs reach."""
    blocks = next(m for m in transformer.children() if isinstance(m, torch.nn.ModuleList))
    return tuple(
        name
        for name, module in blocks[0].named_modules()
        if name.endswith("to_q") and isinstance(module, torch.nn.Linear)
    )


def _state(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


@pytest.mark.parametrize("spec", FAMILIES)
def test_lora_job_equals_diffusers_fuse_lora(world_size_1, spec, tmp_path):
    """A PEFT LoRA on the DiT's query projections at strength 0.8: the job's weights equal
    diffusers' `load_lora_weights` + `fuse_lora` (the DiT's `load_lora_adapter` + `fuse_lora`
    where the pipeline has no LoRA loader), byte for byte, and come back after; the job's
    frames equal diffusers' pipeline called with the LoRA fused, and differ from the plain
    job's."""
    ref = world_size_1(spec)
    job, pipe = _job(spec), ref.pipe
    targets = _query_projections(pipe.transformer)
    assert targets, spec.name
    peft_lora(tmp_path / f"{LORA}.safetensors", pipe.transformer, targets, seed=3)
    patcher = dit_patcher(pipe, tmp_path)
    base = _state(pipe.transformer)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with patcher.applied(patcher.resolve(lora_items([(LORA, LORA_STRENGTH)]))):
            ours = _state(pipe.transformer)
            frames, result = run_here(pipe, dict(job.body), ref.tensors, parallel=ref.parallel)
        restored = _state(pipe.transformer)
        unhooked = copy.copy(pipe)
        unhooked.register_modules(transformer=ref.plain_dit)
        fused = diffusers_fused(unhooked, tmp_path, [(LORA, LORA_STRENGTH)])
        direct = to_uint8(np.asarray(job.direct(fused, dict(job.body))))
    finally:
        torch.set_num_threads(threads)
    assert all(torch.equal(base[k], restored[k]) for k in base), f"{spec.name}: not restored"
    changed = [k for k in base if not torch.equal(base[k], ours[k])]
    assert changed and all(k.endswith("to_q.weight") for k in changed), changed
    reference = _state(fused.transformer)
    assert all(torch.equal(reference[k], ours[k]) for k in base), "not diffusers' fuse_lora"
    measured = compare(frames, direct, FLOAT32)
    assert measured.verdict == IDENTICAL, f"{spec.name}: {_summary(measured)}"
    plain = compare(ref.frames, frames, FLOAT32, ref.latents, result.latents.numpy())
    assert plain.verdict == DIFFERENT, f"{spec.name}: the LoRA changed nothing"
