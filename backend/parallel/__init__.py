"""Parallelism applied from outside the model: meshes, sequence parallel, sharding, CFG.

Model code stays single-device; `parallelize` turns a plan into hooks on the transformer.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.tensor import DTensor

from .branches import PairedBranches
from .cfg import BatchedCfgParallel, CfgParallel
from .fsdp import (
    ModelStateError,
    local_param_bytes,
    reset_after_exception,
    shard_encoder,
    shard_weights,
)
from .plan import ParallelPlan
from .sequence import PLAN, SPREAD, SequenceLayouts, apply_sequence_parallel
from .step_cache import CacheSwitch, install_step_cache

SPREAD_ENV = "PARADIT_UNGUIDED_SPREAD"
"""Set to 0, jobs without CFG on a CFG-parallel plan run whole on both halves, as before they
spread: only for `paradit bench --rows unguided` to measure the difference."""

__all__ = [
    "PLAN",
    "SPREAD",
    "ModelStateError",
    "Parallelized",
    "parallelize",
    "local_param_bytes",
]


@dataclass
class Parallelized:
    """What `parallelize` applied to the transformers on this rank."""

    plan: ParallelPlan
    cfg: list[CfgParallel]
    layouts: list[SequenceLayouts] = field(default_factory=list)
    """Each transformer's sequence layouts (none when the sequence is never split)."""
    caches: list[CacheSwitch | None] = field(default_factory=list)
    """Each transformer's step-cache hooks (None: diffusers' cache does not know its blocks)."""
    sharded: list[torch.nn.Module] = field(default_factory=list)
    """The transformers sharded with FSDP2 (each the root of its blocks' units)."""
    paired: list[PairedBranches] = field(default_factory=list)
    """Each transformer's pairing of the CFG branches into one batch (`plan.pairs_branches`:
    a sharded plan without a CFG split; empty otherwise)."""
    encoders: list[torch.nn.Module] = field(default_factory=list)
    """The text/image encoders sharded with FSDP2 over the replica's ranks (the memory plan's
    `sharded` encoder): every rank runs each encode together."""

    def begin_job(self, uses_cfg: bool, tokens: int = 0, step_cache: bool = False) -> str:
        """Set up the next job; returns its sequence layout (`PLAN` or `SPREAD`).

        A job without CFG on a CFG-parallel plan spreads its sequence over the whole replica
        when it has a token for every rank (`tokens`: its latent tokens); otherwise, and for
        every job with CFG, the plan's own layout. A guided job on a plan that pairs its
        branches runs them as one batch, unless it has a `step_cache` (whose decisions and
        residuals are kept per branch call: `step_cache.Branches`).
        """
        for wrapper in self.cfg:
            wrapper.begin_job(uses_cfg)
        for pairing in self.paired:
            pairing.begin_job(uses_cfg and not step_cache)
        spread = (
            not uses_cfg
            and tokens >= self.plan.world_size
            and any(SPREAD in layouts.states for layouts in self.layouts)
        )
        layout = SPREAD if spread else PLAN
        for layouts in self.layouts:
            layouts.use(layout)
        return layout

    def end_job(self) -> None:
        """Between jobs: CFG parallel and pairing off, the plan's own layout."""
        self.begin_job(False)

    def branches_record(self) -> dict | None:
        """How the job's guided steps ran their branches where this plan pairs them
        (job.json's `cfg_branches`; None elsewhere)."""
        records = [r for r in (pairing.record() for pairing in self.paired) if r is not None]
        if not records:
            return None
        total = {key: sum(r[key] for r in records) for key in ("batched_steps", "separate_steps")}
        why = next((r["why_separate"] for r in records if "why_separate" in r), None)
        return {**total, **({"why_separate": why} if why else {})}

    def recover(self) -> None:
        """After an exception inside a forward: every FSDP2 unit resharded and its
        per-forward state cleared (FSDP2's post-forward has no exception path), then
        `check_at_rest`. Collective-free: each rank does its own."""
        for root in self.sharded:
            reset_after_exception(root)
        self.check_at_rest()

    def check_at_rest(self) -> None:
        """ModelStateError unless every sharded transformer holds only its shards."""
        for root in self.sharded:
            loose = [name for name, p in root.named_parameters() if not isinstance(p, DTensor)]
            if loose:
                raise ModelStateError(
                    f"{len(loose)} parameters of {type(root).__name__} are not sharded "
                    f"between jobs (e.g. {loose[0]})"
                )


def parallelize(
    transformers: list[torch.nn.Module],
    plan: ParallelPlan,
    device: torch.device,
    dp_degree: int = 1,
    *,
    group: dist.ProcessGroup | None = None,
    batched_cfg: bool = False,
    cpu_offload: bool = False,
    encoders: list[torch.nn.Module] | None = None,
) -> Parallelized:
    """Apply `plan` to each transformer (Wan 2.2 has two experts) on every rank, together.

    With `dp_degree` replicas the world mesh has a leading "dp" dimension and each rank keeps
    its replica's slice: the plan (CFG x ring x Ulysses, FSDP over the replica's ranks)
    divides one replica, and no collective of a job leaves it. `batched_cfg`: the pipeline
    runs both CFG branches as one batch of 2 (CogVideoX). `cpu_offload`: the shards live in
    host memory between uses (FSDP2's CPU offload policy; the memory plan's offload).
    `group`: the ranks of one replica when it is not a slice of the world (`dp_degree` 1),
    e.g. 3 of 4 ranks; only its ranks call this. torch names the groups it creates by a
    count kept in each process, so a rank outside `group` must not create groups together
    with these ranks afterwards. `encoders`: text/image encoders to shard over the replica's
    ranks as well (FSDP2, one unit a layer: `fsdp.shard_encoder`); each encode then runs on
    every rank of the replica together.
    """
    ranks = _group_ranks(group, plan, dp_degree)
    if encoders and (plan.world_size == 1 or not plan.shard_weights):
        raise ValueError(
            "an encoder is sharded over the replica's ranks: it needs a plan of several ranks "
            "that shards weights"
        )
    caches = [install_step_cache(transformer) for transformer in transformers]  # before CP
    if plan.world_size == 1:
        return Parallelized(plan, [], [], caches)
    mesh = _replica_mesh(
        device,
        dp_degree,
        (plan.cfg_degree, plan.ring_degree, plan.ulysses_degree),
        ("cfg", "ring", "ulysses"),
        ranks,
    )
    flat = None
    if plan.shard_weights:
        flat = _replica_mesh(device, dp_degree, (plan.world_size,), ("fsdp",), ranks)
    spread = None
    if plan.cfg_degree > 1 and os.environ.get(SPREAD_ENV, "1") != "0":
        # jobs without CFG: Ulysses over the whole replica
        spread = _replica_mesh(device, dp_degree, (1, plan.world_size), ("ring", "ulysses"), ranks)
    wrappers, all_layouts, sharded, paired = [], [], [], []
    for transformer in transformers:
        layouts = apply_sequence_parallel(transformer, plan, mesh, device, spread)
        if layouts is not None:
            all_layouts.append(layouts)
        if flat is not None:
            shard_weights(transformer, flat, cpu_offload=cpu_offload)
            sharded.append(transformer)
        if plan.cfg_degree > 1:
            cfg_mesh = mesh["cfg"]
            wrapper = BatchedCfgParallel if batched_cfg else CfgParallel
            wrappers.append(wrapper(transformer, cfg_mesh.get_group(), cfg_mesh.get_local_rank()))
        elif plan.pairs_branches and not batched_cfg:
            paired.append(PairedBranches(transformer))
    for encoder in encoders or []:
        shard_encoder(encoder, flat)
    return Parallelized(plan, wrappers, all_layouts, caches, sharded, paired, list(encoders or []))


def _group_ranks(
    group: dist.ProcessGroup | None, plan: ParallelPlan, dp_degree: int
) -> list[int] | None:
    """The global ranks of `group` (None: the world), checked against the plan."""
    if group is None:
        return None
    if dp_degree != 1:
        raise ValueError(f"a group is one replica: dp_degree must be 1, got {dp_degree}")
    if group == dist.GroupMember.NON_GROUP_MEMBER:
        raise ValueError("this rank is not in the group: only the group's ranks parallelize")
    ranks = dist.get_process_group_ranks(group)
    if len(ranks) != plan.world_size:
        raise ValueError(
            f"the plan needs {plan.world_size} ranks, the group has {len(ranks)}: {ranks}"
        )
    return ranks


def _replica_mesh(
    device: torch.device,
    dp_degree: int,
    shape: tuple[int, ...],
    names: tuple[str, ...],
    ranks: list[int] | None = None,
) -> DeviceMesh:
    """This rank's replica's slice of a world mesh of shape (dp_degree, *shape), or the
    mesh of shape `shape` over `ranks`."""
    if ranks is not None:
        return DeviceMesh(device.type, torch.tensor(ranks).view(shape), mesh_dim_names=names)
    if dp_degree == 1:
        return init_device_mesh(device.type, shape, mesh_dim_names=names)
    world = init_device_mesh(device.type, (dp_degree, *shape), mesh_dim_names=("dp", *names))
    return world[names]
