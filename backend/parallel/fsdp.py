"""Weight sharding with FSDP2: each transformer block is its own shard unit."""

from __future__ import annotations

import logging

import torch
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import CPUOffloadPolicy, OffloadPolicy, fully_shard
from torch.distributed.tensor import DTensor

log = logging.getLogger(__name__)


def transformer_blocks(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The repeated blocks of a DiT: every item of its top-level ModuleLists."""
    blocks: list[torch.nn.Module] = []
    for child in model.children():
        if isinstance(child, torch.nn.ModuleList):
            blocks.extend(child)
    return blocks


def shard_weights(model: torch.nn.Module, mesh: DeviceMesh, *, cpu_offload: bool = False) -> None:
    """fully_shard each block, then the root (embeddings, norms, projections).

    Parameters are gathered block by block during the forward and freed after it, so a rank
    holds about 1/N of the weights plus one block at a time. `cpu_offload` keeps the shards
    in host memory, copied in for each block's forward.
    """
    policy = CPUOffloadPolicy() if cpu_offload else OffloadPolicy()
    # Inference only. FSDP2 asks trainable parameters of one unit for a single dtype, and a
    # DiT in bfloat16 keeps some in float32 (`models.casting`): frozen, they shard as they are.
    model.requires_grad_(False)
    blocks = transformer_blocks(model)
    for block in blocks:
        fully_shard(block, mesh=mesh, reshard_after_forward=True, offload_policy=policy)
    fully_shard(model, mesh=mesh, reshard_after_forward=True, offload_policy=policy)
    log.info("sharded %d blocks over %d ranks", len(blocks), mesh.size())


def local_param_bytes(model: torch.nn.Module) -> int:
    """Bytes of parameters this rank holds (its shards when sharded)."""
    total = 0
    for param in model.parameters():
        local = param.to_local() if isinstance(param, DTensor) else param
        total += local.numel() * local.element_size()
    return total
