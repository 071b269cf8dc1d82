"""A two-stage job's second stage (the request's `upscale`), as LTX-2's templates run it.

Stage 1 denoises at the request's size divided by `factor`; the latent upscaler (`serve
--upscaler FILE`) multiplies the latents' width and height by `factor`; stage 2 re-noises them
to its first level and denoises them at the request's size over its own levels (`sigmas`,
ComfyUI's ManualSigmas), with its own sampler, guidance and LoRAs. The request's width and
height are the final size.

Torch-free: the request table validates with it. The job runs it in `runtime/stages.py`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .contract import Limits

STAGE_2_SIGMAS = (0.909375, 0.725, 0.421875)
"""Stage 2's default levels: diffusers' `STAGE_2_DISTILLED_SIGMA_VALUES` (Lightricks' distilled
schedule from its sixth level on; the scheduler appends the final 0)."""
STAGE_2_GUIDANCE = 1.0
"""Stage 2's default guidance: none (the distilled LoRA's stage runs without CFG)."""
KEYS = ("factor", "sigmas", "sampler", "guidance_scale", "loras")
DEFAULT_SAMPLER = "default"


@dataclass(frozen=True)
class UpscaleSettings:
    """A request's `upscale`, checked, its defaults filled in."""

    factor: int
    """The latent upscaler's factor on width and height (2 for Lightricks' x2 upscalers)."""
    sigmas: tuple[float, ...] = STAGE_2_SIGMAS
    """Stage 2's noise levels, strictly decreasing in (0, 1], without the final 0: the
    upscaled latents are re-noised to the first."""
    sampler: str = DEFAULT_SAMPLER
    """`default` (the model's own Euler over the levels as given) or a paradit sampler."""
    guidance_scale: float = STAGE_2_GUIDANCE
    loras: tuple[dict[str, Any], ...] = ()
    """Stage 2's LoRAs ({name, strength}), applied for stage 2 only, in place of the job's."""

    def __post_init__(self) -> None:
        if isinstance(self.factor, bool) or not isinstance(self.factor, int) or self.factor < 2:
            raise ValueError(f"upscale.factor must be a whole number >= 2, got {self.factor!r}")
        usage = "upscale.sigmas must be noise levels in (0, 1], strictly decreasing"
        if not self.sigmas:
            raise ValueError(f"{usage}: at least one, got none")
        for a in self.sigmas:
            if not math.isfinite(a) or not 0 < a <= 1:
                raise ValueError(f"{usage} (a final 0 may end them), got {list(self.sigmas)}")
        if any(b >= a for a, b in zip(self.sigmas, self.sigmas[1:], strict=False)):
            raise ValueError(f"{usage}, got {list(self.sigmas)}")
        if not math.isfinite(self.guidance_scale) or self.guidance_scale < 0:
            raise ValueError(f"upscale.guidance_scale must be >= 0, got {self.guidance_scale}")

    @property
    def num_steps(self) -> int:
        return len(self.sigmas)

    @classmethod
    def parse(cls, value: Any, limits: Limits | None = None) -> UpscaleSettings | None:
        """A request's `upscale` ({factor, sigmas, sampler, guidance_scale, loras}; None or {}:
        one stage). With `limits`, the model's own rules: it runs two stages, its upscaler
        gives the factor, it runs the sampler, the guidance is within its bound."""
        if value is None or value == {}:
            return None
        if not isinstance(value, dict):
            raise ValueError(f"upscale must be an object {{{', '.join(KEYS)}}}, got {value!r}")
        unknown = sorted(set(value) - set(KEYS))
        if unknown:
            raise ValueError(f"upscale takes the keys {', '.join(KEYS)}, got {unknown}")
        if limits is not None:
            _served(limits)
        factor = value.get("factor", limits.upscale_factors[0] if limits is not None else 2)
        sigmas = _sigmas(value.get("sigmas"))
        guidance = value.get("guidance_scale", STAGE_2_GUIDANCE)
        if isinstance(guidance, bool) or not isinstance(guidance, (int, float)):
            raise ValueError(f"upscale.guidance_scale must be a number, got {guidance!r}")
        sampler = value.get("sampler") or DEFAULT_SAMPLER
        if not isinstance(sampler, str):
            raise ValueError(f"upscale.sampler must be a sampler's name, got {sampler!r}")
        loras = value.get("loras") or ()
        settings = cls(factor, sigmas, sampler, float(guidance), tuple(loras))
        if limits is not None:
            settings.check(limits)
        return settings

    def check(self, limits: Limits) -> None:
        """The loaded model's rules (the loras' items are checked by the request's table)."""
        if self.factor not in limits.upscale_factors:
            raise ValueError(
                f"upscale.factor must be one the loaded upscaler gives "
                f"({', '.join(map(str, limits.upscale_factors))}), got {self.factor}"
            )
        if self.sampler != DEFAULT_SAMPLER and self.sampler not in limits.samplers:
            raise ValueError(
                f"upscale.sampler must be one of {DEFAULT_SAMPLER}, {', '.join(limits.samplers)} "
                f"for this model, got {self.sampler!r}"
            )
        if self.guidance_scale > limits.max_guidance:
            raise ValueError(
                f"upscale.guidance_scale must be at most {limits.max_guidance}, "
                f"got {self.guidance_scale}"
            )

    def stage_one_size(self, width: int, height: int, limits: Limits) -> tuple[int, int]:
        """Stage 1's size for a final `width` x `height`: each divided by the factor, still a
        multiple of the model's size step and at least its smallest size."""
        step = limits.size_multiple * self.factor
        if width % step or height % step or min(width, height) // self.factor < limits.min_size:
            raise ValueError(
                f"with upscale (factor {self.factor}) width and height are the final size: "
                f"multiples of {step} (the model's {limits.size_multiple} times the factor) "
                f"and at least {limits.min_size * self.factor}, got {width}x{height}"
            )
        return width // self.factor, height // self.factor

    def to_dict(self) -> dict[str, Any]:
        return {
            "factor": self.factor,
            "sigmas": list(self.sigmas),
            "sampler": self.sampler,
            "guidance_scale": self.guidance_scale,
            "loras": [dict(item) for item in self.loras],
        }


def _served(limits: Limits) -> None:
    if not limits.two_stage:
        raise ValueError(
            "upscale (a two-stage job: stage 1, the latent upscale, stage 2) applies only to "
            "models that run one (LTX-2); this model runs one stage: leave upscale out"
        )
    if not limits.upscale_factors:
        raise ValueError(
            "upscale needs the latent upscaler: start the backend with --upscaler FILE "
            "(e.g. ltx-2-spatial-upscaler-x2-1.0.safetensors)"
        )


def _sigmas(value: Any) -> tuple[float, ...]:
    """Stage 2's levels; a final 0 (as ComfyUI's ManualSigmas writes them) is dropped."""
    if value is None:
        return STAGE_2_SIGMAS
    if not isinstance(value, list) or not all(
        isinstance(s, (int, float)) and not isinstance(s, bool) for s in value
    ):
        raise ValueError(
            f"upscale.sigmas must be a list of noise levels, e.g. {list(STAGE_2_SIGMAS)}, "
            f"got {value!r}"
        )
    levels = [float(s) for s in value]
    if len(levels) > 1 and levels[-1] == 0:
        levels = levels[:-1]
    return tuple(levels)


def total_steps(num_inference_steps: int, upscale: Any) -> int:
    """A job's denoising steps over both stages (what its progress counts to)."""
    settings = UpscaleSettings.parse(upscale)
    return num_inference_steps + (0 if settings is None else settings.num_steps)
