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


def encoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The shard units of a text or image encoder: the modules of the classes its model
    declares unsplittable (transformers' `_no_split_modules`: a decoder layer, a T5 block, a
    vision block), outermost first; else the items of every ModuleList in it."""
    names = set(getattr(model, "_no_split_modules", None) or ())
    units: list[torch.nn.Module] = []
    inside: set[int] = set()
    for module in model.modules():
        if id(module) in inside:
            continue
        if type(module).__name__ in names:
            units.append(module)
            inside.update(id(sub) for sub in module.modules())
    if units:
        return units
    return [
        item
        for module in model.modules()
        if isinstance(module, torch.nn.ModuleList)
        for item in module
    ]


def shard_encoder(model: torch.nn.Module, mesh: DeviceMesh) -> int:
    """fully_shard each of an encoder's layers (`encoder_layers`), then each module outside
    them that holds parameters of its own (embeddings, final norms, projections), then the
    root: every rank holds about 1/N of the encoder and gathers one unit at a time in the
    forward, which every rank of `mesh` runs together. The modules outside the layers are
    units of their own because a pipeline may call a submodule rather than the root (MiniMax
    H3's calls the language model inside Qwen3-VL): each unit's own hook gathers it, whatever
    is called. A parameter two modules share stays with the root. Returns the number of
    units besides the root."""
    model.requires_grad_(False)
    model.eval()
    layers = encoder_layers(model)
    inside = {id(p) for layer in layers for p in layer.parameters()}
    seen: set[int] = set(inside)
    counts: dict[int, int] = {}
    for module in model.modules():
        for param in module.parameters(recurse=False):
            counts[id(param)] = counts.get(id(param), 0) + 1
    others = []
    for module in model.modules():
        own = list(module.parameters(recurse=False))
        if module is model or not own or any(id(p) in seen for p in own):
            continue
        if any(counts[id(p)] > 1 for p in own):  # tied to another module's: the root's
            continue
        others.append(module)
        seen.update(id(p) for p in own)
    for unit in [*layers, *others]:
        fully_shard(unit, mesh=mesh, reshard_after_forward=True)
    fully_shard(model, mesh=mesh, reshard_after_forward=True)
    log.info(
        "sharded %s: %d layers and %d other units over %d ranks",
        type(model).__name__,
        len(layers),
        len(others),
        mesh.size(),
    )
    return len(layers) + len(others)
