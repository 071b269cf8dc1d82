"""The median and spread of repeated measurements, and how the bench's tables print them."""

from __future__ import annotations

import statistics


def spread(values: list[float]) -> dict[str, float]:
    """Median, min and max of a non-empty list."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def fmt_spread(spread: dict[str, float] | None, unit: str = "", scale: float = 1.0) -> str:
    """`median (min-max)` with 3 significant digits, scaled and with a unit; "-" for None."""
    if spread is None:
        return "-"
    m, lo, hi = (spread[k] * scale for k in ("median", "min", "max"))
    return f"{m:.3g}{unit} ({lo:.3g}-{hi:.3g})"


def fixed_spread(spread: dict[str, float | None], digits: int) -> str:
    """`median (min-max)` with `digits` decimals; "-" when there is no median."""
    if spread.get("median") is None:
        return "-"
    m, lo, hi = (spread[k] for k in ("median", "min", "max"))
    return f"{m:.{digits}f} ({lo:.{digits}f}-{hi:.{digits}f})"
