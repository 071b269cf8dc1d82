"""Sampling per job: noise levels as ComfyUI spaces them (`schedules`), the samplers as a
scheduler the pipelines call (`samplers`, torch), named recipes (`recipes`), the request
fields' rules (`rules`) and the per-job hook on a rank (`job`, torch).

Torch-free on import: the frontends read the names, rules and recipes.
"""

from .names import DEFAULT, SAMPLERS, SCHEDULERS
from .recipes import NO_RECIPE, RECIPES, find_recipe, recipe_names, with_recipe

__all__ = [
    "DEFAULT",
    "NO_RECIPE",
    "RECIPES",
    "SAMPLERS",
    "SCHEDULERS",
    "find_recipe",
    "recipe_names",
    "with_recipe",
]
