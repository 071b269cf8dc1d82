"""The suite's own rules: every test file states its cost, and the costs add up to a suite
that fits its budget on the 2-core machine CI runs on.

Cost: about 1 s (pure logic, no process).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import file_cost_s

pytestmark = pytest.mark.fast

TESTS = Path(__file__).parent
BUDGET_S = 12 * 60
"""What the whole suite may take on 2 cores, in its README command (two workers)."""
WORKERS = 2


def test_every_test_file_states_its_cost():
    missing = [p.name for p in sorted(TESTS.glob("test_*.py")) if file_cost_s(p) is None]
    assert not missing, f"state 'Cost: about N s' in the docstring of {missing}"


def test_the_stated_costs_fit_the_budget():
    """Each worker takes the next file, most costly first; the stated costs (measured alone
    on 2 cores, where two workers share the cores) must fit the budget."""
    costs = sorted((file_cost_s(p) or 0 for p in TESTS.glob("test_*.py")), reverse=True)
    total = sum(costs)
    assert total <= BUDGET_S * 1.5, (
        f"the test files state {total} s together: over the {BUDGET_S} s budget for the suite "
        "on 2 cores (two workers overlap where the cores are idle, about 1.5x at best)"
    )
    assert costs[0] <= BUDGET_S / WORKERS, f"one file alone states {costs[0]} s"
