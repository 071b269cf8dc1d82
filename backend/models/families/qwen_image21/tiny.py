"""The tiny Qwen-Image 2.1 preset: Qwen-Image 2.1's structure (a single-stream DiT with one
shared modulation and block-causal attention over the text followed by the image; the 16x
64-channel-style VAE with RGBA in and out; a Qwen3-VL text encoder read through its processor)
at tiny widths."""

from __future__ import annotations

from ...encoders.qwen3_vl import qwen3_vl_processor, tiny_qwen3_vl
from ...random_presets import shipped_scheduler
from ...tiny_parts import TEXT_DIM, Builders, seeded

HEADS, HEAD_DIM = 4, 16
"""4 heads of 16 (the real model: 32 of 128): 2 and 4 ranks divide them, 3 pads them."""


def qwen3_vl_text_encoder():
    """Qwen3-VL at tiny widths (interleaved multimodal rotary sections for 8-wide heads), its
    vision tower one block deep; the vision markers' ids are the tiny tokenizer's."""
    return tiny_qwen3_vl(
        2,
        {
            "depth": 1,
            "hidden_size": 16,
            "intermediate_size": 32,
            "num_heads": 2,
            "out_hidden_size": TEXT_DIM,
            "deepstack_visual_indexes": [],
            "num_position_embeddings": 64,
        },
        tie_word_embeddings=True,
    )


def qwen_image21_vae():
    """The 2.1 VAE at tiny widths: 16x spatially (five levels), 16 latent channels of the
    real 64 (the real statistics' first 16), RGBA in and out, as the real one."""
    import inspect

    from diffusers import AutoencoderKLQwenImage21

    defaults = inspect.signature(AutoencoderKLQwenImage21.__init__).parameters
    z_dim = 16
    return AutoencoderKLQwenImage21(
        base_dim=8,
        decoder_base_dim=8,
        z_dim=z_dim,
        dim_mult=[1, 1, 1, 1, 1],
        num_res_blocks=1,
        latents_mean=list(defaults["latents_mean"].default)[:z_dim],
        latents_std=list(defaults["latents_std"].default)[:z_dim],
    )


def qwen_image21_transformer():
    from diffusers import QwenImage21Transformer2DModel

    return QwenImage21Transformer2DModel(
        in_channels=16,
        out_channels=16,
        num_layers=2,
        attention_head_dim=HEAD_DIM,
        num_attention_heads=HEADS,
        context_in_dim=TEXT_DIM,
        mlp_ratio=3,
        axes_dims_rope=(4, 6, 6),  # sums to the head width, as the real (16, 56, 56) to 128
    )


_QWEN_IMAGE21: Builders = {
    "processor": qwen3_vl_processor,
    "text_encoder": lambda: seeded(701, qwen3_vl_text_encoder),
    "vae": lambda: seeded(702, qwen_image21_vae),
    "scheduler": lambda: shipped_scheduler("random:qwen-image2.1"),
    "transformer": lambda: seeded(703, qwen_image21_transformer),
}

PRESETS: dict[str, tuple[str, Builders]] = {
    "tiny-qwen-image2.1": ("QwenImage21Pipeline", _QWEN_IMAGE21),
}
