"""Weight sharding with FSDP2: each transformer block is its own shard unit."""

from __future__ import annotations

import logging

import torch
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import CPUOffloadPolicy, FSDPModule, OffloadPolicy, fully_shard
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


class ModelStateError(RuntimeError):
    """A rank's model is not in its between-jobs state (weights not sharded as loaded, a
    saved row's storage gone): no job may run or write weights on it; the group is rebuilt."""


def reset_after_exception(root: torch.nn.Module) -> None:
    """Put a sharded DiT back as between jobs after an exception inside its forward.

    FSDP2's post-forward hook never runs for the unit that raised nor for the root: their
    parameters stay unsharded (plain tensors registered in place of the DTensors) and the
    root's per-forward state stays set. torch's `reset_iter_state` (on the root) reshards
    every unit and clears that state; an older torch without it gets each unit resharded.
    """
    if not isinstance(root, FSDPModule):
        return
    if hasattr(root, "reset_iter_state"):
        root.reset_iter_state()
        return
    for module in root.modules():
        if isinstance(module, FSDPModule):
            module.reshard()


def keep_root_gathered(root: torch.nn.Module, keep: bool) -> None:
    """Whether FSDP2 leaves `root`'s own weights (not its blocks') gathered after the forward
    under way: a wrapper that records a step's first call and computes on the second keeps
    them for that second call, so the root is gathered once a step. No-op unless sharded."""
    if isinstance(root, FSDPModule):
        root.set_reshard_after_forward(not keep, recurse=False)


def release_root(root: torch.nn.Module) -> None:
    """`root`'s own weights back to their shards (after a job stopped between the calls)."""
    if isinstance(root, FSDPModule):
        root.reshard()


def local_param_bytes(model: torch.nn.Module) -> int:
    """Bytes of parameters this rank holds (its shards when sharded)."""
    total = 0
    for param in model.parameters():
        local = param.to_local() if isinstance(param, DTensor) else param
        total += local.numel() * local.element_size()
    return total
