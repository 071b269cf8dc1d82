"""The tiny Flux.1 preset (dev-shaped)."""

from __future__ import annotations

from ...seeded import byte_tokenizer
from ...tiny_parts import (
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


_FLUX: Builders = {
    "tokenizer": lambda: byte_tokenizer(77),
    "text_encoder": lambda: seeded(201, clip_text_encoder),
    "tokenizer_2": lambda: byte_tokenizer(512),
    "text_encoder_2": lambda: seeded(202, t5_encoder),
    "vae": lambda: seeded(203, flux_vae),
    "scheduler": _flux_scheduler,
    "transformer": lambda: seeded(204, _flux_transformer),
}

PRESETS: dict[str, tuple[str, Builders]] = {
    "tiny-flux": ("FluxPipeline", _FLUX),
}
