"""Which model a checkpoint holds, from its header alone (key names and shapes), with reasons.

Nothing is downloaded and no config is guessed from a hub repo: the architecture is read off
the shapes (layer counts from the block indices, widths from the weight shapes) and the only
number a header cannot show, the attention head width, is 128 for every real Wan and Flux
(the tiny test architectures of the built-in presets use 16). Every decision carries the
reasons it was taken on, so `paradit models DIR` and the refusals can say why.

An all-in-one checkpoint (ComfyUI's `models/checkpoints`, e.g. `flux1-dev-fp8`) holds its DiT
under `model.diffusion_model.`, its text encoders under `text_encoders.NAME.transformer.` and
its VAE under `vae.` (the prefixes of ComfyUI's `supported_models` for Flux and Wan): it is
recognised as its DiT with `bundled` naming the other parts, which `bundled_parts` recognises
each as a file of its own (`FileHeader.view`).

Roles: "transformer" (a DiT: each family's recognition is its spec's, `FileSpec.detect_dit`,
tried in the specs' `detection_order`), "text_encoder" (UMT5, T5, CLIP-L, Qwen3, Qwen2.5-VL,
Mistral 3, Gemma 3: each encoder kind's recognition, `encoders/`), "vae" (each family's,
`FileSpec.detect_parts`), "lora", "clip_vision" (CLIP and SigLIP towers, `encoders/`) and
"unknown".
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from ..encoders import recognitions
from .detection import Detection
from .header import FileHeader, read_header
from .spec import FILES
from .vocabulary import Part

DIT_PREFIXES = ("model.diffusion_model.", "diffusion_model.")
BUNDLED_ENCODERS = re.compile(r"^text_encoders\.([^.]+)\.transformer\.")
"""An all-in-one checkpoint's text encoders: `text_encoders.clip_l.transformer.text_model...`."""
BUNDLED_VAE = "vae."

__all__ = ["Part", "bundled_parts", "detect", "recognise"]


def recognise(path: str) -> Part:
    """Read a file's header and recognise it."""
    header = read_header(path)
    return Part(header, detect(header))


def detect(header: FileHeader) -> Detection:
    """Recognise a checkpoint from its header; role "unknown" with the reasons if nothing fits."""
    keys = header.tensors
    if any(_is_lora_key(k) for k in keys):
        return Detection("lora", reasons=("has LoRA keys (lora_up/lora_down/lora_A/lora_B)",))
    if (found := _dit(header)) is not None:
        return found
    for _, detector in _part_detectors():
        found = detector(header)
        if found is not None:
            return found
    if any(k.startswith(("visual.", "vision_model.")) for k in keys):
        return Detection(
            "clip_vision",
            reasons=("has CLIP vision tower keys, not in Hugging Face's layout (vision_model.)",),
        )
    sample = ", ".join(sorted(keys)[:3])
    return Detection(
        "unknown",
        reasons=(
            f"no known key layout (Wan blocks.N.self_attn.q, Flux double_blocks.N.img_attn.qkv, "
            f"Flux.2 single_stream_modulation, Qwen-Image transformer_blocks.N.img_mod, Z-Image "
            f"layers.N.attention, HunyuanVideo 1.5 double_blocks.N.img_attn_q, LTX-2 "
            f"av_ca_a2v_gate_adaln_single, T5/UMT5 encoder.block.N, CLIP text_model, Qwen3, "
            f"Qwen2.5-VL, Mistral 3, Gemma 3, Wan/Flux/Flux.2/HunyuanVideo 1.5/LTX-2 VAE, "
            f"CLIP/SigLIP vision); first keys: {sample}",
        ),
    )


def _dit(header: FileHeader) -> Detection | None:
    """The DiT a file holds, by the family specs' recognitions in their `detection_order`:
    each family's own key names under every key prefix in turn, then diffusers' layouts."""
    specs = sorted(FILES, key=lambda spec: spec.detection_order)
    for prefix in ("", *DIT_PREFIXES):
        for spec in specs:
            found = None if spec.detect_dit is None else spec.detect_dit(header, prefix)
            if found is not None:
                return _with_bundle(header, found) if spec.all_in_one else found
    for spec in specs:
        found = None if spec.detect_diffusers_dit is None else spec.detect_diffusers_dit(header)
        if found is not None:
            return found
    return None


def _part_detectors() -> list[tuple[int, Any]]:
    """The recognitions of the files that are no DiT, in the order they are tried: every
    encoder kind's (`encoders.KINDS`) and each family's own (`FileSpec.detect_parts`: its
    VAE)."""
    found = [*recognitions(), *(part for spec in FILES for part in spec.detect_parts)]
    return sorted(found, key=lambda part: part[0])


def bundled_prefixes(header: FileHeader) -> dict[str, str]:
    """An all-in-one checkpoint's parts besides its DiT: name -> key prefix (encoders by name,
    then "vae"); empty for a file of one part."""
    found: dict[str, str] = {}
    for key in header.tensors:
        if m := BUNDLED_ENCODERS.match(key):
            found.setdefault(m.group(1), m.group(0))
    found = dict(sorted(found.items()))
    if any(k.startswith(BUNDLED_VAE) for k in header.tensors):
        found["vae"] = BUNDLED_VAE
    return found


def bundled_parts(part: Part) -> dict[str, Part]:
    """The parts an all-in-one checkpoint holds besides its DiT, each recognised as a file of
    its own (a view of the file's header: the same bytes are read)."""
    out = {}
    for name, prefix in bundled_prefixes(part.header).items():
        view = part.header.view(prefix)
        out[name] = Part(view, detect(view))
    return out


def _with_bundle(header: FileHeader, found: Detection) -> Detection:
    """A DiT under ComfyUI's checkpoint prefix, with what else the file bundles."""
    if found.role != "transformer" or found.prefix != DIT_PREFIXES[0]:
        return found
    bundled = bundled_prefixes(header)
    if not bundled:
        return found
    reason = "all-in-one checkpoint: also holds " + ", ".join(
        f"{name} ({prefix})" for name, prefix in bundled.items()
    )
    return dataclasses.replace(found, bundled=tuple(bundled), reasons=(*found.reasons, reason))


def _is_lora_key(key: str) -> bool:
    return any(
        part in key for part in (".lora_down.", ".lora_up.", ".lora_A.", ".lora_B.", "lora_unet_")
    )
