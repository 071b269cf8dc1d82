"""Rank 0's guard over the start-up calls that cannot be interrupted.

Most of start-up waits on the store's barriers, which poll `OwnGroup.lost` and give up at once
when a rank has exited. A few waits cannot poll: the process group's rendezvous (gloo's and
NCCL's `init_process_group` wait for every rank's address until the collective timeout,
`--timeout`, 10 minutes by default) and a collective whose peer died before it connected. A
rank lost there would hold `serve` for the whole timeout. `StartWatch` runs beside the start
on a thread: once a rank has been lost for `grace_s` and the start has still not returned
(a barrier would have noticed it by then), it calls `give_up(reason)`, which ends the process.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

POLL_S = 0.1
GRACE_S = 2.0
"""How long a lost rank may go unnoticed by the start itself before the watch ends it."""


class StartWatch:
    """`with StartWatch(lost, give_up): <start>`; `lost()` says which rank is gone (or None),
    `give_up(reason)` ends the process and does not return."""

    def __init__(
        self,
        lost: Callable[[], str | None],
        give_up: Callable[[str], None],
        grace_s: float = GRACE_S,
        poll_s: float = POLL_S,
    ):
        if grace_s < 0 or poll_s <= 0:
            raise ValueError(f"grace_s must be >= 0 and poll_s > 0, got {grace_s}, {poll_s}")
        self._lost, self._give_up = lost, give_up
        self._grace_s, self._poll_s = grace_s, poll_s
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="paradit-start-watch", daemon=True)

    def __enter__(self) -> StartWatch:
        self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self._done.set()
        self._thread.join()

    def _watch(self) -> None:
        while not self._done.wait(self._poll_s):
            reason = self._lost()
            if reason is None:
                continue
            if self._done.wait(self._grace_s):  # the start noticed it, or finished
                return
            log.error("start-up stopped while waiting in the group's rendezvous: %s", reason)
            self._give_up(reason)
            return
