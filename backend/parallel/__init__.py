"""Parallelism applied from outside the model: meshes, sequence parallel, sharding, CFG.

Model code stays single-device; `parallelize` turns a plan into hooks on the transformer.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.distributed.device_mesh import init_device_mesh

from .cfg import BatchedCfgParallel, CfgParallel
from .fsdp import local_param_bytes, shard_weights
from .plan import ParallelPlan
from .sequence import apply_sequence_parallel

__all__ = ["Parallelized", "parallelize", "local_param_bytes"]


@dataclass
class Parallelized:
    """What `parallelize` applied to the transformers on this rank."""

    plan: ParallelPlan
    cfg: list[CfgParallel]

    def begin_job(self, uses_cfg: bool) -> None:
        for wrapper in self.cfg:
            wrapper.begin_job(uses_cfg)


def parallelize(
    transformers: list[torch.nn.Module],
    plan: ParallelPlan,
    device: torch.device,
    *,
    batched_cfg: bool = False,
) -> Parallelized:
    """Apply `plan` to each transformer (Wan 2.2 has two experts) on every rank, together.

    `batched_cfg`: the pipeline runs both CFG branches as one batch of 2 (CogVideoX).
    """
    if plan.world_size == 1:
        return Parallelized(plan, [])
    mesh = init_device_mesh(
        device.type,
        (plan.cfg_degree, plan.ring_degree, plan.ulysses_degree),
        mesh_dim_names=("cfg", "ring", "ulysses"),
    )
    flat = None
    if plan.shard_weights:
        flat = init_device_mesh(device.type, (plan.world_size,), mesh_dim_names=("fsdp",))
    wrappers = []
    for transformer in transformers:
        apply_sequence_parallel(transformer, plan, mesh, device)
        if flat is not None:
            shard_weights(transformer, flat)
        if plan.cfg_degree > 1:
            cfg_mesh = mesh["cfg"]
            wrapper = BatchedCfgParallel if batched_cfg else CfgParallel
            wrappers.append(wrapper(transformer, cfg_mesh.get_group(), cfg_mesh.get_local_rank()))
    return Parallelized(plan, wrappers)
