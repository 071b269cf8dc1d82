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
tried in the specs' `detection_order`), "text_encoder" (UMT5, T5/ByT5, CLIP-L in Hugging Face
key names here; Qwen3, Qwen2.5-VL, Mistral 3 and Gemma 3 by the specs of the families that
brought them, `FileSpec.detect_parts`), "vae" (each family's, `detect_parts`), "lora",
"clip_vision" (CLIP towers here; SigLIP by HunyuanVideo 1.5's spec) and "unknown".
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from ..seeded import EOS_ID, PAD_ID, VOCAB_SIZE
from .detection import Detection, count_indices
from .header import FileHeader, read_header
from .spec import FILES
from .vocabulary import Part

T5_ORDER, CLIP_TEXT_ORDER, CLIP_VISION_ORDER = 10, 30, 120
"""Where the generic recognitions stand among the families' (`FileSpec.detect_parts`)."""
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
    """The recognitions of the files that are no DiT, in the order they are tried: the
    encoders every family may take (T5, CLIP) and each family's own (`FileSpec.detect_parts`:
    its VAE, the encoders it brought)."""
    generic = [(T5_ORDER, _t5), (CLIP_TEXT_ORDER, _clip_text), (CLIP_VISION_ORDER, _clip_vision)]
    found = [*generic, *(part for spec in FILES for part in spec.detect_parts)]
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


# -- text encoders ----------------------------------------------------------------------------


def _t5(header: FileHeader) -> Detection | None:
    keys = {k: v.shape for k, v in header.tensors.items()}
    prefix = next(
        (
            p
            for p in ("", "encoder.")
            if f"{p}encoder.block.0.layer.0.SelfAttention.q.weight" in keys
        ),
        None,
    )
    if prefix is None:
        return None
    if prefix:  # some files nest the encoder once more
        keys = {k[len(prefix) :]: v for k, v in keys.items() if k.startswith(prefix)}
    embed = keys.get("shared.weight") or keys.get("encoder.embed_tokens.weight")
    if embed is None:
        return Detection("unknown", "t5", reasons=("T5-like keys but no token embedding",))
    vocab, d_model = embed
    layers = count_indices(keys, r"encoder\.block\.(\d+)\.layer\.0\.SelfAttention\.q\.weight$")
    bias = "encoder.block.{}.layer.0.SelfAttention.relative_attention_bias.weight"
    umt5 = bias.format(1) in keys
    buckets, heads = keys[bias.format(0)]
    inner = keys["encoder.block.0.layer.0.SelfAttention.q.weight"][0]
    gated = "encoder.block.0.layer.1.DenseReluDense.wi_0.weight" in keys
    d_ff = keys[
        "encoder.block.0.layer.1.DenseReluDense." + ("wi_0" if gated else "wi") + ".weight"
    ][0]
    kind = "umt5" if umt5 else "t5"
    config = {
        "_class_name": "UMT5EncoderModel" if umt5 else "T5EncoderModel",
        "vocab_size": vocab,
        "d_model": d_model,
        "d_kv": inner // heads,
        "d_ff": d_ff,
        "num_layers": layers,
        "num_heads": heads,
        "relative_attention_num_buckets": buckets,
        "relative_attention_max_distance": 128,
        "feed_forward_proj": "gated-gelu" if gated else "relu",
        "layer_norm_epsilon": 1e-6,
        "pad_token_id": 0,
        "eos_token_id": 1,
        "decoder_start_token_id": 0,
    }
    reasons = (
        f"{kind.upper()} encoder keys (encoder.block.N"
        + (", relative attention bias in every block" if umt5 else "")
        + ")",
        f"width {d_model}, {layers} blocks, {heads} heads, vocabulary {vocab}",
    )
    return Detection("text_encoder", kind, f"{kind} {d_model}", "hf", prefix, config, reasons)


def _clip_text(header: FileHeader) -> Detection | None:
    keys = {k: v.shape for k, v in header.tensors.items()}
    prefix = next(
        (p for p in ("text_model.", "") if f"{p}embeddings.token_embedding.weight" in keys), None
    )
    if prefix is None:
        return None
    vocab, hidden = keys[f"{prefix}embeddings.token_embedding.weight"]
    positions = keys[f"{prefix}embeddings.position_embedding.weight"][0]
    layers = count_indices(
        keys, rf"{re.escape(prefix)}encoder\.layers\.(\d+)\.self_attn\.q_proj\.weight$"
    )
    intermediate = keys[f"{prefix}encoder.layers.0.mlp.fc1.weight"][0]
    byte_vocab = vocab == VOCAB_SIZE  # the presets' reduced encoders (seeded.byte_tokenizer)
    heads = hidden // (64 if hidden % 64 == 0 else 8)  # CLIP-L: 64-wide heads; tiny: 8
    config = {
        "_class_name": "CLIPTextModel",
        "vocab_size": vocab,
        "hidden_size": hidden,
        "intermediate_size": intermediate,
        "projection_dim": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "max_position_embeddings": positions,
        "hidden_act": "quick_gelu",
        # CLIP's pooled output is taken at the first end-of-text token
        **(
            {"pad_token_id": PAD_ID, "bos_token_id": EOS_ID, "eos_token_id": EOS_ID}
            if byte_vocab
            else {}
        ),
    }
    reasons = (
        "CLIP text model keys (text_model.encoder.layers.N)",
        f"width {hidden}, {layers} layers, vocabulary {vocab}",
    )
    return Detection("text_encoder", "clip", f"clip {hidden}", "hf", "", config, reasons)


# CLIP vision towers: heads per width (ViT-B/16, ViT-L/14, ViT-H/14, ViT-bigG/14); the tiny
# presets' towers have 8-wide heads. laion's ViT-H/14 (Wan 2.1 image-to-video's image encoder,
# ComfyUI's clip_vision_h) uses GELU, OpenAI's towers and the presets' quick GELU.
_CLIP_VISION_HEADS = {768: 12, 1024: 16, 1280: 16, 1664: 16}
_CLIP_VISION_GELU = (1280,)


def _clip_vision(header: FileHeader) -> Detection | None:
    keys = {k: v.shape for k, v in header.tensors.items()}
    # ComfyUI's files keep transformers' former `vision_model.` prefix; transformers 5 drops it
    prefix = next(
        (p for p in ("vision_model.", "") if f"{p}embeddings.class_embedding" in keys), None
    )
    if prefix is None:
        return None
    keys = {k[len(prefix) :]: v for k, v in keys.items() if k.startswith(prefix)} | {
        k: v for k, v in keys.items() if k == "visual_projection.weight"
    }
    patch = keys["embeddings.patch_embedding.weight"]
    hidden, channels, patch_size = patch[0], patch[1], patch[2]
    positions = keys["embeddings.position_embedding.weight"][0]
    side = round((positions - 1) ** 0.5)
    layers = count_indices(keys, r"encoder\.layers\.(\d+)\.self_attn\.q_proj\.weight$")
    intermediate = keys["encoder.layers.0.mlp.fc1.weight"][0]
    heads = _CLIP_VISION_HEADS.get(hidden, hidden // 8)
    config = {
        "_class_name": "CLIPVisionModel",
        "hidden_size": hidden,
        "intermediate_size": intermediate,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_channels": channels,
        "image_size": side * patch_size,
        "patch_size": patch_size,
        "hidden_act": "gelu" if hidden in _CLIP_VISION_GELU else "quick_gelu",
    }
    projection = keys.get("visual_projection.weight")
    if projection is not None:
        config["projection_dim"] = projection[0]
    reasons = (
        f"CLIP vision tower keys ({prefix}encoder.layers.N)",
        f"width {hidden}, {layers} layers, {heads} heads, {side * patch_size} px images in "
        f"{patch_size}-px patches",
    )
    return Detection("clip_vision", "clip", f"clip vision {hidden}", "hf", "", config, reasons)
