"""One rank's model: loaded, planned and parallelized at start-up (`Runtime`).

Every rank holds the same pipeline with the parallel plan applied to its transformer. Rank 0
alone holds the text/image encoders. What a job runs on is `Runtime.rank_model`; how a job runs
is `job.run_on_rank`.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..compile_modes import BLOCKS, CompileChoice, choose_compile
from ..kernels import Choice, choose_kernel
from ..lora import LoraLibrary, LoraPatcher
from ..memory import placement
from ..memory.measure import PeakMeter, resident_bytes
from ..memory.planner import Budget, Layout, MemoryPlanner, Topology
from ..memory.settings import JobShape, MemorySettings, parse_tile
from ..memory.sizes import ModelSizes, sizes_of_pipeline, stored_weights
from ..memory.swap import ExpertSwap
from ..models.encoder_rows import EmptyEncoder, fill_encoder, load_encoders_to_shard
from ..models.families import Family, enable_tiles, family_for, family_of
from ..models.loading import (
    ModelSource,
    align_cpu_weights,
    load_pipeline,
    pipeline_index,
    set_components,
)
from ..models.preset_names import is_random_preset
from ..models.quantized import (
    fp8_refusal,
    int8_refusal,
    quantize_loaded,
    resolve_mode,
    set_fp8_compute,
    set_int8_compute,
    store_layers,
    stored_summary,
)
from ..models.random_presets import (
    random_dit_components,
    random_dit_config,
    random_dit_weights,
)
from ..models.sharded_load import empty_dit, empty_from_config, fill_shards
from ..parallel import Parallelized, attention, local_param_bytes, parallelize
from ..parallel.plan import ParallelPlan, choose_plan
from ..parallel.sabotage import break_plan_from_env
from .compiled import compile_blocks, compile_counter, cpu_compile_threads
from .faults import Faults
from .group import Group
from .job import DIT_COMPONENTS, RankModel, dits_of, job_limits
from .phases import PhaseClock
from .preview import Previewer
from .progress import BETWEEN_JOBS, Progress, main_thread_place
from .warm_up import warm_up

log = logging.getLogger(__name__)

VAE_TILE_ENV = "PARADIT_VAE_TILE"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def pipeline_class_name(source: ModelSource) -> str:
    """The diffusers pipeline class a model source holds, read without loading weights."""
    if source.kind == "preset":
        from ..models.presets import preset_pipeline_class

        return preset_pipeline_class(source.name)
    if source.kind == "file":
        return source.resolved_files().pipeline_class
    folder = source.local_folder()
    index = None if folder is None else pipeline_index(folder)
    if index is not None:  # a modular pipeline's folder too (its own index file)
        return str(index["_class_name"])
    from diffusers import DiffusionPipeline

    return DiffusionPipeline.load_config(source.name)["_class_name"]


@dataclass(frozen=True)
class Carried:
    """What rank 0's runtime hands on to the one that a rebuild of its group starts with the
    same config (so the same model): the memory plan's model of the sizes with the dry runs
    it ran (their peaks follow from the architecture and the job's shape; the budget is
    measured again) and the preview's fitted map. Neither holds the old model's weights."""

    sizes: ModelSizes | None = None
    preview: torch.Tensor | None = None


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
        upscaler: str = "",
        loras: LoraLibrary | None = None,
        attention_kernel: str = "auto",
        fp8_compute: bool = False,
        int8_compute: bool = False,
        compile_mode: str = "off",
        carried: Carried | None = None,
    ):
        """Start-up, in named steps: identify the model (single files are resolved once,
        here, and every later step reads `source.resolved`), load it, choose the plan, plan
        the memory, place it, compile its blocks, parallelize it, then what jobs need (and,
        with compiled blocks, the jobs that warm them). `carried`: what the runtime this one
        replaces hands on (a rebuild's rank 0)."""
        started = time.perf_counter()
        carried = carried or Carried()
        self.group = group
        self.source = ModelSource.parse(model, text_encoders, vaes, image_encoders)
        self.family: Family = family_for(self._import_pipeline())
        self.meter = PeakMeter(group.device, resident_bytes())
        memory = memory or MemorySettings()
        # Measured before this rank loads anything: the model is part of what the plan counts.
        budget = Budget.of(group.device, memory.gpu_memory_gib, group.env.local_world_size)
        self.dtype = DTYPES[dtype]
        self.wait_point: WaitPoint | None = None
        self.progress = Progress()
        """This rank's work counter, published by its heartbeat (`progress.py`)."""
        self.phases = PhaseClock.from_env()
        """Profiles the last step of each job when PARADIT_PHASES is set (`phases.py`)."""
        self.fault = Faults.from_environ(  # tests only
            group.rank, group.env.generation, tick=self.progress.tick
        )
        if self.fault is not None:
            self.fault.at_place("load")
        lazy = self._load(plan_overrides, memory)
        self._load_upsampler(upscaler)
        self._choose_plan(plan_overrides)
        limits = self.limits
        self.reference_shape = (
            JobShape.parse(memory.plan_for)
            if memory.plan_for
            else JobShape(limits.default_width, limits.default_height, limits.default_frames)
        )
        """The job size the server expects (`--plan-for`, else the model's default): what
        the memory plan chooses for and the compiled blocks are warmed with."""
        self._choose_attention(attention_kernel)
        self.planner: MemoryPlanner | None = None
        self.layout: Layout = self._plan_memory(memory, budget, carried.sizes)
        self._load_encoders_to_shard()
        self._place(group.device)
        self._compile(compile_mode)
        group.barrier("loaded")  # loading takes different times; meshes need everyone
        self._parallelize(lazy)
        self._fp8_compute(fp8_compute)
        self._int8_compute(int8_compute)
        self._prepare_jobs(loras, carried.preview)
        break_plan_from_env(self)  # test-only (PARADIT_BREAK_PLAN); nothing when unset
        self.warm_up_seconds = 0.0
        """The start-up jobs that compiled the blocks (`runtime/warm_up.py`)."""
        if self.compile.mode == BLOCKS:
            self.warm_up_seconds = warm_up(self.rank_model, group, self.reference_shape)
        self.warm_up_compilations = compile_counter().count
        """dynamo's compilations at start-up (the blocks' pieces, for each warmed layout)."""
        self.load_seconds = time.perf_counter() - started
        log.info("rank %d loaded %s in %.1fs", group.rank, model, self.load_seconds)

    def _import_pipeline(self) -> str:
        """The model's pipeline class, its module imported: what the process holds before
        the model is the libraries', so that job.json's `above_start` is the model's share."""
        pipeline_class = pipeline_class_name(self.source)
        import diffusers

        getattr(diffusers, pipeline_class)  # the pipeline module imports its models'
        return pipeline_class

    def _load(self, plan_overrides: dict[str, Any], memory: MemorySettings) -> frozenset[str]:
        """Load the pipeline on this rank (the encoders on rank 0 only); returns the DiTs built
        empty, to be filled shard by shard after `parallelize` (one host copy:
        models/sharded_load.py)."""
        encoders = self.family.encoder_components
        forced = self._encoders_sharded_by_flag(memory, plan_overrides)
        skip = frozenset() if self.group.is_rank0 and not forced else encoders
        lazy = self._lazy_dits(plan_overrides)
        self.weights = memory.weights
        """`--weights`: how the DiTs' linear layers are stored (`models/quantized.py`)."""
        self.pipe = load_pipeline(
            self.source, skip=skip | lazy, dtype=self.dtype, weights=self.weights
        )
        self.empty_encoders: dict[str, EmptyEncoder] = {}
        """The encoders built empty on this rank, filled with its rows in `_parallelize`."""
        if self.group.is_rank0 and forced:  # sized on meta by the plan, like the empty DiTs
            self.empty_encoders = load_encoders_to_shard(
                self.pipe, self.source, encoders, self.dtype, self.weights
            )
        for name in sorted(lazy):
            set_components(self.pipe, **{name: self._empty_dit(name)})
        resolved_mode = resolve_mode(self.weights, False)
        if self.source.kind != "file" and resolved_mode in ("fp8", "int8"):
            for name in DIT_COMPONENTS:  # loaded whole in floats: quantized in place
                if name not in lazy and getattr(self.pipe, name, None) is not None:
                    quantize_loaded(getattr(self.pipe, name), resolved_mode)
        self.model_files: dict[str, Any] | None = None
        """A single-file model's files: variant, and each file's role, format and why."""
        if self.source.resolved is not None:
            self.model_files = self.source.resolved.summary()
        self.pipe.set_progress_bar_config(disable=True)
        self.family = family_of(self.pipe)  # the loaded pipeline's settings may say more
        tile_vae_from_env(self.pipe, memory.vae_tile)  # --vae-tile, else PARADIT_VAE_TILE
        return lazy

    def _load_upsampler(self, path: str) -> None:
        """`--upscaler`: the latent upscaler of two-stage jobs, whole on every rank (it is
        small: Lightricks' x2 is 0.5 GB in bf16), on the device with the VAE."""
        self.upsampler = None if not path else self.family.load_upsampler(path, self.dtype)
        """The upscaler (`models.families.Upsampler`); None without --upscaler."""

    def _choose_plan(self, plan_overrides: dict[str, Any]) -> None:
        """The parallel plan for this replica's ranks, and the model's limits under it."""
        group = self.group
        limits = job_limits(self.family, self.pipe, tiny=self.source.tiny)
        self.plan: ParallelPlan = choose_plan(
            group.replica_size,
            supports_cfg=self.family.supports_cfg(self.pipe),
            device_type=group.device.type,
            tiled_decode=True,
            **plan_overrides,
        )
        factors = () if self.upsampler is None else self.upsampler.factors
        self.limits = dataclasses.replace(
            limits, min_tokens=self.plan.sequence_degree, upscale_factors=factors
        )

    def _choose_attention(self, kernel: str) -> None:
        """The attention kernel every job's DiT runs with (`kernels.py`), installed on the
        DiTs before the plan's hooks (they keep the processors it installs)."""
        group = self.group
        self.attention: Choice = choose_kernel(
            kernel,
            device_type=group.device.type,
            capability=attention.device_capability(group.device),
            installed=attention.installed,
            ring=self.plan.ring_degree > 1,
        )
        """The attention kernel every job's DiT runs with (`kernels.py`), and why."""
        for dit in self.dits():
            attention.reach(dit, self.attention.kernel)

    def _compile(self, mode: str) -> None:
        """`--compile`: the DiTs' repeated blocks compiled (before the plan's hooks go on, so
        that they stay outside the compiled code: `runtime/compiled.py`), or not."""
        self.compile: CompileChoice = choose_compile(
            mode,
            device_type=self.group.device.type,
            offload=self.layout.offload,
            triton=attention.installed("triton"),
        )
        """The compile mode jobs run with, and why (`compile_modes.py`)."""
        self.compiled_blocks: list[torch.nn.Module] = []
        if self.compile.mode == BLOCKS:
            attention.keep_eager(attention.backend_key(self.attention.kernel))
            if self.group.device.type == "cpu":
                cpu_compile_threads()
            self.compiled_blocks = [block for dit in self.dits() for block in compile_blocks(dit)]

    def _parallelize(self, lazy: frozenset[str]) -> None:
        """Apply the plan to the DiTs (every rank together), offload what the memory layout
        says, and fill the DiTs built empty with this rank's rows."""
        group = self.group
        self.parallel: Parallelized = parallelize(
            self.dits(),
            self.plan,
            group.device,
            group.dp_degree,
            batched_cfg=self.family.batched_cfg,
            cpu_offload=placement.fsdp_offload(self.layout, group.device),
            encoders=self._encoders() if self.layout.text_encoder == "sharded" else None,
        )
        caches = self.parallel.caches
        self.limits = dataclasses.replace(
            self.limits, step_cache=self.limits.step_cache and bool(caches) and None not in caches
        )
        if not self._sharded():
            placement.apply_offload(self.dits(), self.layout, group.device)
        for name in sorted(lazy):
            target = placement.expert_target(self.layout, name, group.device)
            fill_shards(getattr(self.pipe, name), self._dit_weights(name), target)
        for encoder in self.empty_encoders.values():  # sharded with the DiTs, on the device
            fill_encoder(encoder, group.device)
        release_freed_memory(collect=True)  # the full weights each rank loaded before sharding

    def _prepare_jobs(self, loras: LoraLibrary | None, preview: torch.Tensor | None) -> None:
        """What jobs need besides the model: the work counter on its modules, previews on
        the leader (`preview`: a map fitted already), the LoRA patcher, and the `RankModel`
        that `job.run_on_rank` runs on."""
        group = self.group
        for module in [*self.dits(), getattr(self.pipe, "vae", None)]:
            if isinstance(module, torch.nn.Module):
                # a slow step still ticks; a hung one does not
                self.progress.watch(module, opaque=self.compiled_blocks)
        if self.compiled_blocks:  # a block compiling for a new shape counts as progressing
            self.progress.working = compile_counter().busy
        if self.fault is not None:  # tests only: faults inside blocks and collectives
            self.fault.watch(self.dits())
        self.previewer = (
            Previewer.fit(self.family, self.pipe, fitted=preview) if group.is_leader else None
        )
        dits = {
            name: getattr(self.pipe, name)
            for name in DIT_COMPONENTS
            if getattr(self.pipe, name, None) is not None
        }
        hooked = self.layout.dit in ("offload-group", "offload-sequential") and not self._sharded()
        refuse = f"LoRAs cannot reach the weights under {self.layout.dit}" if hooked else ""
        if self.layout.swaps_experts:
            refuse = (
                f"LoRAs are not applied under {self.layout.dit}: each swap brings an expert "
                "in from its host copy, without the job's rows"
            )
        self.loras = LoraPatcher(
            loras or LoraLibrary(()), type(self.pipe), dits, refuse, tick=self.progress.tick
        )
        """The jobs' LoRAs on this rank's weight rows (`lora/patch.py`)."""
        self.experts: ExpertSwap | None = None
        """One expert on the device at a time (memory level 4); None: all resident."""
        if self.layout.swaps_experts:  # its hook runs before every other (FSDP2's included)
            self.experts = ExpertSwap(dits, group.device)
        self.rank_model = RankModel(
            self.pipe,
            self.family,
            self.parallel,
            self.limits,
            group.device,
            group.ctrl,
            group.leader,
            group.replica_size,
            group.is_leader,
            self.plan.vae_parallel,
            self.layout,
            self.loras,
            self.meter,
            self.progress,
            self.fault,
            waiting=self.waiting,
            attention_key=attention.backend_key(self.attention.kernel),
            compile_mode=self.compile.mode,
            rank=group.rank,
            phases=self.phases,
            experts=self.experts,
            upsampler=None if self.upsampler is None else self.upsampler.module,
        )
        """What `job.run_on_rank` runs a job on."""

    def _sharded(self) -> bool:
        """The DiTs' weights are sharded over the replica's ranks (FSDP2)."""
        return self.plan.shard_weights and self.plan.world_size > 1

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
        index = None if folder is None else pipeline_index(folder)
        if index is None:
            return frozenset()
        return frozenset(
            name for name in DIT_COMPONENTS if isinstance(index.get(name), list) and index[name][0]
        )

    def _empty_dit(self, name: str) -> torch.nn.Module:
        """DiT `name` on the meta device, its linears stored as `--weights` asks."""
        if self.source.kind == "file":
            from ..models.single_file.build import empty_model, store_file_layers

            part = self.source.resolved_files().dits[name]
            model = empty_model(part.detection.config, self.dtype, part.detection.family or "")
            store_file_layers(model, part, self.weights)
            return model
        if self.source.kind == "preset":  # a random: preset
            model = empty_from_config(random_dit_config(self.source.name, name), self.dtype)
        else:
            model = empty_dit(self.source.local_folder(), name, self.dtype)
        store_layers(model, self.weights)
        return model

    def _fp8_compute(self, on: bool) -> None:
        """`--fp8-compute`: the fp8 layers multiply in fp8; ValueError with the reason where
        the device cannot (before any job)."""
        self.fp8_compute = False
        if not on:
            return
        refusal = fp8_refusal(self.group.device)
        if refusal is not None:
            raise ValueError(refusal)
        count = set_fp8_compute(self.dits(), self.group.device)
        if not count:
            raise ValueError(
                "--fp8-compute multiplies the DiT's fp8 layers in fp8, and this model holds "
                "none: give an fp8 file with --weights auto or file, or --weights fp8"
            )
        self.fp8_compute = True
        log.info("fp8 matmuls in %d linear layers", count)

    def _int8_compute(self, on: bool) -> None:
        """`--int8-compute`: the int8 layers multiply in int8 (W8A8); ValueError with the
        reason where the device cannot (before any job)."""
        self.int8_compute = False
        if not on:
            return
        refusal = int8_refusal(self.group.device)
        if refusal is not None:
            raise ValueError(refusal)
        count = set_int8_compute(self.dits())
        if not count:
            raise ValueError(
                "--int8-compute multiplies the DiT's int8 layers in int8, and this model holds "
                "none: give an int8 file with --weights auto or file, or --weights int8"
            )
        self.int8_compute = True
        log.info("int8 matmuls in %d linear layers", count)

    def _dit_weights(self, name: str) -> Any:
        """Where `fill_shards` reads DiT `name`: its folder, or its single file."""
        if self.source.kind == "file":
            from ..models.single_file.build import DitWeights

            weights = DitWeights(self.source.resolved_files().dits[name])
            weights.check(getattr(self.pipe, name))
            return weights
        if self.source.kind == "preset":  # a random: preset: this rank's rows, drawn
            return random_dit_weights(self.source.name, name, getattr(self.pipe, name))
        return Path(self.source.local_folder()) / name

    def _plan_memory(
        self, settings: MemorySettings, budget: Budget, sizes: ModelSizes | None
    ) -> Layout:
        """The memory layout, the same on every rank: each rank publishes its budget, rank 0
        plans for the smallest one (it alone holds the encoders) and publishes the layout.
        `sizes`: the model's, from the runtime this one replaces (its dry runs kept)."""
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
            paired_cfg=self.plan.pairs_branches and self.family.supports_cfg(self.pipe),
            num_replicas=group.dp_degree,
        )
        reference = self.reference_shape
        taken_over = " (the model's sizes and dry runs taken over from the group rebuilt)"
        if sizes is None:
            taken_over = ""
            formats = ()
            if self.model_files is not None:  # a single-file model: its DiT files' formats
                files = self.model_files["files"]
                formats = tuple(files[n]["format"] for n in DIT_COMPONENTS if n in files)
            stored = stored_weights(settings.weights, formats)
            sizes = sizes_of_pipeline(self.pipe, self.family, self.dtype, stored)
            if self.upsampler is not None:  # whole on every rank, with the VAE; its activations
                sizes.add_upsampler(self.upsampler.module, self.upsampler.factors[0])
        self.planner = MemoryPlanner(
            sizes, settings, budget, topology, reference, self.limits.size_multiple
        )
        store.set("memory/layout", json.dumps(dataclasses.asdict(self.planner.layout)))
        group.barrier("memory-layout")
        log.info("memory plan: %s%s", "; ".join(self.planner.start_reasons), taken_over)
        return self.planner.layout

    def _encoders_sharded_by_flag(
        self, memory: MemorySettings, plan_overrides: dict[str, Any]
    ) -> bool:
        """`--encoder-placement sharded` on a replica of several ranks that shards weights:
        the encoders are sharded whatever the plan finds, so rank 0 too builds them empty (the
        memory plan refuses the flag, naming the rule, where it cannot be)."""
        return (
            memory.encoder_placement == "sharded"
            and self.group.replica_size > 1
            and self.group.dp_degree == 1
            and plan_overrides.get("shard_weights", True)
        )

    def _load_encoders_to_shard(self) -> None:
        """With the encoders sharded over the replica's ranks (the layout's `sharded` text
        encoder), the ranks other than 0 put them in their pipeline too (rank 0 loaded them in
        `_load`: whole, unless `--encoder-placement sharded` said so before it loaded): built
        empty where their files can be read by rows, filled with this rank's rows after
        `_parallelize` shards them (`models/encoder_rows.py`), so such a rank never holds
        more of an encoder than its share."""
        if self.layout.text_encoder != "sharded" or self.group.is_rank0:
            return
        self.empty_encoders = load_encoders_to_shard(
            self.pipe, self.source, self.family.encoder_components, self.dtype, self.weights
        )

    def _encoders(self) -> list[torch.nn.Module]:
        """The text/image encoders this rank holds as modules."""
        return [
            module
            for name in placement.ENCODERS
            if isinstance(module := getattr(self.pipe, name, None), torch.nn.Module)
        ]

    def _place(self, device: torch.device) -> None:
        """Move the components to the device. Sharded DiTs stay where they are: FSDP2 moves
        each parameter to the device as it shards it, so no rank ever holds a whole DiT there.
        What the memory layout keeps in host memory stays there.
        """
        sharded = self._sharded()
        encoders_sharded = self.layout.text_encoder == "sharded"  # FSDP2 moves their shards
        for name, module in self.pipe.components.items():
            if not isinstance(module, torch.nn.Module) or (sharded and name in DIT_COMPONENTS):
                continue
            if encoders_sharded and name in placement.ENCODERS:
                continue
            if not placement.keeps_on_host(self.layout, name, sharded):
                module.to(device)
        if self.family.vae_float32 and self.pipe.vae is not None:
            self.pipe.vae.to(torch.float32)
        if self.upsampler is not None:  # with the VAE, which its pipeline runs beside it
            vae = getattr(self.pipe, "vae", None)
            self.upsampler.module.to(device if vae is None else vae.device)
        if device.type == "cpu":
            align_cpu_weights(self.pipe)  # results must not depend on the file's layout

    def carried(self) -> Carried:
        """What a rebuild's runtime on this rank takes over from this one (`Carried`)."""
        return Carried(
            self.planner.sizes if self.planner is not None else None,
            self.previewer.weights if self.previewer is not None else None,
        )

    def dits(self) -> list[torch.nn.Module]:
        """The pipeline's diffusion transformers (Wan 2.2 A14B has a second, low-noise one)."""
        return dits_of(self.pipe)

    @property
    def in_job(self) -> bool:
        """This rank is inside a job (`job.run_on_rank`): the watchdogs look at it then."""
        return self.rank_model.in_job

    def place(self) -> str:
        """Where this rank's main thread is (`progress.main_thread_place`), or between jobs."""
        return main_thread_place() if self.in_job else BETWEEN_JOBS

    def rank_info(self) -> dict[str, Any]:
        return {
            "rank": self.group.rank,
            "pid": os.getpid(),
            "device": str(self.group.device),
            "dit_param_bytes": sum(local_param_bytes(dit) for dit in self.dits()),
            "encoder_param_bytes": sum(local_param_bytes(e) for e in self._encoders()),
            "encoders_built_empty": sorted(self.empty_encoders),
            "rss_before_model_bytes": self.meter.start_rss,
            "weights": {
                "mode": self.weights,
                "stored": stored_summary(self.dits()),
                "fp8_compute": self.fp8_compute,
                "int8_compute": self.int8_compute,
            },
        }

    @contextlib.contextmanager
    def waiting(self, key: str):
        """Mark that this rank waits for the others at `key` ("<job id>:<point>").

        Each rank publishes its last point in the store; rank 0's watchdog compares them when
        it has waited too long, to name the rank that stopped progressing
        (`serving/health.py`)."""
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
