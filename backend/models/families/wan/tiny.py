"""The tiny Wan presets: Wan 2.1 text- and image-to-video, Wan 2.2 TI2V-5B and I2V-A14B."""

from __future__ import annotations

from typing import Any

from ...image_processors import clip_image_processor
from ...seeded import (
    byte_tokenizer,
)
from ...tiny_parts import (
    CLIP_IMAGE_SIZE,
    CLIP_VISION_DIM,
    TEXT_DIM,
    Builders,
    clip_image_encoder,
    seeded,
    umt5_encoder,
)

_WAN_HEADS, _WAN_HEAD_DIM = 4, 16
_WAN_Z_DIM = 16


def _wan_vae():
    from diffusers import AutoencoderKLWan

    return AutoencoderKLWan(
        base_dim=8,
        z_dim=_WAN_Z_DIM,
        dim_mult=[1, 1, 1, 1],
        num_res_blocks=1,
        temperal_downsample=[False, True, True],
    )


def _wan22_vae():
    from diffusers import AutoencoderKLWan

    from ...random_presets import random_preset_spec

    # Wan 2.2's VAE as TI2V-5B ships it (residual blocks, 2x2 patches, its latent statistics),
    # 8 channels wide with one resnet per level.
    shipped = random_preset_spec("random:wan2.2-ti2v-5b")["components"]["vae"]["config"]
    config = {key: value for key, value in shipped.items() if not key.startswith("_")}
    config.update(base_dim=8, decoder_base_dim=8, dim_mult=[1, 1, 1, 1], num_res_blocks=1)
    return AutoencoderKLWan(**config)


def _wan_transformer(image_to_video: bool, *, z_dim: int = _WAN_Z_DIM, clip: bool = True):
    """`image_to_video`: 2 * z_dim + 4 input channels (Wan 2.1/2.2 I2V) and, with `clip`, the
    CLIP image embedding (Wan 2.1 I2V only)."""
    from diffusers import WanTransformer3DModel

    inner_dim = _WAN_HEADS * _WAN_HEAD_DIM
    image_embedding = image_to_video and clip
    return WanTransformer3DModel(
        patch_size=(1, 2, 2),
        num_attention_heads=_WAN_HEADS,
        attention_head_dim=_WAN_HEAD_DIM,
        in_channels=2 * z_dim + 4 if image_to_video else z_dim,
        out_channels=z_dim,
        text_dim=TEXT_DIM,
        freq_dim=256,
        ffn_dim=2 * inner_dim,
        num_layers=2,
        cross_attn_norm=True,
        qk_norm="rms_norm_across_heads",
        image_dim=CLIP_VISION_DIM if image_embedding else None,
        added_kv_proj_dim=inner_dim if image_embedding else None,
        rope_max_seq_len=1024,
    )


def _wan_scheduler(flow_shift: float = 3.0):
    from diffusers import UniPCMultistepScheduler

    # What the Wan diffusers repos ship: UniPC on flow sigmas with shift 3 (TI2V-5B: 5).
    return UniPCMultistepScheduler(
        prediction_type="flow_prediction", use_flow_sigmas=True, flow_shift=flow_shift
    )


_WAN_T2V: Builders = {
    "tokenizer": lambda: byte_tokenizer(512),
    "text_encoder": lambda: seeded(101, umt5_encoder),
    "vae": lambda: seeded(102, _wan_vae),
    "scheduler": _wan_scheduler,
    "transformer": lambda: seeded(103, lambda: _wan_transformer(image_to_video=False)),
}

_WAN_I2V: Builders = {
    **_WAN_T2V,
    "image_processor": lambda: clip_image_processor(CLIP_IMAGE_SIZE),
    "image_encoder": lambda: seeded(104, clip_image_encoder),
    "transformer": lambda: seeded(105, lambda: _wan_transformer(image_to_video=True)),
}

_WAN22_TI2V: Builders = {
    **_WAN_T2V,
    "vae": lambda: seeded(106, _wan22_vae),
    "scheduler": lambda: _wan_scheduler(flow_shift=5.0),
    "transformer": lambda: seeded(107, lambda: _wan_transformer(False, z_dim=48)),
}

_WAN22_I2V: Builders = {
    **_WAN_T2V,
    "transformer": lambda: seeded(108, lambda: _wan_transformer(True, clip=False)),
    "transformer_2": lambda: seeded(109, lambda: _wan_transformer(True, clip=False)),
}

PRESETS: dict[str, tuple[str, Builders]] = {
    "tiny-wan": ("WanPipeline", _WAN_T2V),
    "tiny-wan-i2v": ("WanImageToVideoPipeline", _WAN_I2V),
    "tiny-wan2.2-ti2v-5b": ("WanPipeline", _WAN22_TI2V),
    "tiny-wan2.2-i2v-a14b": ("WanImageToVideoPipeline", _WAN22_I2V),
}

PIPELINE_CONFIG: dict[str, dict[str, Any]] = {
    "tiny-wan2.2-ti2v-5b": {"expand_timesteps": True},
    "tiny-wan2.2-i2v-a14b": {"boundary_ratio": 0.9},
}
"""The pipeline's own settings, as the real repos' model_index.json has them."""
