"""What a checkpoint file was recognised as (`Detection`), apart from the recognisers
(detect.py and the per-model ones it calls) so that each of them can build one."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

ROLES = ("transformer", "text_encoder", "vae", "lora", "clip_vision", "unknown")


@dataclass(frozen=True)
class Detection:
    """What a file is, and why we think so."""

    role: str
    family: str | None = None
    """"wan" or "flux" for a DiT or VAE; the encoder kind ("umt5", "t5", "clip") otherwise."""
    variant: str = ""
    """e.g. "wan2.1-t2v-14b", "wan2.2-ti2v-5b", "flux.1-dev", "umt5 4096"."""
    layout: str = ""
    """Key names: "wan" (original/ComfyUI), "bfl", "diffusers", "hf", "ldm"."""
    prefix: str = ""
    """Prefix stripped from every key (ComfyUI's `model.diffusion_model.`)."""
    config: dict[str, Any] = field(default_factory=dict)
    """The diffusers/transformers config read off the shapes (DiTs, encoders, VAEs)."""
    reasons: tuple[str, ...] = ()
    bundled: tuple[str, ...] = ()
    """An all-in-one checkpoint's parts besides the DiT: encoder names ("clip_l", "t5xxl") and
    "vae", as the file names them (`bundled_parts` reads them)."""

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {self.role!r}")
        if self.bundled and self.role != "transformer":
            raise ValueError(f"only a DiT checkpoint bundles other parts, not a {self.role}")

    @property
    def label(self) -> str:
        """The variant, e.g. "all-in-one flux.1-dev (DiT, clip_l, t5xxl, vae)" for a bundle."""
        if not self.bundled:
            return self.variant
        return f"all-in-one {self.variant} (DiT, {', '.join(self.bundled)})"

    def describe(self) -> str:
        what = " ".join(x for x in (self.label or self.family or "", self.role) if x)
        return f"{what}: {'; '.join(self.reasons)}"


def count_indices(keys: Any, pattern: str) -> int:
    """How many blocks the keys hold: one more than the largest N of the keys matching
    `pattern` (a regex with one (\\d+) group), 0 when none matches."""
    regex = re.compile(pattern)
    found = {int(m.group(1)) for k in keys if (m := regex.match(k))}
    return max(found) + 1 if found else 0


def language_model_prefix(keys: Any, prefixes: tuple[str, ...], marker: str) -> str | None:
    """The first of `prefixes` under which `keys` hold both `marker` (a layer-0 key that tells
    the language model apart) and `embed_tokens.weight`, or None."""
    return next(
        (p for p in prefixes if f"{p}{marker}" in keys and f"{p}embed_tokens.weight" in keys),
        None,
    )


def stripped(header: Any, prefix: str) -> dict[str, tuple[int, ...]]:
    """The shapes of the header's tensors under `prefix`, by their names without it."""
    return {k[len(prefix) :]: v.shape for k, v in header.tensors.items() if k.startswith(prefix)}


REAL_HEAD_DIM = 128
TINY_WIDTH, TINY_HEAD_DIM = 64, 16  # the tiny presets' DiTs (presets.py)


def dit_head_dim(width: int, models: str) -> int:
    """A DiT's attention head width from its width: 128 for the real models, 16 for the
    tiny presets' 64; ValueError naming `models` for any other width."""
    if width % REAL_HEAD_DIM == 0:
        return REAL_HEAD_DIM
    if width == TINY_WIDTH:
        return TINY_HEAD_DIM
    raise ValueError(
        f"a width of {width} is no known {models} model (real ones are multiples of 128)"
    )
