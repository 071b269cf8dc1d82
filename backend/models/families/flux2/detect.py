"""Flux.2's single files, recognised from their headers.

- The Flux.2 DiT (FLUX.2-dev, FLUX.2-klein-4B/9B) in Black Forest Labs' names, as ComfyUI's
  `diffusion_models` hold it (`double_blocks.N.img_attn.qkv`, `single_blocks.N.linear1`, and
  the global `single_stream_modulation` Flux.1 lacks), or in diffusers' names. Dev embeds its
  guidance (`guidance_in`); Klein does not, and its text width says which Qwen3 feeds it
  (4B: 3 x 2560, 9B: 3 x 4096). Whether a Klein file is the step-distilled model or the
  undistilled -base one no weight shows: its name says it (`klein_kind`), as Black Forest
  Labs and ComfyUI name them (`flux-2-klein-base-4b`, `flux-2-klein-base-9b-fp8`: a word
  `base`); a name that says neither is taken as the distilled model (its preset's settings),
  and the detection's reasons say so.
- The Flux.2 VAE (`AutoencoderKLFlux2`: 32 latent channels and the batch-norm statistics
  `bn.running_mean`/`running_var` the pipeline normalises with), in diffusers' names or the
  original (ldm) ones Flux's `ae` uses.
- FLUX.2-dev's text encoder: Mistral Small 3.1's language model as ComfyUI holds it
  (`mistral_3_small_flux2_bf16`/`_fp8`: `model.layers.N` in Hugging Face's names, no q/k/v
  biases (Qwen2.5's) and no q/k norms (Qwen3's)); its vision tower is not in the file and
  Flux2Pipeline never runs one for text.

Widths and counts are read off the shapes (head width from the q norm's gain); what no weight
shows (rotary axes and theta, epsilon) comes from the published configs the `random:` presets
ship, the tiny presets' rotary axes for their 16-wide heads.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from ...random_presets import random_dit_config
from ...single_file.detection import Detection, count_indices, stripped
from ...single_file.header import FileHeader

log = logging.getLogger(__name__)

FLUX2 = "flux2"
REAL_HEAD_DIM = 128
KLEIN_TEXT_WIDTHS = {3 * 2560: "flux.2-klein-4b", 3 * 4096: "flux.2-klein-9b"}
KLEIN_BASE = {
    "tiny-flux2-klein": "tiny-flux2-klein-base",
    "flux.2-klein-4b": "flux.2-klein-base-4b",
    "flux.2-klein-9b": "flux.2-klein-base-9b",
}
"""A Klein variant -> its undistilled (-base) model's: the same shapes."""
KLEIN_KV = {"tiny-flux2-klein": "tiny-flux2-klein-kv", "flux.2-klein-9b": "flux.2-klein-9b-kv"}
"""A Klein variant -> its KV model's (FLUX.2-klein-9b-kv: Klein 9B's shapes, its edits'
references cached by `Flux2KleinKVPipeline`); Black Forest Labs released no 4B KV model."""


def klein_kind(name: str) -> str:
    """What a FLUX.2-klein file's name says it is: "base" (a word `base`, as in Black Forest
    Labs' and ComfyUI's `flux-2-klein-base-4b.safetensors`), "distilled" (a word
    `distilled`), "kv" (a word `kv`, as in `flux-2-klein-9b-kv.safetensors`: the
    step-distilled KV model), "both" (base with distilled or kv), or "" (none: the
    step-distilled model, as BFL name it, `flux-2-klein-4b`). Words are the name's runs of
    letters and digits, any case."""
    words = set(re.split(r"[^a-z0-9]+", name.lower()))
    said = [kind for kind in ("base", "distilled") if kind in words]
    if "kv" in words:
        return "both" if "base" in said else "kv"
    return "both" if len(said) == 2 else "".join(said)


def flux2_layout(keys: Any, prefix: str) -> str | None:
    """ "bfl", "diffusers", or None when the keys are no Flux.2 DiT's."""
    if f"{prefix}single_stream_modulation.lin.weight" in keys:
        return "bfl"
    if f"{prefix}single_stream_modulation.linear.weight" in keys:
        return "diffusers"
    return None


def flux2_dit(header: FileHeader, prefix: str, layout: str):
    """The Detection of a Flux.2 DiT (role "unknown" with the reasons when a key is missing)."""
    keys = stripped(header, prefix)
    bfl = layout == "bfl"
    names = {
        "embed": "img_in.weight" if bfl else "x_embedder.weight",
        "text": "txt_in.weight" if bfl else "context_embedder.weight",
        "norm_q": "double_blocks.0.img_attn.norm.query_norm.scale"
        if bfl
        else "transformer_blocks.0.attn.norm_q.weight",
        "mlp": "double_blocks.0.img_mlp.0.weight"
        if bfl
        else "transformer_blocks.0.ff.linear_in.weight",
        "time": "time_in.in_layer.weight"
        if bfl
        else "time_guidance_embed.timestep_embedder.linear_1.weight",
    }
    missing = [n for n in names.values() if n not in keys]
    if missing:
        return Detection(
            "unknown", FLUX2, layout=layout, reasons=(f"Flux.2-like keys but no {missing[0]}",)
        )
    width, in_channels = keys[names["embed"]]
    head_dim = keys[names["norm_q"]][0]
    joint = keys[names["text"]][1]
    guided = (
        "guidance_in.in_layer.weight"
        if bfl
        else "time_guidance_embed.guidance_embedder.linear_1.weight"
    ) in keys
    if bfl:
        layers = count_indices(keys, r"double_blocks\.(\d+)\.img_attn\.qkv\.weight$")
        singles = count_indices(keys, r"single_blocks\.(\d+)\.linear1\.weight$")
    else:
        layers = count_indices(keys, r"transformer_blocks\.(\d+)\.attn\.to_q\.weight$")
        singles = count_indices(
            keys, r"single_transformer_blocks\.(\d+)\.attn\.to_qkv_mlp_proj\.weight$"
        )
    tiny = head_dim != REAL_HEAD_DIM
    klein = ()
    if guided:
        variant = "tiny-flux2" if tiny else "flux.2-dev"
    else:
        variant = "tiny-flux2-klein" if tiny else KLEIN_TEXT_WIDTHS.get(joint, "flux.2-klein")
        kind = klein_kind(header.name)
        if kind == "both":
            return Detection(
                "unknown", FLUX2, layout=layout,
                reasons=(f"a FLUX.2-klein DiT whose name ({header.name}) says both base and "
                         "distilled (or kv): rename it to say one (no weight tells them apart)",),
            )  # fmt: skip
        if kind == "kv" and variant not in KLEIN_KV:
            return Detection(
                "unknown", FLUX2, layout=layout,
                reasons=(f"a FLUX.2-klein DiT whose name ({header.name}) says kv, of text "
                         f"width {joint}: the KV model is FLUX.2-klein-9b-kv (text width "
                         f"{3 * 4096})",),
            )  # fmt: skip
        variant = KLEIN_BASE.get(variant, variant) if kind == "base" else variant
        variant = KLEIN_KV[variant] if kind == "kv" else variant
        klein = (_klein_reason(header.name, kind),)
    published = random_dit_config("random:flux.2-dev", "transformer")
    config = {
        **published,
        "in_channels": in_channels,
        "num_layers": layers,
        "num_single_layers": singles,
        "attention_head_dim": head_dim,
        "num_attention_heads": width // head_dim,
        "joint_attention_dim": joint,
        "mlp_ratio": keys[names["mlp"]][0] / (2 * width),  # SwiGLU: gate and value rows
        "timestep_guidance_channels": keys[names["time"]][1],
        "guidance_embeds": guided,
    }
    if tiny:
        config["axes_dims_rope"] = [4, 4, 4, 4]  # the tiny presets' (16-wide heads)
    reasons = (
        "Flux.2 DiT keys ("
        + ("Black Forest Labs' names, single_stream_modulation.lin" if bfl else "diffusers' names")
        + ")"
        + (f" under {prefix!r}" if prefix else ""),
        f"width {width}, {layers} double + {singles} single blocks, {width // head_dim} heads of "
        f"{head_dim}, text width {joint}, "
        + ("guidance embedding (dev)" if guided else "no guidance embedding (Klein)"),
        *klein,
    )
    return Detection("transformer", FLUX2, variant, layout, prefix, config, reasons)


def _klein_reason(name: str, kind: str) -> str:
    """Which Klein model the file runs as, and why (its name; logged where it is a default)."""
    if kind == "base":
        return "the undistilled -base model (its name says base; no weight shows it): true CFG"
    if kind == "distilled":
        return "the step-distilled model (its name says distilled): no CFG"
    if kind == "kv":
        return (
            "the KV model (its name says kv; no weight shows it): Flux2KleinKVPipeline, the "
            "references' keys and values cached at the first step, no CFG"
        )
    log.info(
        "%s: a FLUX.2-klein DiT whose name says neither base nor distilled runs as the "
        "step-distilled model (no CFG); a -base file's name has the word 'base' "
        "(flux-2-klein-base-4b.safetensors)",
        name,
    )
    return (
        "the step-distilled model, by default: its name does not say base (no weight shows "
        "it; a -base file is named ...-klein-base-...): no CFG"
    )


def flux2_vae(header: FileHeader):
    """The Detection of a Flux.2 VAE (diffusers' or ldm names), or None for other files."""
    keys = {k: v.shape for k, v in header.tensors.items()}
    first = keys.get("encoder.conv_in.weight")
    if "bn.running_mean" not in keys or first is None or len(first) != 4:
        return None
    latent = keys["bn.running_mean"][0] // 4  # statistics per channel of the 2x2 patches
    layout = "ldm" if "encoder.down.0.block.0.conv1.weight" in keys else "diffusers"
    reasons = (
        f"Flux.2 VAE keys ({layout} names; the batch-norm statistics bn.running_mean/var)",
        f"{latent} latent channels, base width {first[0]}",
    )
    config = {"latent_channels": latent, "base_width": first[0]}
    return Detection("vae", FLUX2, "flux.2 vae", layout, "", config, reasons)
