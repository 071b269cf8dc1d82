"""Parallelism applied from outside the model: meshes, sequence parallel, sharding, CFG.

Model code stays single-device; `parallelize` turns a plan into hooks on the transformer.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from .cfg import BatchedCfgParallel, CfgParallel
from .fsdp import local_param_bytes, shard_weights
from .plan import ParallelPlan
from .sequence import PLAN, SPREAD, SequenceLayouts, apply_sequence_parallel
from .step_cache import CacheSwitch, install_step_cache

SPREAD_ENV = "PARADIT_UNGUIDED_SPREAD"
"""Set to 0, jobs without CFG on a CFG-parallel plan run whole on both halves, as before they
spread: only for `paradit bench --rows unguided` to measure the difference."""

__all__ = ["PLAN", "SPREAD", "Parallelized", "parallelize", "local_param_bytes"]


@dataclass
class Parallelized:
    """What `parallelize` applied to the transformers on this rank."""

    plan: ParallelPlan
    cfg: list[CfgParallel]
    layouts: list[SequenceLayouts] = field(default_factory=list)
    """Each transformer's sequence layouts (none when the sequence is never split)."""
    caches: list[CacheSwitch | None] = field(default_factory=list)
    """Each transformer's step-cache hooks (None: diffusers' cache does not know its blocks)."""

    def begin_job(self, uses_cfg: bool, tokens: int = 0) -> str:
        """Set up the next job; returns its sequence layout (`PLAN` or `SPREAD`).

        A job without CFG on a CFG-parallel plan spreads its sequence over the whole replica
        when it has a token for every rank (`tokens`: its latent tokens); otherwise, and for
        every job with CFG, the plan's own layout.
        """
        for wrapper in self.cfg:
            wrapper.begin_job(uses_cfg)
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
        """Between jobs: CFG parallel off, the plan's own layout."""
        self.begin_job(False)


def parallelize(
    transformers: list[torch.nn.Module],
    plan: ParallelPlan,
    device: torch.device,
    dp_degree: int = 1,
    *,
    batched_cfg: bool = False,
    cpu_offload: bool = False,
    group: dist.ProcessGroup | None = None,
) -> Parallelized:
    """Apply `plan` to each transformer (Wan 2.2 has two experts) on every rank, together.

    With `dp_degree` replicas the world mesh has a leading "dp" dimension and each rank keeps
    its replica's slice: the plan (CFG x ring x Ulysses, FSDP over the replica's ranks)
    divides one replica, and no collective of a job leaves it. `batched_cfg`: the pipeline
    runs both CFG branches as one batch of 2 (CogVideoX). `cpu_offload`: the shards live in
    host memory between uses (FSDP2's CPU offload policy; the memory plan's offload).
    `group`: the ranks the plan divides (the world when None); only its members call this,
    together, and its meshes' groups are made among them alone.
    """
    caches = [install_step_cache(transformer) for transformer in transformers]  # before CP
    if plan.world_size == 1:
        return Parallelized(plan, [], [], caches)
    mesh = _replica_mesh(
        device,
        dp_degree,
        (plan.cfg_degree, plan.ring_degree, plan.ulysses_degree),
        ("cfg", "ring", "ulysses"),
        group,
    )
    flat = None
    if plan.shard_weights:
        flat = _replica_mesh(device, dp_degree, (plan.world_size,), ("fsdp",), group)
    spread = None
    if plan.cfg_degree > 1 and os.environ.get(SPREAD_ENV, "1") != "0":
        # jobs without CFG: Ulysses over the whole replica
        spread = _replica_mesh(device, dp_degree, (1, plan.world_size), ("ring", "ulysses"), group)
    wrappers, all_layouts = [], []
    for transformer in transformers:
        layouts = apply_sequence_parallel(transformer, plan, mesh, device, spread)
        if layouts is not None:
            all_layouts.append(layouts)
        if flat is not None:
            shard_weights(transformer, flat, cpu_offload=cpu_offload)
        if plan.cfg_degree > 1:
            cfg_mesh = mesh["cfg"]
            wrapper = BatchedCfgParallel if batched_cfg else CfgParallel
            wrappers.append(wrapper(transformer, cfg_mesh.get_group(), cfg_mesh.get_local_rank()))
    return Parallelized(plan, wrappers, all_layouts, caches)


def _replica_mesh(
    device: torch.device,
    dp_degree: int,
    shape: tuple[int, ...],
    names: tuple[str, ...],
    group: dist.ProcessGroup | None = None,
) -> DeviceMesh:
    """This rank's replica's slice of a mesh of shape (dp_degree, *shape) over the world, or
    over `group`'s ranks in their order."""
    full_shape, full_names = (dp_degree, *shape), ("dp", *names)
    if dp_degree == 1:
        full_shape, full_names = shape, names
    if group is None:
        mesh = init_device_mesh(device.type, full_shape, mesh_dim_names=full_names)
    else:
        ranks = dist.get_process_group_ranks(group)
        if len(ranks) != math.prod(full_shape):
            raise ValueError(
                f"the plan divides {math.prod(full_shape)} ranks, the group has {len(ranks)}"
            )
        layout = torch.tensor(ranks, dtype=torch.int).view(full_shape)
        mesh = DeviceMesh(device.type, layout, mesh_dim_names=full_names)
    return mesh if dp_degree == 1 else mesh[names]
