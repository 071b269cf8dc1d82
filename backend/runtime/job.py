"""One job on one rank: `run_on_rank`, the same sequence of collectives on every rank.

Rank 0's executor, every worker and the tests call `run_on_rank` with the same `RunJob`
message, so the collectives of a job (the encoder outputs' broadcast, the denoising loop's
parallel attention and sharded weights, the per-step cancel decision, a split VAE decode) are
spelled out once: adding one here adds it on every rank. It returns the job's `RankResult`
(frames on the replica's leader, final latents, audio, peak memory, the LoRAs' switch, step
timings): nothing of a job is left on the model. What only the leader does comes in as
`JobHooks`: its encoder outputs (`encode`, rank 0 alone holds the encoders), the cancel
decision, previews.

`RankModel` is what a job runs on: the pipeline with its plan applied and the ranks of its
replica. `Runtime` builds it at start-up (`engine.py`); a test builds one from a pipeline
(`RankModel.here`).

A replica's leader (its first rank: rank 0 for replica 0) reports its job's progress, previews
and final latents and takes the cancel decision through `LeaderHooks`, written once: rank 0
reports to the job itself, another replica's leader through the store (`replica.py`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
import torch.distributed as dist

from ..audio import Audio
from ..cache import CacheSettings
from ..contract import Limits
from ..lora import JobLora, LoraPatcher
from ..lora.patch import Applied
from ..memory import placement
from ..memory.measure import PeakMeter
from ..memory.planner import Layout
from ..memory.swap import ExpertSwap
from ..models.families import Family, TiledDecode, Upsampler, family_of, vae_split_of
from ..parallel import ModelStateError, Parallelized, attention
from ..parallel.plan import ParallelPlan
from ..parallel.step_cache import Branches, StepAgreement, cache_record
from ..parallel.vae import decode_share, gather_tiles
from ..parallel.vae_bands import decode_bands
from ..request import JobRequest
from ..sampling import guidance
from ..sampling.job import job_sampling, sampling_limits
from ..sampling.names import CFG_NORM, CFG_PLAIN
from .compiled import compile_counter
from .faults import Faults
from .messages import RunJob
from .phases import PhaseClock
from .progress import Progress
from .stages import StageCall, two_stages

PREVIEW_PERIOD_S = 0.25
"""Previews are rendered this often at most (and at the last step)."""
DIT_COMPONENTS = ("transformer", "transformer_2")
RESIDENT = Layout(level=0, dit="resident", text_encoder="device", tiles=False)
"""Everything on the device, nothing offloaded: a model built in a test."""


class JobCancelled(Exception):
    """Raised on every rank at the same step boundary when a job is cancelled."""


@dataclass
class StepClock:
    """Wall time of each denoising step, measured at the step callbacks."""

    start: float = field(default_factory=time.perf_counter)
    marks: list[float] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)
    """How the steps ran (`sequence_layout`, the step cache's `cache` record): job.json
    carries them at its top level (`serving/writer.py`)."""

    def mark(self) -> None:
        self.marks.append(time.perf_counter())

    def step_seconds(self) -> list[float]:
        points = [self.start, *self.marks]
        return [b - a for a, b in zip(points, points[1:], strict=False)]

    def timings(self, begin: float, end: float) -> dict[str, Any]:
        """A job's step timings (`job.json`): `begin` is when the job started on this rank,
        `end` when its frames were decoded (perf_counter seconds)."""
        steps = self.step_seconds()
        out: dict[str, Any] = {
            "first_step_start_s": round(self.start - begin, 4),
            "step_s": [round(s, 4) for s in steps],
        }
        if steps:
            out["mean_step_s"] = round(sum(steps) / len(steps), 4)
            out["decode_s"] = round(end - self.marks[-1], 4)
        return {**out, **self.notes}


def _never_cancel(_step: int, _total: int) -> bool:
    return False


@dataclass
class JobHooks:
    """What one rank adds to the common sequence (the defaults are a worker's)."""

    tensors: dict[str, torch.Tensor] | None = None
    """The leader's encoder outputs, broadcast to the others; None on the others."""
    on_step: Callable[[int, int], bool] = _never_cancel
    """Called after each step with (step, total); the leader returns True to cancel."""
    on_latents: Callable[[int, torch.Tensor], None] | None = None
    """Sees the latents after each step (the leader's previews)."""
    clock: StepClock = field(default_factory=StepClock)


@dataclass
class RankResult:
    """What one job gave on one rank."""

    frames: np.ndarray | None
    """Float frames (F, H, W, 3) in 0..1 on the replica's leader; None elsewhere."""
    outputs: tuple[torch.Tensor, ...]
    """All the pipeline's final latents, on every rank: the video's (`latents`) and, for
    LTX-2, the audio's."""
    audio: Audio | None
    """The audio track on the replica's leader (LTX-2); None elsewhere and for other models."""
    peak: dict[str, Any] | None
    """This rank's measured peak memory during the job (`PeakMeter.read`)."""
    loras: Applied | None
    """The job's LoRA switch on this rank (its timings and saved bytes); None without LoRAs."""
    clock: StepClock
    """The step timings, and how the steps ran (`notes`)."""
    sequence_layout: str
    """`parallel.PLAN` or `parallel.SPREAD`."""
    cache: dict[str, Any] | None
    """The step cache's record (`step_cache.cache_record`); None for a job without `cache`."""
    num_tiles: int
    """The VAE tiles the decode was cut into."""

    @property
    def latents(self) -> torch.Tensor:
        """The pipeline's final latents: what the decode took."""
        return self.outputs[0]


def _not_watched(_key: str) -> AbstractContextManager[None]:
    return contextlib.nullcontext()


def tensor_meta(tensors: dict[str, torch.Tensor]) -> list[list]:
    """JSON-able (name, shape, dtype) for the spec, so receivers can allocate."""
    return [[n, list(t.shape), str(t.dtype).removeprefix("torch.")] for n, t in tensors.items()]


def job_limits(family: Family, pipe: Any, *, tiny: bool) -> Limits:
    """What jobs on the loaded `pipe` may ask: its family's limits (`tiny`: a tiny preset's)
    with the samplers the family runs on it (`sampling_limits`)."""
    return dataclasses.replace(
        family.limits(pipe, tiny=tiny), **sampling_limits(family.samplers, pipe)
    )


def dits_of(pipe: Any) -> list[torch.nn.Module]:
    """The pipeline's diffusion transformers (Wan 2.2 A14B has a second, low-noise one)."""
    return [getattr(pipe, n) for n in DIT_COMPONENTS if getattr(pipe, n, None) is not None]


@dataclass
class RankModel:
    """The model as one rank holds it for jobs, and the ranks of its replica."""

    pipe: Any
    family: Family
    parallel: Parallelized
    """What `parallelize` applied to the DiTs (sequence layouts, CFG halves, step caches)."""
    limits: Limits
    device: torch.device = torch.device("cpu")
    ctrl: dist.ProcessGroup | None = None
    """The replica's gloo group for a job's small messages (cancel flags, encoder outputs,
    decoded tiles); None: the world."""
    leader: int = 0
    """Global rank of the replica's first rank: the source of its broadcasts."""
    replica_size: int = 1
    is_leader: bool = True
    vae_parallel: bool = False
    """The decode's tiles are dealt to the replica's ranks (else the leader decodes them)."""
    layout: Layout = RESIDENT
    loras: LoraPatcher | None = None
    meter: PeakMeter | None = None
    progress: Progress = field(default_factory=Progress)
    """This rank's work counter, published by its heartbeat (`progress.py`)."""
    fault: Faults | None = None
    """Test-only: a fault to inject (`faults.py`)."""
    cache_alone: bool = False
    """Test-only (`sabotage.py`, cache-alone): this rank takes its cache decisions alone."""
    waiting: Callable[[str], AbstractContextManager[None]] = _not_watched
    """Marks where this rank waits for the others ("<job id>:<point>") for the hang watchdog
    (`Runtime.waiting`)."""
    in_job: bool = False
    """This rank is inside a job (`run_on_rank`): the watchdogs look at it then."""
    attention_key: Any = None
    """The attention backend the DiTs' steps run with (`parallel.attention.backend_key`);
    None: diffusers' own default."""
    compile_mode: str = "off"
    """The DiTs' blocks run compiled (`blocks`) or eagerly (`off`): `--compile`'s choice."""
    rank: int = 0
    """This process's global rank (the attention spy's file name, tests only)."""
    phases: PhaseClock = field(default_factory=PhaseClock.from_env)
    """Profiles the last step of each job when PARADIT_PHASES is set (`phases.py`)."""
    experts: ExpertSwap | None = None
    """Keeps one expert on the device at a time (memory level 4); None: all resident."""
    upsampler: torch.nn.Module | None = None
    """The latent upscaler of two-stage jobs (`--upscaler`), on every rank; None without."""

    @classmethod
    def here(
        cls,
        pipe: Any,
        parallel: Parallelized | None = None,
        group: dist.ProcessGroup | None = None,
        *,
        tiny: bool = True,
        upsampler: Upsampler | None = None,
    ) -> RankModel:
        """A pipeline built in this process (a test's), with `parallel` applied to its DiTs
        (None: nothing), on the ranks of `group` (the world when torch.distributed is up;
        else this process alone). The decode's tiles are dealt to the ranks when there are
        several, as the engine's plan does. `tiny`: the limits of a tiny preset's model;
        `upsampler`: the latent upscaler of two-stage jobs (as `--upscaler` gives it)."""
        family = family_of(pipe)
        if parallel is None:
            parallel = Parallelized(ParallelPlan(1, 1, 1, False, False), [])
        size, rank, leader = 1, 0, 0
        if dist.is_initialized():
            size, rank = dist.get_world_size(group), dist.get_rank(group)
            leader = 0 if group is None else dist.get_global_rank(group, 0)
        limits = job_limits(family, pipe, tiny=tiny)
        if upsampler is not None:
            limits = dataclasses.replace(limits, upscale_factors=upsampler.factors)
        # encoders sharded by `parallelize` run together on every rank (`encode_together`)
        layout = RESIDENT
        if parallel.encoders:
            layout = dataclasses.replace(RESIDENT, text_encoder="sharded")
        return cls(
            pipe,
            family,
            parallel,
            limits,
            layout=layout,
            ctrl=group,
            leader=leader,
            replica_size=size,
            is_leader=rank == 0,
            vae_parallel=size > 1,
            upsampler=None if upsampler is None else upsampler.module,
        )

    def set_vae_tiling(self, tiled: bool) -> None:
        """The job's decode: tiled (or split, which is tiled) or whole (the memory plan's)."""
        vae = getattr(self.pipe, "vae", None)
        if vae is not None and hasattr(vae, "enable_tiling"):
            vae.enable_tiling() if tiled else vae.disable_tiling()

    def audio_latents(self, outputs: tuple[torch.Tensor, ...]) -> torch.Tensor | None:
        """The job's final audio latents in the pipeline's `outputs` (`Family.audio_latents`);
        None for a model without audio."""
        return self.family.audio_latents(self.pipe, outputs)

    def share(self, tensors: dict[str, torch.Tensor] | None, meta: list[list], job_id: str):
        """Broadcast the leader's encoder outputs over the replica's control group; returns
        them on device."""
        out = {}
        for name, shape, dtype in meta:
            tensor = (
                tensors[name]
                if tensors is not None
                else torch.empty(shape, dtype=getattr(torch, dtype))
            )
            if self.replica_size > 1:
                with self.waiting(f"{job_id}:share"):
                    dist.broadcast(tensor, src=self.leader, group=self.ctrl)
            out[name] = tensor.to(self.device)
        return out

    def lora_switch(self, loras: list[JobLora]) -> AbstractContextManager[Applied | None]:
        """`loras` on this rank's rows for the time of the block (restored however it ends)."""
        if loras and self.loras is None:
            raise ValueError("this model takes no LoRA")
        return self.loras.applied(loras) if self.loras is not None else _no_loras()

    def denoise(
        self,
        request: JobRequest,
        tensors: dict[str, torch.Tensor],
        hooks: JobHooks,
        job_id: str,
        stage: StageCall | None = None,
    ) -> tuple[Any, str, dict[str, Any] | None]:
        """Run the pipeline's own denoising loop to the final latents; `hooks.on_step(step,
        total)` returns True to cancel (the leader decides). Returns the pipeline's output
        (latents first), the sequence layout and the step cache's record. `stage`: one stage
        of a two-stage job (None: the whole job)."""
        family, pipe, clock = self.family, self.pipe, hooks.clock
        uses_cfg = family.uses_cfg(pipe, request)
        tokens = self.limits.tokens(request.width, request.height, request.num_frames)
        step_cache = CacheSettings.parse(request.cache) is not None
        layout = self.parallel.begin_job(uses_cfg, tokens, step_cache)
        if self.parallel.layouts:
            clock.notes["sequence_layout"] = layout
        first = 0 if stage is None else stage.first_step
        total = request.num_inference_steps if stage is None else stage.total
        on_latents = hooks.on_latents if stage is None or stage.previews else None

        def step_end(_pipe: Any, index: int, _t: Any, kwargs: dict) -> dict:
            step = first + index + 1
            clock.mark()
            self.phases.at_mark(step - 1, total)
            self.progress.tick()
            if on_latents is not None:
                on_latents(step, kwargs["latents"])
            if self.fault is not None:
                self.fault.at_step(step)
            if self._agree_cancel(hooks.on_step(step, total), step, job_id):
                raise JobCancelled(f"cancelled after step {step} of {total}")
            return {}

        kwargs = family.prepare(pipe, request, tensors)
        runner = family.pipeline_for_job(pipe, request)
        if stage is None:
            generator = torch.Generator("cpu").manual_seed(request.seed)
        else:
            generator = stage.generator
            kwargs.update(stage.inputs)
        cache = None
        self.phases.begin_job()
        if self.experts is not None:  # a swap happens in the forward of the step to come
            self.experts.begin_job(lambda: len(clock.marks))
        if first == 0:
            clock.start = time.perf_counter()
        try:
            cache = self._start_cache(request, uses_cfg)
            spy_dir = os.environ.get(attention.SPY_ENV)  # tests only
            spy = attention.Spy(self.attention_key) if spy_dir else contextlib.nullcontext()
            kernel = (
                contextlib.nullcontext()
                if self.attention_key is None
                else attention.active(self.attention_key)
            )
            scheduler = None if stage is None else stage.scheduler
            with (
                placement.steps(dits_of(pipe), self.layout, self.device),
                kernel,
                spy,
                scheduled(runner, scheduler),
                job_sampling(runner, request, self.limits) as sampling,
                _guidance(pipe, request, uses_cfg, self.limits),
            ):
                output = runner(
                    **kwargs,
                    **sampling.kwargs,
                    generator=generator,
                    output_type="latent",
                    callback_on_step_end=step_end,
                    return_dict=False,
                )
            clock.notes["sampling"] = sampling.record
            if spy_dir:
                record = json.dumps(spy.to_dict())
                Path(spy_dir, f"rank{self.rank}.json").write_text(record)
        except BaseException as exc:
            # Whatever stopped the steps (JobCancelled included) may have stopped them inside
            # a forward: back to the between-jobs weights before the LoRAs' rows go back.
            try:
                self.parallel.recover()
            except ModelStateError as lost:  # the group is rebuilt; say what came first
                raise ModelStateError(f"{lost}, after {type(exc).__name__}: {exc}") from exc
            raise
        finally:
            self.phases.stop()
            branches = self.parallel.branches_record()
            for switch in self.parallel.caches:
                if switch is not None:
                    switch.stop()
            self.parallel.end_job()
            family.finish(pipe)
            # what the job's steps recorded, handed over: nothing of it stays on the model
            swaps = None if self.experts is None else self.experts.end_job()
            phases = self.phases.take()
        if branches is not None:
            clock.notes["cfg_branches"] = branches
        if swaps is not None:
            clock.notes["expert_swaps"] = swaps
        record = None if cache is None else cache_record(*cache)
        if record is not None:
            clock.notes["cache"] = record
        if phases is not None:
            clock.notes["phases"] = phases
        return output, layout, record

    def _start_cache(
        self, request: JobRequest, uses_cfg: bool
    ) -> tuple[CacheSettings, list[dict[str, Any]]] | None:
        """Put the job's step cache on every DiT, deciding together over the replica
        (`parallel/step_cache.py`); the settings and the per-step record it fills."""
        settings = CacheSettings.parse(request.cache)
        if settings is None:
            return None
        active = [wrapper for wrapper in self.parallel.cfg if wrapper.active]
        branches = Branches(
            uses_cfg,
            cfg_rank=active[0].cfg_rank if active else None,
            batched=self.family.batched_cfg,
        )
        group = None
        if self.replica_size > 1:
            group = self.ctrl if self.ctrl is not None else dist.group.WORLD
        caches = self.parallel.caches
        if not self.limits.step_cache or not caches or None in caches:  # refused at submit too
            raise ValueError(f"{self.family.name} has no step cache: leave `cache` out")
        record: list[dict[str, Any]] = []
        for switch in self.parallel.caches:  # each expert its own hooks and state
            switch.start(StepAgreement(settings, branches, group, record, alone=self.cache_alone))
        return settings, record

    def decode(
        self, request: JobRequest, latents: torch.Tensor, job_id: str, *, bands: bool = False
    ) -> tuple[np.ndarray | None, int]:
        """Decode the final latents on every rank: with `bands` the whole decode split into
        row bands over the replica's ranks, gathered on its leader; else with `vae_parallel`
        the tiles are dealt to the replica's ranks and gathered on its leader; otherwise the
        leader decodes them one after another. (Float frames on the leader, else None; the
        number of tiles.)"""
        if self.fault is not None:
            self.fault.at_decode()
        with torch.no_grad():
            tiles = self.family.tiled_decode(self.pipe, request, latents)
            split = bands and self.replica_size > 1
            if split and (tiles.decode_rows is not None or tiles.num_tiles == 1):
                return self._decode_bands(tiles, job_id), 1
            if self.vae_parallel or split:  # tiles that do not split into bands: dealt
                # Within the job's replica, over the gloo control group (tiles go through host
                # memory on CUDA too: a gather of decoded tiles once per job).
                mine = decode_share(tiles, self.ctrl)
                with self.waiting(f"{job_id}:decode"):  # the watchdog knows who still decodes
                    decoded = gather_tiles(tiles, mine, torch.device("cpu"), self.ctrl)
            elif self.is_leader:
                decoded = [tiles.decode_tile(index) for index in range(tiles.num_tiles)]
            else:
                decoded = None
            frames = None if decoded is None else tiles.assemble(decoded)
        return frames, tiles.num_tiles

    def _decode_bands(self, tiles: TiledDecode, job_id: str) -> np.ndarray | None:
        """The whole decode split exactly into row bands over the replica (over the gloo
        control group: the halos go through host memory on CUDA too)."""
        whole_frame = vae_split_of(tiles.vae)
        if whole_frame is None or tiles.latents is None or tiles.decode_rows is None:
            raise ValueError(f"{type(tiles.vae).__name__}'s decode does not split into bands")
        with self.waiting(f"{job_id}:decode"):  # collectives all through the decode
            sample = decode_bands(
                tiles.decode_rows, tiles.vae, tiles.latents, whole_frame, self.ctrl
            )
        return None if sample is None else tiles.to_frames(sample)

    def _agree_cancel(self, wants: bool, step: int, job_id: str) -> bool:
        """All ranks of the replica take its leader's decision, so all stop at the same step."""
        if self.replica_size == 1:
            return wants
        flag = torch.tensor([1 if wants else 0], dtype=torch.int32)
        with self.waiting(f"{job_id}:step {step}"):
            dist.broadcast(flag, src=self.leader, group=self.ctrl)
        return bool(flag.item())


def encode(model: RankModel, request: JobRequest) -> dict[str, torch.Tensor]:
    """Rank 0 (which alone holds the encoders): run them once for the whole group; the outputs
    on the host, for `JobHooks.tensors` (and `tensor_meta` for the message). Nothing (an
    empty dict) when the encoders are sharded over the replica: then every rank encodes
    together inside `run_on_rank`."""
    if model.layout.text_encoder == "sharded":
        return {}
    device = placement.encoder_device(model.layout, model.device)
    with torch.no_grad():
        tensors = model.family.encode(model.pipe, request, device)
    return {name: t.detach().to("cpu").contiguous() for name, t in tensors.items()}


def encode_together(model: RankModel, request: JobRequest, job_id: str) -> dict[str, torch.Tensor]:
    """Every rank of the replica runs the encoders sharded over it (FSDP2 gathers each layer
    from all of them), on the same request: the same outputs on every rank, on the device."""
    with model.waiting(f"{job_id}:encode"), torch.no_grad():
        tensors = model.family.encode(model.pipe, request, model.device)
    return {name: t.detach().to(model.device) for name, t in tensors.items()}


def run_on_rank(model: RankModel, message: RunJob, hooks: JobHooks | None = None) -> RankResult:
    """Run `message` on this rank: the leader's encoder outputs to every rank, the job's LoRAs
    on this rank's rows, the denoising steps, the decode's tiles, the audio.

    Raises JobCancelled on every rank at the same step when the leader cancels.
    """
    hooks = hooks or JobHooks()
    request = JobRequest.from_dict(message.request)
    if model.meter is not None:
        model.meter.reset()
    model.set_vae_tiling(message.vae_tiling)
    model.in_job = True
    compiled_before = compile_counter().count
    try:
        if model.layout.text_encoder == "sharded":
            began = time.perf_counter()
            tensors = encode_together(model, request, message.job_id)
            hooks.clock.notes["encode_s"] = round(time.perf_counter() - began, 4)
        else:
            tensors = model.share(hooks.tensors, message.tensors, message.job_id)
        loras = [JobLora(**lora) for lora in message.loras]
        if model.fault is not None:  # tests only
            model.fault.begin_job(request.prompt or "")
        if request.upscale is None:
            with model.lora_switch(loras) as applied:  # on this rank's rows, restored after
                output, layout, cache = model.denoise(request, tensors, hooks, message.job_id)
        else:
            stage_2 = [JobLora(**lora) for lora in message.upscale_loras]
            output, layout, applied = two_stages(
                model, request, tensors, hooks, message.job_id, (loras, stage_2)
            )
            cache = None
        audio = model.family.audio(model.pipe, output) if model.is_leader else None
        frames, num_tiles = model.decode(
            request, output[0], message.job_id, bands=message.split_bands
        )
    finally:
        model.in_job = False
        if model.fault is not None:
            model.fault.end_job()
    peak = model.meter.read() if model.meter is not None else None
    clock = hooks.clock
    recompiles = compile_counter().count - compiled_before  # blocks compiled for a new shape
    clock.notes["compile"] = {"mode": model.compile_mode, "recompiles": recompiles}
    outputs = tuple(output)
    return RankResult(frames, outputs, audio, peak, applied, clock, layout, cache, num_tiles)


@contextlib.contextmanager
def _no_loras() -> Iterator[None]:
    yield None


@contextlib.contextmanager
def scheduled(runner: Any, scheduler: Any) -> Iterator[None]:
    """`runner` steps with `scheduler` for the block (None: its own), then with its own again.
    Not `runner.scheduler = ...`: the pipeline would record the class in its config."""
    if scheduler is None:
        yield
        return
    pipeline = inspect.unwrap(runner)
    own = pipeline.scheduler
    pipeline.__dict__["scheduler"] = scheduler
    try:
        yield
    finally:
        pipeline.__dict__["scheduler"] = own


def job_message(
    job_id: str,
    request: JobRequest,
    tensors: dict[str, torch.Tensor],
    *,
    save_latents: bool = False,
    vae_tiling: bool = False,
    loras: list[JobLora] | None = None,
    split_bands: bool = False,
    upscale_loras: list[JobLora] | None = None,
) -> RunJob:
    """The `RunJob` every rank of the replica gets for `request`, encoded as `tensors`."""
    return RunJob(
        job_id,
        request.to_dict(),
        tensor_meta(tensors),
        save_latents,
        vae_tiling,
        split_bands,
        [dataclasses.asdict(lora) for lora in loras or []],
        [dataclasses.asdict(lora) for lora in upscale_loras or []],
    )


class Reporter(Protocol):
    """Where a leader's job progress goes and where its cancel decision comes from."""

    def step(self, step: int) -> None: ...

    def preview(self, png: bytes, step: int) -> None: ...

    def cancel_requested(self) -> bool: ...


class LeaderHooks:
    """A replica leader's hooks: report each step, render previews every `PREVIEW_PERIOD_S`
    (and at the last step), keep the final latents, pass on the cancel decision."""

    def __init__(
        self,
        reporter: Reporter,
        total: int,
        render: Callable[[torch.Tensor], bytes] | None,
        *,
        keep_latents: bool = False,
    ):
        self.reporter, self.total, self.render = reporter, total, render
        self.keep_latents = keep_latents
        self.latents: torch.Tensor | None = None
        """The final latents, when `keep_latents` (what `--save-latents` writes)."""
        self._last_preview = 0.0

    def on_step(self, step: int, _total: int) -> bool:
        self.reporter.step(step)
        return self.reporter.cancel_requested()

    def on_latents(self, step: int, latents: torch.Tensor) -> None:
        if self.keep_latents and step == self.total:
            self.latents = latents.detach().clone()  # the pipeline owns the tensor it passes
        if self.render is None:
            return
        now = time.monotonic()
        if now - self._last_preview < PREVIEW_PERIOD_S and step < self.total:
            return
        self._last_preview = now
        self.reporter.preview(self.render(latents), step)

    def job_hooks(self, tensors: dict[str, torch.Tensor] | None) -> JobHooks:
        needs_latents = self.keep_latents or self.render is not None
        return JobHooks(tensors, self.on_step, self.on_latents if needs_latents else None)


def latents_array(latents: torch.Tensor) -> np.ndarray:
    """Final latents as float32 on the host (what `--save-latents` writes)."""
    return latents.detach().to("cpu", torch.float32).contiguous().numpy()


def _guidance(
    pipe: Any, request: JobRequest, uses_cfg: bool, limits: Limits
) -> AbstractContextManager:
    """The job's CFG combination: plain CFG wrapped around the model's DiTs for `cfg_mode`
    plain, plain CFG then CFGNorm for `cfg_mode` norm (sampling/guidance.py), else the
    pipeline's own."""
    if uses_cfg and request.cfg_mode == CFG_PLAIN:
        return guidance.plain_cfg(dits_of(pipe), request.guidance_scale)
    if uses_cfg and request.cfg_mode == CFG_NORM:
        return guidance.norm_cfg(
            dits_of(pipe), request.guidance_scale, request.cfg_norm, limits.cfg_norm_pixels
        )
    return contextlib.nullcontext()
