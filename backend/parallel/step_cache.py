"""Step caching whose skip decision every rank of a replica takes together.

First-Block-Cache (diffusers' `FirstBlockCacheConfig` hooks) runs the first transformer block
at every step and compares its residual with the one of the last fully computed step: when
the relative mean absolute change is at most the threshold, the other blocks are skipped and
their cached residual is added instead. diffusers decides on each process's own tensor, which
in parallel is a shard: under Ulysses each rank sees a part of the sequence, under CFG
parallel each half sees one branch, and ranks that decide differently run different
collectives (a hang, or wrong output). Here the decision is replaced by `StepAgreement`:

- the metric is reduced over the replica: each rank contributes the sums |r - r_prev| and
  |r_prev| of its rows for the branch it computes, one all-reduce adds them up, and the
  ratio of the sums is world size 1's mean ratio (its mean over the whole sequence);
- the CFG rule: the conditional branch decides for the step and the unconditional branch
  follows it (at world size 1 the conditional call comes first; on a CFG-parallel plan both
  halves read the conditional half's reduced metric from the same all-reduce);
- a second all-reduce checks that every rank took the same decision; if not, every rank
  raises the same error at the same step (no rank is left waiting in a collective).

diffusers' hooks read a block's inputs and outputs by the layout registered for its class
(`TransformerBlockRegistry`); the blocks diffusers does not list (HunyuanVideo 1.5's,
LTX-2's) are registered from their family spec's `block_layouts` (`family_spec.BlockLayout`),
so their transformers get the cache too. The hooks carry two
streams through a block: the first (`hidden_states`, whose residual decides) and a second
they read as `encoder_hidden_states`. LTX-2's block returns its video and audio states (the
text goes in unchanged): its layout names the audio as the second stream, and the metadata
paradit registers (`_metadata_class`) looks the hooks' "encoder_hidden_states" up under that
name, so a skipped step adds the cached residuals of both streams. The video's residual
decides (under a split, every rank's share of it, summed as below); the audio, whole on every
rank, follows.

diffusers keeps the hooks' state per named transformer call: a pipeline names each call
(`cache_context("cond")`, `"uncond"`) around it. For a pipeline that names none (Krea 2's),
a hook on the transformer names the call by the branch it computes (`Branches.rows`: at
world size 1 the conditional call first, then the unconditional one; on a CFG-parallel half,
its own branch) and clears the name after it, so each branch keeps its own residuals as the
named pipelines' do. A block that returns its hidden states alone (one stream over a joint
sequence) is registered with no second stream (`BlockLayout.second` None): the hooks then
carry that one tensor.

Each transformer (Wan 2.2's two experts) has its own hooks and state. The hooks are installed
once at load (`install_step_cache`), switched on for a job that asks for the cache and off
after it, their state cleared: no state outlives a job.
"""

from __future__ import annotations

import inspect
import logging
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from ..cache import CacheSettings
from ..diffusers_internals import require

log = logging.getLogger(__name__)

COND, UNCOND = "cond", "uncond"


@dataclass(frozen=True)
class Branches:
    """Which CFG branch each batch row of this rank's transformer calls computes."""

    uses_cfg: bool
    cfg_rank: int | None = None
    """This rank's half of an active CFG-parallel plan (None: CFG parallel not in use)."""
    batched: bool = False
    """The pipeline batches (uncond, cond) in one call (CogVideoX)."""

    def rows(self, call: int, batch: int) -> list[str]:
        """Labels of the rows of the `call`-th transformer call of a job (batch `batch`)."""
        if not self.uses_cfg:
            return [COND] * batch
        if self.cfg_rank is not None:  # each half computes one branch
            if self.batched:  # rows (uncond, cond): half 0 has row 0
                return [UNCOND if self.cfg_rank == 0 else COND] * batch
            return [COND if self.cfg_rank == 0 else UNCOND] * batch
        if self.batched:
            return [UNCOND, COND][:batch]
        return [COND if call % 2 == 0 else UNCOND] * batch  # cond first, then uncond


class DisagreementError(RuntimeError):
    """The ranks of a replica took different cache decisions (raised on every rank)."""


class StepAgreement:
    """One transformer's cache decisions in one job, agreed over the replica's `group`."""

    def __init__(
        self,
        settings: CacheSettings,
        branches: Branches,
        group: dist.ProcessGroup | None,
        record: list[dict[str, Any]],
        *,
        alone: bool = False,
    ):
        self.settings, self.branches, self.group = settings, branches, group
        self.record = record
        """Shared by a job's transformers: one entry per step, in step order."""
        self.alone = alone  # test-only (sabotage.py): decide from this rank's shard alone
        self.calls = 0
        self._decision = True

    def should_compute(self, residual: torch.Tensor, previous: torch.Tensor | None) -> bool:
        """The hook's decision for this call: run the remaining blocks?"""
        rows = self.branches.rows(self.calls, residual.shape[0])
        self.calls += 1
        # [cond |diff|, cond |prev|, cond rows, uncond |diff|, uncond |prev|, uncond rows, first]
        sums = torch.zeros(7, dtype=torch.float64)
        if previous is None:
            sums[6] = 1
        for row, label in enumerate(rows):
            at = 0 if label == COND else 3
            sums[at + 2] += 1
            if previous is not None:
                diff = (residual[row] - previous[row]).abs().sum(dtype=torch.float64)
                sums[at] += diff.cpu()
                sums[at + 1] += previous[row].abs().sum(dtype=torch.float64).cpu()
        local = sums.clone()
        if self.group is not None:
            dist.all_reduce(sums, group=self.group)
        if self.alone:
            sums = local
        first = sums[6] > 0
        if sums[2] == 0:  # an unconditional call alone: it follows the step's decision
            compute = self._decision or bool(first)
            self._agree(compute, len(self.record))
            uncond = _ratio(sums[3], sums[4])
            if self.record and uncond is not None:
                self.record[-1]["metric_uncond"] = round(uncond, 6)
            return compute
        cond = _ratio(sums[0], sums[1])
        compute = bool(first) or cond is None or cond > self.settings.threshold
        self._agree(compute, len(self.record) + 1)
        self._decision = compute
        uncond = _ratio(sums[3], sums[4]) if sums[5] > 0 else None
        self.record.append(
            {
                "computed": compute,
                "metric": None if cond is None else round(cond, 6),
                **({"metric_uncond": round(uncond, 6)} if uncond is not None else {}),
            }
        )
        return compute

    def _agree(self, compute: bool, step: int) -> None:
        """Every rank checks that all took `compute`; all raise together when not."""
        if self.group is None:
            return
        votes = torch.tensor([1.0 if compute else 0.0, 0.0 if compute else 1.0, step])
        dist.all_reduce(votes, op=dist.ReduceOp.MAX, group=self.group)
        if votes[:2].sum() > 1:  # the same message on every rank: one error for the job
            raise DisagreementError(
                f"step cache: the ranks of this replica took different skip decisions at "
                f"step {int(votes[2])} (a rank decided alone); the job is stopped"
            )


def cache_record(settings: CacheSettings, steps: list[dict[str, Any]]) -> dict[str, Any]:
    """job.json's `cache`: the settings, which steps were computed and each step's metric."""
    computed = [index for index, step in enumerate(steps) if step["computed"]]
    return {
        **settings.to_dict(),
        "num_computed": len(computed),
        "num_skipped": len(steps) - len(computed),
        "skipped_steps": [index for index, step in enumerate(steps) if not step["computed"]],
        "steps": steps,
    }


def _ratio(diff: torch.Tensor, prev: torch.Tensor) -> float | None:
    return None if prev <= 0 else float(diff / prev)


def _register_block_layout(block_class: type) -> None:
    """Tell diffusers' cache hooks how `block_class` returns its states, when its family
    declares the layout (`FamilySpec.block_layouts`) and diffusers does not (registering
    again changes nothing)."""
    from ..models.families import block_layout_for  # the families' layouts: their specs

    layout = block_layout_for(block_class.__name__)
    if layout is None:
        return
    registry, metadata, _lookup = require(
        "the step cache",
        "_helpers.TransformerBlockRegistry",
        "_helpers.TransformerBlockMetadata",
        "_helpers.TransformerBlockMetadata._get_parameter_from_args_kwargs",
    )
    try:
        registry.get(block_class)
    except ValueError:  # not registered yet
        registry.register(
            model_class=block_class,
            metadata=_metadata_class(metadata)(
                return_hidden_states_index=layout.first,
                return_encoder_hidden_states_index=layout.second,
                encoder_hidden_states_argument_name=layout.second_input,
            ),
        )


def _named(manager: Any) -> bool:
    """Whether the pipeline named the call (`cache_context`): the state manager's context
    raises ValueError when none is set."""
    try:
        return manager.context is not None
    except ValueError:
        return False


def _metadata_class(base: type) -> type:
    """diffusers' block metadata whose lookups by the hooks' names go to the block's own
    argument names: First-Block-Cache asks for "encoder_hidden_states" whatever the metadata
    declares (its newer hooks read `encoder_hidden_states_argument_name`)."""

    class NamedStreams(base):
        def _get_parameter_from_args_kwargs(
            self, identifier: str, args: tuple = (), kwargs: dict | None = None
        ) -> Any:
            names = {
                "hidden_states": self.hidden_states_argument_name,
                "encoder_hidden_states": self.encoder_hidden_states_argument_name,
            }
            return super()._get_parameter_from_args_kwargs(
                names.get(identifier, identifier), args, kwargs
            )

    return NamedStreams


class CacheSwitch:
    """First-Block-Cache hooks on one transformer, installed once at load, on for a job.

    They are installed before the sequence-parallel hooks (so they see each rank's shard, as
    the blocks do) and before FSDP; between jobs, and in jobs without a cache, they call the
    block straight through.
    """

    def __init__(self, state_manager: Any):
        self.state_manager = state_manager
        self.agreement: StepAgreement | None = None

    def start(self, agreement: StepAgreement) -> None:
        self.state_manager.reset()
        self.agreement = agreement

    def stop(self) -> None:
        self.agreement = None
        self.state_manager.reset()  # no residual outlives its job


def install_step_cache(transformer: torch.nn.Module) -> CacheSwitch | None:
    """Put switchable First-Block-Cache hooks on `transformer`'s blocks (diffusers' own, with
    the decision replaced); None when diffusers does not know its block classes."""
    try:
        head_class, block_class, state_class, state_manager_class, block_names, context_class = (
            require(
                "the step cache",
                "first_block_cache.FBCHeadBlockHook",
                "first_block_cache.FBCBlockHook",
                "first_block_cache.FBCSharedBlockState",
                "hooks.StateManager",
                "_common._ALL_TRANSFORMER_BLOCK_IDENTIFIERS",
                "hooks.CacheContext",
                "hooks.StateManager.set_context",
                "hooks.StateManager.context",
            )[:6]
        )
    except RuntimeError as exc:  # another diffusers: the model still loads, jobs get no cache
        log.warning("%s", exc)
        return None
    from diffusers.hooks import HookRegistry, ModelHook

    blocks = [
        block
        for name, child in transformer.named_children()
        if name in block_names and isinstance(child, torch.nn.ModuleList)
        for block in child
    ]
    if len(blocks) < 2:
        return None
    if "hidden_states" not in inspect.signature(type(blocks[0]).forward).parameters:
        # diffusers' cache hooks read each block's input by that name (Z-Image's is `x`)
        log.info("no step cache for %s: its blocks take no hidden_states", type(transformer))
        return None
    _register_block_layout(type(blocks[0]))
    switch = CacheSwitch(state_manager_class(state_class, (), {}))

    class Head(head_class):
        def new_forward(self, module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
            if switch.agreement is None:
                return self.fn_ref.original_forward(*args, **kwargs)
            return super().new_forward(module, *args, **kwargs)

        def _should_compute_remaining_blocks(self, residual: torch.Tensor) -> bool:
            previous = self.state_manager.get_state().head_block_residual
            return switch.agreement.should_compute(residual, previous)

    class Block(block_class):
        def new_forward(self, module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
            if switch.agreement is None:
                return self.fn_ref.original_forward(*args, **kwargs)
            return super().new_forward(module, *args, **kwargs)

    class NamedCall(ModelHook):
        """Names a call the pipeline leaves unnamed by the branch it computes (see above)."""

        def new_forward(self, module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
            manager = switch.state_manager
            if switch.agreement is None or _named(manager):
                return self.fn_ref.original_forward(*args, **kwargs)
            agreement = switch.agreement
            manager.set_context(context_class(agreement.branches.rows(agreement.calls, 1)[0]))
            try:
                return self.fn_ref.original_forward(*args, **kwargs)
            finally:
                manager.set_context(None)

    try:
        hooks = [
            Head(switch.state_manager, 0.0),
            *(Block(switch.state_manager) for _ in blocks[1:-1]),
            Block(switch.state_manager, is_tail=True),
        ]
        for index, (block, hook) in enumerate(zip(blocks, hooks, strict=True)):
            HookRegistry.check_if_exists_or_initialize(block).register_hook(
                hook, f"paradit_step_cache_{index}"
            )
        HookRegistry.check_if_exists_or_initialize(transformer).register_hook(
            NamedCall(), "paradit_step_cache_call"
        )
    except ValueError as exc:  # a block class diffusers' cache hooks do not know
        log.info("no step cache for %s: %s", type(transformer).__name__, exc)
        return None
    # the transformer's first cache context noted which of its modules carry hooks: renew
    # that list, or a transformer that ran before gets no context set on these hooks
    HookRegistry.check_if_exists_or_initialize(transformer).invalidate_child_registries_cache()
    return switch
