"""The tiny Flux.2 preset (FLUX.2-dev-shaped); Klein's takes its DiT and VAE."""

from __future__ import annotations

import torch

from ...random_presets import shipped_scheduler
from ...seeded import MISTRAL_CHAT_VOCAB_SIZE, PAD_ID, mistral_chat_tokenizer
from ...tiny_parts import TEXT_DIM, Builders, seeded

_FLUX_HEADS, _FLUX_HEAD_DIM = 4, 16


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


_FLUX2: Builders = {
    "tokenizer": mistral_chat_tokenizer,
    "text_encoder": lambda: seeded(601, _mistral3_text_encoder),
    "vae": lambda: seeded(602, _flux2_vae),
    "scheduler": lambda: shipped_scheduler("random:flux.2-dev"),
    "transformer": lambda: seeded(603, _flux2_transformer),
}

PRESETS: dict[str, tuple[str, Builders]] = {
    "tiny-flux2": ("Flux2Pipeline", _FLUX2),
}
