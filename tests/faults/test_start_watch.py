"""Rank 0's guard over the start-up waits that cannot poll for a lost rank (`StartWatch`).

Cost: about 2 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import threading
import time

import pytest

from paradit.backend.processes.start_watch import StartWatch

pytestmark = pytest.mark.fast


class Lost:
    """`lost()` says a rank is gone once `gone` is set."""

    def __init__(self) -> None:
        self.gone = threading.Event()

    def __call__(self) -> str | None:
        return "rank 1 exited with code -9" if self.gone.is_set() else None


def test_a_rank_lost_during_a_blocked_start_gives_up_with_its_reason():
    lost, reasons = Lost(), []
    with StartWatch(lost, reasons.append, grace_s=0.2, poll_s=0.01):
        lost.gone.set()
        deadline = time.monotonic() + 5
        while not reasons and time.monotonic() < deadline:  # the start stays blocked
            time.sleep(0.01)
    assert reasons == ["rank 1 exited with code -9"]


def test_a_start_that_notices_the_loss_itself_within_the_grace_is_left_alone():
    lost, reasons = Lost(), []
    with StartWatch(lost, reasons.append, grace_s=1.0, poll_s=0.01):
        lost.gone.set()
        time.sleep(0.1)  # a barrier notices it and the start raises
    time.sleep(1.2)
    assert reasons == []


def test_a_start_with_every_rank_alive_is_never_given_up():
    lost, reasons = Lost(), []
    with StartWatch(lost, reasons.append, grace_s=0.0, poll_s=0.01):
        time.sleep(0.2)
    assert reasons == []


def test_the_watch_refuses_a_negative_grace():
    with pytest.raises(ValueError, match="grace_s must be >= 0"):
        StartWatch(lambda: None, lambda reason: None, grace_s=-1)
