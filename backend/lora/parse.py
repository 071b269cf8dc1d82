"""A LoRA file as per-layer weight changes keyed by the DiT's own (diffusers) module names.

The formats users hold are read by diffusers' own loaders: the pipeline class's
`lora_state_dict` recognises ComfyUI/Kohya Wan LoRAs (`diffusion_model.…lora_down/lora_up`,
`alpha`, `diff_b`), musubi-tuner's, Kohya/XLabs/BFL Flux LoRAs, and diffusers/PEFT ones
(`transformer.….lora_A/lora_B`), and hands back PEFT-format keys. Two things diffusers leaves
out are done here: ComfyUI's full-weight `diff` keys (diffusers drops them; here they are renamed
by the same converter, see `_wan_diffs`) and the PEFT scaling (`alpha / rank` from the file's
`alpha` keys or its `lora_adapter_metadata`), which diffusers only turns into a PEFT config.

What comes out, per layer: `LayerDelta` (A, B, scale; and/or a full `diff`; and/or a bias
change) — the weight change at strength s is `(B @ A) * (scale * s)` (+ `diff * s`), as PEFT's
`merge` computes it when diffusers' `fuse_lora(lora_scale=s)` runs.
"""

from __future__ import annotations

import inspect
import json
import logging
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

log = logging.getLogger(__name__)

COMPONENT = "transformer"
"""diffusers names the DiT's keys `transformer.…`; both Wan 2.2 experts take the same keys."""
_SUFFIXES = {
    ".lora_A.weight": "a",
    ".lora_B.weight": "b",
    ".lora_B.bias": "bias",
    ".diff": "diff",
    ".alpha": "alpha",
}


class LoraError(ValueError):
    """A LoRA that cannot be used; the message names the LoRA and the reason."""


@dataclass(frozen=True)
class LayerDelta:
    """One layer's change: `(b @ a) * scale` and/or `diff` on its weight, `bias` on its bias
    (scaled like the low-rank part, as PEFT's `lora_bias`)."""

    a: torch.Tensor | None = None
    """(rank, in_features)"""
    b: torch.Tensor | None = None
    """(out_features, rank)"""
    scale: float = 1.0
    diff: torch.Tensor | None = None
    """A full change of the weight (ComfyUI's `.diff`), applied times the strength."""
    bias: torch.Tensor | None = None

    def __post_init__(self) -> None:
        if (self.a is None) != (self.b is None):
            raise ValueError("a LoRA layer needs both lora_A (down) and lora_B (up)")
        if self.a is not None and (self.a.dim() != 2 or self.b.dim() != 2):
            raise ValueError("lora_A and lora_B must be 2-D (linear layers)")
        if self.a is not None and self.a.shape[0] != self.b.shape[1]:
            raise ValueError(
                f"lora_A has rank {self.a.shape[0]} but lora_B has rank {self.b.shape[1]}"
            )

    @property
    def weight_shape(self) -> tuple[int, ...] | None:
        """The shape of the weight this change fits (None: it changes the bias only)."""
        if self.diff is not None:
            return tuple(self.diff.shape)
        if self.a is not None:
            return (self.b.shape[0], self.a.shape[1])
        return None

    @property
    def nbytes(self) -> int:
        tensors = (self.a, self.b, self.diff, self.bias)
        return sum(t.numel() * t.element_size() for t in tensors if t is not None)

    def weight_rows(self, start: int, rows: int, strength: float, out: torch.Tensor) -> bool:
        """Write the change of weight rows start..start+rows at `strength` into `out` (float32,
        their shape, on their device); False when the layer changes no weight.

        `out` is a scratch buffer the caller reuses: a fresh tensor per layer would cost more
        than the product itself (the allocator maps fresh pages for each large one)."""
        if self.a is not None:
            b_rows = self.b[start : start + rows].to(out.device, torch.float32)
            torch.mm(b_rows, self.a.to(out.device, torch.float32), out=out)
            out.mul_(self.scale * strength)  # as PEFT: (B @ A) * scaling
        if self.diff is not None:
            diff = self.diff[start : start + rows].to(out.device, torch.float32)
            if self.a is None:
                torch.mul(diff, strength, out=out)
            else:
                out.add_(diff, alpha=strength)
        return self.a is not None or self.diff is not None

    def bias_rows(
        self, start: int, rows: int, strength: float, device: torch.device
    ) -> torch.Tensor | None:
        if self.bias is None:
            return None
        bias = self.bias[start : start + rows].to(device, torch.float32)
        return bias * (self.scale * strength)


def parse_lora(
    name: str, state_dict: dict[str, torch.Tensor], metadata: Mapping[str, str], pipeline: type
) -> dict[str, LayerDelta]:
    """The layers of the LoRA file `name` (its tensors and safetensors metadata) for the DiT of
    diffusers pipeline class `pipeline`, keyed by module name (e.g. `blocks.0.attn1.to_q`)."""
    diffs, state_dict = _wan_diffs(name, state_dict, pipeline)
    try:
        converted, alphas = _diffusers_keys(state_dict, pipeline)
    except Exception as exc:  # the converters raise what they raise (KeyError, ValueError...)
        raise LoraError(
            f"LoRA {name!r}: its keys are in no LoRA format {pipeline.__name__} knows "
            f"({type(exc).__name__}: {exc})"
        ) from None
    parts: dict[str, dict[str, torch.Tensor]] = {}
    ignored: set[str] = set()
    for key, tensor in [*converted.items(), *alphas.items(), *diffs.items()]:
        component, _, rest = key.partition(".")
        if component != COMPONENT:
            ignored.add(component)
            continue
        for suffix, part in _SUFFIXES.items():
            if rest.endswith(suffix):
                parts.setdefault(rest[: -len(suffix)], {})[part] = tensor
                break
        else:
            raise LoraError(f"LoRA {name!r}: key {key!r} is not a LoRA weight this backend knows")
    if ignored:
        log.warning("LoRA %r: its %s layers are not applied (DiT only)", name, sorted(ignored))
    if not parts:
        raise LoraError(f"LoRA {name!r}: it has no layers for the diffusion transformer")
    config = _adapter_config(metadata)
    return {module: _layer(name, module, found, config) for module, found in parts.items()}


def _layer(
    name: str, module: str, found: dict[str, torch.Tensor], config: dict[str, Any]
) -> LayerDelta:
    a, b = found.get("a"), found.get("b")
    scale = 1.0
    if a is not None:
        alpha = found.get("alpha")
        alpha = float(alpha) if alpha is not None else _pattern(config, "alpha", module)
        if alpha is not None:
            rank = a.shape[0]
            scale = alpha / (math.sqrt(rank) if config.get("use_rslora") else rank)
    try:
        return LayerDelta(a, b, scale, found.get("diff"), found.get("bias"))
    except ValueError as exc:
        raise LoraError(f"LoRA {name!r}: layer {module}: {exc}") from None


def _pattern(config: dict[str, Any], kind: str, module: str) -> float | None:
    """PEFT's per-module value (`alpha_pattern`, matched as PEFT matches it) or its global
    `lora_alpha`; None when the file has no adapter config."""
    for key, value in (config.get(f"{kind}_pattern") or {}).items():
        if re.match(rf"(.*\.)?({key})$", module):
            return float(value)
    value = config.get("lora_alpha")
    return None if value is None else float(value)


def _adapter_config(metadata: Mapping[str, str]) -> dict[str, Any]:
    """The DiT's PEFT config diffusers writes as `lora_adapter_metadata` (keys
    `transformer.lora_alpha`, ...), or {}."""
    raw = metadata.get("lora_adapter_metadata")
    if not raw:
        return {}
    try:
        flat = json.loads(raw)
    except ValueError:
        return {}
    prefix = f"{COMPONENT}."
    config = {k[len(prefix) :]: v for k, v in flat.items() if k.startswith(prefix)}
    if config.get("use_dora"):
        raise LoraError("DoRA adapters are not supported (use_dora in the file's metadata)")
    return config


def _diffusers_keys(
    state_dict: dict[str, torch.Tensor], pipeline: type
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """diffusers' own conversion to PEFT-format keys, and the `alpha` values it hands back
    apart (Flux; keyed `<module>.alpha`)."""
    loader = getattr(pipeline, "lora_state_dict", None)
    if loader is None:
        return _prefixed(state_dict), {}
    if "return_alphas" in inspect.signature(loader).parameters:
        converted, alphas = loader(dict(state_dict), return_alphas=True)
    else:
        converted, alphas = loader(dict(state_dict)), None
    alphas = {k: torch.as_tensor(v) for k, v in (alphas or {}).items()}
    converted = _prefixed(converted)
    alpha_keys = {k: converted.pop(k) for k in list(converted) if k.endswith(".alpha")}
    return converted, {**_prefixed(alphas), **alpha_keys}


def _prefixed(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Keys under `transformer.` (PEFT's own `base_model.model.` prefix, or none, becomes it)."""
    out = {}
    for key, tensor in state_dict.items():
        key = key.removeprefix("base_model.model.")
        if not key.startswith((f"{COMPONENT}.", "text_encoder")):
            key = f"{COMPONENT}.{key}"
        out[key] = tensor
    return out


def _takes_full_diffs(pipeline: type) -> bool:
    """Whether LoRAs of the pipeline's family may carry full-weight diffs its diffusers
    converter names (`FamilySpec.lora_full_diffs`: Wan's)."""
    from ..models.families import family_for, spec_of

    try:
        return spec_of(family_for(pipeline.__name__)).lora_full_diffs
    except ValueError:  # a pipeline no family serves
        return False


def _wan_diffs(
    name: str, state_dict: dict[str, torch.Tensor], pipeline: type
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """ComfyUI Wan LoRAs' full-weight `<layer>.diff` keys as `transformer.<module>.diff`.

    diffusers' Wan converter drops them. Here each is renamed by that converter itself: it is
    given a stand-in down/up pair under the layer's name, and the converted key that holds the
    stand-in names the module. A norm layer's diffs are left out when they are all zeros
    (diffusers' note: they are), refused otherwise.
    """
    prefix = "diffusion_model."
    diff_keys = [
        k for k in state_dict if k.startswith(prefix) and k.endswith(".diff") and "lora" not in k
    ]
    if not diff_keys or not _takes_full_diffs(pipeline):
        return {}, state_dict
    rest = {k: v for k, v in state_dict.items() if k not in diff_keys}
    down, up = (
        ("lora_A", "lora_B") if any("lora_A" in k for k in rest) else ("lora_down", "lora_up")
    )
    stand_ins: dict[int, str] = {}
    diffs: dict[str, torch.Tensor] = {}
    for key in diff_keys:
        layer = key.removesuffix(".diff")
        if "norm" in layer:
            if torch.count_nonzero(state_dict[key]):
                raise LoraError(f"LoRA {name!r}: non-zero norm diffs ({key}) are not supported")
            continue
        if f"{layer}.{down}.weight" in rest:
            raise LoraError(f"LoRA {name!r}: {layer} has both a diff and a LoRA pair")
        tag = torch.zeros(1)
        stand_ins[id(tag)] = key
        rest[f"{layer}.{down}.weight"] = tag
        rest[f"{layer}.{up}.weight"] = torch.zeros(1)
    if not stand_ins:
        return {}, rest
    try:
        converted = pipeline.lora_state_dict(dict(rest))
    except Exception as exc:
        raise LoraError(
            f"LoRA {name!r}: its keys are in no LoRA format {pipeline.__name__} knows "
            f"({type(exc).__name__}: {exc})"
        ) from None
    for new_key, tensor in converted.items():
        if id(tensor) in stand_ins:
            module = new_key.removesuffix(".lora_A.weight")
            diffs[f"{module}.diff"] = state_dict[stand_ins.pop(id(tensor))]
    if stand_ins:
        raise LoraError(f"LoRA {name!r}: no layer of the model for {sorted(stand_ins.values())}")
    return diffs, {k: v for k, v in state_dict.items() if k not in diff_keys}
