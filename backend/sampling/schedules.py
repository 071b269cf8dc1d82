"""Noise levels of a flow model as ComfyUI spaces them, from the published formulas.

A flow model (Wan, Flux, Qwen-Image, ...) noises `x_t = (1 - σ) x_0 + σ ε`. ComfyUI's
ModelSamplingSD3 / ModelSamplingAuraFlow (ModelSamplingDiscreteFlow) give it a static `shift`
and a table of N = 1000 levels, σ_i = σ(i / N) for i = 1..N, with the SD3 time shift (Esser
et al. 2024, "Scaling Rectified Flow Transformers", eq. 23):

    σ(t) = shift·t / (1 + (shift − 1)·t)

ModelSamplingFlux (Flux.1's, Qwen-Image's, Krea 2's and Qwen-Image 2.1's own sampling, and the
ModelSamplingFlux node) holds N = 10000 levels of the same curve at shift = exp(mu)
(exp(mu) / (exp(mu) + 1/t − 1)); `flow_levels` is that N. Its schedulers pick `steps` levels
from the table and append 0:

- `simple`: every (N / steps)-th level from the top, index −(1 + ⌊k·N/steps⌋).
- `sgm_uniform`: t spaced evenly from σ_max to σ_min over steps + 1 points, the last dropped,
  each mapped through σ(·) (ComfyUI spaces *timesteps* σ·1000 and maps them back through the
  shifted σ: for shift ≠ 1 a level is shifted once more than the table's; kept as it is).
- `normal`: the same over `steps` points, the last one σ(σ_min).
- `beta`: the table indices at the quantiles 1 − k/steps of Beta(0.6, 0.6) (Lee et al. 2024,
  "Beta Sampling is All You Need", arXiv:2407.12173), rounded to the nearest index, repeats
  dropped.

A sampler that ComfyUI runs with one step more and the next-to-last level dropped (UniPC,
DPM-2) gets `drop_penultimate`. Pure Python (math only): every frontend may import it.
"""

from __future__ import annotations

import math

NUM_LEVELS = 1000
"""Levels of ComfyUI's flow table (ModelSamplingDiscreteFlow's `timesteps` default)."""
FLUX_LEVELS = 10000
"""Levels of ModelSamplingFlux's table."""
FLOW_LEVELS = (NUM_LEVELS, FLUX_LEVELS)
"""The tables ComfyUI's flow samplings hold: ModelSamplingDiscreteFlow's 1000 levels,
ModelSamplingFlux's 10000 (`comfy/model_sampling.py`, their `timesteps`)."""

SCHEDULERS = ("simple", "normal", "beta", "sgm_uniform")
"""The noise-level spacings paradit runs, with ComfyUI's names."""

BETA_ALPHA = BETA_BETA = 0.6
"""ComfyUI's `beta` scheduler's defaults (the paper's suggestion)."""


def flow_sigma(t: float, shift: float) -> float:
    """The noise level at time t in [0, 1] under a static shift (SD3's time shift)."""
    if shift <= 0:
        raise ValueError(f"shift must be above 0, got {shift}")
    return shift * t / (1 + (shift - 1) * t)


def flow_table(shift: float, count: int = NUM_LEVELS) -> list[float]:
    """ComfyUI's `count` levels of a flow model, lowest first: σ(i/count), i = 1..count."""
    if count not in FLOW_LEVELS:
        raise ValueError(f"flow_levels must be one of {FLOW_LEVELS}, got {count}")
    return [flow_sigma(i / count, shift) for i in range(1, count + 1)]


def levels(
    scheduler: str,
    steps: int,
    shift: float,
    *,
    drop_penultimate: bool = False,
    table: int = NUM_LEVELS,
) -> list[float]:
    """`steps` noise levels from the top, then 0 (`steps` + 1 values), as ComfyUI's KSampler
    computes them for `scheduler` at `shift` on a table of `table` levels; `drop_penultimate`:
    computed for one step more and the next-to-last level dropped (UniPC's rule)."""
    if scheduler not in SCHEDULERS:
        raise ValueError(f"scheduler must be one of {', '.join(SCHEDULERS)}, got {scheduler!r}")
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    wanted = steps + 1 if drop_penultimate else steps
    spaced = _SPACINGS[scheduler](flow_table(shift, table), wanted, shift)
    if drop_penultimate:
        spaced = spaced[:-2] + spaced[-1:]
    return spaced


def _simple(table: list[float], steps: int, _shift: float) -> list[float]:
    stride = len(table) / steps
    return [table[-(1 + int(k * stride))] for k in range(steps)] + [0.0]


def _uniform_times(table: list[float], steps: int, shift: float, *, sgm: bool) -> list[float]:
    start, end = table[-1], table[0]  # σ_max, σ_min as ComfyUI's timestep()/1000 gives them
    points = steps + 1 if sgm else steps
    times = (
        [start + (end - start) * k / (points - 1) for k in range(points)] if points > 1 else [start]
    )
    if sgm:
        times = times[:-1]
    return [flow_sigma(t, shift) for t in times] + [0.0]


def _normal(table: list[float], steps: int, shift: float) -> list[float]:
    # σ(σ_min) is never ~0 for a flow table (σ_min = σ(0.001)), so no step is added.
    return _uniform_times(table, steps, shift, sgm=False)


def _sgm_uniform(table: list[float], steps: int, shift: float) -> list[float]:
    return _uniform_times(table, steps, shift, sgm=True)


def _beta(table: list[float], steps: int, _shift: float) -> list[float]:
    last = len(table) - 1
    picked: list[float] = []
    previous = -1
    for k in range(steps):
        quantile = 1 - k / steps
        index = _round_half_even(beta_ppf(quantile, BETA_ALPHA, BETA_BETA) * last)
        if index != previous:
            picked.append(table[index])
        previous = index
    return picked + [0.0]


_SPACINGS = {"simple": _simple, "normal": _normal, "beta": _beta, "sgm_uniform": _sgm_uniform}


def _round_half_even(value: float) -> int:
    """numpy.rint's rounding (ties to even), which the beta spacing's indices use."""
    return int(round(value))  # Python's round() is round-half-even too


# -- the Beta distribution's quantile, for the `beta` spacing ------------------------------------


def beta_cdf(x: float, a: float, b: float) -> float:
    """The regularized incomplete beta function I_x(a, b) by its continued fraction
    (Abramowitz & Stegun 26.5.8, evaluated with the modified Lentz method)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    if x > (a + 1) / (a + b + 2):  # the fraction converges fast below the mean: use symmetry
        return 1.0 - beta_cdf(1 - x, b, a)
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    return math.exp(log_front) * _beta_fraction(x, a, b) / a


def _beta_fraction(x: float, a: float, b: float) -> float:
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 500):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= c * d
        if abs(c * d - 1.0) < 1e-16:
            break
    return result


def beta_ppf(q: float, a: float, b: float) -> float:
    """The q-quantile of Beta(a, b): the x with I_x(a, b) = q, by bisection to 1e-15."""
    if q <= 0:
        return 0.0
    if q >= 1:
        return 1.0
    low, high = 0.0, 1.0
    while high - low > 1e-15:
        middle = (low + high) / 2
        if beta_cdf(middle, a, b) < q:
            low = middle
        else:
            high = middle
    return (low + high) / 2
