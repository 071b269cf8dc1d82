"""Named recipes: the sampling settings of a known workflow, chosen by one name.

A recipe sets request fields (steps, guidance, sampler, scheduler, shift and its table,
switch step, or fixed noise levels: a distilled model's ManualSigmas); a
field the request gives itself wins over the recipe's. A recipe sets no LoRAs and no size:
the 4-step recipes assume the distillation LoRAs they were made for (give them in `loras`).
Torch-free: the CLI lists them (`paradit recipes`), the frontends offer them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
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
    "flow_levels",
    "switch_step",
    "sigmas",
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


FAMILIES = Path(__file__).resolve().parents[1] / "models" / "families"
"""Each family's recipes are data in its folder (`<family>/recipes.json`: a list of
{name, models, source, fields}), read here without importing the family's code (torch)."""


def load_recipes(folder: Path = FAMILIES) -> tuple[Recipe, ...]:
    """Every family's recipes, families in folder order, each file's in its own order."""
    recipes = [
        Recipe(**entry)
        for path in sorted(folder.glob("*/recipes.json"))
        for entry in json.loads(path.read_text())
    ]
    names = [recipe.name for recipe in recipes]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(f"a recipe name must be unique across the families, got {twice} twice")
    return tuple(recipes)


RECIPES: tuple[Recipe, ...] = load_recipes()


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
