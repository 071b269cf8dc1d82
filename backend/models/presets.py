"""Built-in tiny model presets: real diffusers pipelines with seeded random weights.

Every preset is built offline in well under a second. Each component is built from its own
fixed seed with an explicit generator, so the same preset gives bit-identical weights on every
machine, whatever other components are built, and the caller's global RNG state is untouched.

Tiny configs (pixel sizes must be multiples of 16 for all presets):
  tiny-wan      WanPipeline, 4 heads x 16 dims, 2 layers, VAE 8x spatial / 4x temporal
                (frames 4k+1), UMT5 text encoder (d_model 32), UniPC flow scheduler.
  tiny-wan-i2v  WanImageToVideoPipeline, the same plus a CLIP vision encoder (32x32 input,
                17 tokens) and a transformer with 36 input channels (2 * z_dim + 4).
  tiny-wan2.2-ti2v-5b   WanPipeline shaped like Wan 2.2 TI2V-5B: the Wan 2.2 VAE (48 latent
                channels, 2x2 patches then 8x: 16x spatial / 4x temporal, the real latent
                statistics), a transformer with 48 input channels, `expand_timesteps` (the
                first latent frame can hold a start image: text- and image-to-video in one
                model, see `wan22.py`), UniPC with shift 5. Sizes: multiples of 32.
  tiny-wan2.2-i2v-a14b  WanImageToVideoPipeline shaped like Wan 2.2 I2V-A14B: two experts
                (`transformer` for high noise, `transformer_2` below boundary_ratio 0.9 of the
                timesteps), 36 input channels (the image latents and mask concatenated), no
                CLIP image encoder, the tiny-wan VAE.
  tiny-flux     FluxPipeline, 4 heads x 16 dims, 2 double + 2 single blocks, no guidance
                embedding (guidance is true CFG), CLIP (77 tokens) + T5 text encoders.
  tiny-cogvideox      CogVideoXPipeline shaped like CogVideoX-5B: 4 heads x 16 dims, 2 layers,
                rotary positions, 226 text tokens (T5, d_model 32), VAE 8x spatial / 4x
                temporal (frames 4k+1) tiled at 240x360 pixels like the real one, DDIM.
  tiny-cogvideox-i2v  CogVideoXImageToVideoPipeline: the same with 32 input channels (the
                image latents are concatenated) and the DPM scheduler; rotary positions only,
                so any size works (the real 5B-I2V's learned positions allow 720x480 only).
  tiny-qwen-image     QwenImagePipeline: 4 heads x 16 dims, 2 layers, the Qwen-Image VAE
                (Wan-style, 8x spatial, one frame; the real latent statistics), a Qwen2.5-VL
                text encoder (hidden 32, 2 layers, a 1-layer vision tower it never uses for
                text) with the chat-template tokenizer (`seeded.qwen_chat_tokenizer`),
                FlowMatch Euler with Qwen-Image's shifts. Guidance is true CFG.
  tiny-hunyuanvideo1.5  HunyuanVideo15Pipeline (text-to-video): 4 heads x 16 dims, 2 dual-stream
                layers, 1 token-refiner layer, patch 1 over the HunyuanVideo 1.5 VAE (16x
                spatial / 4x temporal, frames 4k+1; 8 latent channels, 8 wide), a Qwen2.5-VL
                text model (hidden 32, 2 layers; the chat-template tokenizer) and a ByT5-style
                T5 glyph encoder (d_model 32, bytes) for quoted text, classifier-free guidance
                6 in the guider, FlowMatch Euler with shift 5 (the 480p model's).
  tiny-z-image  ZImagePipeline shaped like Z-Image-Turbo: a single-stream DiT of 4 heads x
                16 dims (2 refiner layers for the image and for the text, 2 main layers), Flux's
                VAE (16 channels, 8x spatial), a Qwen3 text encoder (hidden 32, 2 layers; the
                second-to-last hidden states are the text features) with Qwen3's chat template
                (`seeded.qwen3_chat_tokenizer`), FlowMatch Euler with Z-Image-Turbo's shift 3.
                Distilled: no CFG by default (see `families/z_image.py`).
  tiny-flux2    Flux2Pipeline shaped like FLUX.2-dev: 4 heads x 16 dims, 2 double + 2 single
                blocks, guidance embedded (no CFG), the Flux.2 VAE (32 latent channels, 2x2
                patches normalised by its batch-norm statistics: 16x per token), a Mistral 3 text
                encoder (hidden 32, 31 layers: the pipeline stacks hidden states 10, 20 and 30)
                with Mistral's chat markers (`seeded.mistral_chat_tokenizer`, in place of the
                Pixtral processor), FlowMatch Euler with Flux.2's empirical shift.
The byte-level tokenizers give every byte its own token, so any unicode text tokenizes.

diffusers and transformers are imported only when a preset is built (they take seconds), so
`PRESET_NAMES` and `is_preset` stay cheap. `random:<model>` presets (the real architectures
with seeded random weights) live in `random_presets.py`; the functions here take both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from .random_presets import (
    RANDOM_PRESET_NAMES,
    build_random_preset,
    is_random_preset,
    random_preset_components,
    random_preset_pipeline_class,
    wanted_components,
)
from .seeded import (
    EOS_ID,
    MISTRAL_CHAT_VOCAB_SIZE,
    PAD_ID,
    QWEN_CHAT_VOCAB_SIZE,
    VOCAB_SIZE,
    byte_tokenizer,
    mistral_chat_tokenizer,
    qwen3_chat_tokenizer,
    qwen_chat_tokenizer,
    seed_weights,
)

if TYPE_CHECKING:
    from diffusers import DiffusionPipeline

PRESET_NAMES: tuple[str, ...] = (
    "tiny-wan",
    "tiny-wan-i2v",
    "tiny-flux",
    "tiny-cogvideox",
    "tiny-cogvideox-i2v",
    "tiny-wan2.2-ti2v-5b",
    "tiny-wan2.2-i2v-a14b",
    "tiny-qwen-image",
    "tiny-hunyuanvideo1.5",
    "tiny-z-image",
    "tiny-flux2",
)
"""The tiny presets; `random:<model>` presets are listed in RANDOM_PRESET_NAMES."""

_TEXT_DIM = 32  # hidden size of every tiny text encoder
_WAN_HEADS, _WAN_HEAD_DIM = 4, 16
_WAN_Z_DIM = 16
_CLIP_IMAGE_SIZE = 32
_CLIP_VISION_DIM = 32
_FLUX_HEADS, _FLUX_HEAD_DIM = 4, 16
_FLUX_LATENT_CHANNELS = 16
_COG_HEADS, _COG_HEAD_DIM = 4, 16
_COG_LATENT_CHANNELS = 16
_COG_TEXT_TOKENS = 226  # what every CogVideoX pipeline pads its prompts to
_QWEN_HEADS, _QWEN_HEAD_DIM = 4, 16
_HY15_HEADS, _HY15_HEAD_DIM = 4, 16
_HY15_LATENT_CHANNELS = 8
_ZIMAGE_HEADS, _ZIMAGE_HEAD_DIM = 4, 16


def is_preset(name: str) -> bool:
    """Whether `name` is one of the built-in presets (tiny or `random:`)."""
    return name in PRESET_NAMES or is_random_preset(name)


def is_tiny_preset(name: str) -> bool:
    """Tiny presets get tiny default sizes; `random:` presets the real model's."""
    return name in PRESET_NAMES


def preset_components(name: str) -> frozenset[str]:
    """The component names of preset `name`."""
    if is_random_preset(name):
        return random_preset_components(name)
    return frozenset(_preset(name)[1])


def build_preset(
    name: str,
    *,
    components: frozenset[str] | None = None,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str = "cpu",
) -> DiffusionPipeline:
    """Build preset `name`; only the named `components` (default: all), the rest are None.

    Random presets are built directly in `dtype` on `device` ("meta": no memory); tiny ones
    in float32 on the CPU (the caller moves them).
    """
    import diffusers

    if is_random_preset(name):
        return build_random_preset(name, components=components, dtype=dtype, device=device)
    pipeline_class_name, builders = _preset(name)
    wanted = wanted_components(name, builders.keys(), components)
    parts = {
        component: (build() if component in wanted else None)
        for component, build in builders.items()
    }
    return getattr(diffusers, pipeline_class_name)(**parts, **_PIPELINE_CONFIG.get(name, {}))


def _preset(name: str) -> tuple[str, _Builders]:
    if name not in _PRESETS:
        choices = ", ".join((*PRESET_NAMES, *RANDOM_PRESET_NAMES))
        raise ValueError(f"unknown preset {name!r}: choose one of {choices}")
    return _PRESETS[name]


# --- seeded weights --------------------------------------------------------------------------


def _seeded(seed: int, make: Callable[[], torch.nn.Module]) -> torch.nn.Module:
    """Construct a module without touching the caller's RNG, then set every weight from `seed`.

    The weights do not depend on the library's own init code (which changes between versions):
    matrices get N(0, 1/fan_in), biases N(0, 0.02^2), norm gains 1 + N(0, 0.02^2).
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = make()
    return seed_weights(module, seed)


# --- tokenizer, text and image encoders ------------------------------------------------------


def _t5_config(config_class):
    return config_class(
        vocab_size=VOCAB_SIZE,
        d_model=_TEXT_DIM,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_heads=4,
        relative_attention_num_buckets=32,
        relative_attention_max_distance=128,
        feed_forward_proj="gated-gelu",
        pad_token_id=PAD_ID,
        eos_token_id=EOS_ID,
        decoder_start_token_id=PAD_ID,
    )


def _umt5_encoder():
    from transformers import UMT5Config, UMT5EncoderModel

    return UMT5EncoderModel(_t5_config(UMT5Config))


def _t5_encoder():
    from transformers import T5Config, T5EncoderModel

    return T5EncoderModel(_t5_config(T5Config))


def _clip_text_encoder():
    from transformers import CLIPTextConfig, CLIPTextModel

    config = CLIPTextConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=_TEXT_DIM,
        intermediate_size=64,
        projection_dim=_TEXT_DIM,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=77,
        pad_token_id=PAD_ID,
        bos_token_id=EOS_ID,
        eos_token_id=EOS_ID,  # the pooled output is taken at the first </s>
    )
    return CLIPTextModel(config)


def _clip_image_encoder():
    from transformers import CLIPVisionConfig, CLIPVisionModel

    config = CLIPVisionConfig(
        hidden_size=_CLIP_VISION_DIM,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        image_size=_CLIP_IMAGE_SIZE,
        patch_size=8,
    )
    return CLIPVisionModel(config)


def _clip_image_processor():
    import transformers

    # The PIL backend where transformers has a choice: torchvision must not change the pixels.
    processor_class = getattr(transformers, "CLIPImageProcessorPil", None)
    processor_class = processor_class or transformers.CLIPImageProcessor
    return processor_class(
        size={"shortest_edge": _CLIP_IMAGE_SIZE},
        crop_size={"height": _CLIP_IMAGE_SIZE, "width": _CLIP_IMAGE_SIZE},
    )


# --- Wan -------------------------------------------------------------------------------------


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

    from .random_presets import random_preset_spec

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
        text_dim=_TEXT_DIM,
        freq_dim=256,
        ffn_dim=2 * inner_dim,
        num_layers=2,
        cross_attn_norm=True,
        qk_norm="rms_norm_across_heads",
        image_dim=_CLIP_VISION_DIM if image_embedding else None,
        added_kv_proj_dim=inner_dim if image_embedding else None,
        rope_max_seq_len=1024,
    )


def _wan_scheduler(flow_shift: float = 3.0):
    from diffusers import UniPCMultistepScheduler

    # What the Wan diffusers repos ship: UniPC on flow sigmas with shift 3 (TI2V-5B: 5).
    return UniPCMultistepScheduler(
        prediction_type="flow_prediction", use_flow_sigmas=True, flow_shift=flow_shift
    )


# --- Flux ------------------------------------------------------------------------------------


def _flux_vae():
    from diffusers import AutoencoderKL

    return AutoencoderKL(
        in_channels=3,
        out_channels=3,
        down_block_types=("DownEncoderBlock2D",) * 4,
        up_block_types=("UpDecoderBlock2D",) * 4,
        block_out_channels=(8, 8, 8, 8),
        layers_per_block=1,
        norm_num_groups=4,
        latent_channels=_FLUX_LATENT_CHANNELS,
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
        in_channels=4 * _FLUX_LATENT_CHANNELS,
        num_layers=2,
        num_single_layers=2,
        attention_head_dim=_FLUX_HEAD_DIM,
        num_attention_heads=_FLUX_HEADS,
        joint_attention_dim=_TEXT_DIM,
        pooled_projection_dim=_TEXT_DIM,
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


# --- CogVideoX -------------------------------------------------------------------------------


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
        text_embed_dim=_TEXT_DIM,
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


# --- Qwen-Image ------------------------------------------------------------------------------


def _qwen_text_encoder():
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    config = Qwen2_5_VLConfig(
        text_config={
            "vocab_size": QWEN_CHAT_VOCAB_SIZE,
            "hidden_size": _TEXT_DIM,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "rope_scaling": {"type": "mrope", "mrope_section": [2, 1, 1]},
            "bos_token_id": None,
            "eos_token_id": None,
        },
        vision_config={
            "depth": 1,
            "hidden_size": 16,
            "intermediate_size": 32,
            "num_heads": 2,
            "out_hidden_size": _TEXT_DIM,
            "fullatt_block_indexes": [0],
        },
    )
    return Qwen2_5_VLForConditionalGeneration(config)


def _qwen_vae():
    from diffusers import AutoencoderKLQwenImage

    # The real latent statistics (the class's defaults), 8 channels wide, one resnet per level.
    return AutoencoderKLQwenImage(base_dim=8, dim_mult=[1, 1, 1, 1], num_res_blocks=1)


def _qwen_transformer():
    from diffusers import QwenImageTransformer2DModel

    return QwenImageTransformer2DModel(
        patch_size=2,
        in_channels=64,
        out_channels=16,
        num_layers=2,
        attention_head_dim=_QWEN_HEAD_DIM,
        num_attention_heads=_QWEN_HEADS,
        joint_attention_dim=_TEXT_DIM,
        axes_dims_rope=(4, 6, 6),
    )


def _qwen_scheduler():
    import diffusers

    from .random_presets import random_preset_spec

    shipped = dict(random_preset_spec("random:qwen-image")["components"]["scheduler"]["config"])
    return getattr(diffusers, shipped.pop("_class_name")).from_config(shipped)


# --- HunyuanVideo 1.5 --------------------------------------------------------------------------


def _hy15_text_encoder():
    from transformers import Qwen2_5_VLTextConfig, Qwen2_5_VLTextModel

    # The pipeline takes the third hidden state from the end: 2 layers give 3.
    config = Qwen2_5_VLTextConfig(
        vocab_size=QWEN_CHAT_VOCAB_SIZE,
        hidden_size=_TEXT_DIM,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        rope_scaling={"type": "mrope", "mrope_section": [2, 1, 1]},
        bos_token_id=None,
        eos_token_id=None,
    )
    return Qwen2_5_VLTextModel(config)


def _hy15_vae():
    from diffusers import AutoencoderKLHunyuanVideo15

    # The real compression (16x spatial over 5 levels, 4x temporal) 8 channels wide; the
    # decoder's first width must be a multiple of the latent channels.
    return AutoencoderKLHunyuanVideo15(
        block_out_channels=(8, 8, 8, 8, 8),
        layers_per_block=1,
        latent_channels=_HY15_LATENT_CHANNELS,
    )


def _hy15_transformer():
    from diffusers import HunyuanVideo15Transformer3DModel

    # Input: the noise, the (zero) condition latents and their mask: 2 * channels + 1.
    return HunyuanVideo15Transformer3DModel(
        in_channels=2 * _HY15_LATENT_CHANNELS + 1,
        out_channels=_HY15_LATENT_CHANNELS,
        num_attention_heads=_HY15_HEADS,
        attention_head_dim=_HY15_HEAD_DIM,
        num_layers=2,
        num_refiner_layers=1,
        text_embed_dim=_TEXT_DIM,
        text_embed_2_dim=_TEXT_DIM,
        image_embed_dim=16,
        rope_axes_dim=(4, 6, 6),
        task_type="t2v",
    )


def _hy15_scheduler():
    from diffusers import FlowMatchEulerDiscreteScheduler

    return FlowMatchEulerDiscreteScheduler(shift=5.0)  # the 480p text-to-video model's


def _hy15_guider():
    from diffusers import ClassifierFreeGuidance

    return ClassifierFreeGuidance(guidance_scale=6.0)


# --- Z-Image ---------------------------------------------------------------------------------


def _qwen3_text_encoder():
    from transformers import Qwen3Config, Qwen3Model

    config = Qwen3Config(
        vocab_size=QWEN_CHAT_VOCAB_SIZE,
        hidden_size=_TEXT_DIM,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=PAD_ID,
    )
    return Qwen3Model(config)


def _z_image_transformer():
    from diffusers import ZImageTransformer2DModel

    return ZImageTransformer2DModel(
        all_patch_size=(2,),
        all_f_patch_size=(1,),
        in_channels=_FLUX_LATENT_CHANNELS,
        dim=_ZIMAGE_HEADS * _ZIMAGE_HEAD_DIM,
        n_layers=2,
        n_refiner_layers=2,
        n_heads=_ZIMAGE_HEADS,
        n_kv_heads=_ZIMAGE_HEADS,
        cap_feat_dim=_TEXT_DIM,
        axes_dims=[4, 6, 6],  # sums to the head dim, as the real [32, 48, 48] to 128
        axes_lens=[1536, 512, 512],
    )


def _z_image_scheduler():
    import diffusers

    from .random_presets import random_preset_spec

    shipped = dict(random_preset_spec("random:z-image-turbo")["components"]["scheduler"]["config"])
    return getattr(diffusers, shipped.pop("_class_name")).from_config(shipped)


# --- Flux.2 ----------------------------------------------------------------------------------

FLUX2_TEXT_LAYERS = 31  # the pipeline stacks hidden states 10, 20 and 30


def _mistral3_text_encoder():
    from transformers import Mistral3Config, Mistral3ForConditionalGeneration

    config = Mistral3Config(
        text_config={
            "model_type": "mistral",
            "vocab_size": MISTRAL_CHAT_VOCAB_SIZE,
            "hidden_size": _TEXT_DIM,
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


def _flux2_transformer():
    from diffusers import Flux2Transformer2DModel

    return Flux2Transformer2DModel(
        patch_size=1,
        in_channels=4 * 32,  # the VAE's 32 channels in 2x2 patches
        num_layers=2,
        num_single_layers=2,
        attention_head_dim=_FLUX_HEAD_DIM,
        num_attention_heads=_FLUX_HEADS,
        joint_attention_dim=3 * _TEXT_DIM,  # three of the text encoder's hidden states
        axes_dims_rope=(4, 4, 4, 4),
        guidance_embeds=True,
    )


def _flux2_scheduler():
    import diffusers

    from .random_presets import random_preset_spec

    shipped = dict(random_preset_spec("random:flux.2-dev")["components"]["scheduler"]["config"])
    return getattr(diffusers, shipped.pop("_class_name")).from_config(shipped)


# --- the table: pipeline class name and component builders, each with its own seed ----------

_Builders = dict[str, Callable[[], Any]]

_WAN_T2V: _Builders = {
    "tokenizer": lambda: byte_tokenizer(512),
    "text_encoder": lambda: _seeded(101, _umt5_encoder),
    "vae": lambda: _seeded(102, _wan_vae),
    "scheduler": _wan_scheduler,
    "transformer": lambda: _seeded(103, lambda: _wan_transformer(image_to_video=False)),
}

_WAN_I2V: _Builders = {
    **_WAN_T2V,
    "image_processor": _clip_image_processor,
    "image_encoder": lambda: _seeded(104, _clip_image_encoder),
    "transformer": lambda: _seeded(105, lambda: _wan_transformer(image_to_video=True)),
}

_WAN22_TI2V: _Builders = {
    **_WAN_T2V,
    "vae": lambda: _seeded(106, _wan22_vae),
    "scheduler": lambda: _wan_scheduler(flow_shift=5.0),
    "transformer": lambda: _seeded(107, lambda: _wan_transformer(False, z_dim=48)),
}

_WAN22_I2V: _Builders = {
    **_WAN_T2V,
    "transformer": lambda: _seeded(108, lambda: _wan_transformer(True, clip=False)),
    "transformer_2": lambda: _seeded(109, lambda: _wan_transformer(True, clip=False)),
}

_FLUX: _Builders = {
    "tokenizer": lambda: byte_tokenizer(77),
    "text_encoder": lambda: _seeded(201, _clip_text_encoder),
    "tokenizer_2": lambda: byte_tokenizer(512),
    "text_encoder_2": lambda: _seeded(202, _t5_encoder),
    "vae": lambda: _seeded(203, _flux_vae),
    "scheduler": _flux_scheduler,
    "transformer": lambda: _seeded(204, _flux_transformer),
}

_COGVIDEOX: _Builders = {
    "tokenizer": lambda: byte_tokenizer(_COG_TEXT_TOKENS),
    "text_encoder": lambda: _seeded(301, _t5_encoder),
    "vae": lambda: _seeded(302, _cogvideox_vae),
    "scheduler": lambda: _cogvideox_scheduler(dpm=False),
    "transformer": lambda: _seeded(303, lambda: _cogvideox_transformer(image_to_video=False)),
}

_COGVIDEOX_I2V: _Builders = {
    **_COGVIDEOX,
    "scheduler": lambda: _cogvideox_scheduler(dpm=True),
    "transformer": lambda: _seeded(304, lambda: _cogvideox_transformer(image_to_video=True)),
}

_QWEN_IMAGE: _Builders = {
    "tokenizer": qwen_chat_tokenizer,
    "text_encoder": lambda: _seeded(401, _qwen_text_encoder),
    "vae": lambda: _seeded(402, _qwen_vae),
    "scheduler": _qwen_scheduler,
    "transformer": lambda: _seeded(403, _qwen_transformer),
}

_HUNYUAN_VIDEO15: _Builders = {
    "tokenizer": lambda: qwen_chat_tokenizer(1108),  # 1000 prompt tokens after 108 dropped
    "text_encoder": lambda: _seeded(501, _hy15_text_encoder),
    "tokenizer_2": lambda: byte_tokenizer(256),
    "text_encoder_2": lambda: _seeded(502, _t5_encoder),
    "vae": lambda: _seeded(503, _hy15_vae),
    "scheduler": _hy15_scheduler,
    "transformer": lambda: _seeded(504, _hy15_transformer),
    "guider": _hy15_guider,
}

_Z_IMAGE: _Builders = {
    "tokenizer": qwen3_chat_tokenizer,
    "text_encoder": lambda: _seeded(501, _qwen3_text_encoder),
    "vae": lambda: _seeded(502, _flux_vae),
    "scheduler": _z_image_scheduler,
    "transformer": lambda: _seeded(503, _z_image_transformer),
}

_FLUX2: _Builders = {
    "tokenizer": mistral_chat_tokenizer,
    "text_encoder": lambda: _seeded(601, _mistral3_text_encoder),
    "vae": lambda: _seeded(602, _flux2_vae),
    "scheduler": _flux2_scheduler,
    "transformer": lambda: _seeded(603, _flux2_transformer),
}

_PRESETS: dict[str, tuple[str, _Builders]] = {
    "tiny-wan": ("WanPipeline", _WAN_T2V),
    "tiny-wan-i2v": ("WanImageToVideoPipeline", _WAN_I2V),
    "tiny-flux": ("FluxPipeline", _FLUX),
    "tiny-cogvideox": ("CogVideoXPipeline", _COGVIDEOX),
    "tiny-cogvideox-i2v": ("CogVideoXImageToVideoPipeline", _COGVIDEOX_I2V),
    "tiny-wan2.2-ti2v-5b": ("WanPipeline", _WAN22_TI2V),
    "tiny-wan2.2-i2v-a14b": ("WanImageToVideoPipeline", _WAN22_I2V),
    "tiny-qwen-image": ("QwenImagePipeline", _QWEN_IMAGE),
    "tiny-hunyuanvideo1.5": ("HunyuanVideo15Pipeline", _HUNYUAN_VIDEO15),
    "tiny-z-image": ("ZImagePipeline", _Z_IMAGE),
    "tiny-flux2": ("Flux2Pipeline", _FLUX2),
}

_PIPELINE_CONFIG: dict[str, dict[str, Any]] = {
    "tiny-wan2.2-ti2v-5b": {"expand_timesteps": True},
    "tiny-wan2.2-i2v-a14b": {"boundary_ratio": 0.9},
}
"""The pipeline's own settings, as the real repos' model_index.json has them."""


def preset_pipeline_class(name: str) -> str:
    """The diffusers pipeline class name of preset `name`, without building it."""
    if is_random_preset(name):
        return random_preset_pipeline_class(name)
    return _preset(name)[0]
