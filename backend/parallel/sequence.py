"""Sequence parallelism (Ulysses / ring) through diffusers' context-parallel hooks.

The model only declares its `_cp_plan` (or, for models diffusers gives none, a plan of ours in
`EXTERNAL_PLANS` supplies it); this module builds the config on our own device mesh and hands
it to diffusers' `apply_context_parallel`. We do not call `enable_parallelism`: it
derives the device from `torch.accelerator.device_count()`, which is 0 (a division by zero)
on CPU-only machines, and it cannot take a mesh that also has a CFG dimension. The private
diffusers names this needs are looked up and checked (`internals`) when it is applied.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import torch
from torch.distributed.device_mesh import DeviceMesh

from .cogvideox import prepare_cogvideox
from .internals import require
from .patches import install_any_head_count, install_uneven_gather, needs_any_head_count
from .plan import ParallelPlan

log = logging.getLogger(__name__)

RING_BACKEND = "_native_cudnn"

EXTERNAL_PLANS: dict[str, Callable[[torch.nn.Module], dict[str, Any]]] = {
    "CogVideoXTransformer3DModel": prepare_cogvideox,
}
"""Transformer class name -> a function that prepares the model (e.g. swaps in attention
processors that dispatch) and returns its context-parallel plan."""


def apply_sequence_parallel(
    transformer: torch.nn.Module, plan: ParallelPlan, mesh: DeviceMesh, device: torch.device
) -> None:
    """Split the token sequence over the mesh's ("ring", "ulysses") dimensions.

    `ulysses_anything` / `ring_anything` let any sequence length and head count through, so no
    size is refused for not dividing by the degree.
    """
    if plan.sequence_degree == 1:
        return
    apply_context_parallel, cp_config_class, config_class, *_ = require(
        "sequence parallelism",
        "context_parallel.apply_context_parallel",
        "_modeling_parallel.ContextParallelConfig",
        "_modeling_parallel.ParallelConfig",
        "_modeling_parallel.ParallelConfig.setup",
        "modeling_utils.ModelMixin._cp_plan",
        "modeling_utils.ModelMixin._parallel_config",
    )
    cp_plan = getattr(transformer, "_cp_plan", None)
    prepare = EXTERNAL_PLANS.get(type(transformer).__name__)
    if cp_plan is None and prepare is not None:
        cp_plan = prepare(transformer)
    if cp_plan is None:
        raise ValueError(
            f"{type(transformer).__name__} has no context-parallel plan: "
            "use --ulysses-degree 1 --ring-degree 1 (CFG parallel and sharding still apply)"
        )
    if plan.ring_degree > 1:
        transformer.set_attention_backend(RING_BACKEND)
    num_heads = _num_heads(transformer)
    if plan.ulysses_degree > 1 and needs_any_head_count(num_heads, plan.ulysses_degree):
        install_any_head_count()
    if device.type == "cpu":
        install_uneven_gather()
    sub_mesh = mesh["ring", "ulysses"]
    cp_config = cp_config_class(
        ring_degree=plan.ring_degree,
        ulysses_degree=plan.ulysses_degree,
        ulysses_anything=plan.ulysses_degree > 1,
        ring_anything=plan.ring_degree > 1,
        mesh=sub_mesh,
    )
    config = config_class(context_parallel_config=cp_config)
    rank = torch.distributed.get_rank()
    config.setup(rank, torch.distributed.get_world_size(), device, mesh=sub_mesh)
    transformer._parallel_config = config
    for module in transformer.modules():
        processor = getattr(module, "processor", None)
        if processor is not None and hasattr(processor, "_parallel_config"):
            processor._parallel_config = config
    apply_context_parallel(transformer, cp_config, cp_plan)
    log.info("sequence parallel: ulysses=%d ring=%d", plan.ulysses_degree, plan.ring_degree)


def _num_heads(transformer: torch.nn.Module) -> int:
    heads = getattr(transformer.config, "num_attention_heads", None)
    if heads is None:
        raise ValueError(f"{type(transformer).__name__} does not say its num_attention_heads")
    return int(heads)
