"""The suite's own rules: every test file states its cost, and the costs add up to a suite
that fits its budget on the 2-core machine CI runs on.

Cost: about 3 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from conftest import file_cost_s

pytestmark = pytest.mark.fast

TESTS = Path(__file__).parents[1]
BUDGET_S = 12 * 60
"""What the whole suite may take on 2 cores, in its README command (two workers): 12 minutes.
Measured 9 min 23 s (380 tests, quiet machine); 16 min 57 s (321 tests, under load) when
every rank imported torch and diffusers afresh, 13.5 min (380 tests) with ranks forked by
`serve`, 9.4 min with the pool's backends also forked from a warm zygote (tests/zygote.py).
A file that makes the suite outgrow the budget fails here first."""
WORKERS = 2


def test_every_test_file_states_its_cost():
    missing = [p.name for p in sorted(TESTS.rglob("test_*.py")) if file_cost_s(p) is None]
    assert not missing, f"state 'Cost: about N s' in the docstring of {missing}"


def test_the_stated_costs_fit_the_budget():
    """Costs are measured in the suite's own run (two workers sharing the 2 cores: the sum
    of a file's `--durations=0` lines), so the two workers' halves must fit the budget, and no
    file may outlast the other worker's whole share."""
    costs = sorted((file_cost_s(p) or 0 for p in TESTS.rglob("test_*.py")), reverse=True)
    total = sum(costs)
    assert total / WORKERS <= BUDGET_S, (
        f"the test files state {total} s together: {total / WORKERS:.0f} s per worker, over "
        f"the suite's {BUDGET_S} s budget on 2 cores"
    )
    assert costs[0] <= BUDGET_S, f"one file alone states {costs[0]} s"


def test_test_files_live_in_the_area_folders_docs_testing_names():
    """Tests are laid out like the code: every test file sits in an area folder of tests/,
    and docs/testing.md's table names each folder (a new area is documented where it is
    made)."""
    loose = [p.name for p in sorted(TESTS.glob("test_*.py"))]
    assert not loose, f"test files outside an area folder of tests/: {loose}"
    areas = {p.parent.name for p in TESTS.rglob("test_*.py")}
    table = (TESTS.parent / "docs" / "testing.md").read_text()
    listed = set(re.findall(r"^\| `tests/([a-z_]+)/` \|", table, re.MULTILINE))
    assert areas == listed, (
        f"folders with tests but not in docs/testing.md: {sorted(areas - listed)}; "
        f"listed without tests: {sorted(listed - areas)}"
    )
    assert all(p.parent.parent == TESTS for p in TESTS.rglob("test_*.py")), "one level deep"


def test_a_test_file_imports_no_other_test_file():
    """What tests share lives in tests/*.py (conftest.py, image_jobs.py, template_jobs.py,
    ...), one copy each: importing another test file works only when pytest happened to
    collect that file's folder first. Caught by its module name however it is spelled:
    `import test_x`, `from test_x import`, dotted (`from workflow.test_x import`,
    `import workflow.test_x`), a test module imported from its package (`from workflow import
    test_x`) or through importlib (`importlib.import_module("workflow.test_x")`)."""
    test_modules = {p.stem for p in TESTS.rglob("test_*.py")}
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.ImportFrom):  # `from . import test_x`
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.Call) and _imports_by_name(node) and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    names = [first.value]
            hits = [n for n in names if n.rpartition(".")[2] in test_modules]
            found += [f"{path.relative_to(TESTS)}:{node.lineno}: {n}" for n in hits]
    assert not found, found


def _imports_by_name(call: ast.Call) -> bool:
    """`importlib.import_module(...)`, `import_module(...)` or `__import__(...)`."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name in ("import_module", "__import__")
