"""ComfyUI's own sampling defaults per architecture, what a graph without a ModelSampling or
FluxGuidance node runs with: declared as data in each family's folder
(`<family>/comfyui.json`, a list of entries with the ComfyUI source that gives each value),
read here without importing the family's code (torch).

An entry names the DiT it is for by its detected family (`Detection.family`) and, where one
family's DiTs differ (Flux.1 dev and schnell), by values of the config read off the file
(`when`). `sampling` says how ComfyUI reads `shift`: "flow" (ModelSamplingDiscreteFlow: the
static shift paradit runs, on a table of 1000 levels) or "mu" (ModelSamplingFlux: mu, the
static shift exp(mu), on a table of 10000: the request's `flow_levels`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..sampling.schedules import FLUX_LEVELS

FAMILIES = Path(__file__).resolve().parents[1] / "models" / "families"
SAMPLINGS = ("flow", "mu")


@dataclass(frozen=True)
class ComfyDefault:
    """The sampling ComfyUI gives one architecture when the graph sets none."""

    dit: str
    """The DiT's detected family (`Detection.family`)."""
    sampling: str
    shift: float
    """As ComfyUI's sampling_settings hold it (mu for "mu" sampling)."""
    source: str
    when: Mapping[str, Any] = field(default_factory=dict)
    """Config values the DiT's file must have for this entry."""
    multiplier: float | None = None
    """ModelSamplingDiscreteFlow's timestep multiplier ("flow" sampling only)."""
    guidance: float | None = None
    """The distilled guidance where no FluxGuidance node sets one (None: no embedding)."""

    def __post_init__(self) -> None:
        if self.sampling not in SAMPLINGS:
            raise ValueError(f"{self.dit}: sampling must be one of {SAMPLINGS}")
        if not self.shift > 0 or not self.source.strip():
            raise ValueError(f"{self.dit}: a default needs a shift above 0 and its source")
        if self.guidance is not None and not self.guidance > 0:
            raise ValueError(f"{self.dit}: guidance must be above 0 or null")
        if self.multiplier is not None and self.sampling != "flow":
            raise ValueError(f"{self.dit}: only flow sampling has a multiplier")
        object.__setattr__(self, "when", MappingProxyType(dict(self.when)))

    @property
    def flow_levels(self) -> int | None:
        """The table its model sampling holds: ModelSamplingFlux's 10000 levels for "mu"
        sampling (None: ModelSamplingDiscreteFlow's 1000, the request's default)."""
        return FLUX_LEVELS if self.sampling == "mu" else None

    @property
    def static_shift(self) -> float:
        """The shift paradit runs (its levels: shift / (shift + 1/t - 1))."""
        return self.shift if self.sampling == "flow" else math.exp(self.shift)

    def matches(self, family: str | None, config: Mapping[str, Any]) -> bool:
        return family == self.dit and all(
            bool(config.get(k)) == v if isinstance(v, bool) else config.get(k) == v
            for k, v in self.when.items()
        )

    def describe(self) -> str:
        """The line `workflow import` prints for it."""
        given = f"shift {self.shift:g}" if self.sampling == "flow" else f"mu {self.shift:g}"
        parts = [f"{given} -> shift {self.static_shift:.6g}"]
        if self.flow_levels is not None:
            parts.append(f"flow_levels {self.flow_levels}")
        if self.guidance is not None:
            parts.append(f"guidance {self.guidance:g} -> guidance_scale")
        return f"{', '.join(parts)} (ComfyUI's default for the model: {self.source})"


def load_defaults(folder: Path = FAMILIES) -> tuple[ComfyDefault, ...]:
    """Every family's entries, families in folder order."""
    return tuple(
        ComfyDefault(**entry)
        for path in sorted(folder.glob("*/comfyui.json"))
        for entry in json.loads(path.read_text())
    )


DEFAULTS: tuple[ComfyDefault, ...] = load_defaults()


def default_for(family: str | None, config: Mapping[str, Any]) -> ComfyDefault | None:
    """ComfyUI's default for a DiT of `family` with `config`; None where none is declared."""
    found = [d for d in DEFAULTS if d.matches(family, config)]
    if len(found) > 1:
        raise ValueError(f"two ComfyUI defaults declared for a {family} DiT")
    return found[0] if found else None
