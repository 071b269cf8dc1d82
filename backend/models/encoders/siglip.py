"""SigLIP vision towers (HunyuanVideo 1.5 image-to-video's `sigclip_vision_patch14_384`)."""

from __future__ import annotations

from ..image_processors import siglip_image_processor
from ..single_file.detection import Detection, count_indices
from ..single_file.header import FileHeader
from .kind import EncoderKind

_SIGLIP_HEADS = {1152: 16, 768: 12}
_SIGLIP_IMAGE_SIZES = {(27, 14): 384}
"""Patches per side and patch size -> the image size SigLIP's config names, where the patches do
not tile it (so400m-patch14-384: 27 patches of 14 px, the last 6 pixels never seen)."""


def siglip_vision(header: FileHeader) -> Detection | None:
    """A SigLIP vision tower (no class embedding, unlike CLIP), with or without `vision_model.`."""
    keys = {k: v.shape for k, v in header.tensors.items()}
    prefix = next(
        (
            p
            for p in ("vision_model.", "")
            if f"{p}embeddings.patch_embedding.weight" in keys
            and f"{p}encoder.layers.0.layer_norm1.weight" in keys
        ),
        None,
    )
    if prefix is None or f"{prefix}embeddings.class_embedding" in keys:
        return None
    keys = {k[len(prefix) :]: v for k, v in keys.items() if k.startswith(prefix)}
    hidden, channels, patch_size = keys["embeddings.patch_embedding.weight"][:3]
    side = round(keys["embeddings.position_embedding.weight"][0] ** 0.5)
    layers = count_indices(keys, r"encoder\.layers\.(\d+)\.self_attn\.q_proj\.weight$")
    heads = _SIGLIP_HEADS.get(hidden, hidden // 8)
    image_size = _SIGLIP_IMAGE_SIZES.get((side, patch_size), side * patch_size)
    config = {
        "_class_name": "SiglipVisionModel",
        "hidden_size": hidden,
        "intermediate_size": keys["encoder.layers.0.mlp.fc1.weight"][0],
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_channels": channels,
        "image_size": image_size,
        "patch_size": patch_size,
        "vision_use_head": "head.probe" in keys,
    }
    reasons = (
        "SigLIP vision tower keys (encoder.layers.N, no class embedding)"
        + (f" under {prefix!r}" if prefix else ""),
        f"width {hidden}, {layers} layers, {heads} heads, {image_size} px images in "
        f"{patch_size}-px patches",
    )
    return Detection(
        "clip_vision", "siglip", f"siglip vision {hidden}", "hf", prefix, config, reasons
    )


SIGLIP = EncoderKind(
    "siglip",
    title="SigLIP",
    recognitions=((130, siglip_vision),),
    image_processor=("feature_extractor", siglip_image_processor),
)
