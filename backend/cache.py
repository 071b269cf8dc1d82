"""A job's step cache settings (the request's `cache`, `--cache METHOD[:THRESHOLD]`).

Torch-free: the request table validates with it. How the cache runs in parallel, and the rule
every rank follows, is `parallel/step_cache.py`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

METHODS = {"first-block": 0.05}
"""Method -> default threshold. `first-block`: diffusers' First-Block-Cache."""
MAX_THRESHOLD = 1.0


@dataclass(frozen=True)
class CacheSettings:
    """A job's step cache (the request's `cache`, or the serve default)."""

    method: str
    """One of METHODS."""
    threshold: float
    """Skip the step's remaining blocks while the first block's residual changed by at most
    this fraction (relative mean absolute change) since the last computed step."""

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"cache method must be one of {sorted(METHODS)}, got {self.method!r}")
        threshold = self.threshold
        if (
            isinstance(threshold, bool)
            or not isinstance(threshold, (int, float))
            or not math.isfinite(threshold)
            or not 0 < threshold <= MAX_THRESHOLD
        ):
            raise ValueError(
                f"cache threshold must be a number > 0 and <= {MAX_THRESHOLD}, got {threshold!r}"
            )

    @classmethod
    def parse(cls, value: Any) -> CacheSettings | None:
        """A request's `cache` value ({method, threshold}); None for none."""
        if value is None or value == {}:
            return None
        if not isinstance(value, dict):
            raise ValueError(f"cache must be an object {{method, threshold}}, got {value!r}")
        unknown = sorted(set(value) - {"method", "threshold"})
        if unknown:
            raise ValueError(f"cache takes the keys method and threshold, got {unknown}")
        method = value.get("method")
        if method not in METHODS:
            raise ValueError(f"cache method must be one of {sorted(METHODS)}, got {method!r}")
        return cls(method, value.get("threshold", METHODS[method]))

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "threshold": float(self.threshold)}
