"""Reference noise levels and integrations for tests/sampling/test_sampling.py, written from the
published formulas independently of backend/sampling (exact fractions, mpmath, loop-form
solvers that call the model where the papers do).

Sources:
- the flow shift: Esser et al. 2024, "Scaling Rectified Flow Transformers", eq. 23, over the
  N-level table of ComfyUI's ModelSamplingDiscreteFlow (N = 1000: σ(i/N), i = 1..N) or
  ModelSamplingFlux (N = 10000, its `timesteps`, `comfy/model_sampling.py`); the spacings as
  described in DESIGN.md's facts and ComfyUI's documentation of its schedulers;
- beta: Lee et al. 2024, "Beta Sampling is All You Need" (arXiv:2407.12173), α = β = 0.6;
- euler: Karras et al. 2022, Alg. 1; DPM-Solver++(2M): Lu et al. 2022 (arXiv:2211.01095),
  Alg. 2; RES multistep: Zhang et al. 2023 (arXiv:2308.02157), second-order multistep;
  LCM: Luo et al. 2023 (arXiv:2310.04378), Alg. 1; UniPC: Zhao et al. 2023
  (arXiv:2302.04867), Alg. 2-3 (UniP-p, UniC-p, B(h) = h or e^h - 1), in the VP reading
  α = 1/sqrt(1 + σ²) that ComfyUI runs, final level 0.001.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from fractions import Fraction

import mpmath
import torch


def sigma_of(t: float, shift: float) -> float:
    return shift * t / (1 + (shift - 1) * t)


def ref_levels(
    scheduler: str, steps: int, shift: float, drop: bool, table: int = 1000
) -> list[float]:
    n = steps + 1 if drop else steps
    if scheduler == "simple":
        out = [
            sigma_of((table - math.floor(Fraction(table * k, n))) / table, shift) for k in range(n)
        ]
    elif scheduler in ("normal", "sgm_uniform"):
        top, bottom = 1.0, sigma_of(1 / table, shift)
        points = n + 1 if scheduler == "sgm_uniform" else n
        times = (
            [top + (bottom - top) * k / (points - 1) for k in range(points)]
            if points > 1
            else [top]
        )
        out = [sigma_of(t, shift) for t in times[:n]]
    elif scheduler == "beta":
        out, last = [], None
        for k in range(n):
            index = _beta_index(k, n, table)
            if index != last:
                out.append(sigma_of((index + 1) / table, shift))
            last = index
    else:
        raise AssertionError(scheduler)
    out.append(0.0)
    return out[:-2] + out[-1:] if drop else out


def _beta_index(k: int, n: int, table: int) -> int:
    """The index into a table of `table` levels at the (1 - k/n)-quantile of Beta(0.6, 0.6),
    rounded half to even (as numpy.rint)."""
    return int(round(_beta_x(k, n) * (table - 1)))


@functools.cache
def _beta_x(k: int, n: int) -> float:
    q = mpmath.mpf(1) - mpmath.mpf(k) / n
    return 1.0 if q == 1 else float(_beta_quantile(q))


def _beta_quantile(q):
    mpmath.mp.dps = 30

    def cdf(x):
        return mpmath.betainc(0.6, 0.6, 0, x, regularized=True) - q

    return mpmath.findroot(
        cdf, (mpmath.mpf("1e-30"), mpmath.mpf(1) - mpmath.mpf("1e-30")), solver="anderson"
    )


# -- integrations: `velocity(x, sigma)` is the model (a flow model's v = eps - x0) --------------

Model = Callable[[torch.Tensor, float], torch.Tensor]


def integrate(sampler: str, velocity: Model, x: torch.Tensor, sigmas: list[float], seed: int):
    x = x.to(torch.float64)
    if sampler.startswith("uni_pc"):
        return _unipc(velocity, x, sigmas, "bh1" if sampler == "uni_pc" else "bh2")
    noise = torch.Generator("cpu").manual_seed(seed + 1)
    previous = previous_v = None
    for i in range(len(sigmas) - 1):
        s, s_next = sigmas[i], sigmas[i + 1]
        v = velocity(x, s).to(torch.float64)
        d0 = x - s * v
        if sampler == "euler":
            x = x + (s_next - s) * v
        elif sampler == "lcm":
            x = (
                d0
                if s_next == 0
                else (1 - s_next) * d0
                + s_next
                * torch.randn(x.shape, generator=noise, dtype=torch.float32).to(torch.float64)
            )
        elif sampler == "euler_ancestral":  # ComfyUI's sample_euler_ancestral_RF, eta 1
            if s_next == 0:
                x = d0
            else:
                # the ancestral split of the step into a deterministic part to s_down and
                # fresh noise of variance s_up², in the flow's own scaling (1 - s) of the data
                s_down = s_next * (s_next / s)
                x = x + (s_down - s) * v  # the Euler (ODE) step down to s_down
                scale = (1 - s_next) / (1 - s_down)
                s_up = (s_next**2 - (scale * s_down) ** 2) ** 0.5
                drawn = torch.randn(x.shape, generator=noise, dtype=torch.float32)
                x = scale * x + s_up * drawn.to(torch.float64)
        elif sampler == "gradient_estimation":  # ComfyUI's, ge_gamma 2; d = v for a flow
            if s_next == 0:
                x = d0
            else:
                x = x + (s_next - s) * v
                if previous_v is not None:
                    x = x + (2.0 - 1.0) * (v - previous_v) * (s_next - s)
        elif sampler == "dpmpp_2m":
            if s_next == 0:
                x = d0
            elif previous is None:
                x = (s_next / s) * x + (1 - s_next / s) * d0
            else:
                h, h_last = math.log(s / s_next), math.log(sigmas[i - 1] / s)
                r = h_last / h
                blend = d0 + (d0 - previous) / (2 * r)
                x = (s_next / s) * x + (1 - s_next / s) * blend
        elif sampler == "res_multistep":
            if s_next == 0 or previous is None:
                x = d0 + (s_next / s) * (x - d0)  # the Euler step, written as an interpolation
            else:
                h = math.log(s / s_next)
                c2 = -math.log(sigmas[i - 1] / s) / h
                z = -h
                phi1 = (math.exp(z) - 1) / z
                phi2 = (phi1 - 1) / z
                x = math.exp(-h) * x + h * ((phi1 - phi2 / c2) * d0 + (phi2 / c2) * previous)
        else:
            raise AssertionError(sampler)
        previous, previous_v = d0, v
    return x


def _unipc(velocity: Model, x_flow: torch.Tensor, sigmas: list[float], variant: str):
    """UniPC multistep, data prediction, as the paper's loop runs it: the model is called at
    each predicted point; that output corrects the point (UniC) and is the history."""
    ts = [*sigmas[:-1], 0.001]
    n = len(ts) - 1
    top_order = min(3, n - 1)

    def alpha(s):
        return 1 / math.sqrt(1 + s * s)

    def lam(s):
        return -math.log(s)

    def data(x_vp, s):
        x = x_vp / alpha(s)
        return x - s * velocity(x.to(torch.float32), s).to(torch.float64)

    x = x_flow * alpha(ts[0])
    hist_t, hist_m = [ts[0]], [data(x, ts[0])]
    for k in range(1, n + 1):
        order = k if k < top_order else min(top_order, n + 1 - k)
        s0, t = hist_t[-1], ts[k]
        h = lam(t) - lam(s0)
        rks = [(lam(hist_t[-(j + 1)]) - lam(s0)) / h for j in range(1, order)] + [1.0]
        d1s = [(hist_m[-(j + 1)] - hist_m[-1]) / rks[j - 1] for j in range(1, order)]
        hh = -h
        b_h = hh if variant == "bh1" else math.expm1(hh)
        phi_k, fact, rows, b = math.expm1(hh) / hh - 1, 1, [], []
        for j in range(1, order + 1):
            rows.append([r ** (j - 1) for r in rks])
            b.append(phi_k * fact / b_h)
            fact *= j + 1
            phi_k = phi_k / hh - 1 / fact
        mat, vec = torch.tensor(rows, dtype=torch.float64), torch.tensor(b, dtype=torch.float64)
        sig_vp = lambda s: s * alpha(s)  # noqa: E731
        base = sig_vp(t) / sig_vp(s0) * x - alpha(t) * math.expm1(hh) * hist_m[-1]
        x_pred = base
        if d1s:
            rho_p = [0.5] if order == 2 else torch.linalg.solve(mat[:-1, :-1], vec[:-1]).tolist()
            x_pred = base - alpha(t) * b_h * sum(r * d for r, d in zip(rho_p, d1s, strict=True))
        if k == n:
            x = x_pred
            break
        m_t = data(x_pred, t)
        rho_c = [0.5] if order == 1 else torch.linalg.solve(mat, vec).tolist()
        corr = sum((r * d for r, d in zip(rho_c[:-1], d1s, strict=True)), torch.zeros_like(x))
        x = base - alpha(t) * b_h * (corr + rho_c[-1] * (m_t - hist_m[-1]))
        hist_t.append(t)
        hist_m.append(m_t)
        hist_t, hist_m = hist_t[-top_order:], hist_m[-top_order:]
    return x / alpha(ts[-1])
