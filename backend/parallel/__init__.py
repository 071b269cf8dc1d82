"""Parallelism applied from outside the model: meshes, sequence parallel, sharding, CFG.

Model code stays single-device; `parallelize` turns a plan into hooks on the transformer.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.distributed.device_mesh import init_device_mesh

from ..config import ParallelPlan
from .cfg import CfgParallel
from .fsdp import local_param_bytes, shard_weights
from .sequence import apply_sequence_parallel

__all__ = ["Parallelized", "parallelize", "local_param_bytes"]


@dataclass
class Parallelized:
    """What `parallelize` applied to one transformer on this rank."""

    plan: ParallelPlan
    cfg: CfgParallel | None

    def begin_job(self, uses_cfg: bool) -> None:
        if self.cfg is not None:
            self.cfg.begin_job(uses_cfg)


def parallelize(
    transformer: torch.nn.Module, plan: ParallelPlan, device: torch.device
) -> Parallelized:
    """Apply `plan` to `transformer` on every rank (all ranks must call this together)."""
    if plan.world_size == 1:
        return Parallelized(plan, None)
    mesh = init_device_mesh(
        device.type,
        (plan.cfg_degree, plan.ring_degree, plan.ulysses_degree),
        mesh_dim_names=("cfg", "ring", "ulysses"),
    )
    apply_sequence_parallel(transformer, plan, mesh, device)
    if plan.shard_weights:
        flat = init_device_mesh(device.type, (plan.world_size,), mesh_dim_names=("fsdp",))
        shard_weights(transformer, flat)
    cfg = None
    if plan.cfg_degree > 1:
        cfg_mesh = mesh["cfg"]
        cfg = CfgParallel(transformer, cfg_mesh.get_group(), cfg_mesh.get_local_rank())
    return Parallelized(plan, cfg)
