"""The `fast` marker keeps its promise: inside a test marked fast (its fixtures included),
starting a process fails the test, so `pytest -m fast` stays pure logic (the guard is at the
end of conftest.py).

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys

import pytest
from conftest import StartedAProcess, spawn_gloo


def _nothing(rank: int, world_size: int) -> None:
    pass


STARTS = {
    "subprocess": lambda: subprocess.run([sys.executable, "-c", "pass"], check=True),
    "multiprocessing": lambda: multiprocessing.get_context("spawn").Process(target=print).start(),
    "torch.multiprocessing": lambda: spawn_gloo(1, _nothing),
    "os.system": lambda: os.system("true"),
    "os.fork": lambda: os.fork() or os._exit(0),  # a child (were the guard off) exits at once
}


@pytest.mark.fast
@pytest.mark.parametrize("how", sorted(STARTS))
def test_a_fast_test_cannot_start_a_process(how):
    with pytest.raises(StartedAProcess, match="a test marked fast started a process"):
        STARTS[how]()


@pytest.fixture
def started_a_process() -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "print('hi')"], capture_output=True, text=True)


@pytest.mark.fast
def test_a_fast_tests_fixtures_are_held_to_it_too(request):
    with pytest.raises(StartedAProcess):
        request.getfixturevalue("started_a_process")
