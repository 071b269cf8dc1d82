"""The job sequence on a rank is written once (`backend/runtime/job.py`: `run_on_rank` and
`encode`); the tests run a job through it (`tests/image_jobs.py`: `run_here`, `encoded`) and
keep no copy of it. Read from the source (an AST scan of backend/ and tests/), so a copy
cannot come back unnoticed; and no long-lived object of a rank keeps a job's result in a
`last_*` field (a job's results are its `RankResult`).

Cost: about 2 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SEQUENCE = ROOT / "backend" / "runtime" / "job.py"
"""Where the job sequence is written."""
FAMILIES = ROOT / "backend" / "models" / "families"
"""A family's own methods (an adapter calls its base class's steps through `super()`)."""
ONLY_IN_SEQUENCE = frozenset({"encode", "job_sampling"})
"""Steps nothing else calls: tests encode through `runtime.job.encode` (`image_jobs.encoded`)
and run a job's sampling through `run_on_rank`."""
ONE_PER_FUNCTION = frozenset({"prepare", "pipeline_for_job", "to latents"})
"""Steps a unit test may call one of (what `prepare` sets, which pipeline runs a job), never
two in one function: two is the sequence again. `finish` undoes `prepare` (the same step)."""
JOB_FIELDS_ON = ("runtime", "lora", "memory", "parallel")
"""The packages of what a rank keeps between jobs (`Runtime`, `RankModel`, the LoRA patcher,
the memory meter and expert swap, the parallel hooks)."""


def _family_step(call: ast.Call) -> str | None:
    """The step of the job sequence `call` is, or None: a family's `encode`, `prepare`,
    `pipeline_for_job` or `finish` (called on something named for the family: `family`,
    `model.family`, `family_of(pipe)`), `job_sampling(...)`, or a pipeline run to latents
    (`output_type="latent"`, as `RankModel.denoise` runs it)."""
    func = call.func
    if isinstance(func, ast.Name) and func.id == "job_sampling":
        return "job_sampling"
    if isinstance(func, ast.Attribute):
        if func.attr == "job_sampling":
            return "job_sampling"
        steps = {"encode", "prepare", "pipeline_for_job", "finish"}
        if func.attr in steps and "family" in ast.unparse(func.value).lower():
            return "prepare" if func.attr == "finish" else func.attr
    latent = ast.Constant("latent")
    for keyword in call.keywords:
        if keyword.arg == "output_type" and ast.dump(keyword.value) == ast.dump(latent):
            return "to latents"
    return None


def _scopes(tree: ast.Module) -> list[tuple[str, list[ast.AST]]]:
    """(name, nodes) for each function or method (its nested functions in it) and for the
    module's own statements outside them."""
    scopes: list[tuple[str, list[ast.AST]]] = []
    loose: list[ast.AST] = []
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    for node in tree.body:
        if isinstance(node, functions):
            scopes.append((node.name, list(ast.walk(node))))
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, functions):
                    scopes.append((f"{node.name}.{item.name}", list(ast.walk(item))))
                else:
                    loose.extend(ast.walk(item))
        else:
            loose.extend(ast.walk(node))
    return [*scopes, ("<module>", loose)]


def steps_by_scope(path: Path) -> dict[str, set[str]]:
    """The job sequence's steps each function of `path` calls (only those that call some)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = {}
    for name, nodes in _scopes(tree):
        steps = {_family_step(n) for n in nodes if isinstance(n, ast.Call)} - {None}
        if steps:
            found[name] = steps
    return found


def _sources() -> list[Path]:
    files = [*(ROOT / "backend").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]
    return sorted(p for p in files if p != SEQUENCE and FAMILIES not in p.parents)


def copies(path: Path) -> list[str]:
    """What in `path` repeats the job sequence: a step only the sequence calls, or more than
    one step in one function."""
    found = []
    for scope, steps in steps_by_scope(path).items():
        alone = steps & ONLY_IN_SEQUENCE
        several = steps & ONE_PER_FUNCTION
        if alone or len(several) > 1:
            found.append(f"{path.relative_to(ROOT)}::{scope} calls {sorted(steps)}")
    return found


@pytest.mark.fast
def test_the_scan_sees_the_sequence_where_it_is_written():
    """The scan finds every step in `run_on_rank`'s own module (else it would find no copy
    anywhere either), and the test helpers run jobs through it."""
    steps = set().union(*steps_by_scope(SEQUENCE).values())
    assert steps == ONLY_IN_SEQUENCE | ONE_PER_FUNCTION, steps
    assert copies(SEQUENCE), "the sequence itself reads as a copy"
    helpers = (ROOT / "tests" / "image_jobs.py").read_text()
    assert "run_on_rank(" in helpers and "encode(model, request)" in helpers


@pytest.mark.fast
def test_no_test_or_module_carries_a_copy_of_the_job_sequence():
    """Outside `backend/runtime/job.py` and the families' own folders: no family `encode` or
    `job_sampling` call, and no function calling two steps of the sequence (a family's
    `prepare`/`finish`, its `pipeline_for_job`, a pipeline run to latents). A test runs a job
    through `image_jobs.run_here` (`run_on_rank`), rank 0's text through `image_jobs.encoded`."""
    found = [copy for path in _sources() for copy in copies(path)]
    assert not found, "\n".join(found)


@pytest.mark.fast
def test_no_rank_object_keeps_a_jobs_result_in_a_last_field():
    """`last_peak`, `last_audio`, `loras.last` were a job's results left on the runtime: a
    job's results are its `RankResult` now, and nothing assigns a `last*` attribute again in
    the packages of what a rank keeps between jobs."""
    found = []
    for package in JOB_FIELDS_ON:
        for path in sorted((ROOT / "backend" / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                targets = []
                if isinstance(node, ast.Assign):
                    targets = node.targets
                elif isinstance(node, ast.AnnAssign | ast.AugAssign):
                    targets = [node.target]
                for target in targets:
                    if isinstance(target, ast.Attribute) and target.attr.startswith("last"):
                        where = f"{path.relative_to(ROOT)}:{node.lineno}"
                        found.append(f"{where} {ast.unparse(target)}")
    assert not found, found


@pytest.mark.fast
def test_the_expert_swap_and_the_phase_clock_hand_a_job_over_at_its_end():
    """What a job's steps record on a rank's long-lived helpers (its expert swaps, its
    profiled step) is handed over at the job's end (`RankModel.denoise` puts it in the
    job's timings) and forgotten there: the next reader gets nothing of that job."""
    import torch

    from paradit.backend.memory.swap import ExpertSwap
    from paradit.backend.runtime.phases import PhaseClock

    high, low = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    swap = ExpertSwap({"high": high, "low": low}, torch.device("cpu"))
    swap.begin_job(lambda: 3)
    low(torch.ones(1, 2))  # the low-noise expert comes in at step 3
    job = swap.end_job()
    assert [(s["step"], s["expert"]) for s in job["swaps"]] == [(3, "low")]
    assert job["resident"] == "low" and swap.record == [] and swap.to_dict()["swaps"] == []
    high(torch.ones(1, 2))  # between jobs: no step of a finished job
    assert [(s["step"], s["expert"]) for s in swap.record] == [(0, "high")]

    clock = PhaseClock(enabled=True)
    clock.begin_job()
    for index in range(2):  # the last of two steps is profiled
        clock.at_mark(index, 2)
    profiled = clock.take()
    assert profiled is not None and profiled["step"] == 1
    assert clock.take() is None
