"""The image processors of the image encoders (CLIP's, SigLIP's), for the tiny presets and the
single-file pipelines alike."""

from __future__ import annotations

from typing import Any


def _pil_class(name: str) -> Any:
    """transformers' `{name}Pil` where it has one, else `{name}`: the PIL backend where
    transformers has a choice, for torchvision must not change the pixels."""
    import transformers

    return getattr(transformers, f"{name}Pil", None) or getattr(transformers, name)


def clip_image_processor(size: int) -> Any:
    """CLIP's image processor (OpenAI's mean and std, bicubic, center crop) for `size`-px
    images: what the Wan 2.1 image-to-video repos ship for their ViT-H/14 (224), and the tiny
    preset's (32)."""
    processor_class = _pil_class("CLIPImageProcessor")
    return processor_class(size={"shortest_edge": size}, crop_size={"height": size, "width": size})


def siglip_image_processor(size: int) -> Any:
    """SigLIP's image processor for `size`-px images (mean and std 0.5, bicubic, no crop):
    HunyuanVideo 1.5's feature extractor (384), the tiny preset's (32)."""
    return _pil_class("SiglipImageProcessor")(size={"height": size, "width": size})
