"""The tiny LTX-2 presets: text to video with its audio track (`LTX2Pipeline`), and image to
video with it (`LTX2ImageToVideoPipeline`: the same components); LTX-2.3's (`tiny-ltx2.3`):
the same pipeline classes, the DiT, connectors, VAE and vocoder with 2.3's settings; LTX-2.5's
(`tiny-ltx2.5`): 2.3's components with 2.5's DiT settings and a Gemma 4 text model."""

from __future__ import annotations

from typing import Any

from ...encoders.gemma3 import TINY_SETTINGS
from ...seeded import VOCAB_SIZE, byte_tokenizer
from ...tiny_parts import TEXT_DIM, Builders, seeded, tiny_text_config

_TEXT_LAYERS = 2
"""The pipeline stacks every hidden state of the text encoder (Gemma 3 12B: 48 layers + the
embeddings = 49); the connectors' input is that stack, so their factor is layers + 1."""
_LATENT_CHANNELS = 8
_AUDIO_LATENT_CHANNELS, _MEL_BINS = 2, 16
"""The audio VAE packs channels x (mel bins / 4) per audio token: 2 x 4 = 8 features (the real
8 x 16 = 128), and its latent statistics have that length."""
_AUDIO_TOKEN_FEATURES = _AUDIO_LATENT_CHANNELS * _MEL_BINS // 4


TEXT_ENCODER_UNSEEN = TINY_SETTINGS
"""The tiny text encoder's settings a file's header cannot show (`encoders/gemma3.py`)."""


def _text_encoder():
    from transformers import Gemma3TextConfig, Gemma3TextModel

    # Gemma 3's text model in Gemma-3-12B's role: the pipeline reads all its hidden states.
    config = Gemma3TextConfig(**tiny_text_config(VOCAB_SIZE, _TEXT_LAYERS, **TEXT_ENCODER_UNSEEN))
    return Gemma3TextModel(config)


def _connectors():
    from diffusers.pipelines.ltx2 import LTX2TextConnectors

    # The text stack -> the video and the audio branch's text tokens (4 heads x 8 = TEXT_DIM),
    # 8 learnable registers in place of the padding (the real model has 128 for 1024 tokens).
    return LTX2TextConnectors(
        caption_channels=TEXT_DIM,
        text_proj_in_factor=_TEXT_LAYERS + 1,
        video_connector_num_attention_heads=4,
        video_connector_attention_head_dim=8,
        video_connector_num_layers=1,
        video_connector_num_learnable_registers=8,
        audio_connector_num_attention_heads=4,
        audio_connector_attention_head_dim=8,
        audio_connector_num_layers=1,
        audio_connector_num_learnable_registers=8,
        connector_rope_base_seq_len=32,
    )


def _transformer(**flags):
    from diffusers import LTX2VideoTransformer3DModel

    # Video 4 heads x 16, audio 4 heads x 8; their cross-attention widths are the streams'.
    return LTX2VideoTransformer3DModel(
        in_channels=_LATENT_CHANNELS,
        out_channels=_LATENT_CHANNELS,
        num_attention_heads=4,
        attention_head_dim=16,
        cross_attention_dim=64,
        audio_in_channels=_AUDIO_TOKEN_FEATURES,
        audio_out_channels=_AUDIO_TOKEN_FEATURES,
        audio_num_attention_heads=4,
        audio_attention_head_dim=8,
        audio_cross_attention_dim=32,
        num_layers=2,
        caption_channels=TEXT_DIM,
        **flags,
    )


def _vae():
    from diffusers import AutoencoderKLLTX2Video

    # LTX-2's block structure (4x4 patches, then spatial, temporal and two spatio-temporal
    # downsamples: 32x spatial, 8x temporal, frames 8k+1) 8 to 32 channels wide.
    return AutoencoderKLLTX2Video(
        latent_channels=_LATENT_CHANNELS,
        block_out_channels=(8, 8, 8, 8),
        decoder_block_out_channels=(8, 16, 32),
        layers_per_block=(1, 1, 1, 1, 1),
        decoder_layers_per_block=(1, 1, 1, 1),
        decoder_causal=False,
        spatial_compression_ratio=32,
        temporal_compression_ratio=8,
    )


def _audio_vae():
    from diffusers import AutoencoderKLLTX2Audio

    # The real mel front end (16 kHz, hop 160, 4x in time and in mel bins: 25 latent frames a
    # second), stereo, 16 mel bins.
    return AutoencoderKLLTX2Audio(
        base_channels=_AUDIO_TOKEN_FEATURES,
        latent_channels=_AUDIO_LATENT_CHANNELS,
        mel_bins=_MEL_BINS,
        output_channels=2,
        num_res_blocks=1,
    )


def _vocoder():
    from diffusers.pipelines.ltx2.vocoder import LTX2Vocoder

    # The real upsampling (x240: 100 mel frames a second -> 24 kHz stereo), 32 channels wide.
    return LTX2Vocoder(in_channels=2 * _MEL_BINS, hidden_channels=32, out_channels=2)


def _scheduler():
    from diffusers import FlowMatchEulerDiscreteScheduler

    # LTX's: the shift follows the token count (`mu`), exponential, to a terminal 0.1.
    return FlowMatchEulerDiscreteScheduler(
        use_dynamic_shifting=True,
        base_shift=0.95,
        max_shift=2.05,
        base_image_seq_len=1024,
        max_image_seq_len=4096,
        shift_terminal=0.1,
        time_shift_type="exponential",
    )


_LTX23_FLAGS = {
    "gated_attn": True,
    "cross_attn_mod": True,
    "audio_gated_attn": True,
    "audio_cross_attn_mod": True,
    "use_prompt_embeddings": False,
    "rope_type": "split",
    "perturbed_attn": True,
}
"""LTX-2.3's flags on tiny-ltx2's sizes: per-head gates on every attention (`gated_attn`), the
text cross-attention modulated by the timestep (`cross_attn_mod`, 9 modulations) and its keys
and values by the noise level (the prompt AdaLN), no caption projection (the connectors project
per stream), rotary tables per head (`rope_type="split"`) and attention that spatio-temporal
guidance can perturb (`perturbed_attn`)."""

_LTX25_FLAGS = {**_LTX23_FLAGS, "ff_bias": False, "use_keyframes_abs_pos_embedding": True}
"""LTX-2.5's published settings over 2.3's: the video feed-forward without biases and the
keyframe marker embedding (which `LTX2Pipeline`'s jobs never mark); the prompt AdaLN kept
(diffusers' `use_prompt_adaln_single=False`, cacheable cross-attention keys, is no published
checkpoint's)."""


def _gemma4_text_encoder():
    from transformers import Gemma4UnifiedTextConfig, Gemma4UnifiedTextModel

    # Gemma 4's text model (LTX-2.5's `gemma4-12b-ltx-v1` is a Gemma 4 "unified" model) in the
    # same role, every hidden state stacked: a sliding-window layer, then a full one whose
    # keys are its values (`attention_k_eq_v`) with wider heads and one key/value head.
    config = Gemma4UnifiedTextConfig(
        **tiny_text_config(VOCAB_SIZE, _TEXT_LAYERS, **TEXT_ENCODER_UNSEEN),
        global_head_dim=16,
        num_global_key_value_heads=1,
        attention_k_eq_v=True,
        layer_types=["sliding_attention", "full_attention"],
    )
    return Gemma4UnifiedTextModel(config)


def _connectors_23():
    from diffusers.pipelines.ltx2 import LTX2TextConnectors

    # LTX-2.3's: one text projection per stream, to the streams' widths (64 and 32, with a
    # bias), gated connector attention and split rotary tables.
    return LTX2TextConnectors(
        caption_channels=TEXT_DIM,
        text_proj_in_factor=_TEXT_LAYERS + 1,
        video_connector_num_attention_heads=4,
        video_connector_attention_head_dim=16,
        video_connector_num_layers=1,
        video_connector_num_learnable_registers=8,
        video_gated_attn=True,
        audio_connector_num_attention_heads=4,
        audio_connector_attention_head_dim=8,
        audio_connector_num_layers=1,
        audio_connector_num_learnable_registers=8,
        audio_gated_attn=True,
        connector_rope_base_seq_len=32,
        rope_type="split",
        per_modality_projections=True,
        video_hidden_dim=64,
        audio_hidden_dim=32,
        proj_bias=True,
    )


def _vae_23():
    from diffusers import AutoencoderKLLTX2Video

    # LTX-2.3's decoder layout: four up blocks (spatio-temporal, spatio-temporal, temporal,
    # spatial) without residual upsampling, zero padding; the same 32x / 8x compression.
    return AutoencoderKLLTX2Video(
        latent_channels=_LATENT_CHANNELS,
        block_out_channels=(8, 8, 8, 8),
        decoder_block_out_channels=(8, 16, 16, 32),
        layers_per_block=(1, 1, 1, 1, 1),
        decoder_layers_per_block=(1, 1, 1, 1, 1),
        decoder_spatio_temporal_scaling=(True, True, True, True),
        decoder_inject_noise=(False, False, False, False, False),
        upsample_type=("spatiotemporal", "spatiotemporal", "temporal", "spatial"),
        upsample_residual=(False, False, False, False),
        upsample_factor=(2, 2, 1, 2),
        decoder_causal=False,
        decoder_spatial_padding_mode="zeros",
        spatial_compression_ratio=32,
        temporal_compression_ratio=8,
    )


def _vocoder_23():
    from diffusers.pipelines.ltx2.vocoder import LTX2VocoderWithBWE

    # LTX-2.3's vocoder with bandwidth extension: 16 kHz from the mel bins (x160), then its mel
    # again through a second generator (x240) added to the resampled 16 kHz: 48 kHz stereo.
    # Each upsample halves the channels: 6 of them from 128, 5 from 64, 2 channels at the end.
    return LTX2VocoderWithBWE(
        in_channels=2 * _MEL_BINS,
        hidden_channels=128,
        bwe_in_channels=2 * _MEL_BINS,
        bwe_hidden_channels=64,
        num_mel_channels=_MEL_BINS,
    )


def _snakes_at_rest(vocoder):
    """The vocoder's snake activations at their initial value (log-scale 0: alpha = beta = 1),
    the rest seeded: seeded log-scales (exp of N(0, 1)) make the tiny waveform chaotic, a
    rounding difference in the latents flipping whole saturated samples."""
    import torch

    with torch.no_grad():
        for name, param in vocoder.named_parameters():
            if name.endswith((".alpha", ".beta")):
                param.zero_()
    return vocoder


_LTX2: Builders = {
    "tokenizer": lambda: byte_tokenizer(32),
    "text_encoder": lambda: seeded(601, _text_encoder),
    "connectors": lambda: seeded(602, _connectors),
    "transformer": lambda: seeded(603, _transformer),
    "vae": lambda: seeded(604, _vae),
    "audio_vae": lambda: seeded(605, _audio_vae),
    "vocoder": lambda: seeded(606, _vocoder),
    "scheduler": _scheduler,
}

_LTX23: Builders = {
    **_LTX2,
    "connectors": lambda: seeded(612, _connectors_23),
    "transformer": lambda: seeded(613, lambda: _transformer(**_LTX23_FLAGS)),
    "vae": lambda: seeded(614, _vae_23),
    "vocoder": lambda: _snakes_at_rest(seeded(616, _vocoder_23)),
}

_LTX25: Builders = {
    **_LTX23,
    "text_encoder": lambda: seeded(621, _gemma4_text_encoder),
    "transformer": lambda: seeded(623, lambda: _transformer(**_LTX25_FLAGS)),
}

DIFFUSION_DECODER = {
    "in_channels": 8, "out_channels": 3, "patch_size": 16, "head_dim": 8,
    "stage_channels": [64, 32, 16, 16, 8], "stage_depths": [1, 1, 1, 1, 1],
    "stage_kernels": [[3, 1, 1], [1, 1, 1], [3, 1, 1], [3, 1, 1], [3, 3, 3]],
    "upsamples": [[[1, 1, 1], 2], [[2, 1, 1], 2], [[2, 1, 1], 1], [[2, 2, 2], 2]],
    "stage5_kernel": [3, 3, 3], "t_emb_dim": 32, "timestep_scale_multiplier": 1000.0,
    "default_num_inference_steps": 1,
}  # fmt: skip
"""A tiny LTX-2.5 diffusion video decoder's settings as the file's metadata
(`config.vae.decoder`) names them, which ComfyUI's `CausalDiffusionVAE` reads
(comfy/ldm/lightricks/vae/na_diffusion_decoder.py): tiny-ltx2.5's 8 latent channels, heads
of 8, one block a stage. Cheap on a CPU: diffusers' FlexAttention without compilation scores
every token against every other, so most of the 32x spatial ratio is the 16-pixel patch
(stage 5 sees 2x the latent grid: a 128x128 job of 25 frames is 25 x 8 x 8 tokens, not
25 x 32 x 32). Its windows fit every job of at least 2 latent frames and 2x2 latent pixels:
stage 1's 3 frames (with the 2 frames it pads), stages 3 and 4's 3 frames (2F - 1 and
4F - 3), stage 5's 3x3x3. The tests write it into the tiny `ltx-2.5-video-vae-bf16`
(tests/comfy_files.py); the family contract's `diffusion decoder` job rides it on
tiny-ltx2.5's VAE (`tiny_job.with_diffusion_decoder`)."""


def diffusion_decoder(seed: int = 0) -> Any:
    """The seeded diffusers `LTX2VideoDiffusionDecoderModel` of `DIFFUSION_DECODER` (its latent
    statistics the defaults, 0 and 1; every parameter N(0, 0.2^2), away from the zero
    initialisations), built without touching the caller's random state."""
    import torch
    from diffusers import LTX2VideoDiffusionDecoderModel

    c = DIFFUSION_DECODER
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LTX2VideoDiffusionDecoderModel(
            out_channels=c["out_channels"], latent_channels=c["in_channels"],
            patch_size=c["patch_size"], decoder_head_dim=c["head_dim"],
            decoder_stage_channels=tuple(c["stage_channels"]),
            decoder_stage_depths=tuple(c["stage_depths"]),
            decoder_stage_kernels=tuple(tuple(k) for k in c["stage_kernels"][:4]),
            decoder_upsample_strides=tuple(tuple(s) for s, _ in c["upsamples"]),
            decoder_upsample_channel_reductions=tuple(r for _, r in c["upsamples"]),
            decoder_stage5_kernel=tuple(c["stage5_kernel"]), decoder_t_emb_dim=c["t_emb_dim"],
        )  # fmt: skip
        for param in model.parameters():
            torch.nn.init.normal_(param, std=0.2)
    return model.eval()


PRESETS: dict[str, tuple[str, Builders]] = {
    "tiny-ltx2": ("LTX2Pipeline", _LTX2),
    "tiny-ltx2-i2v": ("LTX2ImageToVideoPipeline", _LTX2),
    "tiny-ltx2.3": ("LTX2Pipeline", _LTX23),
    "tiny-ltx2.3-i2v": ("LTX2ImageToVideoPipeline", _LTX23),
    "tiny-ltx2.5": ("LTX2Pipeline", _LTX25),
}
