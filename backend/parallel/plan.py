"""Choosing how a group of ranks divides a job (the parallel plan)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class ParallelPlan:
    """How the ranks of the group divide one job.

    world_size = cfg_degree * ring_degree * ulysses_degree.
    """

    cfg_degree: int = 1
    """Ranks groups that run the conditional / unconditional branch side by side (1 or 2)."""
    ulysses_degree: int = 1
    """Ranks that split the token sequence with all-to-all attention (Ulysses)."""
    ring_degree: int = 1
    """Ranks that split the token sequence with ring attention (needs a flash/cuDNN backend)."""
    shard_weights: bool = True
    """Shard the DiT weights with FSDP2 across all ranks (only meaningful for world size > 1)."""
    vae_parallel: bool = False
    """Split the VAE decode: its tiles are dealt to all ranks and blended on rank 0 (CogVideoX)."""

    def __post_init__(self) -> None:
        for name in ("cfg_degree", "ulysses_degree", "ring_degree"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
        if self.cfg_degree not in (1, 2):
            raise ValueError(f"cfg_degree must be 1 or 2, got {self.cfg_degree}")
        if self.ring_degree > 1 and self.ulysses_degree > 1:
            raise ValueError("ring and ulysses cannot be combined yet: set one of them to 1")
        if self.vae_parallel and self.world_size == 1:
            raise ValueError("vae_parallel needs more than one rank")

    @property
    def world_size(self) -> int:
        return self.cfg_degree * self.ulysses_degree * self.ring_degree

    @property
    def sequence_degree(self) -> int:
        return self.ulysses_degree * self.ring_degree

    @property
    def pairs_branches(self) -> bool:
        """Every rank computes both CFG branches of a guided job with sharded weights: they
        run as one batch of 2, so each block's weights are gathered once a step
        (`parallel/branches.py`). World size 1 and CFG-parallel plans run them as diffusers
        does."""
        return self.cfg_degree == 1 and self.world_size > 1 and self.shard_weights

    def to_dict(self) -> dict[str, Any]:
        modes = []
        if self.cfg_degree > 1:
            modes.append("cfg")
        if self.ulysses_degree > 1:
            modes.append("ulysses")
        if self.ring_degree > 1:
            modes.append("ring")
        sharded = self.shard_weights and self.world_size > 1
        if sharded:
            modes.append("fsdp")
        if self.vae_parallel:
            modes.append("vae")
        return {**asdict(self), "world_size": self.world_size, "modes": modes, "sharded": sharded}


def choose_plan(
    world_size: int,
    *,
    supports_cfg: bool,
    device_type: str,
    cfg_degree: int | None = None,
    ulysses_degree: int | None = None,
    ring_degree: int | None = None,
    shard_weights: bool = True,
    tiled_decode: bool = False,
) -> ParallelPlan:
    """Pick degrees for `world_size` ranks; explicit degrees override the automatic choice.

    Automatic: CFG parallel (degree 2) when the world size is even and the model has an
    unconditional branch, the remaining ranks split the sequence with Ulysses (the
    `ulysses_anything` mode accepts any token and head count). Ring attention is only chosen
    when asked for, and only on CUDA (diffusers' ring needs an attention backend that returns
    the log-sum-exp, which the CPU SDPA path does not). `tiled_decode`: the model's decode
    comes in independent tiles, so with more than one rank they are dealt to all ranks.
    """
    if world_size < 1:
        raise ValueError(f"world size must be >= 1, got {world_size}")
    if ring_degree is not None and ring_degree > 1 and device_type != "cuda":
        raise ValueError(
            "--ring-degree > 1 needs CUDA devices (flash/cuDNN attention); use Ulysses"
        )
    if cfg_degree is None:
        cfg_degree = 2 if supports_cfg and world_size % 2 == 0 else 1
    if cfg_degree not in (1, 2):
        raise ValueError(f"--cfg-degree must be 1 or 2, got {cfg_degree}")
    if cfg_degree == 2 and not supports_cfg:
        raise ValueError("--cfg-degree 2 needs a model with classifier-free guidance")
    if world_size % cfg_degree:
        raise ValueError(f"--cfg-degree {cfg_degree} must divide the world size {world_size}")
    rest = world_size // cfg_degree
    if ring_degree is None and ulysses_degree is None:
        ring_degree, ulysses_degree = 1, rest
    elif ring_degree is None:
        ring_degree = rest // ulysses_degree if ulysses_degree and rest % ulysses_degree == 0 else 0
    elif ulysses_degree is None:
        ulysses_degree = rest // ring_degree if rest % ring_degree == 0 else 0
    if (
        not ring_degree
        or not ulysses_degree
        or cfg_degree * ring_degree * ulysses_degree != world_size
    ):
        raise ValueError(
            f"cfg ({cfg_degree}) x ulysses ({ulysses_degree}) x ring ({ring_degree}) "
            f"must equal the world size {world_size}"
        )
    vae_parallel = tiled_decode and world_size > 1
    return ParallelPlan(cfg_degree, ulysses_degree, ring_degree, shard_weights, vae_parallel)
