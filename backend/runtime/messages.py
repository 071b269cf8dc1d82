"""Typed control messages: what rank 0 sends every rank, and the one reply each rank sends back.

They travel as JSON through the group's store (see `control.py`); `to_json` / `from_json`
are the only places that know the wire form. Errors travel as values in `Reply`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

MODEL_STATE_ERROR = "ModelStateError"
"""The error type of a rank whose model is not in its between-jobs state
(`parallel.fsdp.ModelStateError`)."""


@dataclass(frozen=True)
class RunJob:
    """Run one job on every rank."""

    TYPE: ClassVar[str] = "run"
    job_id: str
    request: dict[str, Any]
    """The validated request (`JobRequest.to_dict()`)."""
    tensors: list[list] = field(default_factory=list)
    """(name, shape, dtype) of rank 0's encoder outputs, broadcast right after this message."""
    save_latents: bool = False
    """The leader of a replica other than rank 0's also hands back the final latents."""
    vae_tiling: bool = False
    """Decode in tiles (the job's memory plan: tiled, or split over the replica)."""
    split_bands: bool = False
    """Decode whole, split exactly into row bands over the replica (`parallel/vae_bands.py`;
    the job's memory plan: decode "bands")."""
    loras: list[dict[str, Any]] = field(default_factory=list)
    """The job's LoRAs as rank 0 resolved them (`lora.JobLora` fields), in order."""
    upscale_loras: list[dict[str, Any]] = field(default_factory=list)
    """A two-stage job's stage-2 LoRAs (the request's `upscale.loras`), resolved likewise."""


@dataclass(frozen=True)
class Shutdown:
    """Leave the worker loop."""

    TYPE: ClassVar[str] = "shutdown"


Message = RunJob | Shutdown
MESSAGE_TYPES: dict[str, type[RunJob] | type[Shutdown]] = {
    cls.TYPE: cls for cls in (RunJob, Shutdown)
}


def to_json(message: Message) -> dict[str, Any]:
    return {"type": message.TYPE, **asdict(message)}


def from_json(data: dict[str, Any]) -> Message:
    """The message a JSON object holds; ValueError for an unknown type or fields."""
    kind = MESSAGE_TYPES.get(data.get("type", ""))
    if kind is None:
        raise ValueError(f"unknown control message type {data.get('type')!r}")
    return kind(**{k: v for k, v in data.items() if k != "type"})


@dataclass(frozen=True)
class Reply:
    """One rank's outcome of one message."""

    rank: int
    ok: bool = True
    error_type: str | None = None
    """The exception's class name when the rank failed."""
    message: str = ""
    cancelled: bool = False
    """The job stopped at a step boundary because rank 0 decided to cancel it."""
    memory: dict[str, Any] | None = None
    """The rank's measured peak during the job (`memory.measure.PeakMeter.read`)."""

    @classmethod
    def failure(cls, rank: int, exc: BaseException, *, cancelled: bool = False) -> Reply:
        return cls(rank, False, type(exc).__name__, str(exc), cancelled)

    @property
    def error(self) -> str:
        """`Type: message`, as a person reads it."""
        return f"{self.error_type}: {self.message}" if self.error_type else self.message

    def same_failure(self, other: Reply) -> bool:
        """Both failed with the same error (a deterministic failure leaves ranks in step)."""
        return (
            not self.ok
            and not other.ok
            and (self.error_type, self.message) == (other.error_type, other.message)
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Reply:
        return cls(**data)


@dataclass(frozen=True)
class Outcome:
    """A job's result over the whole group (rank 0's own and every worker's reply)."""

    status: str
    """"succeeded", "cancelled" or "failed"."""
    message: str = ""
    in_step: bool = True
    """Every rank entered the same collectives. False when ranks failed differently (one
    rank alone, a timeout, cancel on some ranks only): the group must not be trusted with
    another job."""
    at_rest: bool = True
    """Every rank's model is back in its between-jobs state. False when a rank could not put
    it back (`ModelStateError`): the group must not run another job either."""


def combine(own: Reply, replies: dict[int, Reply]) -> Outcome:
    """The group-health rule: a job that failed the same way on every rank (a deterministic
    error such as a bad input) leaves the group in step; anything else may have left
    collectives unmatched."""
    failed = [r for r in replies.values() if not r.ok]
    if own.ok and not failed:
        return Outcome("succeeded")
    if own.cancelled and all(r.cancelled for r in replies.values()):
        return Outcome("cancelled", own.message)
    in_step = all(own.same_failure(r) for r in replies.values())
    at_rest = all(r.error_type != MODEL_STATE_ERROR for r in (own, *failed))
    culprit = next((r for r in (own, *failed) if not r.ok and not r.cancelled), None)
    culprit = culprit or (own if not own.ok else failed[0])
    message = culprit.error if culprit.rank == 0 else f"rank {culprit.rank}: {culprit.error}"
    return Outcome("failed", message, in_step, at_rest)
