"""One rank's model and how a job runs on it.

Every rank holds the same pipeline with the parallel plan applied to its transformer. Rank 0
alone holds the text/image encoders: it encodes each request once and the embeddings reach the
job's replica (a broadcast from its leader, which got them from rank 0); every rank of the
replica then runs the diffusers pipeline's own denoising loop. Families that decode in the job
(Wan, Flux, CogVideoX: all of them today) stop at the latents everywhere and `decode` splits
the VAE's tiles over the replica's ranks (`plan.vae_parallel`); for any other family only the
replica's leader (its first rank; rank 0 when there is one replica) decodes with the VAE.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import gc
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from ..audio import Audio
from ..cache import CacheSettings
from ..kernels import Choice, choose_kernel
from ..lora import LoraLibrary, LoraPatcher
from ..memory import placement
from ..memory.measure import PeakMeter, resident_bytes
from ..memory.planner import Budget, Layout, MemoryPlanner, Topology
from ..memory.settings import JobShape, MemorySettings, parse_tile
from ..memory.sizes import sizes_of_pipeline
from ..models.families import Family, family_for, family_of
from ..models.loading import ModelSource, align_cpu_weights, load_pipeline
from ..models.random_presets import (
    is_random_preset,
    random_dit_components,
    random_dit_config,
    random_dit_weights,
)
from ..models.vae_tiles import enable_tiles
from ..parallel import (
    ModelStateError,
    Parallelized,
    attention,
    local_param_bytes,
    parallelize,
)
from ..parallel.plan import ParallelPlan, choose_plan
from ..parallel.sabotage import break_plan_from_env
from ..parallel.sharded_load import empty_dit, empty_from_config, fill_shards
from ..parallel.step_cache import Branches, StepAgreement, cache_record
from ..parallel.vae import decode_share, gather_tiles
from ..request import JobRequest
from ..sampling.job import job_sampling, sampling_limits
from .faults import Faults
from .group import Group
from .phases import PhaseClock
from .preview import Previewer
from .progress import BETWEEN_JOBS, Progress, main_thread_place

log = logging.getLogger(__name__)

DIT_COMPONENTS = ("transformer", "transformer_2")
VAE_TILE_ENV = "PARADIT_VAE_TILE"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class JobCancelled(Exception):
    """Raised on every rank at the same step boundary when a job is cancelled."""


def pipeline_class_name(source: ModelSource) -> str:
    """The diffusers pipeline class a model source holds, read without loading weights."""
    if source.kind == "preset":
        from ..models.presets import preset_pipeline_class

        return preset_pipeline_class(source.name)
    if source.kind == "file":
        from ..models.single_file.load import resolve

        return resolve(source.single_files()).pipeline_class
    from diffusers import DiffusionPipeline

    return DiffusionPipeline.load_config(source.name)["_class_name"]


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


@dataclass(frozen=True)
class WaitPoint:
    """Where this rank waits for the others, and since when (monotonic seconds)."""

    key: str
    since: float


class Runtime:
    """The pipeline on this rank, with the plan applied."""

    def __init__(
        self,
        group: Group,
        model: str,
        plan_overrides: dict[str, Any],
        dtype: str,
        memory: MemorySettings | None = None,
        *,
        text_encoders: tuple[str, ...] = (),
        vaes: tuple[str, ...] = (),
        image_encoders: tuple[str, ...] = (),
        loras: LoraLibrary | None = None,
        attention_kernel: str = "auto",
    ):
        self.group = group
        self.source = ModelSource.parse(model, text_encoders, vaes, image_encoders)
        pipeline_class = pipeline_class_name(self.source)
        self.family: Family = family_for(pipeline_class)
        # What the process holds before the model: the libraries, imported here (the pipeline
        # module imports its models'), so that job.json's `above_start` is the model's share.
        import diffusers

        getattr(diffusers, pipeline_class)
        self.meter = PeakMeter(group.device, resident_bytes())
        memory = memory or MemorySettings()
        # Measured before this rank loads anything: the model is part of what the plan counts.
        budget = Budget.of(group.device, memory.gpu_memory_gib, group.env.local_world_size)
        self.last_peak: dict[str, Any] | None = None
        self.last_audio: Audio | None = None
        """The last job's audio track on the replica's leader (LTX-2), else None."""
        """This rank's measured peak in its last job (`PeakMeter.read`)."""
        skip = frozenset() if group.is_rank0 else self.family.encoder_components
        self.dtype = DTYPES[dtype]
        started = time.perf_counter()
        self.job_id = ""
        self.sequence_layout = ""
        self.cache_alone = False
        """Test-only (`sabotage.py`, cache-alone): this rank takes its cache decisions alone."""
        """The last job's sequence layout (`parallel.PLAN` or `parallel.SPREAD`)."""
        self.wait_point: WaitPoint | None = None
        self.in_job = False
        """This rank is inside a job (`job.run_job`): the watchdogs look at it then."""
        self.progress = Progress()
        """This rank's work counter, published by its heartbeat (`progress.py`)."""
        self.phases = PhaseClock.from_env()
        """Profiles the last step of each job when PARADIT_PHASES is set (`phases.py`)."""
        self.fault = Faults.from_environ(  # tests only
            group.rank, group.env.generation, tick=self.progress.tick
        )
        if self.fault is not None:
            self.fault.at_load()
        # One host copy: a sharded DiT from a folder is built empty and each rank reads only
        # its shards after `parallelize` (parallel/sharded_load.py).
        lazy = self._lazy_dits(plan_overrides)
        self.pipe = load_pipeline(self.source, skip=skip | lazy, dtype=self.dtype)
        for name in sorted(lazy):
            self.pipe.register_modules(**{name: self._empty_dit(name)})
        self.model_files: dict[str, Any] | None = None
        """A single-file model's files: variant, and each file's role, format and why."""
        if self.source.kind == "file":
            from ..models.single_file.load import resolve

            self.model_files = resolve(self.source.single_files()).summary()
        self.pipe.set_progress_bar_config(disable=True)
        self.family = family_of(self.pipe)  # the loaded pipeline's settings may say more
        tile_vae_from_env(self.pipe, memory.vae_tile)  # --vae-tile, else PARADIT_VAE_TILE
        limits = self.family.limits(self.pipe, tiny=self.source.tiny)
        self.plan: ParallelPlan = choose_plan(
            group.replica_size,
            supports_cfg=self.family.supports_cfg(self.pipe),
            device_type=group.device.type,
            tiled_decode=self.family.decodes_in_job,
            **plan_overrides,
        )
        self.limits = dataclasses.replace(
            limits,
            min_tokens=self.plan.sequence_degree,
            **sampling_limits(self.family.samplers, self.pipe),
        )
        self.attention: Choice = choose_kernel(
            attention_kernel,
            device_type=group.device.type,
            capability=attention.device_capability(group.device),
            installed=attention.installed,
            ring=self.plan.ring_degree > 1,
        )
        """The attention kernel every job's DiT runs with (`kernels.py`), and why."""
        for dit in self.dits():  # before the plan's hooks: they keep the processors it installs
            attention.reach(dit, self.attention.kernel)
        self._attention_key = attention.backend_key(self.attention.kernel)
        self.planner: MemoryPlanner | None = None
        self.layout: Layout = self._plan_memory(memory, budget)
        self._place(group.device)
        group.barrier("loaded")  # loading takes different times; meshes need everyone
        self.parallel: Parallelized = parallelize(
            self.dits(),
            self.plan,
            group.device,
            group.dp_degree,
            batched_cfg=self.family.batched_cfg,
            cpu_offload=placement.fsdp_offload(self.layout, group.device),
        )
        caches = self.parallel.caches
        self.limits = dataclasses.replace(
            self.limits, step_cache=self.limits.step_cache and bool(caches) and None not in caches
        )
        sharded = self.plan.shard_weights and self.plan.world_size > 1
        if not sharded:
            placement.apply_offload(self.dits(), self.layout, group.device)
        for name in sorted(lazy):
            host = placement.fsdp_offload(self.layout, group.device)
            target = torch.device("cpu") if host else group.device
            fill_shards(getattr(self.pipe, name), self._dit_weights(name), target)
        release_freed_memory(collect=True)  # the full weights each rank loaded before sharding
        for module in [*self.dits(), getattr(self.pipe, "vae", None)]:
            if isinstance(module, torch.nn.Module):
                self.progress.watch(module)  # a slow step still ticks; a hung one does not
        if self.fault is not None:  # tests only: faults inside blocks and collectives
            self.fault.watch(self.dits())
        self.previewer = Previewer.fit(self.family, self.pipe) if group.is_leader else None
        dits = {
            name: getattr(self.pipe, name)
            for name in DIT_COMPONENTS
            if getattr(self.pipe, name, None) is not None
        }
        hooked = self.layout.dit in ("offload-group", "offload-sequential") and not sharded
        refuse = f"LoRAs cannot reach the weights under {self.layout.dit}" if hooked else ""
        self.loras = LoraPatcher(
            loras or LoraLibrary(()), type(self.pipe), dits, refuse, tick=self.progress.tick
        )
        """The jobs' LoRAs on this rank's weight rows (`lora/patch.py`)."""
        break_plan_from_env(self)  # test-only (PARADIT_BREAK_PLAN); nothing when unset
        self.load_seconds = time.perf_counter() - started
        log.info("rank %d loaded %s in %.1fs", group.rank, model, self.load_seconds)

    def _lazy_dits(self, plan_overrides: dict[str, Any]) -> frozenset[str]:
        """The DiTs to build empty and fill shard by shard: those of a folder, of single
        files or of a `random:` preset (each rank draws its own rows), when sharded."""
        random = self.source.kind == "preset" and is_random_preset(self.source.name)
        if not (
            (self.source.kind in ("folder", "file", "hub") or random)
            and plan_overrides.get("shard_weights", True)
            and self.group.replica_size > 1
        ):
            return frozenset()
        if random:
            return random_dit_components(self.source.name)
        if self.source.kind == "file":
            return frozenset(DIT_COMPONENTS[: len(self.source.single_files().models)])
        folder = self.source.local_folder()  # a hub id: its snapshot in the local cache
        if folder is None or not (Path(folder) / "model_index.json").is_file():
            return frozenset()
        index = json.loads((Path(folder) / "model_index.json").read_text())
        return frozenset(
            name for name in DIT_COMPONENTS if isinstance(index.get(name), list) and index[name][0]
        )

    def _empty_dit(self, name: str) -> torch.nn.Module:
        if self.source.kind == "file":
            from ..models.single_file.load import resolve

            config = resolve(self.source.single_files()).dits[name].detection.config
            return empty_from_config(config, self.dtype)
        if self.source.kind == "preset":  # a random: preset
            return empty_from_config(random_dit_config(self.source.name, name), self.dtype)
        return empty_dit(self.source.local_folder(), name, self.dtype)

    def _dit_weights(self, name: str) -> Any:
        """Where `fill_shards` reads DiT `name`: its folder, or its single file."""
        if self.source.kind == "file":
            from ..models.single_file.build import DitWeights
            from ..models.single_file.load import resolve

            weights = DitWeights(resolve(self.source.single_files()).dits[name])
            weights.check(getattr(self.pipe, name))
            return weights
        if self.source.kind == "preset":  # a random: preset: this rank's rows, drawn
            return random_dit_weights(self.source.name, name, getattr(self.pipe, name))
        return Path(self.source.local_folder()) / name

    def _plan_memory(self, settings: MemorySettings, budget: Budget) -> Layout:
        """The memory layout, the same on every rank: each rank publishes its budget, rank 0
        plans for the smallest one (it alone holds the encoders) and publishes the layout."""
        group, store = self.group, self.group.store
        store.set(f"memory/budget/{group.rank}", str(budget.total))
        # Barriers, not blocking reads: they give up when a rank is lost while loading.
        group.barrier("memory-budgets")
        if not group.is_rank0:
            group.barrier("memory-layout")
            return Layout(**json.loads(store.get("memory/layout")))
        totals = [int(store.get(f"memory/budget/{rank}")) for rank in range(group.world_size)]
        if group.world_size > 1:
            budget = Budget(min(totals), f"{budget.source}; the smallest of the ranks'")
        topology = Topology(
            device_type=group.device.type,
            replica_size=group.replica_size,
            sequence_degree=self.plan.sequence_degree,
            cfg_parallel=self.plan.cfg_degree > 1,
            batched_cfg=self.family.batched_cfg,
            shard_weights=self.plan.shard_weights,
        )
        limits = self.limits
        reference = (
            JobShape.parse(settings.plan_for)
            if settings.plan_for
            else JobShape(limits.default_width, limits.default_height, limits.default_frames)
        )
        sizes = sizes_of_pipeline(self.pipe, self.family, self.dtype)
        self.planner = MemoryPlanner(
            sizes, settings, budget, topology, reference, limits.size_multiple
        )
        store.set("memory/layout", json.dumps(dataclasses.asdict(self.planner.layout)))
        group.barrier("memory-layout")
        log.info("memory plan: %s", "; ".join(self.planner.start_reasons))
        return self.planner.layout

    def _place(self, device: torch.device) -> None:
        """Move the components to the device. Sharded DiTs stay where they are: FSDP2 moves
        each parameter to the device as it shards it, so no rank ever holds a whole DiT there.
        What the memory layout keeps in host memory stays there.
        """
        sharded = self.plan.shard_weights and self.plan.world_size > 1
        for name, module in self.pipe.components.items():
            if not isinstance(module, torch.nn.Module) or (sharded and name in DIT_COMPONENTS):
                continue
            if not placement.keeps_on_host(self.layout, name, sharded):
                module.to(device)
        if self.family.vae_float32 and self.pipe.vae is not None:
            self.pipe.vae.to(torch.float32)
        if device.type == "cpu":
            align_cpu_weights(self.pipe)  # results must not depend on the file's layout

    def dits(self) -> list[torch.nn.Module]:
        """The pipeline's diffusion transformers (Wan 2.2 A14B has a second, low-noise one)."""
        return [
            getattr(self.pipe, name)
            for name in DIT_COMPONENTS
            if getattr(self.pipe, name, None) is not None
        ]

    def place(self) -> str:
        """Where this rank's main thread is (`progress.main_thread_place`), or between jobs."""
        return main_thread_place() if self.in_job else BETWEEN_JOBS

    def rank_info(self) -> dict[str, Any]:
        return {
            "rank": self.group.rank,
            "pid": os.getpid(),
            "device": str(self.group.device),
            "dit_param_bytes": sum(local_param_bytes(dit) for dit in self.dits()),
        }

    # -- a job, on every rank -------------------------------------------------------------

    def encode(self, request: JobRequest) -> dict[str, torch.Tensor]:
        """Rank 0: run the encoders once for the whole group."""
        device = placement.encoder_device(self.layout, self.group.device)
        with torch.no_grad():
            tensors = self.family.encode(self.pipe, request, device)
        return {name: t.detach().to("cpu").contiguous() for name, t in tensors.items()}

    def share(self, tensors: dict[str, torch.Tensor] | None, meta: list[list]) -> dict:
        """Broadcast the leader's encoder outputs over the replica's control group; returns
        them on device."""
        out = {}
        for name, shape, dtype in meta:
            tensor = (
                tensors[name]
                if tensors is not None
                else torch.empty(shape, dtype=getattr(torch, dtype))
            )
            if self.group.replica_size > 1:
                with self.waiting("share"):
                    dist.broadcast(tensor, src=self.group.leader, group=self.group.ctrl)
            out[name] = tensor.to(self.group.device)
        return out

    def denoise(
        self,
        request: JobRequest,
        tensors: dict[str, torch.Tensor],
        on_step: Callable[[int, int], bool],
        clock: StepClock,
        on_latents: Callable[[int, torch.Tensor], None] | None = None,
    ) -> np.ndarray | torch.Tensor | None:
        """Run the pipeline; `on_step(step, total)` returns True to cancel (rank 0 decides);
        `on_latents(step, latents)` sees the latents after each step (previews).

        Returns float frames (F, H, W, 3) on the replica's leader, None elsewhere; for families
        that decode in the job, the final latents on every rank (then call `decode`).
        """
        uses_cfg = self.family.uses_cfg(self.pipe, request)
        tokens = self.limits.tokens(request.width, request.height, request.num_frames)
        self.sequence_layout = self.parallel.begin_job(uses_cfg, tokens)
        if self.parallel.layouts:
            clock.notes["sequence_layout"] = self.sequence_layout
        total = request.num_inference_steps

        def step_end(_pipe: Any, index: int, _t: Any, kwargs: dict) -> dict:
            clock.mark()
            self.phases.at_mark(index, total)
            self.progress.tick()
            if on_latents is not None:
                on_latents(index + 1, kwargs["latents"])
            if self.fault is not None:
                self.fault.at_step(index + 1)
            if self._agree_cancel(on_step(index + 1, total), index + 1):
                raise JobCancelled(f"cancelled after step {index + 1} of {total}")
            return {}

        kwargs = self.family.prepare(self.pipe, request, tensors)
        runner = self.family.pipeline_for_job(self.pipe, request)
        generator = torch.Generator("cpu").manual_seed(request.seed)
        leader = self.group.is_leader
        decodes_here = leader and not self.family.decodes_in_job
        cache = None
        self.phases.begin_job()
        clock.start = time.perf_counter()
        try:
            cache = self._start_cache(request, uses_cfg)
            spy_dir = os.environ.get(attention.SPY_ENV)  # tests only
            spy = attention.Spy(self._attention_key) if spy_dir else contextlib.nullcontext()
            with (
                placement.steps(self.dits(), self.layout, self.group.device),
                attention.active(self._attention_key),
                spy,
                job_sampling(runner, request, self.limits) as sampling,
            ):
                output = runner(
                    **kwargs,
                    **sampling.kwargs,
                    generator=generator,
                    output_type="np" if decodes_here else "latent",
                    callback_on_step_end=step_end,
                    return_dict=False,
                )
            clock.notes["sampling"] = sampling.record
            if spy_dir:
                record = json.dumps(spy.to_dict())
                Path(spy_dir, f"rank{self.group.rank}.json").write_text(record)
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
            for switch in self.parallel.caches:
                if switch is not None:
                    switch.stop()
            self.parallel.end_job()
            self.family.finish(self.pipe)
        if cache is not None:
            clock.notes["cache"] = cache_record(*cache)
        if self.phases.result() is not None:
            clock.notes["phases"] = self.phases.result()
        if leader:
            self.last_audio = self.family.audio(self.pipe, output)
        if self.family.decodes_in_job:
            return output[0]
        return self.family.frames(output) if leader else None

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
        group = self.group.ctrl if self.group.replica_size > 1 else None
        if not self.limits.step_cache:  # refused at submit already; each rank checks again
            raise ValueError(f"{self.family.name} has no step cache: leave `cache` out")
        record: list[dict[str, Any]] = []
        for switch in self.parallel.caches:  # each expert its own hooks and state
            switch.start(StepAgreement(settings, branches, group, record, alone=self.cache_alone))
        return settings, record

    def decode(self, request: JobRequest, latents: torch.Tensor) -> np.ndarray | None:
        """Decode the final latents (families that decode in the job), on every rank.

        With `plan.vae_parallel` the tiles are dealt to all ranks and gathered on rank 0;
        otherwise rank 0 decodes them one after another. Float frames on rank 0, else None.
        """
        if self.fault is not None:
            self.fault.at_decode()
        with torch.no_grad():
            tiles = self.family.tiled_decode(self.pipe, request, latents)
            if self.plan.vae_parallel:
                # Within the job's replica, over the gloo control group (tiles go through host
                # memory on CUDA too: a gather of decoded tiles once per job).
                group = self.group.ctrl
                mine = decode_share(tiles, group)
                with self.waiting("decode"):  # the hang watchdog knows who is still decoding
                    decoded = gather_tiles(tiles, mine, torch.device("cpu"), group)
            elif self.group.is_leader:
                decoded = [tiles.decode_tile(index) for index in range(tiles.num_tiles)]
            else:
                decoded = None
            return None if decoded is None else tiles.assemble(decoded)

    def set_vae_tiling(self, tiled: bool) -> None:
        """The job's decode: tiled (or split, which is tiled) or whole (the memory plan's)."""
        vae = getattr(self.pipe, "vae", None)
        if vae is not None and hasattr(vae, "enable_tiling"):
            vae.enable_tiling() if tiled else vae.disable_tiling()

    def _agree_cancel(self, wants: bool, step: int) -> bool:
        """All ranks of the replica take its leader's decision, so all stop at the same step."""
        if self.group.replica_size == 1:
            return wants
        flag = torch.tensor([1 if wants else 0], dtype=torch.int32)
        with self.waiting(f"step {step}"):
            dist.broadcast(flag, src=self.group.leader, group=self.group.ctrl)
        return bool(flag.item())

    @contextlib.contextmanager
    def waiting(self, point: str):
        """Mark that this rank waits for the others at `point` of the current job.

        Each rank publishes its last point in the store; rank 0's watchdog compares them when
        it has waited too long, to name the rank that stopped progressing
        (`serving/health.py`)."""
        key = f"{self.job_id}:{point}"
        self.group.store.set(f"wait/{self.group.rank}", key)
        self.wait_point = WaitPoint(key, time.monotonic())
        try:
            yield
        finally:
            self.wait_point = None


def tile_vae_from_env(pipe: Any, size: str | None = None) -> tuple[int, int] | None:
    """Set the VAE's tiles to HxW sample pixels: `size` (`--vae-tile`), else PARADIT_VAE_TILE
    ("HxW", e.g. "64x64"; every rank gets the same flags and environment, so all cut the same
    tiles). Returns the size, None when neither is set. Whether a job's decode is tiled is the
    memory plan's (`set_vae_tiling` per job)."""
    where = "--vae-tile" if size else VAE_TILE_ENV
    value = (size or os.environ.get(VAE_TILE_ENV, "")).strip()
    if not value or getattr(pipe, "vae", None) is None:
        return None
    try:
        height, width = parse_tile(value, where)
    except ValueError:
        raise ValueError(f"{where}={value!r}: expected HxW in pixels, e.g. 64x64") from None
    enable_tiles(pipe.vae, height, width)
    log.info("VAE tiling on: tiles of %sx%s pixels (%s)", height, width, where)
    return height, width


def release_freed_memory(*, collect: bool = False) -> None:
    """Hand freed heap pages back to the OS: glibc keeps them otherwise, so a rank's resident
    memory would stay at its high-water mark (the unsharded model at load, a job's peak).
    `collect` first runs the cycle collector (~0.2 s with diffusers loaded: load time only).
    """
    if collect:
        gc.collect()
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to trim
            ctypes.CDLL("libc.so.6").malloc_trim(0)


def tensor_meta(tensors: dict[str, torch.Tensor]) -> list[list]:
    """JSON-able (name, shape, dtype) for the spec, so receivers can allocate."""
    return [[n, list(t.shape), str(t.dtype).removeprefix("torch.")] for n, t in tensors.items()]


def dumps(message: dict) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode()
