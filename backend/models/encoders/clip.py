"""CLIP: the text model (Flux.1's CLIP-L) and the vision towers (Wan 2.1 image-to-video's
ViT-H/14), in Hugging Face's key names."""

from __future__ import annotations

import re
from pathlib import Path

from ..image_processors import clip_image_processor
from ..seeded import EOS_ID, PAD_ID, VOCAB_SIZE
from ..single_file.detection import Detection, count_indices
from ..single_file.header import FileHeader
from .kind import EncoderKind


def detect_clip_text(header: FileHeader) -> Detection | None:
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


def detect_clip_vision(header: FileHeader) -> Detection | None:
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


CLIP = EncoderKind(
    "clip",
    recognitions=((30, detect_clip_text), (120, detect_clip_vision)),
    slot="text_encoder",
    image_processor=("image_processor", clip_image_processor),
    tokenizer_class="CLIPTokenizer",
    tokenizer_files=(("vocab.json", "merges.txt"),),
    comfy_tokenizer=Path("comfy/sd1_tokenizer"),
    hub_tokenizers=(
        ("black-forest-labs/FLUX.1-dev", "tokenizer"),
        ("black-forest-labs/FLUX.1-schnell", "tokenizer"),
        ("openai/clip-vit-large-patch14", ""),
    ),
)
