"""How far a parallel run is from world size 1: distances, thresholds and a verdict.

Byte identity across world sizes holds only where a split leaves every kernel's shapes as
they are (CFG parallel: each branch runs as in one process). Sequence parallel computes the
linear layers on sequence shards, i.e. matrix products with other row counts, and CPU/GPU
kernels may then round differently. So equivalence is measured, not just hashed:

- frames (8-bit RGB, 0..255): the largest and the mean absolute difference, and the PSNR in
  dB (infinite when equal), per frame and over all frames;
- the final latents: the relative L2 error ||a - b|| / ||a|| (a: world size 1).

The verdict is `identical` (every frame byte equal), `equal within rounding` (within the
`Tolerance`), or `different`. The float32 thresholds are calibrated in docs/equivalence.md:
legitimate plans stay far below them, deliberately broken plans far above.

Only numpy; no torch, so the metrics can be used anywhere.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

IDENTICAL = "identical"
WITHIN_ROUNDING = "equal within rounding"
DIFFERENT = "different"
VERDICTS = (IDENTICAL, WITHIN_ROUNDING, DIFFERENT)

PEAK = 255.0


@dataclass(frozen=True)
class Tolerance:
    """How far frames and latents may be from world size 1 and still count as equal."""

    max_abs: float
    """The largest absolute difference of any frame value allowed, on the 0..255 scale."""
    min_psnr: float
    """The lowest PSNR (dB) any frame may have."""
    latent_rel_l2: float
    """The largest relative L2 error of the final latents allowed."""

    def __post_init__(self) -> None:
        rules = {
            "max_abs": (0.0, PEAK, "between 0 and 255"),
            "min_psnr": (0.0, math.inf, ">= 0 (dB; inf: frames must be equal)"),
            "latent_rel_l2": (0.0, math.inf, ">= 0"),
        }
        for name, (low, high, rule) in rules.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"tolerance {name} must be a number {rule}, got {value!r}")
            if math.isnan(value) or not low <= value <= high:
                raise ValueError(f"tolerance {name} must be {rule}, got {value}")

    def updated(self, overrides: dict[str, float]) -> Tolerance:
        """A copy with some thresholds replaced (validated again)."""
        return dataclasses.replace(self, **overrides)

    def to_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)


# Calibrated on CPU (docs/equivalence.md): legitimate float32 plans measured max_abs <= 1,
# PSNR >= 86 dB, latent_rel_l2 <= 4e-7; deliberately broken ones max_abs >= 23,
# PSNR <= 39.5 dB, latent_rel_l2 >= 0.034. Each threshold sits far above the first (bigger
# models and more steps drift more) and well below the second.
FLOAT32 = Tolerance(max_abs=8.0, min_psnr=50.0, latent_rel_l2=1e-3)
# Measured on an H100 (docs/gpu.md, docs/gpu/measured.json): legitimate bfloat16 variations
# (world size 1 against diffusers called directly; the same pipeline on each of PyTorch's
# attention kernels, as a parallel plan changes kernel shapes) gave at worst max_abs 35,
# PSNR 38.0 dB, latent_rel_l2 0.0155. Frames cannot tell bf16 rounding from the mildest CPU
# break (23, 39.5 dB), the latents can (0.034): latent_rel_l2 decides, 1.6x above the worst
# legitimate and 1.4x below the mildest break; the frame thresholds catch gross breaks only.
BFLOAT16 = Tolerance(max_abs=64.0, min_psnr=32.0, latent_rel_l2=0.025)
DEFAULTS = {"float32": FLOAT32, "bfloat16": BFLOAT16, "float16": BFLOAT16}

_KEYS = tuple(f.name for f in dataclasses.fields(Tolerance))
TOLERANCE_SYNTAX = (
    "KEY=VALUE[,KEY=VALUE...] with keys max_abs (0..255), min_psnr (dB) and latent_rel_l2, "
    "e.g. latent_rel_l2=1e-3,min_psnr=40,max_abs=16"
)


def tolerance_for(dtype: str) -> Tolerance:
    """The default thresholds for runs computed in `dtype` ("float32", "bfloat16", ...)."""
    if dtype not in DEFAULTS:
        raise ValueError(f"no thresholds for dtype {dtype!r}; known: {sorted(DEFAULTS)}")
    return DEFAULTS[dtype]


def parse_tolerance(text: str) -> dict[str, float]:
    """`max_abs=16,min_psnr=40` -> {"max_abs": 16.0, "min_psnr": 40.0}; ValueError if bad."""
    overrides: dict[str, float] = {}
    for item in (text or "").split(","):
        key, sep, value = item.strip().partition("=")
        key = key.strip()
        if not sep or key not in _KEYS:
            raise ValueError(f"--tolerance takes {TOLERANCE_SYNTAX}; got {item.strip()!r}")
        if key in overrides:
            raise ValueError(f"--tolerance gives {key} twice")
        try:
            overrides[key] = float(value)
        except ValueError:
            raise ValueError(f"--tolerance {key} must be a number, got {value.strip()!r}") from None
    FLOAT32.updated(overrides)  # the same range rules, checked now
    return overrides


# -- metrics ----------------------------------------------------------------------------------


def psnr(mse: float) -> float:
    """Peak signal-to-noise ratio in dB for 8-bit values; inf when equal."""
    return math.inf if mse == 0 else 10.0 * math.log10(PEAK * PEAK / mse)


def distances(a: np.ndarray, b: np.ndarray) -> dict[str, Any]:
    """Distances between two uint8 arrays of one shape (a frame, or all frames)."""
    diff = np.abs(a.astype(np.int16) - b.astype(np.int16))
    mse = float(np.mean(diff.astype(np.float64) ** 2))
    return {
        "max_abs": int(diff.max(initial=0)),
        "mean_abs": float(diff.mean()) if diff.size else 0.0,
        "psnr": psnr(mse),
        "differing_values": int(np.count_nonzero(diff)),
        "num_values": int(diff.size),
    }


def relative_l2(reference: np.ndarray, other: np.ndarray) -> float:
    """||reference - other|| / ||reference|| in float64 (inf if the reference is all zeros)."""
    ref = np.asarray(reference, dtype=np.float64)
    diff = float(np.linalg.norm(ref - np.asarray(other, dtype=np.float64)))
    norm = float(np.linalg.norm(ref))
    if norm == 0:
        return 0.0 if diff == 0 else math.inf
    return diff / norm


@dataclass(frozen=True)
class Comparison:
    """The measured distance between a world-size-1 run and another, and its verdict."""

    frames: list[dict[str, Any]]
    overall: dict[str, Any]
    latent_rel_l2: float | None
    tolerance: Tolerance
    verdict: str
    reasons: list[str]
    """Why the verdict is `different` (empty otherwise)."""

    @property
    def identical(self) -> bool:
        return self.verdict == IDENTICAL

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "identical": self.identical,
            "reasons": self.reasons,
            "overall": self.overall,
            "latent_rel_l2": self.latent_rel_l2,
            "frames": self.frames,
            "thresholds": self.tolerance.to_dict(),
        }


def compare(
    reference: np.ndarray,
    other: np.ndarray,
    tolerance: Tolerance,
    reference_latents: np.ndarray | None = None,
    other_latents: np.ndarray | None = None,
) -> Comparison:
    """Compare uint8 frames (F, H, W, 3) and, when both are given, the final latents.

    `different` when the shapes differ or any threshold is exceeded; otherwise `identical`
    when every frame byte is equal, else `equal within rounding`.
    """
    if reference.shape != other.shape:
        reason = f"frames have shape {tuple(other.shape)}, expected {tuple(reference.shape)}"
        return Comparison([], {}, None, tolerance, DIFFERENT, [reason])
    pairs = enumerate(zip(reference, other, strict=True))
    frames = [{"index": i, **distances(a, b)} for i, (a, b) in pairs]
    overall = distances(reference, other)
    reasons = []
    if overall["max_abs"] > tolerance.max_abs:
        reasons.append(f"max_abs {overall['max_abs']} > {tolerance.max_abs}")
    worst = min((f["psnr"] for f in frames), default=math.inf)
    overall["min_frame_psnr"] = worst
    if worst < tolerance.min_psnr:
        reasons.append(f"a frame's PSNR {worst:.2f} dB < {tolerance.min_psnr} dB")
    latent_error = None
    if reference_latents is not None and other_latents is not None:
        if np.shape(reference_latents) != np.shape(other_latents):
            reasons.append(
                f"latents have shape {np.shape(other_latents)}, "
                f"expected {np.shape(reference_latents)}"
            )
        else:
            latent_error = relative_l2(reference_latents, other_latents)
            if latent_error > tolerance.latent_rel_l2:
                reasons.append(f"latent_rel_l2 {latent_error:.3g} > {tolerance.latent_rel_l2}")
    if reasons:
        verdict = DIFFERENT
    elif overall["differing_values"] == 0:
        verdict = IDENTICAL
    else:
        verdict = WITHIN_ROUNDING
    return Comparison(frames, overall, latent_error, tolerance, verdict, reasons)


def json_safe(value: Any) -> Any:
    """Infinite floats as the string "inf" (JSON has no infinity), recursively."""
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
