"""Casting a model to the run's dtype as `from_pretrained(torch_dtype=...)` does.

diffusers and transformers keep some modules in float32 whatever the dtype asked for (a
model's `_keep_in_fp32_modules`: Wan's norms, time embedder and modulation table, T5's
feed-forward output). A plain `.to(torch.bfloat16)` casts those too, so a model built here
would compute differently from the same weights loaded with `from_pretrained` on a GPU. Every
loading path casts through `cast_model`, so presets, folders, single files and sharded loads
hold the same dtypes.

An entry of `_keep_in_fp32_modules` names a module by one part of a parameter's dotted name
(`time_embedder`), as diffusers matches it, or by several consecutive parts (`norm_out.linear`:
that projection, not its sibling norm).
"""

from __future__ import annotations

from typing import Any

import torch


def float32_names(model: torch.nn.Module) -> list[str]:
    """The module names `model` keeps in float32 when loaded in a lower precision."""
    return list(getattr(model, "_keep_in_fp32_modules", None) or [])


def keeps_float32(name: str, keep: list[str] | set[str] | tuple[str, ...]) -> bool:
    """Whether the parameter or module `name` lies under one of the module names `keep`
    (each one or more consecutive parts of `name`)."""
    dotted = f".{name}."
    return any(f".{entry}." in dotted for entry in keep)


def cast_model(model: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """`model` in `dtype`, but the parameters under its float32 modules stay float32 (matched by
    name parts, `keeps_float32`); returns the model."""
    if dtype == torch.float32:
        return model
    model.to(dtype=dtype)
    keep = float32_names(model)
    if keep and dtype in (torch.float16, torch.bfloat16):
        for name, param in model.named_parameters():
            if keeps_float32(name, keep):
                param.data = param.data.to(torch.float32)
    return model


def cast_pipeline(pipe: Any, dtype: torch.dtype) -> Any:
    """Every module of a pipeline through `cast_model`; returns the pipeline."""
    for component in pipe.components.values():
        if isinstance(component, torch.nn.Module):
            cast_model(component, dtype)
    return pipe
