"""The samplers, written from their published methods, as a scheduler the pipelines call.

Every sampler takes the model's output at a level σ_i as the denoised estimate
D = x − σ_i·v (a flow model predicts v = ε − x_0) and moves x to σ_{i+1}. They are the methods
ComfyUI runs under the same names (its k-diffusion samplers treat σ as a variance-exploding
level, t = −log σ); the formulas, from the papers:

- `euler`: x' = x + (σ' − σ)·(x − D)/σ (Karras et al. 2022, "Elucidating the Design Space",
  Alg. 1 without churn).
- `dpmpp_2m`: DPM-Solver++(2M) (Lu et al. 2022, arXiv:2211.01095, Alg. 2) with h = t' − t:
  x' = (σ'/σ)·x − (e^{−h} − 1)·D̂, D̂ = (1 + 1/(2r))·D − 1/(2r)·D_prev, r = h_prev/h; first
  order (D̂ = D) at the first step and into σ' = 0.
- `res_multistep`: the RES second-order multistep exponential integrator (Zhang et al. 2023,
  arXiv:2308.02157): x' = e^{−h}·x + h·(b1·D + b2·D_prev), b1 = φ1(−h) − φ2(−h)/c2,
  b2 = φ2(−h)/c2, c2 = (t_prev − t)/h, φ1(z) = (e^z − 1)/z, φ2(z) = (φ1(z) − 1)/z; Euler at the
  first step and into σ' = 0. Deterministic (no noise: ComfyUI's `res_multistep` is eta 0).
- `lcm`: the latent consistency sampler (Luo et al. 2023, arXiv:2310.04378, Alg. 1): x' = D,
  re-noised to σ' as (1 − σ')·D + σ'·ε with fresh noise ε (its own generator, seeded from the
  job's seed + 1, so every rank draws the same).
- `euler_ancestral`: Euler ancestral for a flow model, as ComfyUI runs it for one whose
  `model_sampling` is CONST (`comfy/k_diffusion/sampling.py`, `sample_euler_ancestral_RF`,
  eta 1, s_noise 1): the deterministic Euler step to σ_d = σ'²/σ,
  x_d = (σ_d/σ)·x + (1 − σ_d/σ)·D, then re-noised to σ' along the flow,
  x' = ((1 − σ')/(1 − σ_d))·x_d + √(σ'² − σ_d²·(1 − σ')²/(1 − σ_d)²)·ε, with fresh noise ε
  (its own generator, seeded from the job's seed + 1 as `lcm`'s: every rank draws the same
  full-size noise, the pipeline's step holds the whole latents); x' = D into σ' = 0.
- `gradient_estimation`: the gradient-estimation sampler (Permenter & Yuan 2024, "Interpreting
  and Improving Diffusion Models from an Optimization Perspective"), as ComfyUI runs it
  (`comfy/k_diffusion/sampling.py`, `sample_gradient_estimation`, ge_gamma 2): with
  d = (x − D)/σ, the Euler step x + (σ' − σ)·d, from the second step on plus
  (γ − 1)·(d − d_prev)·(σ' − σ); into σ' = 0 the step returns D. Deterministic.
- `uni_pc` / `uni_pc_bh2`: UniPC (Zhao et al. 2023, arXiv:2302.04867): the multistep
  predictor UniP-p and corrector UniC-p on the data prediction, B(h) = h (bh1) or e^h − 1
  (bh2), order min(3, steps − 1) with lower orders for the first steps and at the end, the
  corrector on every step but the last. As ComfyUI runs it, the levels are those of a
  variance-preserving process with α = 1/√(1 + σ²), σ_vp = σ/√(1 + σ²) (λ = −log σ), and the
  final level 0 is taken as 0.001. diffusers' `UniPCMultistepScheduler` with flow sigmas uses
  α = 1 − σ instead: other updates, so it is not used.

`FlowSampler` wraps them in the interface diffusers' pipelines call (`set_timesteps`,
`timesteps`, `step`): a pipeline runs it in place of its own scheduler, with its timesteps
σ·1000 for every level but the last.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from .names import SAMPLERS

UNIPC_FINAL_SIGMA = 0.001
UNIPC_MAX_ORDER = 3
NUM_TRAIN_TIMESTEPS = 1000


class Method:
    """One sampler's update from level i to i + 1, with what it keeps between steps."""

    def __init__(self, sigmas: list[float], seed: int):
        self.sigmas = sigmas

    def step(self, i: int, x: torch.Tensor, denoised: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


class Euler(Method):
    def step(self, i: int, x: torch.Tensor, denoised: torch.Tensor) -> torch.Tensor:
        sigma, after = self.sigmas[i], self.sigmas[i + 1]
        return x + (after - sigma) * ((x - denoised) / sigma)


class DpmPP2M(Method):
    def __init__(self, sigmas: list[float], seed: int):
        super().__init__(sigmas, seed)
        self.previous: torch.Tensor | None = None

    def step(self, i: int, x: torch.Tensor, denoised: torch.Tensor) -> torch.Tensor:
        sigma, after = self.sigmas[i], self.sigmas[i + 1]
        previous, self.previous = self.previous, denoised
        if after == 0:
            return denoised
        h = math.log(sigma / after)  # t' − t with t = −log σ
        estimate = denoised
        if previous is not None:
            r = math.log(self.sigmas[i - 1] / sigma) / h
            estimate = (1 + 1 / (2 * r)) * denoised - (1 / (2 * r)) * previous
        return (after / sigma) * x - math.expm1(-h) * estimate


class ResMultistep(Method):
    def __init__(self, sigmas: list[float], seed: int):
        super().__init__(sigmas, seed)
        self.previous: torch.Tensor | None = None

    def step(self, i: int, x: torch.Tensor, denoised: torch.Tensor) -> torch.Tensor:
        sigma, after = self.sigmas[i], self.sigmas[i + 1]
        previous, self.previous = self.previous, denoised
        if after == 0 or previous is None:
            return x + (after - sigma) * ((x - denoised) / sigma)
        h = math.log(sigma / after)
        c2 = math.log(self.sigmas[i - 1] / sigma) / -h  # (t_prev − t)/h
        phi1 = math.expm1(-h) / -h
        phi2 = (phi1 - 1) / -h
        b1, b2 = phi1 - phi2 / c2, phi2 / c2
        return math.exp(-h) * x + h * (b1 * denoised + b2 * previous)


class Lcm(Method):
    def __init__(self, sigmas: list[float], seed: int):
        super().__init__(sigmas, seed)
        self.generator = torch.Generator("cpu").manual_seed((seed + 1) % 2**63)

    def step(self, i: int, x: torch.Tensor, denoised: torch.Tensor) -> torch.Tensor:
        after = self.sigmas[i + 1]
        if after == 0:
            return denoised
        noise = torch.randn(x.shape, generator=self.generator, dtype=torch.float32)
        return (1 - after) * denoised + after * noise.to(x.device)


class EulerAncestral(Method):
    def __init__(self, sigmas: list[float], seed: int):
        super().__init__(sigmas, seed)
        self.generator = torch.Generator("cpu").manual_seed((seed + 1) % 2**63)

    def step(self, i: int, x: torch.Tensor, denoised: torch.Tensor) -> torch.Tensor:
        sigma, after = self.sigmas[i], self.sigmas[i + 1]
        if after == 0:
            return denoised
        down = after * after / sigma  # eta 1: σ_d = σ'·(σ'/σ)
        ratio = down / sigma
        x = ratio * x + (1 - ratio) * denoised
        alpha_ratio = (1 - after) / (1 - down)
        renoise = math.sqrt(after * after - (down * alpha_ratio) ** 2)
        noise = torch.randn(x.shape, generator=self.generator, dtype=torch.float32)
        return alpha_ratio * x + renoise * noise.to(x.device)


class GradientEstimation(Method):
    GAMMA = 2.0
    """ComfyUI's ge_gamma (its default; the sampler takes no other from a graph)."""

    def __init__(self, sigmas: list[float], seed: int):
        super().__init__(sigmas, seed)
        self.previous: torch.Tensor | None = None

    def step(self, i: int, x: torch.Tensor, denoised: torch.Tensor) -> torch.Tensor:
        sigma, after = self.sigmas[i], self.sigmas[i + 1]
        d = (x - denoised) / sigma
        previous, self.previous = self.previous, d
        if after == 0:
            return denoised
        dt = after - sigma
        x = x + d * dt
        if previous is not None:
            x = x + (self.GAMMA - 1) * (d - previous) * dt
        return x


@dataclass
class _Correction:
    """What UniC needs of a predicted step once the model has seen its result."""

    base: torch.Tensor
    scale: float
    history_term: torch.Tensor | float
    rho_last: float
    model_before: torch.Tensor


class UniPC(Method):
    """UniPC in ComfyUI's variance-preserving reading of σ; x is kept as x_vp = α·x."""

    def __init__(self, sigmas: list[float], seed: int, variant: str):
        super().__init__(sigmas, seed)
        self.variant = variant
        self.levels = [*sigmas[:-1], UNIPC_FINAL_SIGMA] if sigmas[-1] == 0 else list(sigmas)
        num_updates = len(self.levels) - 1
        self.order = min(UNIPC_MAX_ORDER, num_updates - 1)
        self.num_updates = num_updates
        self.x_vp: torch.Tensor | None = None
        self.lambdas: list[float] = []
        self.models: list[torch.Tensor] = []
        self.pending: _Correction | None = None

    @staticmethod
    def alpha(sigma: float) -> float:
        return 1 / math.sqrt(1 + sigma * sigma)

    def step(self, i: int, x: torch.Tensor, denoised: torch.Tensor) -> torch.Tensor:
        if i == 0:
            self.x_vp = x * self.alpha(self.levels[0])
        elif self.pending is not None:  # UniC: correct the last step with the model's new output
            c = self.pending
            self.x_vp = c.base - c.scale * (
                c.history_term + c.rho_last * (denoised - c.model_before)
            )
        self.pending = None
        self.lambdas.append(-math.log(self.levels[i]))
        self.models.append(denoised)
        k = i + 1  # this update goes to level k
        order = k if k < self.order else min(self.order, self.num_updates + 1 - k)
        x_next = self._predict(k, order, corrected_later=k < self.num_updates)
        return x_next / self.alpha(self.levels[k])

    def _predict(self, k: int, order: int, *, corrected_later: bool) -> torch.Tensor:
        sigma_t = self.levels[k]
        alpha_t = self.alpha(sigma_t)
        sigma_vp_t = sigma_t * alpha_t
        sigma_vp_s = self.levels[k - 1] * self.alpha(self.levels[k - 1])
        lambda_s, model_s = self.lambdas[-1], self.models[-1]
        h = -math.log(sigma_t) - lambda_s
        ratios, differences = [], []
        for j in range(1, order):
            ratio = (self.lambdas[-(j + 1)] - lambda_s) / h
            ratios.append(ratio)
            differences.append((self.models[-(j + 1)] - model_s) / ratio)
        ratios.append(1.0)
        hh = -h  # the data prediction's sign
        h_phi_1 = math.expm1(hh)
        b_h = hh if self.variant == "bh1" else math.expm1(hh)
        rows, b = [], []
        h_phi_k, factorial = h_phi_1 / hh - 1, 1
        for j in range(1, order + 1):
            rows.append([r ** (j - 1) for r in ratios])
            b.append(h_phi_k * factorial / b_h)
            factorial *= j + 1
            h_phi_k = h_phi_k / hh - 1 / factorial
        base = (sigma_vp_t / sigma_vp_s) * self.x_vp - alpha_t * h_phi_1 * model_s
        predicted = base
        if differences:
            rhos_p = [0.5] if order == 2 else _solve([r[:-1] for r in rows[:-1]], b[:-1])
            predicted = base - alpha_t * b_h * _combine(rhos_p, differences)
        if corrected_later:
            rhos_c = [0.5] if order == 1 else _solve(rows, b)
            self.pending = _Correction(
                base=base,
                scale=alpha_t * b_h,
                history_term=_combine(rhos_c[:-1], differences) if differences else 0.0,
                rho_last=rhos_c[-1],
                model_before=model_s,
            )
        return predicted


def _combine(weights: list[float], tensors: list[torch.Tensor]) -> torch.Tensor:
    total = weights[0] * tensors[0]
    for weight, tensor in zip(weights[1:], tensors[1:], strict=True):
        total = total + weight * tensor
    return total


def _solve(matrix: list[list[float]], rhs: list[float]) -> list[float]:
    solution = torch.linalg.solve(
        torch.tensor(matrix, dtype=torch.float64), torch.tensor(rhs, dtype=torch.float64)
    )
    return [float(v) for v in solution]


def make_method(sampler: str, sigmas: list[float], seed: int) -> Method:
    if sampler == "euler":
        return Euler(sigmas, seed)
    if sampler == "dpmpp_2m":
        return DpmPP2M(sigmas, seed)
    if sampler == "res_multistep":
        return ResMultistep(sigmas, seed)
    if sampler == "lcm":
        return Lcm(sigmas, seed)
    if sampler == "euler_ancestral":
        return EulerAncestral(sigmas, seed)
    if sampler == "gradient_estimation":
        return GradientEstimation(sigmas, seed)
    if sampler in ("uni_pc", "uni_pc_bh2"):
        return UniPC(sigmas, seed, "bh1" if sampler == "uni_pc" else "bh2")
    raise ValueError(f"sampler must be one of {', '.join(SAMPLERS)}, got {sampler!r}")


class _Config(dict):
    """A scheduler config: a dict whose keys read as attributes too (diffusers' FrozenDict)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


@dataclass
class _Output:
    prev_sample: torch.Tensor


class FlowSampler:
    """A sampler over fixed noise levels, called as diffusers' schedulers are.

    `set_timesteps` ignores what the pipeline computes (its step count must match; `sigmas`
    and `mu` from a pipeline's own spacing are not used): the levels are the job's."""

    order = 1
    init_noise_sigma = 1.0

    def __init__(self, sampler: str, sigmas: list[float], seed: int, config: dict | None = None):
        if len(sigmas) < 2 or sigmas[-1] != 0:
            raise ValueError(f"sigmas must end in 0 after at least one level, got {sigmas}")
        self.sampler = sampler
        self.levels = [float(s) for s in sigmas]
        self.seed = seed
        self.config = _Config({**(config or {}), "num_train_timesteps": NUM_TRAIN_TIMESTEPS})
        self.timesteps = torch.tensor([s * NUM_TRAIN_TIMESTEPS for s in self.levels[:-1]])
        self.sigmas = torch.tensor(self.levels)
        self._method = make_method(sampler, self.levels, seed)
        self._step_index = 0
        self._begin_index: int | None = None

    @property
    def num_steps(self) -> int:
        return len(self.levels) - 1

    @property
    def step_index(self) -> int:
        return self._step_index

    @property
    def begin_index(self) -> int | None:
        return self._begin_index

    def set_begin_index(self, begin_index: int = 0) -> None:
        self._begin_index = begin_index

    def set_timesteps(
        self,
        num_inference_steps: int | None = None,
        device: Any = None,
        sigmas: Any = None,
        mu: Any = None,
        timesteps: Any = None,
        **_: Any,
    ) -> None:
        """The job's levels on `device`; a pipeline's own `sigmas`, `mu` or `timesteps` (its
        spacing, which `retrieve_timesteps` checks this signature for) are not used."""
        if num_inference_steps is not None and num_inference_steps != self.num_steps:
            raise ValueError(
                f"the pipeline asks for {num_inference_steps} steps; the job's levels are "
                f"{self.num_steps}"
            )
        self.timesteps = torch.tensor(
            [s * NUM_TRAIN_TIMESTEPS for s in self.levels[:-1]], dtype=torch.float32, device=device
        )
        self.sigmas = torch.tensor(self.levels, dtype=torch.float32, device=device)
        self._method = make_method(self.sampler, self.levels, self.seed)
        self._step_index = 0

    def scale_model_input(self, sample: torch.Tensor, *_: Any, **__: Any) -> torch.Tensor:
        return sample

    def step(
        self,
        model_output: torch.Tensor,
        timestep: Any,
        sample: torch.Tensor,
        return_dict: bool = True,
        **_: Any,
    ) -> Any:
        i = self._step_index
        sigma = self.levels[i]
        x = sample.to(torch.float32)
        denoised = x - sigma * model_output.to(torch.float32)
        out = self._method.step(i, x, denoised).to(model_output.dtype)
        self._step_index += 1
        return _Output(out) if return_dict else (out,)
