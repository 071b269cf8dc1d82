"""The tiny CogVideoX presets: text- and image-to-video."""

from __future__ import annotations

from ...seeded import (
    byte_tokenizer,
)
from ...tiny_parts import (
    TEXT_DIM,
    Builders,
    seeded,
    t5_encoder,
)

_COG_HEADS, _COG_HEAD_DIM = 4, 16
_COG_LATENT_CHANNELS = 16
_COG_TEXT_TOKENS = 226  # what every CogVideoX pipeline pads its prompts to


def _cogvideox_vae():
    from diffusers import AutoencoderKLCogVideoX

    # The real tile size (sample 480x720 -> tiles of 240x360 pixels), so 720x480 videos decode
    # in 9 tiles as the real VAE does; 8 channels and one resnet per level keep it cheap.
    return AutoencoderKLCogVideoX(
        block_out_channels=(8, 8, 8, 8),
        layers_per_block=0,
        norm_num_groups=4,
        latent_channels=_COG_LATENT_CHANNELS,
        sample_height=480,
        sample_width=720,
        scaling_factor=0.7,
    )


def _cogvideox_transformer(image_to_video: bool):
    from diffusers import CogVideoXTransformer3DModel

    return CogVideoXTransformer3DModel(
        num_attention_heads=_COG_HEADS,
        attention_head_dim=_COG_HEAD_DIM,
        in_channels=2 * _COG_LATENT_CHANNELS if image_to_video else _COG_LATENT_CHANNELS,
        out_channels=_COG_LATENT_CHANNELS,
        time_embed_dim=32,
        text_embed_dim=TEXT_DIM,
        num_layers=2,
        sample_width=90,
        sample_height=60,
        sample_frames=49,
        max_text_seq_length=_COG_TEXT_TOKENS,
        use_rotary_positional_embeddings=True,
    )


def _cogvideox_scheduler(dpm: bool):
    from diffusers import CogVideoXDDIMScheduler, CogVideoXDPMScheduler

    # CogVideoX-5B's scheduler config; the i2v preset takes the DPM solver diffusers suggests.
    scheduler_class = CogVideoXDPMScheduler if dpm else CogVideoXDDIMScheduler
    return scheduler_class(
        beta_schedule="scaled_linear",
        prediction_type="v_prediction",
        rescale_betas_zero_snr=True,
        set_alpha_to_one=True,
        snr_shift_scale=1.0,
        timestep_spacing="trailing",
        clip_sample=False,
    )


_COGVIDEOX: Builders = {
    "tokenizer": lambda: byte_tokenizer(_COG_TEXT_TOKENS),
    "text_encoder": lambda: seeded(301, t5_encoder),
    "vae": lambda: seeded(302, _cogvideox_vae),
    "scheduler": lambda: _cogvideox_scheduler(dpm=False),
    "transformer": lambda: seeded(303, lambda: _cogvideox_transformer(image_to_video=False)),
}

_COGVIDEOX_I2V: Builders = {
    **_COGVIDEOX,
    "scheduler": lambda: _cogvideox_scheduler(dpm=True),
    "transformer": lambda: seeded(304, lambda: _cogvideox_transformer(image_to_video=True)),
}

PRESETS: dict[str, tuple[str, Builders]] = {
    "tiny-cogvideox": ("CogVideoXPipeline", _COGVIDEOX),
    "tiny-cogvideox-i2v": ("CogVideoXImageToVideoPipeline", _COGVIDEOX_I2V),
}
