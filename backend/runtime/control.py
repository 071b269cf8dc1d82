"""The control plane: typed messages (`messages.py`) from rank 0 to every rank, one reply each.

Messages travel through the group's TCPStore, not through a collective: an idle rank polls
the store (microseconds per check) instead of sitting in a broadcast that the process-group
timeout would kill. Collectives happen only inside a job, where every rank is busy anyway.

Keys: `msg/<seq>` (rank 0 writes), `reply/<seq>/<rank>` (each rank writes), `ready/<rank>`
(loaded), `hb/<rank>` and `ticks/<rank>` (heartbeats and work counters: `progress.py`). With
data-parallel replicas each replica has its own message sequence under `replica<k>/`
(`channel`), driven by its own thread on rank 0.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

import torch.distributed as dist

from .messages import Message, Reply, to_json

log = logging.getLogger(__name__)

POLL_S = 0.002
IDLE_POLL_S = 0.02
ASLEEP_POLL_S = 0.05
"""A worker idle for over `ASLEEP_AFTER_S` polls this rarely: an idle backend (or the many a
test session keeps) costs little CPU, and the first step of the next job waits 50 ms at most."""
ASLEEP_AFTER_S = 5.0


class RankLost(RuntimeError):
    """A rank stopped answering."""


def _get(store: dist.Store, key: str) -> dict[str, Any]:
    return json.loads(store.get(key).decode())


def _put(store: dist.Store, key: str, value: dict[str, Any]) -> None:
    store.set(key, json.dumps(value, separators=(",", ":")))


def channel(replica: int, dp_degree: int) -> str:
    """The key prefix of one replica's messages ("" when there is one replica)."""
    return f"replica{replica}/" if dp_degree > 1 else ""


class Sender:
    """Rank 0's side: send a message to the workers (by default ranks 1..N-1; with replicas,
    one replica's ranks other than 0 under its `prefix`), collect their replies."""

    def __init__(
        self,
        store: dist.Store,
        world_size: int,
        *,
        ranks: list[int] | None = None,
        prefix: str = "",
    ):
        self.store = store
        self.world_size = world_size
        self.ranks = list(range(1, world_size)) if ranks is None else ranks
        self.prefix = prefix
        self.seq = 0
        self.pending: int | None = None
        """The message whose replies are still awaited (`replies` not yet returned)."""
        self.received: dict[int, Reply] = {}
        """The replies to `pending` taken so far (the watchdog reads them)."""

    def send(self, message: Message) -> int:
        self.seq += 1
        self.pending = self.seq
        self.received = {}
        _put(self.store, f"{self.prefix}msg/{self.seq}", to_json(message))
        if self.seq > 2:
            self.store.delete_key(f"{self.prefix}msg/{self.seq - 2}")
        return self.seq

    def reply_key(self, seq: int, rank: int) -> str:
        return f"{self.prefix}reply/{seq}/{rank}"

    def replies(
        self,
        seq: int,
        lost: Callable[[], str | None],
        timeout_s: float,
        on_poll: Callable[[], bool] = lambda: False,
        poll_s: float = POLL_S,
    ) -> dict[int, Reply]:
        """Each worker's reply to message `seq`; RankLost if `lost()` reports a dead rank.

        `on_poll` runs between checks, every `poll_s` (a replica's progress); when it returns
        True the job moved on and the `timeout_s` bound starts again."""
        try:
            return self._replies(seq, lost, timeout_s, on_poll, poll_s)
        finally:
            self.pending = None

    def _replies(
        self,
        seq: int,
        lost: Callable[[], str | None],
        timeout_s: float,
        on_poll: Callable[[], bool],
        poll_s: float,
    ) -> dict[int, Reply]:
        keys = {rank: self.reply_key(seq, rank) for rank in self.ranks}
        got = self.received = {}
        deadline = time.monotonic() + timeout_s
        while len(got) < len(keys):
            if on_poll():
                deadline = time.monotonic() + timeout_s
            for rank, key in keys.items():
                if rank not in got and self.store.check([key]):
                    got[rank] = Reply.from_json(_get(self.store, key))
                    self.store.delete_key(key)
            if len(got) == len(keys):
                break
            reason = lost()
            if reason:
                raise RankLost(reason)
            if time.monotonic() > deadline:
                missing = sorted(set(keys) - set(got))
                raise RankLost(f"ranks {missing} did not reply within {timeout_s:.0f}s")
            time.sleep(poll_s)
        return got

    def wait_ready(self, lost: Callable[[], str | None], timeout_s: float) -> list[dict]:
        """Block until every worker has loaded the model; their rank info, in rank order."""
        infos = []
        deadline = time.monotonic() + timeout_s
        for rank in range(1, self.world_size):
            key = f"ready/{rank}"
            while not self.store.check([key]):
                reason = lost()
                if reason:
                    raise RankLost(reason)
                if time.monotonic() > deadline:
                    raise RankLost(f"rank {rank} did not load the model within {timeout_s:.0f}s")
                time.sleep(IDLE_POLL_S)
            infos.append(_get(self.store, key))
        return infos


class Worker:
    """A worker rank's side: wait for the next message, reply to it."""

    def __init__(self, store: dist.Store, rank: int, prefix: str = ""):
        self.store = store
        self.rank = rank
        self.prefix = prefix
        self.seq = 0

    def ready(self, info: dict[str, Any]) -> None:
        _put(self.store, f"ready/{self.rank}", info)

    def next_message(self) -> tuple[int, dict[str, Any]]:
        """Poll for the next message (its JSON: `messages.from_json` reads it); raises if
        rank 0's store goes away."""
        self.seq += 1
        key = f"{self.prefix}msg/{self.seq}"
        idle_since = time.monotonic()
        while not self.store.check([key]):
            idle_s = time.monotonic() - idle_since
            time.sleep(
                POLL_S
                if idle_s < 1.0
                else IDLE_POLL_S
                if idle_s < ASLEEP_AFTER_S
                else ASLEEP_POLL_S
            )
        return self.seq, _get(self.store, key)

    def reply(self, seq: int, reply: Reply) -> None:
        _put(self.store, f"{self.prefix}reply/{seq}/{self.rank}", reply.to_json())
