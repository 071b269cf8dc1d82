"""The tiny Flux presets: Flux.1 (dev-shaped) and Flux.2."""

from __future__ import annotations

import torch

from ..seeded import (
    MISTRAL_CHAT_VOCAB_SIZE,
    PAD_ID,
    byte_tokenizer,
    mistral_chat_tokenizer,
)
from .common import (
    TEXT_DIM,
    Builders,
    clip_text_encoder,
    seeded,
    t5_encoder,
)

_FLUX_HEADS, _FLUX_HEAD_DIM = 4, 16
FLUX_LATENT_CHANNELS = 16


def flux_vae():
    from diffusers import AutoencoderKL

    return AutoencoderKL(
        in_channels=3,
        out_channels=3,
        down_block_types=("DownEncoderBlock2D",) * 4,
        up_block_types=("UpDecoderBlock2D",) * 4,
        block_out_channels=(8, 8, 8, 8),
        layers_per_block=1,
        norm_num_groups=4,
        latent_channels=FLUX_LATENT_CHANNELS,
        sample_size=64,
        scaling_factor=0.3611,
        shift_factor=0.1159,
        use_quant_conv=False,
        use_post_quant_conv=False,
    )


def _flux_transformer():
    from diffusers import FluxTransformer2DModel

    return FluxTransformer2DModel(
        patch_size=1,
        in_channels=4 * FLUX_LATENT_CHANNELS,
        num_layers=2,
        num_single_layers=2,
        attention_head_dim=_FLUX_HEAD_DIM,
        num_attention_heads=_FLUX_HEADS,
        joint_attention_dim=TEXT_DIM,
        pooled_projection_dim=TEXT_DIM,
        guidance_embeds=False,
        axes_dims_rope=(4, 6, 6),
    )


def _flux_scheduler():
    from diffusers import FlowMatchEulerDiscreteScheduler

    return FlowMatchEulerDiscreteScheduler(
        shift=3.0,
        use_dynamic_shifting=True,
        base_shift=0.5,
        max_shift=1.15,
        base_image_seq_len=256,
        max_image_seq_len=4096,
    )


FLUX2_TEXT_LAYERS = 31  # the pipeline stacks hidden states 10, 20 and 30


def _mistral3_text_encoder():
    from transformers import Mistral3Config, Mistral3ForConditionalGeneration

    config = Mistral3Config(
        text_config={
            "model_type": "mistral",
            "vocab_size": MISTRAL_CHAT_VOCAB_SIZE,
            "hidden_size": TEXT_DIM,
            "intermediate_size": 64,
            "num_hidden_layers": FLUX2_TEXT_LAYERS,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 8,
            "bos_token_id": None,
            "eos_token_id": None,
            "pad_token_id": PAD_ID,
        },
        vision_config={
            "model_type": "pixtral",
            "hidden_size": 16,
            "intermediate_size": 32,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "head_dim": 8,
            "image_size": 32,
            "patch_size": 8,
        },
    )
    return Mistral3ForConditionalGeneration(config)


def _flux2_vae():
    from diffusers import AutoencoderKLFlux2

    vae = AutoencoderKLFlux2(
        block_out_channels=(8, 8, 8, 8),
        layers_per_block=1,
        norm_num_groups=4,
        latent_channels=32,
        sample_size=64,
    )
    # The latent statistics are buffers, not weights: seeded here, so that the pipeline's
    # normalisation of the latents does something.
    generator = torch.Generator().manual_seed(604)
    with torch.no_grad():
        size = vae.bn.running_mean.shape
        vae.bn.running_mean.copy_(torch.randn(size, generator=generator) * 0.5)
        vae.bn.running_var.copy_(torch.rand(size, generator=generator) + 0.5)
    return vae


def _flux2_transformer(guidance_embeds: bool = True):
    """The tiny Flux.2 DiT; Klein's (step-distilled, or true CFG) has no guidance embedding."""
    from diffusers import Flux2Transformer2DModel

    return Flux2Transformer2DModel(
        patch_size=1,
        in_channels=4 * 32,  # the VAE's 32 channels in 2x2 patches
        num_layers=2,
        num_single_layers=2,
        attention_head_dim=_FLUX_HEAD_DIM,
        num_attention_heads=_FLUX_HEADS,
        joint_attention_dim=3 * TEXT_DIM,  # three of the text encoder's hidden states
        axes_dims_rope=(4, 4, 4, 4),
        guidance_embeds=guidance_embeds,
    )


def _flux2_scheduler():
    import diffusers

    from ..random_presets import random_preset_spec

    shipped = dict(random_preset_spec("random:flux.2-dev")["components"]["scheduler"]["config"])
    return getattr(diffusers, shipped.pop("_class_name")).from_config(shipped)


_FLUX: Builders = {
    "tokenizer": lambda: byte_tokenizer(77),
    "text_encoder": lambda: seeded(201, clip_text_encoder),
    "tokenizer_2": lambda: byte_tokenizer(512),
    "text_encoder_2": lambda: seeded(202, t5_encoder),
    "vae": lambda: seeded(203, flux_vae),
    "scheduler": _flux_scheduler,
    "transformer": lambda: seeded(204, _flux_transformer),
}

_FLUX2: Builders = {
    "tokenizer": mistral_chat_tokenizer,
    "text_encoder": lambda: seeded(601, _mistral3_text_encoder),
    "vae": lambda: seeded(602, _flux2_vae),
    "scheduler": _flux2_scheduler,
    "transformer": lambda: seeded(603, _flux2_transformer),
}

PRESETS: dict[str, tuple[str, Builders]] = {
    "tiny-flux": ("FluxPipeline", _FLUX),
    "tiny-flux2": ("Flux2Pipeline", _FLUX2),
}
