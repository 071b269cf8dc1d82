"""Rank 0's view of the group's health: lost ranks, the hang watchdog, and what to do then.

A rank is lost when it:

- **exited** (the supervisor sees its exit code: `lost_children`);
- **froze**: its heartbeat (a thread of its own, `runtime/progress.py`) has not moved for
  `--hang-timeout` seconds. SIGSTOP, a wedged driver that stops the process, a machine gone:
  wherever the rank froze (in attention, an FSDP gather, the decode, the encoder broadcast, or
  idle), its heartbeat thread froze with it;
- **hung**: alive (heartbeat moving) but stuck. Rank 0 has waited `--hang-timeout` at a step
  boundary (`Runtime.waiting`) that the rank has not reached, *and* the rank's work counter
  (ticked before every DiT/VAE block) has not moved for `--hang-timeout`. A slow rank (a long
  decode, an offloaded step) keeps ticking, so it is never taken for a hung one;
- **failed alone**: it replied with an error while rank 0 is still inside the job, where rank
  0 would wait for it in a collective until the collective timeout. At a step boundary this
  is seen at once; elsewhere (rank 0 inside a block's collective: an FSDP2 all-gather, a
  Ulysses all-to-all, the CFG gather) once rank 0's own work counter has stood still for
  `--hang-timeout` (rank 0 failing the same way a moment later keeps the group);
- **hung inside a step**: rank 0's work counter has stood still for `--hang-timeout` inside a
  job, and so has the rank's, whose main thread is not waiting in a collective
  (`progress.main_thread_place`): the others wait for it wherever they are.

The first of these to be noticed (by `/health`, a replica's loop or the watchdog thread, every
0.5 s) marks the group broken and calls `on_hang`: the supervisor kills the ranks (SIGKILL
reaches a stopped process too), so rank 0's pending collective fails at once and the running
job fails naming the rank; under an external launcher rank 0 exits non-zero instead.
"""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch.distributed as dist

from ..runtime.control import RankLost, Sender
from ..runtime.engine import Runtime
from ..runtime.messages import Reply
from ..runtime.progress import BEAT_PERIOD_S, BETWEEN_JOBS, IN_COLLECTIVE, RankWatch
from .jobs import JobBook

log = logging.getLogger(__name__)


class RankZeroHung(RuntimeError):
    """Raised in rank 0's main thread, hung inside its own job, by the watchdog."""


WATCH_PERIOD_S = 0.5
INTERRUPT_SIGNAL = signal.SIGUSR1
"""What the watchdog sends rank 0's main thread when rank 0 hangs inside its own job."""
RESTART = "restart the backend"
STORE_READ_TIMEOUT = timedelta(seconds=5)
"""The watchdog's reads give up this soon (a reply it saw may be taken meanwhile)."""


class GroupHealth:
    """Whether the group can run jobs, and the watchdog that finds frozen and hung ranks.

    `recoverable`: a lost rank marks the group broken but keeps queued jobs queued, because
    the supervisor (`serving/launch.py`) rebuilds the group and calls `attach` again. Without
    it (an external launcher restarts everything), queued jobs fail with the reason.
    """

    def __init__(
        self,
        book: JobBook,
        hang_timeout_s: float,
        *,
        recoverable: bool = False,
        on_hang: Callable[[str], None] = lambda _reason: None,
    ):
        self.book = book
        self.hang_timeout_s = hang_timeout_s
        self.recoverable = recoverable
        self.on_hang = on_hang
        self.broken: str | None = None
        self.note: str | None = None
        """What the supervisor is doing about `broken` (rebuilding, or staying down)."""
        self.rebuilds_in_a_row = 0
        """Rebuilds since the last job that succeeded (a group that keeps breaking stays down)."""
        self.ready = False
        self.world_size = 0
        self._runtime: Runtime | None = None
        self._sender: Sender | None = None
        self._watch: RankWatch | None = None
        self._lost_children: Callable[[], str | None] = lambda: None
        self._lock = threading.Lock()  # one group at a time, swapped by attach/detach
        self._stopped = False  # the group was stopped for the current break
        self._closed = threading.Event()
        self._rank0_moved: tuple[int | None, int, float] = (None, -1, 0.0)
        """The job rank 0 runs (its message's seq), rank 0's work counter inside it, and
        since when the counter stands there: a new job (or group) starts the clock again, so
        a count that the previous job ended on is not taken for a standstill since then."""
        self._others: list[Sender] = []
        """The senders of the other data-parallel replicas (their jobs are watched too)."""
        self._sent: dict[int, tuple[int, float]] = {}
        """Each other replica's pending message, and since when it is pending."""
        self._interrupt: str | None = None
        """Why rank 0's main thread is being interrupted (`install_interrupt`)."""
        self._interruptible = False
        self._interrupted_at: float | None = None
        self._thread = threading.Thread(target=self._watch_loop, name="hang-watchdog", daemon=True)
        self._thread.start()

    def attach(
        self,
        runtime: Runtime,
        sender: Sender,
        lost_children: Callable[[], str | None],
        others: list[Sender] | None = None,
    ) -> None:
        """Watch `runtime`'s group; `sender` reaches rank 0's own replica (its wait points),
        `others` the other data-parallel replicas."""
        group = runtime.group
        with self._lock:
            self._runtime, self._sender = runtime, sender
            self._others, self._sent = list(others or []), {}
            self._rank0_moved = (None, -1, 0.0)  # a new group's counters start at 0
            self._interrupt, self._interrupted_at = None, None
            store = group.store_client(STORE_READ_TIMEOUT)  # the watchdog's own connection
            self._watch = RankWatch(store, list(range(1, group.world_size)))
            self._lost_children = lost_children
            self._stopped = False
            self.ready = False
            self.world_size = group.world_size

    def detach(self) -> None:
        with self._lock:
            self.ready = False
            self._runtime = self._sender = self._watch = None
            self._others = []

    def install_interrupt(self) -> None:
        """Let the watchdog end rank 0's own job when rank 0 hangs inside it (called on the
        main thread, which runs rank 0's share of replica 0's jobs): it sends the main thread
        `INTERRUPT_SIGNAL`, whose handler raises `RankZeroHung` there. A hang in Python code
        (a loop, a sleep, a read from a dead file system) ends so; one inside native code that
        never returns to the interpreter does not (`/health` then says to restart)."""
        signal.signal(INTERRUPT_SIGNAL, self._on_interrupt)
        self._interruptible = True

    def _on_interrupt(self, *_args: Any) -> None:
        reason, self._interrupt = self._interrupt, None
        runtime = self._runtime
        if reason is not None and runtime is not None and runtime.in_job:
            raise RankZeroHung(reason)

    def close(self) -> None:
        self._closed.set()

    # -- what is wrong ---------------------------------------------------------------------

    def mark_broken(self, reason: str) -> None:
        """The group cannot run jobs; queued jobs wait for a rebuild or fail with `reason`."""
        if self.broken is None:
            log.error("backend unhealthy: %s", reason)
        self.broken = self.broken or reason
        if not self.recoverable:
            self.book.fail_queued(f"backend is not healthy: {self.broken}")

    def give_up(self, reason: str) -> None:
        """No more rebuilds: stay down and say why."""
        self.recoverable = False
        self.note = reason
        self.mark_broken(reason)
        self.book.fail_queued(f"backend is down: {reason}")

    def rebuilt(self) -> None:
        self.rebuilds_in_a_row += 1
        self.broken, self.note = None, None

    def lost(self) -> str | None:
        """Why the group is not whole (a rank exited or froze), or None. Once the group is
        ready, the first time it says so the group is marked broken and stopped (`on_hang`)."""
        reason = self._lost_children()
        if not reason and self.ready:  # heartbeats start once a rank has loaded the model
            with self._lock:
                frozen = self._watch.frozen(self.hang_timeout_s) if self._watch else []
            if frozen:
                reason = (
                    f"ranks {frozen} stopped answering "
                    f"(no heartbeat for {self.hang_timeout_s:g}s, --hang-timeout)"
                )
        if reason and self.ready:  # while starting, the supervisor decides
            self.stop_group(reason)
        return reason

    def check(self) -> tuple[bool, dict[str, Any]]:
        """/health: (ok, detail)."""
        reason = self.broken or self.lost()
        if reason:
            self.mark_broken(reason)
        ok = self.ready and not reason
        detail: dict[str, Any] = {
            "status": "ok" if ok else "unavailable",
            "ready": self.ready,
            "world_size": self.world_size,
        }
        if reason:
            detail["error"] = f"{reason} ({self.note})" if self.note else reason
        if self.note and not ok:
            detail["recovery"] = self.note
        return ok, detail

    def explain(self, exc: Exception) -> str:
        """A failed job's error: the lost rank when one was lost, else the exception."""
        if isinstance(exc, RankLost):
            self.mark_broken(str(exc))
            return f"a rank was lost during the job: {self.broken}"
        lost = self.broken or self.lost()
        if lost:
            self.mark_broken(lost)
            return f"a rank was lost during the job: {lost}"
        return f"{type(exc).__name__}: {exc}"

    def stop_group(self, reason: str) -> None:
        """Mark broken and stop the ranks, once per break (a frozen or hung rank would keep
        rank 0 in its collective until the collective timeout)."""
        self.mark_broken(reason)
        with self._lock:
            if self._stopped or self._runtime is None:
                return
            self._stopped = True
        self.on_hang(reason)

    # -- the watchdog ----------------------------------------------------------------------

    def _watch_loop(self) -> None:
        while not self._closed.wait(WATCH_PERIOD_S):
            if self._stopped:
                self._check_interrupted()
            if not self.ready or self._stopped:
                continue
            try:
                if not self.lost():
                    self._check_rank0_waits()
                if not self._stopped:
                    self._check_inside_job()
            except Exception:  # a watchdog that dies silently watches nothing
                log.exception("hang watchdog")

    def _check_rank0_waits(self) -> None:
        """A rank that failed alone, or that rank 0 has waited for too long at a boundary."""
        with self._lock:
            runtime, sender, watch = self._runtime, self._sender, self._watch
        point = runtime.wait_point if runtime is not None else None
        if point is None or sender is None or watch is None:
            return
        failed = _failed_replies(watch.store, sender)
        if failed and runtime.wait_point is point:  # it left the job: rank 0 would wait
            first = failed[0]
            self.stop_group(f"rank {first.rank} failed alone: {first.error}")
            return
        waited = time.monotonic() - point.since
        if waited < self.hang_timeout_s:
            return
        behind = [rank for rank in sender.ranks if _wait_key(watch.store, rank) != point.key]
        idle = set(watch.idle(self.hang_timeout_s))  # a slow rank keeps ticking
        silent = set(watch.frozen(2 * BEAT_PERIOD_S))  # frozen, not hung: `lost` names it
        places = {rank: watch.place(rank) for rank in behind if rank in idle}
        # between jobs: it replied already (rank 0 waits at the end for the others)
        hung = [r for r, place in places.items() if r not in silent and place != BETWEEN_JOBS]
        if hung and runtime.wait_point is point:
            where = "; ".join(f"rank {rank} at {places[rank]}" for rank in hung)
            self.stop_group(
                f"ranks {hung} stopped progressing: rank 0 waited {waited:.0f}s for them at "
                f"{point.key.partition(':')[2]} ({where}; --hang-timeout)"
            )

    def _rank0_still_s(self, runtime: Runtime, job: int) -> float:
        """How long rank 0's work counter has stood still inside the running job `job` (not
        while it compiles a block: `Progress.working`)."""
        now, ticks = time.monotonic(), runtime.progress.ticks
        seen_job, seen, since = self._rank0_moved
        if job != seen_job or ticks != seen or runtime.progress.working():
            self._rank0_moved = (job, ticks, now)
            return 0.0
        return now - since

    def _check_inside_job(self) -> None:
        """A replica stands still inside a job: a rank that failed alone, or one that stopped
        working outside any collective, is what it waits for (see the module doc)."""
        with self._lock:
            runtime, sender, watch = self._runtime, self._sender, self._watch
            others = list(self._others)
        if runtime is None or sender is None or watch is None:
            return
        job = sender.pending
        if job is not None:
            if not runtime.in_job:
                self._rank0_moved = (None, -1, 0.0)
            else:
                still_s = self._rank0_still_s(runtime, job)
                places = {0: runtime.place()}  # rank 0 stands still: waiting, or hung itself
                inside = lambda: runtime.in_job  # noqa: E731
                if self._stands_still(0, sender, watch, still_s, places, inside):
                    return
        for index, other in enumerate(others, start=1):
            pending = other.pending
            if pending is None:
                self._sent.pop(index, None)
                continue
            seq, since = self._sent.get(index, (None, 0.0))
            if seq != pending:
                self._sent[index] = (pending, time.monotonic())
                continue
            ticks_still = watch.still_s("ticks", other.ranks)
            still_s = min([time.monotonic() - since, *ticks_still.values()])
            inside = lambda other=other, seq=seq: other.pending == seq  # noqa: E731
            if self._stands_still(index, other, watch, still_s, {}, inside):
                return

    def _stands_still(
        self,
        index: int,
        sender: Sender,
        watch: RankWatch,
        still_s: float,
        places: dict[int, str],
        inside: Callable[[], bool],
    ) -> bool:
        """Replica `index` has stood still for `still_s` seconds inside the job `sender` still
        awaits (`places`: rank 0's own, for replica 0; `inside`: the job still runs): stop
        the group when a rank of it failed alone or stopped working outside a collective;
        True when it did."""
        if still_s < self.hang_timeout_s:
            return False
        replica = f"replica {index}: " if index else ""
        failed = _failed_replies(watch.store, sender)
        if failed and inside():
            first = failed[0]
            self.stop_group(f"{replica}rank {first.rank} failed alone: {first.error}")
            return True
        idle = set(watch.idle(self.hang_timeout_s))
        silent = set(watch.frozen(2 * BEAT_PERIOD_S))  # frozen, not hung: `lost` names it
        places.update({rank: watch.place(rank) for rank in sender.ranks if rank in idle})
        hung = {
            rank: place
            for rank, place in sorted(places.items())
            if rank not in silent and place not in (IN_COLLECTIVE, BETWEEN_JOBS)
        }
        if not hung or not inside():
            return False
        where = "; ".join(f"rank {rank} at {place}" for rank, place in hung.items())
        reason = (
            f"{replica}ranks {sorted(hung)} stopped progressing inside the job ({where}) for "
            f"{still_s:.0f}s (--hang-timeout)"
        )
        if 0 not in hung:
            self.stop_group(reason)
        elif self._interruptible:
            self.stop_group(f"{reason}; rank 0's job was interrupted")
            self._interrupt_rank0(reason)
        else:
            self.stop_group(f"{reason}; rank 0's own job cannot end: {RESTART}")
        return True

    def _interrupt_rank0(self, reason: str) -> None:
        """Raise `RankZeroHung` in rank 0's main thread (`install_interrupt`)."""
        self._interrupt, self._interrupted_at = reason, time.monotonic()
        signal.pthread_kill(threading.main_thread().ident, INTERRUPT_SIGNAL)

    def _check_interrupted(self) -> None:
        """Rank 0 was interrupted and is still inside its job after `--hang-timeout`: a hang
        in native code, which nothing inside the process ends."""
        at, runtime = self._interrupted_at, self._runtime
        if at is None or runtime is None or time.monotonic() - at < self.hang_timeout_s:
            return
        self._interrupted_at = None
        if runtime.in_job:
            self.note = f"rank 0's own job did not end when interrupted: {RESTART}"
            log.error("backend unhealthy: %s", self.note)


def _failed_replies(store: dist.Store, sender: Sender) -> list[Reply]:
    """Workers that already replied with a failure (not a cancel) to the message `sender`
    still awaits: a rank that failed alone, which the others may wait for in a collective."""
    seq = sender.pending
    if seq is None:
        return []
    replies = list(sender.received.values())  # taken already by a replica's thread
    for rank in sender.ranks:
        key = sender.reply_key(seq, rank)
        try:
            if store.check([key]):
                replies.append(Reply.from_json(json.loads(store.get(key))))
        except dist.DistError:  # taken by rank 0's main thread in between: the job ended
            return []
    return [r for r in replies if not r.ok and not r.cancelled]


def _wait_key(store: dist.Store, rank: int) -> str:
    """Where `rank` last waited for the others (`Runtime.waiting`), "" if nowhere yet."""
    key = f"wait/{rank}"
    return store.get(key).decode() if store.check([key]) else ""
