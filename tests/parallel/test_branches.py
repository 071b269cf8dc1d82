"""Both CFG branches as one batch on a sharded sequence plan (`parallel/branches.py`): each
block's weights gathered once a step instead of twice, the output within rounding of world
size 1; the two calls' inputs batched only when they differ in their batch rows alone, else
run one after the other with the reason recorded.

Cost: about 3 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.distributed as dist
from conftest import spawn_gloo
from image_jobs import CPU, encoded, preset_pipeline, run_here

from paradit.backend.models.families.wan.tiny_job import TINY_JOB
from paradit.backend.parallel import parallelize
from paradit.backend.parallel.branches import PairedBranches, batch_of_two
from paradit.backend.parallel.fsdp import transformer_blocks
from paradit.backend.parallel.plan import ParallelPlan
from paradit.backend.tools.equivalence import FLOAT32, IDENTICAL, WITHIN_ROUNDING, compare

GATHERS = ("all_gather_into_tensor", "all_gather_single")
"""torch.distributed's functions FSDP2 all-gathers with (as `runtime/faults.py` counts them)."""


# -- the pairing itself, on a toy DiT (no process group) ------------------------------------


class RowWise(torch.nn.Module):
    """A DiT-shaped forward whose rows are independent; counts its calls."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[int] = []

    def forward(self, hidden_states, encoder_hidden_states, timestep, ids=None, return_dict=True):
        self.calls.append(hidden_states.shape[0])
        out = hidden_states * encoder_hidden_states.mean(1, keepdim=True) + timestep[:, None, None]
        if ids is not None:
            out = out + ids.sum()
        return (out,) if not return_dict else {"sample": out}


def _inputs(text_len: int = 3, seed: int = 0) -> dict[str, Any]:
    gen = torch.Generator().manual_seed(seed)
    return {
        "hidden_states": torch.randn(1, 5, 4, generator=gen),
        "encoder_hidden_states": torch.randn(1, text_len, 4, generator=gen),
        "timestep": torch.tensor([3.0]),
        "ids": torch.arange(6.0).view(2, 3),
        "return_dict": False,
    }


@pytest.mark.fast
def test_a_step_runs_both_branches_as_one_call_and_each_gets_its_rows():
    model = RowWise()
    cond, uncond = _inputs(seed=1), _inputs(seed=2)
    uncond["hidden_states"] = cond["hidden_states"]  # as the pipelines call it
    expected = (model(**cond)[0], model(**uncond)[0])
    model.calls.clear()
    pairing = PairedBranches(model)
    pairing.begin_job(True)
    first = model(**cond)[0]  # recorded: a placeholder comes back
    second = model(**uncond)[0]
    assert model.calls == [2]  # one call of batch 2 for the step
    assert torch.equal(first, expected[0]) and torch.equal(second, expected[1])
    assert pairing.record() == {"batched_steps": 1, "separate_steps": 0}
    pairing.begin_job(False)  # off: straight through
    model.calls.clear()
    assert torch.equal(model(**cond)[0], expected[0]) and model.calls == [1]
    assert pairing.record() is None


@pytest.mark.fast
def test_branches_that_differ_beyond_their_rows_run_one_after_the_other():
    """Prompts of different lengths (no batch of them), a shared tensor that differs: two
    calls, as world size 1 runs them, and the record says why."""
    model = RowWise()
    cond, uncond = _inputs(text_len=3, seed=1), _inputs(text_len=4, seed=2)
    expected = (model(**cond)[0], model(**uncond)[0])
    model.calls.clear()
    pairing = PairedBranches(model)
    pairing.begin_job(True)
    first, second = model(**cond)[0], model(**uncond)[0]
    assert model.calls == [1, 1]
    assert torch.equal(first, expected[0]) and torch.equal(second, expected[1])
    record = pairing.record()
    assert record["batched_steps"] == 0 and record["separate_steps"] == 1
    assert "encoder_hidden_states differs in shape" in record["why_separate"]

    masked = [dict(_inputs(seed=seed), text_mask=torch.tensor([[1, 1, 1]])) for seed in (1, 2)]
    both, why = batch_of_two(*masked)  # padded alike: one batch
    assert both["text_mask"].shape == (2, 3)
    masked[1]["text_mask"] = torch.tensor([[1, 1, 0]])  # padded differently: two calls
    both, why = batch_of_two(*masked)
    assert both is None and why == "text_mask differs between the branches (their padding differs)"

    other_ids = dict(_inputs(seed=2), ids=torch.zeros(2, 3))
    both, why = batch_of_two(_inputs(seed=1), other_ids)
    assert both is None and why.startswith("ids differs between the branches")


@pytest.mark.fast
def test_the_batch_concatenates_rows_and_passes_shared_arguments_once():
    cond, uncond = _inputs(seed=1), _inputs(seed=2)
    both, why = batch_of_two(cond, uncond)
    assert why == ""
    assert torch.equal(
        both["encoder_hidden_states"],
        torch.cat([cond["encoder_hidden_states"], uncond["encoder_hidden_states"]]),
    )
    assert both["timestep"].shape == (2,) and both["hidden_states"].shape == (2, 5, 4)
    assert both["ids"] is cond["ids"] and both["return_dict"] is False
    missing = {k: v for k, v in uncond.items() if k != "ids"}
    assert batch_of_two(cond, missing)[0] is None


@pytest.mark.fast
def test_only_sharded_plans_without_a_cfg_split_pair_their_branches():
    assert ParallelPlan(1, 2).pairs_branches
    assert ParallelPlan(1, 1, 2).pairs_branches  # ring
    assert not ParallelPlan(1, 2, shard_weights=False).pairs_branches
    assert not ParallelPlan(2, 1).pairs_branches  # CFG parallel: one branch a rank
    assert not ParallelPlan(1, 1).pairs_branches  # world size 1: diffusers' own calls


# -- on 2 ranks: the gathers counted, the output against world size 1 ------------------------


class GatherCount:
    """FSDP2's all-gathers of this process, by the unit whose pre-forward asked for them."""

    def __init__(self, dit: torch.nn.Module):
        self.counts: dict[str, int] = {}
        self.current: str | None = None
        units = {"root": dit, **{f"block{i}": b for i, b in enumerate(transformer_blocks(dit))}}
        for name, unit in units.items():
            # prepended after FSDP2's own (also prepended): runs before its gather
            unit.register_forward_pre_hook(self._enter(name), prepend=True)
            unit.register_forward_hook(self._leave, prepend=True)
        self.units = list(units)
        for name in GATHERS:
            original = getattr(dist, name, None)
            if original is not None:
                setattr(dist, name, self._counted(original))

    def _enter(self, name: str):
        def hook(*_: Any) -> None:
            self.current = name

        return hook

    def _leave(self, *_: Any) -> None:
        self.current = None

    def _counted(self, original):
        def gather(*args: Any, **kwargs: Any) -> Any:
            key = self.current or "elsewhere"
            self.counts[key] = self.counts.get(key, 0) + 1
            return original(*args, **kwargs)

        return gather


def _check_ranks(rank: int, world_size: int, reference: dict, mode: str) -> None:
    pipe, _family = preset_pipeline(TINY_JOB.preset, TINY_JOB.tile, encoders=False)
    plan = ParallelPlan(2, 1) if mode == "cfg" else ParallelPlan(1, world_size)
    parallel = parallelize([pipe.transformer], plan, CPU)
    if mode == "two-calls":  # the branches as diffusers calls them: two forwards a step
        parallel.paired = []
    gathers = GatherCount(pipe.transformer)
    body = dict(TINY_JOB.body)
    frames, result = run_here(pipe, body, reference["tensors"], parallel=parallel)
    steps = body["num_inference_steps"]
    per_step = 2 if mode == "two-calls" else 1
    # every unit, the root (embeddings, norms, projections) included: FSDP2 gathers the root
    # around each call of the transformer, and it is kept gathered between a step's calls
    assert gathers.counts == dict.fromkeys(gathers.units, per_step * steps), gathers.counts
    if mode == "paired":
        assert result.clock.notes["cfg_branches"] == {"batched_steps": steps, "separate_steps": 0}
        _stopped_between_the_calls(pipe.transformer, parallel)
        # a job with a step cache keeps two calls (its decisions and residuals are per call)
        gathers.counts.clear()
        _, cached = run_here(pipe, TINY_JOB.cached_body(), reference["tensors"], parallel=parallel)
        assert "cfg_branches" not in cached.clock.notes and cached.cache is not None
        cached_steps = TINY_JOB.cached_body()["num_inference_steps"]
        assert gathers.counts == dict.fromkeys(gathers.units, 2 * cached_steps), gathers.counts
    else:
        assert "cfg_branches" not in result.clock.notes
    parallel.check_at_rest()  # every unit resharded after the job, the root's too
    if rank == 0:
        measured = compare(
            reference["frames"], frames, FLOAT32, reference["latents"], result.latents.numpy()
        )
        # CFG halves: each branch as world size 1 runs it; a split sequence: within rounding
        verdicts = {IDENTICAL} if mode == "cfg" else {IDENTICAL, WITHIN_ROUNDING}
        assert measured.verdict in verdicts, measured


def _stopped_between_the_calls(dit: torch.nn.Module, parallel: Any) -> None:
    """A job that ends after a step's first (recorded) call leaves the root gathered; the
    next job's start reshards it: the weights are as loaded between jobs."""
    config = dit.config
    parallel.begin_job(True)
    dit(
        hidden_states=torch.randn(1, config.in_channels, 1, 4, 4),
        timestep=torch.tensor([500]),
        encoder_hidden_states=torch.randn(1, 3, config.text_dim),
        return_dict=False,
    )
    parallel.end_job()
    parallel.check_at_rest()


@pytest.fixture(scope="module")
def world_size_1() -> dict:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        pipe, _family = preset_pipeline(TINY_JOB.preset, TINY_JOB.tile)
        parallel = parallelize([pipe.transformer], ParallelPlan(1, 1, 1, False), CPU)
        body = dict(TINY_JOB.body)
        tensors = encoded(pipe, body)
        frames, result = run_here(pipe, body, tensors, parallel=parallel)
    finally:
        torch.set_num_threads(threads)
    return {"tensors": tensors, "frames": frames, "latents": result.latents.numpy()}


@pytest.mark.parametrize("mode", ["paired", "two-calls", "cfg"])
def test_2_ranks_gather_each_block_once_a_step_and_equal_world_size_1(world_size_1, mode):
    """tiny-wan's guided job on 2 ranks with FSDP2: on Ulysses 2 each unit gathered once a
    step with the branches paired (twice as two calls), the frames and latents within float32
    rounding of world size 1; on CFG halves once a step too, byte for byte."""
    spawn_gloo(2, _check_ranks, world_size_1, mode)
