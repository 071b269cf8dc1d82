"""The tiny MiniMax H3 preset: H3's structure (one packed sequence of text, audio and video
rows through one block stack; a Qwen3-VL conditioner read at hidden state 50; the causal 3D
video VAE with its ViT decoder; the mono audio VAE taking stereo as two items; two
schedulers) at tiny widths. 28 heads of 8 channels: Ulysses over 2, 4 and 7 ranks divides
them, as the real 56 heads divide over 2, 4, 7 and 8."""

from __future__ import annotations

from typing import Any

from ...encoders.qwen3_vl import tiny_qwen3_vl
from ...qwen_vl import ImageQwen3VLProcessor, qwen_vl_tokenizer
from ...tiny_parts import TEXT_DIM, Builders, seeded

HEADS, HEAD_DIM = 28, 8
ENCODER_LAYERS = 51
"""H3 reads the conditioner's `hidden_states[50]`: the stack needs more than 50 layers."""
VIDEO_LATENT_CHANNELS, AUDIO_LATENT_CHANNELS = 4, 8
AUDIO_SAMPLE_RATE = 160
"""The tiny audio VAE's rate: 4 samples per latent (its hop), 40 latents a second as H3's."""


def qwen3_vl_conditioner():
    """Qwen3-VL (language model and a two-layer vision tower) at tiny widths."""
    vision = {
        "depth": 2,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_heads": 4,
        "out_hidden_size": TEXT_DIM,
        "patch_size": 16,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "deepstack_visual_indexes": [1],
        "num_position_embeddings": 64,
    }
    return tiny_qwen3_vl(ENCODER_LAYERS, vision)


def qwen3_vl_processor() -> Any:
    """Qwen3-VL's processor on the tiny tokenizer and transformers' PIL image processor,
    without the video processor (it needs torchvision, which H3's text and keyframe requests
    never reach: they read no video): `qwen_vl.ImageQwen3VLProcessor`, as an H3 folder's
    `processor/` loads."""
    from transformers import Qwen2VLImageProcessorPil

    return ImageQwen3VLProcessor(
        # the vision tower's patches: 16 px, 2x2 merged, 2 frames (Qwen3-VL's, not Qwen2-VL's 14)
        image_processor=Qwen2VLImageProcessorPil(
            patch_size=16, merge_size=2, temporal_patch_size=2
        ),
        tokenizer=qwen_vl_tokenizer(),
    )


def h3_transformer():
    from diffusers import MiniMaxH3Transformer3DModel

    return MiniMaxH3Transformer3DModel(
        num_attention_heads=HEADS,
        attention_head_dim=HEAD_DIM,
        hidden_size=64,
        num_layers=2,
        num_refiner_layers=1,
        ffn_dim=64,
        in_channels=VIDEO_LATENT_CHANNELS,
        audio_in_channels=AUDIO_LATENT_CHANNELS,
        text_dim=TEXT_DIM,
        freq_dim=32,
        time_embed_hidden_dim=32,
        time_embed_dim=32,
        rope_freq_dim=1,
    )


def h3_vae():
    from diffusers import AutoencoderKLMiniMaxH3

    return AutoencoderKLMiniMaxH3(
        latent_channels=VIDEO_LATENT_CHANNELS,
        block_out_channels=(8,) * 6,
        layers_per_block=1,
        norm_num_groups=4,
        decoder_num_layers=1,
        decoder_num_attention_heads=2,
        decoder_attention_head_dim=8,
        decoder_num_register_tokens=1,
        decoder_ffn_mult=1,
        latents_mean=(0.0,) * VIDEO_LATENT_CHANNELS,
        latents_std=(1.0,) * VIDEO_LATENT_CHANNELS,
    )


def h3_audio_vae():
    from diffusers import AutoencoderKLMiniMaxH3Audio

    return AutoencoderKLMiniMaxH3Audio(
        encoder_dim=4,
        encoder_rates=(2, 2),
        latent_dim=8,
        latent_channels=AUDIO_LATENT_CHANNELS,
        num_attention_heads=1,
        decoder_dim=8,
        decoder_rates=(2, 2),
        decoder_kernel_sizes=(4, 4),
        resblock_kernel_sizes=(3,),
        resblock_dilation_sizes=((1,),),
        sampling_rate=AUDIO_SAMPLE_RATE,
        latents_mean=[0.0] * AUDIO_LATENT_CHANNELS,
        latents_std=[1.0] * AUDIO_LATENT_CHANNELS,
    )


def video_scheduler():
    from diffusers import MiniMaxH3Scheduler

    return MiniMaxH3Scheduler(shift=12.0)


def audio_scheduler():
    from diffusers import MiniMaxH3Scheduler

    return MiniMaxH3Scheduler(shift=3.0)


_H3: Builders = {
    "tokenizer": qwen_vl_tokenizer,
    "processor": qwen3_vl_processor,
    "text_encoder": lambda: seeded(701, qwen3_vl_conditioner),
    "vae": lambda: seeded(702, h3_vae),
    "audio_vae": lambda: seeded(703, h3_audio_vae),
    "transformer": lambda: seeded(704, h3_transformer),
    "scheduler": video_scheduler,
    "audio_scheduler": audio_scheduler,
}

PRESETS: dict[str, tuple[str, Builders]] = {
    "tiny-minimax-h3": ("MiniMaxH3ModularPipeline", _H3),
}
