"""Sequence parallelism (Ulysses / ring) through diffusers' context-parallel hooks.

The model only declares its `_cp_plan` (or, for models diffusers gives none, a plan of ours
from its family's spec supplies it: `FamilySpec.cp_plans`, in `models/families/<family>/`);
this module builds the config on our own device mesh and hands it to diffusers'
`apply_context_parallel`. We do not call `enable_parallelism`: it derives the device from
`torch.accelerator.device_count()`, which is 0 (a division by zero) on CPU-only machines, and
it cannot take a mesh that also has a CFG dimension. The private diffusers names this needs
are looked up and checked (`diffusers_internals`) when it is applied.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from torch.distributed.device_mesh import DeviceMesh

from ..diffusers_internals import require
from .patches import install_any_head_count, install_uneven_gather, needs_any_head_count
from .plan import ParallelPlan

log = logging.getLogger(__name__)


PLAN, SPREAD = "plan", "spread"
"""The two sequence layouts of a CFG-parallel plan: the plan's own (the sequence split over
ring x Ulysses inside each CFG half), and the whole replica as one Ulysses group, for jobs
that do not use CFG (`SequenceLayouts.use`)."""


class SequenceLayouts:
    """The sequence layouts one transformer's context-parallel hooks can run with.

    diffusers' split/gather hooks and attention processors read one `ContextParallelConfig`
    object at every call. It is built and hooked once; `use` copies a prepared layout's state
    into it between jobs, so a job chooses how its sequence is divided without re-hooking the
    model (FSDP's hooks and the CFG wrapper around `forward` stay as they are). A layout of
    `None` state runs whole: the split/gather hooks see a mesh of one rank and the processors
    get no parallel config (plain attention).
    """

    def __init__(
        self,
        live: Any,
        config: Any,
        processors: list[Any],
        states: dict[str, dict[str, Any] | None],
        whole: dict[str, Any] | None = None,
    ):
        self.live, self.config, self.processors = live, config, processors
        self.states = states
        self._whole = whole
        self.current = ""
        self.use(next(iter(states)))

    def use(self, name: str) -> None:
        """Run the next forwards with layout `name` (every rank of a replica switches alike)."""
        if name == self.current:
            return
        state = self.states[name]
        self.live.__dict__.update(self._whole if state is None else state)
        for processor in self.processors:
            processor._parallel_config = None if state is None else self.config
        self.current = name


def apply_sequence_parallel(
    transformer: torch.nn.Module,
    plan: ParallelPlan,
    mesh: DeviceMesh,
    device: torch.device,
    spread_mesh: DeviceMesh | None = None,
) -> SequenceLayouts | None:
    """Split the token sequence over the mesh's ("ring", "ulysses") dimensions.

    `spread_mesh` (a CFG-parallel plan; dimensions ("ring", "ulysses") of sizes 1 and the
    replica's size) adds the `SPREAD` layout: Ulysses over every rank of the replica, for jobs
    without CFG. `ulysses_anything` / `ring_anything` let any sequence length and head count
    through, so no size is refused for not dividing by the degree. Returns the layouts, or
    None when the sequence is never split.
    """
    if plan.sequence_degree == 1 and spread_mesh is None:
        return None
    apply_context_parallel, cp_config_class, config_class, *_ = require(
        "sequence parallelism",
        "context_parallel.apply_context_parallel",
        "_modeling_parallel.ContextParallelConfig",
        "_modeling_parallel.ParallelConfig",
        "_modeling_parallel.ParallelConfig.setup",
        "modeling_utils.ModelMixin._cp_plan",
        "modeling_utils.ModelMixin._parallel_config",
    )
    from ..models.families import cp_plan_for  # the families' plans: their specs

    # a family's plan prepares the model (e.g. swaps in attention processors that dispatch)
    # and replaces the model's own where it has one (LTX-2: families/ltx2/parallel.py says why)
    prepare = cp_plan_for(type(transformer).__name__)
    cp_plan = (
        prepare(transformer) if prepare is not None else getattr(transformer, "_cp_plan", None)
    )
    if cp_plan is None:
        if plan.sequence_degree == 1:
            return None  # unguided jobs keep running whole on both CFG halves
        raise ValueError(
            f"{type(transformer).__name__} has no context-parallel plan: "
            "use --ulysses-degree 1 --ring-degree 1 (CFG parallel and sharding still apply)"
        )
    # Ring's attention kernel (one that returns the log-sum-exp) is the job's: attention.py.
    num_heads = _num_heads(transformer)
    ulysses_degrees = [plan.ulysses_degree]
    if spread_mesh is not None:
        ulysses_degrees.append(spread_mesh.size())
    if any(d > 1 and needs_any_head_count(num_heads, d) for d in ulysses_degrees):
        install_any_head_count()
    if device.type == "cpu":
        install_uneven_gather()

    def state(ring_degree: int, ulysses_degree: int, sub_mesh: DeviceMesh) -> dict[str, Any]:
        cp_config = cp_config_class(
            ring_degree=ring_degree,
            ulysses_degree=ulysses_degree,
            ulysses_anything=ulysses_degree > 1,
            ring_anything=ring_degree > 1,
            mesh=sub_mesh,
        )
        config_class(context_parallel_config=cp_config).setup(
            torch.distributed.get_rank(), torch.distributed.get_world_size(), device, mesh=sub_mesh
        )
        return dict(vars(cp_config))

    states: dict[str, dict[str, Any] | None] = {}
    whole = None
    if plan.sequence_degree > 1:
        states[PLAN] = state(plan.ring_degree, plan.ulysses_degree, mesh["ring", "ulysses"])
    else:
        states[PLAN] = None
    if spread_mesh is not None:
        states[SPREAD] = state(1, spread_mesh.size(), spread_mesh)
        if states[PLAN] is None:  # run whole: split/gather over this rank alone
            whole = {
                **states[SPREAD],
                "ulysses_degree": 1,
                "ulysses_anything": False,
                "_world_size": 1,
                "_flattened_mesh": mesh["ring", "ulysses"]._flatten(),
            }
    first = next(s for s in states.values() if s is not None)
    live = cp_config_class(
        ring_degree=first["ring_degree"],
        ulysses_degree=first["ulysses_degree"],
        ulysses_anything=first["ulysses_anything"],
        ring_anything=first["ring_anything"],
        mesh=first["mesh"],
    )
    config = config_class(context_parallel_config=live)
    config.setup(
        torch.distributed.get_rank(), torch.distributed.get_world_size(), device, mesh=first["mesh"]
    )
    live.__dict__.update(first)
    transformer._parallel_config = config
    processors = [
        module.processor
        for module in transformer.modules()
        if hasattr(getattr(module, "processor", None), "_parallel_config")
    ]
    apply_context_parallel(transformer, live, cp_plan)
    log.info(
        "sequence parallel: ulysses=%d ring=%d%s",
        plan.ulysses_degree,
        plan.ring_degree,
        f"; jobs without CFG: ulysses={spread_mesh.size()}" if spread_mesh is not None else "",
    )
    return SequenceLayouts(live, config, processors, states, whole)


def _num_heads(transformer: torch.nn.Module) -> int:
    config = transformer.config
    heads = getattr(config, "num_attention_heads", None) or getattr(config, "n_heads", None)
    if heads is None:  # n_heads: Z-Image
        raise ValueError(f"{type(transformer).__name__} does not say its num_attention_heads")
    return int(heads)
