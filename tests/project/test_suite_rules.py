"""The suite's own rules: every test file states its cost, and the costs add up to a suite
that fits its budget on the 2-core machine CI runs on.

Cost: about 2 s (the suite's two-worker run on 2 cores, 2026-11-29).
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
    """What tests share lives in tests/*.py (conftest.py, image_jobs.py, launchers.py, ...),
    one copy each: importing another test file by its module name works only when pytest
    happened to collect that file's folder first."""
    test_modules = {p.stem for p in TESTS.rglob("test_*.py")}
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            found += [f"{path.relative_to(TESTS)}: {n}" for n in names if n in test_modules]
    assert not found, found
