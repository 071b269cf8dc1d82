"""The family contract: one suite run over every registered family spec (`families.SPECS`;
a family registered gets it), each on its tiny jobs (`FamilySpec.tiny_jobs`: the smallest
first, its tiny preset, size, steps and guidance, and diffusers' pipeline called for it; then
one per thing the family adds, an image, audio, experts, tiles, odd token counts):

1. world size 1 equals diffusers' own pipeline called directly, byte for byte;
2. CFG parallel (where the job guides) and Ulysses at 2, 3 and 4 ranks equal world size 1
   (CFG halves alone byte for byte unless the family batches its branches, a split sequence
   within rounding), in one gloo group of 4; a job's final latents decoded with the tiles
   dealt to the ranks give world size 1's frames byte for byte (the float frames too); a
   job's DiT forward alone (`TinyJob.forward`) is within 1e-5 of world size 1's; a plan for
   another number of ranks, and a rank outside the group, are refused;
3. families with a step cache: its decisions at 4 ranks are world size 1's, from the same
   metrics (the ranks agree, or the job fails); the others: a `cache` request is refused
   with the rule;
4. a LoRA job equals the same model with diffusers' `fuse_lora` applied: the DiT's weights
   byte for byte, and the image against diffusers' pipeline called with them.

Jobs run as a rank runs them (`runtime.job.run_on_rank` through tests/image_jobs.py: the
family encodes and prepares, the pipeline stops at the latents, the VAE decodes tile by tile,
the tiles dealt to the ranks), judged with `paradit verify`'s measure (tools/equivalence.py,
float32 thresholds, frames and final latents). Every job runs on the group sizes it names in
the family's one group of 4: each rank's share of the tokens, the layout (an unguided job
spreads over a CFG plan; a two-stage job's, `TinyJob.upsampler`, stage by stage), audio
within 1e-3 of its peak, two experts swapped on sharded weights, a step cache decided by
each rank alone failing. What a family adds beyond its jobs
(presets, limits, plans at real size, served backends) stays in its own file, which starts
no gloo group.

Cost: about 93 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import numpy as np
import pytest
import torch
import torch.distributed as dist
from conftest import spawn_gloo
from image_jobs import CPU, encoded, preset_pipeline, rank_groups, run_here
from lora_files import diffusers_fused, dit_patcher, lora_items, peft_lora, with_dit

from paradit.backend.memory.swap import ExpertSwap
from paradit.backend.models.families import SPECS, enable_tiles, family_of
from paradit.backend.models.family_spec import FamilySpec, TinyJob
from paradit.backend.parallel import PLAN, SPREAD, parallelize
from paradit.backend.parallel.plan import ParallelPlan
from paradit.backend.parallel.step_cache import DisagreementError
from paradit.backend.request import NO_STEP_CACHE, JobRequest
from paradit.backend.runtime.job import RankModel, job_limits
from paradit.backend.runtime.stages import stage_requests
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
MAX_FORWARD_ERROR = 1e-5  # a DiT's output alone, float32: relative L2 error


def _job(spec: FamilySpec) -> TinyJob:
    assert spec.tiny_job is not None, f"{spec.name} declares no tiny job"
    return spec.tiny_job


def _dits(pipe: Any) -> list[torch.nn.Module]:
    """The pipeline's DiTs: the transformer, and the second expert where it has one."""
    return [dit for dit in (pipe.transformer, getattr(pipe, "transformer_2", None)) if dit]


def _job_pipeline(job: TinyJob, *, encoders: bool = True) -> tuple[Any, Any]:
    """The pipeline a job runs on, as a rank holds it (tiles of the job's size), and its
    family."""
    pipe, family = preset_pipeline(job.preset, job.tile, encoders=encoders)
    if job.variant is not None:
        pipe = job.variant(pipe)
        pipe.set_progress_bar_config(disable=True)
        enable_tiles(pipe.vae, job.tile, job.tile)
        family = family_of(pipe)
    return pipe, family


def _pipeline_key(job: TinyJob) -> tuple:
    """Jobs with the same key run on one pipeline (built once for them)."""
    return (job.preset, job.tile, job.variant)


def _count_tokens(pipe: Any) -> tuple[list[int], Any]:
    """The tokens each call of the DiT's last block of its last block list gets on this rank
    (inside the split sequence, where there is one; Z-Image's refiners come before it), filled
    as the job runs; and the hook's handle (`remove()` after the job)."""
    blocks = [m for m in pipe.transformer.children() if isinstance(m, torch.nn.ModuleList)][-1]
    tokens: list[int] = []

    def count(_module, args, kwargs):
        states = args[0] if args else kwargs["hidden_states"]
        tokens.append(int(states.shape[1]))

    return tokens, blocks[-1].register_forward_pre_hook(count, with_kwargs=True)


@dataclasses.dataclass
class JobOutput:
    """One job at world size 1: rank 0's encoded text, its frames (uint8) and final latents,
    whether it guides (each stage: one, or two for a job with `upscale`), the block's tokens
    per DiT call, its audio track, its step cache's record (a job with `cache`)."""

    tensors: dict
    frames: np.ndarray
    latents: np.ndarray
    guided: bool
    stages_guided: tuple[bool, ...]
    tokens: list[int]
    audio: np.ndarray | None
    cache: dict | None
    tiles: int
    forward: torch.Tensor | None
    """The DiT's output for the job's `forward` inputs (None: the job has none)."""
    decoded: np.ndarray | None
    """A one-stage job of several tiles: its final latents decoded here, tile after tile, as
    float frames (what `_check_decode` compares byte for byte before uint8 hides the last
    bits of a sum taken in another order); else None."""


def _forward(pipe: Any, job: TinyJob) -> torch.Tensor | None:
    """The DiT's output on `job.forward`'s inputs, one forward alone (None: none), as the
    job's parallel plan runs it where there is one."""
    if job.forward is None:
        return None
    inputs, _guided = job.forward(pipe)
    with torch.no_grad():
        return pipe.transformer(**inputs, return_dict=False)[0]


def _upsampler(job: TinyJob, pipe: Any) -> Any:
    """A two-stage job's latent upscaler (None for one stage)."""
    return None if job.upsampler is None else job.upsampler(pipe)


def _run_job(pipe: Any, family: Any, job: TinyJob, parallel: Any) -> JobOutput:
    """`job` at world size 1 on `pipe` (one thread is the caller's)."""
    body, upsampler = dict(job.body), _upsampler(job, pipe)
    limits = job_limits(family, pipe, tiny=True)  # with the samplers, as a rank's
    if upsampler is not None:
        limits = dataclasses.replace(limits, upscale_factors=upsampler.factors)
    request = JobRequest.from_body(body, limits)
    tensors = encoded(pipe, body, upsampler)
    tokens, hook = _count_tokens(pipe)
    try:
        frames, result = run_here(pipe, body, tensors, parallel=parallel, upsampler=upsampler)
    finally:
        hook.remove()
    audio = None if result.audio is None else result.audio.waveform
    guided = family.uses_cfg(pipe, request)
    stages = (request,) if request.upscale is None else stage_requests(request, limits)
    stages_guided = tuple(family.uses_cfg(pipe, stage) for stage in stages)
    latents = result.latents.numpy()
    decoded = None
    if result.num_tiles > 1 and upsampler is None:
        decoded, _ = RankModel.here(pipe, parallel).decode(request, result.latents, "decode")
    return JobOutput(
        tensors,
        frames,
        latents,
        guided,
        stages_guided,
        tokens,
        audio,
        result.cache,
        result.num_tiles,
        _forward(pipe, job),
        decoded,
    )


@dataclasses.dataclass
class WorldSize1:
    """A family's tiny jobs at world size 1, one thread: the smallest job's pipeline (tiles
    on), family and `parallelize`, its output and its cached job's, and every job's output by
    name."""

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
    jobs: dict[str, JobOutput]
    pipes: dict[str, Any]
    """Each job's pipeline by job name (diffusers called directly runs on it)."""


def _world_size_1(spec: FamilySpec) -> WorldSize1:
    job = _job(spec)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        pipe, family = _job_pipeline(job)
        plain_dit = copy.deepcopy(pipe.transformer)
        # the DiT as a rank holds it at world size 1 (the step cache's hooks installed)
        parallel = parallelize(_dits(pipe), ParallelPlan(1, 1, 1, False, False), CPU)
        limits = family.limits(pipe, tiny=True)
        jobs = {job.name: _run_job(pipe, family, job, parallel)}
        pipes = {job.name: pipe}
        smallest = jobs[job.name]
        cached = None
        if limits.step_cache:
            cached_frames, cached_result = run_here(
                pipe, job.cached_body(), smallest.tensors, parallel=parallel
            )
            cached = (cached_frames, cached_result.latents.numpy(), cached_result.cache)
        built = {_pipeline_key(job): (pipe, family, parallel)}
        for other in spec.tiny_jobs[1:]:
            if _pipeline_key(other) not in built:
                other_pipe, other_family = _job_pipeline(other)
                one = ParallelPlan(1, 1, 1, False, False)
                built[_pipeline_key(other)] = (
                    other_pipe,
                    other_family,
                    parallelize(_dits(other_pipe), one, CPU),
                )
            other_pipe, other_family, other_parallel = built[_pipeline_key(other)]
            jobs[other.name] = _run_job(other_pipe, other_family, other, other_parallel)
            pipes[other.name] = other_pipe
    finally:
        torch.set_num_threads(threads)
    return WorldSize1(
        pipe,
        plain_dit,
        family,
        parallel,
        smallest.tensors,
        smallest.frames,
        smallest.latents,
        smallest.guided,
        cached,
        jobs,
        pipes,
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
    own tiled decode at the job's tile size) gives the same frames, bit for bit: every tiny
    job that names diffusers' call (the smallest always)."""
    ref = world_size_1(spec)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for job in spec.tiny_jobs:
            if job.direct is None:
                continue
            direct = to_uint8(np.asarray(job.direct(ref.pipes[job.name], dict(job.body))))
            result = compare(ref.jobs[job.name].frames, direct, FLOAT32)
            assert result.verdict == IDENTICAL, f"{spec.name} {job.name}: {_summary(result)}"
    finally:
        torch.set_num_threads(threads)


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


def _shares(tokens: int, degree: int) -> list[int]:
    """A split sequence's tokens per rank: `tensor_split`'s (the first ranks one more)."""
    return [len(part) for part in np.array_split(np.arange(tokens), degree)]


def _runs(calls: list[int]) -> list[set[int]]:
    """The token counts of consecutive DiT calls, one set per run of equal counts."""
    runs: list[set[int]] = []
    for i, count in enumerate(calls):
        if i == 0 or count != calls[i - 1]:
            runs.append(set())
        runs[-1].add(count)
    return runs


def _check_tokens(rank: int, size: int, plan: ParallelPlan, layouts: list, one: list, ours: list):
    """This rank's tokens at the block on every DiT call against world size 1's: its share of
    them, the first ranks of the sequence one more where they do not divide (over the plan's
    sequence ranks; over all `size` ranks when an unguided job spreads). A two-stage job's
    calls run by stage (its `layouts`, one a stage), each stage's tokens its own. A DiT whose
    calls take different token counts within a job (Qwen-Image 2.1: the text and the image
    at the first step, the image alone after) has each count's share; a CFG half, its own
    branch's (whose prompt may be of another length)."""
    if len(layouts) == 1:
        stages, mine_by_stage = [set(one)], [set(ours)]
    else:
        stages, mine_by_stage = _runs(one), _runs(ours)
        assert len(stages) == len(layouts) == len(mine_by_stage), (rank, size, layouts, one, ours)
    for counts, layout, mine in zip(stages, layouts, mine_by_stage, strict=True):
        degree = size if layout == SPREAD else plan.sequence_degree
        index = rank if layout == SPREAD else rank % plan.sequence_degree
        expected = {_shares(tokens, degree)[index] for tokens in counts}
        halves = plan.cfg_degree > 1 and layout == PLAN
        assert mine and (mine <= expected if halves else mine == expected), (
            rank, size, layout, one, ours
        )  # fmt: skip


def _swap_experts(rank: int, pipe: Any, parallel: Any, body: dict, tensors: dict, group) -> Any:
    """The job with its experts one at a time on FSDP2-sharded experts (`ExpertSwap`; on CPU
    `module.to` moves nothing): the low-noise expert comes in at the switch step, every
    parameter a shard again after; (frames, latents) for rank 0's comparison."""
    swap = ExpertSwap({"transformer": pipe.transformer, "transformer_2": pipe.transformer_2}, CPU)
    swap.begin_job(lambda: 0)
    frames, result = run_here(pipe, body, tensors, parallel=parallel, group=group)
    parallel.check_at_rest()
    assert [s["expert"] for s in swap.record] == ["transformer_2"] and swap.record[0]["bytes"]
    return frames, result.latents.numpy()


def _check_job(rank: int, size: int, group, plan, pipe, family, parallel, job, ref, where):
    """One named job on this group's plan against world size 1 (`ref`, a `JobOutput`): the
    layout, each rank's tokens, the step cache's decisions, and on rank 0 frames, latents
    and audio (CFG halves alone byte for byte unless the family batches its branches)."""
    body, upsampler = dict(job.body), _upsampler(job, pipe)
    tokens, hook = _count_tokens(pipe)
    try:
        frames, result = run_here(
            pipe, body, ref.tensors, parallel=parallel, group=group, upsampler=upsampler
        )
    finally:
        hook.remove()
    layouts = [PLAN if plan.cfg_degree == 1 or g else SPREAD for g in ref.stages_guided]
    layout = layouts[-1]  # the job's result: its last stage's
    assert result.sequence_layout == layout, (where, result.sequence_layout)
    if len(layouts) == 2:  # stage 1's, where it differs
        first = result.clock.notes["upscale"].get("stage_1_sequence_layout", layout)
        assert first == layouts[0], (where, first)
    assert result.num_tiles == ref.tiles, (where, result.num_tiles, ref.tiles)
    _check_tokens(rank, size, plan, layouts, ref.tokens, tokens)
    if ref.cache is not None:  # every rank: the decisions agreed over the group
        _same_decisions(ref.cache, result.cache, where)
    if rank != 0:
        assert frames is None
        return
    latents = result.latents.numpy()
    measured = compare(ref.frames, frames, FLOAT32, ref.latents, latents)
    exact = plan.sequence_degree == 1 and set(layouts) == {PLAN} and not family.batched_cfg
    verdicts = {IDENTICAL} if exact else {IDENTICAL, WITHIN_ROUNDING}
    assert measured.verdict in verdicts, f"{where}: {_summary(measured)}"
    if ref.audio is not None:  # within 1e-3 of the track's peak
        drift = float(np.abs(ref.audio - result.audio.waveform).max())
        assert drift < 1e-3 * np.abs(ref.audio).max(), (where, drift)


def _check_decode(rank: int, group, pipe: Any, parallel: Any, job: TinyJob, ref, where) -> None:
    """World size 1's final latents decoded with the tiles dealt to the group's ranks (and
    the temporal chunks of each tile passing their cache along) give world size 1's frames,
    byte for byte (and so the VAE's own tiled decode: the first check of the contract), the
    float frames too (rank 0 blends the gathered tiles in world size 1's order: float
    addition is not associative): for a one-stage job of several tiles."""
    if ref.tiles < 2 or job.upsampler is not None:
        return
    model = RankModel.here(pipe, parallel, group)
    request = JobRequest.from_body(dict(job.body), model.limits)
    frames, num_tiles = model.decode(request, torch.from_numpy(ref.latents), "decode")
    assert num_tiles == ref.tiles, (where, num_tiles)
    if rank == 0:
        assert np.array_equal(frames, ref.decoded), f"{where}: float decode not byte-equal"
        assert np.array_equal(to_uint8(frames), ref.frames), f"{where}: decode not byte-equal"
    else:
        assert frames is None


def _check_forward(parallel: Any, pipe: Any, job: TinyJob, ref, where: str) -> None:
    """The job's forward alone (`TinyJob.forward`) on this plan against world size 1's, on
    every rank: relative error <= 1e-5 (float32). An unguided forward spreads over a CFG
    plan, as a job does."""
    if job.forward is None:
        return
    inputs, guided = job.forward(pipe)
    parallel.begin_job(guided, parallel.plan.world_size)
    try:
        with torch.no_grad():
            ours = pipe.transformer(**inputs, return_dict=False)[0]
    finally:
        parallel.end_job()
    error = float((ours - ref.forward).norm() / ref.forward.norm())
    assert error <= MAX_FORWARD_ERROR, (where, "forward alone", error)


def _check_group(rank: int, world_size: int, name: str, reference: dict) -> None:
    """One rank: the family's tiny jobs on 4, 3 and 2 ranks (largest first; each job on the
    group sizes it names), FSDP2 over them, the decode's tiles dealt to them, from rank 0's
    encoded text; on 4 the smallest job's cached job too; on 2 a job with two experts also
    swaps them, and one whose ranks would decide its step cache differently alone fails."""
    spec = next(spec for spec in SPECS if spec.name == name)
    three = dist.new_group([0, 1, 2])  # every rank makes it: rank 3 gets no member's handle
    if rank == 3:
        with pytest.raises(ValueError, match="this rank is not in the group"):
            parallelize([torch.nn.Linear(1, 1)], ParallelPlan(1, 3), CPU, group=three)
    for size, group in rank_groups(rank, world_size, (4, 3, 2)):
        if size == 3:  # a plan for another number of ranks than the group's is refused
            with pytest.raises(ValueError, match="the plan needs 2 ranks, the group has 3"):
                parallelize([torch.nn.Linear(1, 1)], ParallelPlan(1, 2), CPU, group=group)
            with pytest.raises(ValueError, match="a group is one replica: dp_degree must be 1"):
                parallelize([torch.nn.Linear(1, 1)], ParallelPlan(1, 1), CPU, 3, group=group)
        plan = _plan(size, reference["guided"])
        built: dict[tuple, tuple] = {}
        for job in spec.tiny_jobs:
            if size not in job.ranks:
                continue
            if _pipeline_key(job) not in built:
                pipe, family = _job_pipeline(job, encoders=False)
                parallel = parallelize(
                    _dits(pipe), plan, CPU, batched_cfg=family.batched_cfg, group=group
                )
                built[_pipeline_key(job)] = (pipe, family, parallel)
            pipe, family, parallel = built[_pipeline_key(job)]
            ref = reference["jobs"][job.name]
            where = f"{name} {job.name} on {plan.to_dict()['modes']} ({size} ranks)"
            _check_job(rank, size, group, plan, pipe, family, parallel, job, ref, where)
            _check_forward(parallel, pipe, job, ref, where)
            _check_decode(rank, group, pipe, parallel, job, ref, where)
            if job is spec.tiny_jobs[0] and size == 4 and reference["cached"] is not None:
                *expected, record = reference["cached"]
                frames, result = run_here(
                    pipe, job.cached_body(), ref.tensors, parallel=parallel, group=group
                )
                _same_decisions(record, result.cache, f"{where}, cached")
                if rank == 0:
                    measured = compare(
                        *expected[:1], frames, FLOAT32, expected[1], result.latents.numpy()
                    )
                    assert measured.verdict in {IDENTICAL, WITHIN_ROUNDING}, _summary(measured)
            if size == 2 and getattr(pipe, "transformer_2", None) is not None:
                frames, latents = _swap_experts(
                    rank, pipe, parallel, dict(job.body), ref.tensors, group
                )
                if rank == 0:
                    measured = compare(ref.frames, frames, FLOAT32, ref.latents, latents)
                    assert measured.verdict == IDENTICAL, f"{where}, experts swapped"
            if size == 2 and job.alone_fails:
                with pytest.raises(DisagreementError, match="different skip decisions"):
                    run_here(
                        pipe,
                        dict(job.body),
                        ref.tensors,
                        parallel=parallel,
                        group=group,
                        cache_alone=True,
                    )


@pytest.mark.parametrize("spec", FAMILIES)
def test_cfg_and_ulysses_on_2_3_and_4_ranks_equal_world_size_1(world_size_1, spec):
    """One gloo group of 4 processes: 4 ranks (CFG 2 x Ulysses 2 for a guided job, else
    Ulysses 4; the step cache's decisions there too), 3 (Ulysses 3: uneven tokens and heads)
    and 2 (CFG halves, or Ulysses 2)."""
    ref = world_size_1(spec)
    reference = {"guided": ref.guided, "cached": ref.cached, "jobs": ref.jobs}
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
        with_dit(unhooked, ref.plain_dit)
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
