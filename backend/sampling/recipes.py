"""Named recipes: the sampling settings of a known workflow, chosen by one name.

A recipe sets request fields (steps, guidance, sampler, scheduler, shift, switch step); a
field the request gives itself wins over the recipe's. A recipe sets no LoRAs and no size:
the 4-step recipes assume the distillation LoRAs they were made for (give them in `loras`).
Torch-free: the CLI lists them (`paradit recipes`), the frontends offer them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

NO_RECIPE = "none"
"""What the node and the web form show for "no recipe" (the request leaves `recipe` out)."""

RECIPE_FIELDS = (
    "num_inference_steps",
    "guidance_scale",
    "guidance_scale_low",
    "sampler",
    "scheduler",
    "shift",
    "switch_step",
)
"""The request fields a recipe may set."""


@dataclass(frozen=True)
class Recipe:
    name: str
    models: str
    """The models it is made for, in words."""
    source: str
    """Where its numbers come from."""
    fields: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = set(self.fields) - set(RECIPE_FIELDS)
        if unknown:
            raise ValueError(f"recipe {self.name}: fields must be among {RECIPE_FIELDS}")
        object.__setattr__(self, "fields", MappingProxyType(dict(self.fields)))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "models": self.models, "source": self.source, **self.fields}


RECIPES: tuple[Recipe, ...] = (
    Recipe(
        "wan2.2-a14b-4step",
        "Wan 2.2 A14B (two experts) with the lightx2v 4-step LoRAs on both experts",
        "ComfyUI's Wan 2.2 A14B template, its default group: euler/simple, 4 steps, cfg 1, "
        "shift 5, high-noise expert for steps 0-2 and low-noise for 2-4",
        {
            "num_inference_steps": 4,
            "guidance_scale": 1.0,
            "guidance_scale_low": 1.0,
            "sampler": "euler",
            "scheduler": "simple",
            "shift": 5.0,
            "switch_step": 2,
        },
    ),
    Recipe(
        "wan2.2-a14b-20step",
        "Wan 2.2 A14B (two experts), no LoRA",
        "ComfyUI's Wan 2.2 A14B template, its other group: euler/simple, 20 steps, cfg 3.5, "
        "shift 8, split 10/10",
        {
            "num_inference_steps": 20,
            "guidance_scale": 3.5,
            "guidance_scale_low": 3.5,
            "sampler": "euler",
            "scheduler": "simple",
            "shift": 8.0,
            "switch_step": 10,
        },
    ),
    Recipe(
        "wan2.1",
        "Wan 2.1 (text- and image-to-video) and Wan 2.2 TI2V-5B",
        "ComfyUI's Wan 2.1 and Wan 2.2 5B templates' sampling: uni_pc/simple, shift 8 (steps "
        "and guidance stay the model's)",
        {"sampler": "uni_pc", "scheduler": "simple", "shift": 8.0},
    ),
    Recipe(
        "qwen-image",
        "Qwen-Image",
        "ComfyUI's Qwen-Image template's sampling: euler/simple at the static shift 3.1 "
        "(ModelSamplingAuraFlow; steps and guidance stay the model's)",
        {"sampler": "euler", "scheduler": "simple", "shift": 3.1},
    ),
    Recipe(
        "z-image-turbo",
        "Z-Image-Turbo",
        "ComfyUI's Z-Image-Turbo template: res_multistep/simple, 8 steps, shift 3, cfg 1",
        {
            "num_inference_steps": 8,
            "guidance_scale": 1.0,
            "sampler": "res_multistep",
            "scheduler": "simple",
            "shift": 3.0,
        },
    ),
)


def recipe_names() -> tuple[str, ...]:
    return tuple(r.name for r in RECIPES)


def find_recipe(name: str) -> Recipe:
    for recipe in RECIPES:
        if recipe.name == name:
            return recipe
    raise ValueError(f"recipe must be one of {', '.join(recipe_names())}, got {name!r}")


def with_recipe(body: Mapping[str, Any]) -> dict[str, Any]:
    """A request body with its recipe's fields filled in where the body leaves them out (or
    gives None); the body unchanged without a recipe."""
    name = body.get("recipe")
    if name in (None, "", NO_RECIPE):
        return dict(body)
    if not isinstance(name, str):
        raise ValueError(f"recipe must be a name, one of {', '.join(recipe_names())}")
    recipe = find_recipe(name)
    filled = dict(body)
    for key, value in recipe.fields.items():
        if filled.get(key) is None:
            filled[key] = value
    return filled


def recipes_table() -> str:
    """`paradit recipes`: each recipe with its settings."""
    lines = []
    for recipe in RECIPES:
        settings = ", ".join(f"{key}={value}" for key, value in recipe.fields.items())
        lines += [recipe.name, f"  for: {recipe.models}", f"  sets: {settings}"]
        lines.append(f"  from: {recipe.source}")
    return "\n".join(lines)
