"""Built-in tiny model presets: real diffusers pipelines with seeded random weights.

Every preset is built offline in well under a second. Each component is built from its own
fixed seed with an explicit generator, so the same preset gives bit-identical weights on every
machine, whatever other components are built, and the caller's global RNG state is untouched.

Tiny configs (pixel sizes must be multiples of 16 for all presets):
  tiny-wan      WanPipeline, 4 heads x 16 dims, 2 layers, VAE 8x spatial / 4x temporal
                (frames 4k+1), UMT5 text encoder (d_model 32), UniPC flow scheduler.
  tiny-wan-i2v  WanImageToVideoPipeline, the same plus a CLIP vision encoder (32x32 input,
                17 tokens) and a transformer with 36 input channels (2 * z_dim + 4).
  tiny-flux     FluxPipeline, 4 heads x 16 dims, 2 double + 2 single blocks, no guidance
                embedding (guidance is true CFG), CLIP (77 tokens) + T5 text encoders.
The byte-level tokenizers give every byte its own token, so any unicode text tokenizes.

diffusers and transformers are imported only when a preset is built (they take seconds), so
`PRESET_NAMES` and `is_preset` stay cheap.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from diffusers import DiffusionPipeline

PRESET_NAMES: tuple[str, ...] = ("tiny-wan", "tiny-wan-i2v", "tiny-flux")

# Tokenizer: ids 0..2 are special, then one token per byte.
_PAD_ID, _EOS_ID = 0, 1
_SPECIAL_TOKENS = ("<pad>", "</s>", "<unk>")
_VOCAB_SIZE = len(_SPECIAL_TOKENS) + 256

_TEXT_DIM = 32  # hidden size of every tiny text encoder
_WAN_HEADS, _WAN_HEAD_DIM = 4, 16
_WAN_Z_DIM = 16
_CLIP_IMAGE_SIZE = 32
_CLIP_VISION_DIM = 32
_FLUX_HEADS, _FLUX_HEAD_DIM = 4, 16
_FLUX_LATENT_CHANNELS = 16


def is_preset(name: str) -> bool:
    """Whether `name` is one of the built-in presets."""
    return name in PRESET_NAMES


def preset_components(name: str) -> frozenset[str]:
    """The component names of preset `name`."""
    return frozenset(_preset(name)[1])


def build_preset(name: str, *, components: frozenset[str] | None = None) -> DiffusionPipeline:
    """Build preset `name`; only the named `components` (default: all), the rest are None."""
    import diffusers

    pipeline_class_name, builders = _preset(name)
    wanted = frozenset(builders) if components is None else frozenset(components)
    unknown = wanted - builders.keys()
    if unknown:
        raise ValueError(
            f"preset {name!r} has no component(s) {sorted(unknown)}; "
            f"its components are {sorted(builders)}"
        )
    parts = {
        component: (build() if component in wanted else None)
        for component, build in builders.items()
    }
    return getattr(diffusers, pipeline_class_name)(**parts)


def _preset(name: str) -> tuple[str, _Builders]:
    if name not in _PRESETS:
        raise ValueError(f"unknown preset {name!r}: choose one of {', '.join(PRESET_NAMES)}")
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
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in sorted(module.named_parameters()):
            noise = torch.randn(param.shape, generator=generator, dtype=torch.float32)
            if name.endswith("bias"):
                value = noise * 0.02
            elif _is_gain(name, param):
                value = 1.0 + noise * 0.02
            else:
                fan_in = max(1, param.numel() // param.shape[0])
                value = noise * fan_in**-0.5
            param.copy_(value)
    return module.eval()


def _is_gain(name: str, param: torch.Tensor) -> bool:
    """Norm gains: 1-D weights and the (C, 1, 1[, 1]) `gamma` of Wan's VAE RMS norms."""
    return name.endswith("gamma") or (param.ndim == 1 and name.endswith("weight"))


# --- tokenizer, text and image encoders ------------------------------------------------------


def _byte_tokenizer(max_length: int):
    """Byte-level tokenizer: specials <pad>=0 </s>=1 <unk>=2, then one token per byte."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {token: index for index, token in enumerate(_SPECIAL_TOKENS)}
    for symbol in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab[symbol] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", _EOS_ID)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        eos_token="</s>",
        unk_token="<unk>",
        model_max_length=max_length,
    )


def _t5_config(config_class):
    return config_class(
        vocab_size=_VOCAB_SIZE,
        d_model=_TEXT_DIM,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_heads=4,
        relative_attention_num_buckets=32,
        relative_attention_max_distance=128,
        feed_forward_proj="gated-gelu",
        pad_token_id=_PAD_ID,
        eos_token_id=_EOS_ID,
        decoder_start_token_id=_PAD_ID,
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
        vocab_size=_VOCAB_SIZE,
        hidden_size=_TEXT_DIM,
        intermediate_size=64,
        projection_dim=_TEXT_DIM,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=77,
        pad_token_id=_PAD_ID,
        bos_token_id=_EOS_ID,
        eos_token_id=_EOS_ID,  # the pooled output is taken at the first </s>
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


def _wan_transformer(image_to_video: bool):
    from diffusers import WanTransformer3DModel

    inner_dim = _WAN_HEADS * _WAN_HEAD_DIM
    return WanTransformer3DModel(
        patch_size=(1, 2, 2),
        num_attention_heads=_WAN_HEADS,
        attention_head_dim=_WAN_HEAD_DIM,
        in_channels=2 * _WAN_Z_DIM + 4 if image_to_video else _WAN_Z_DIM,
        out_channels=_WAN_Z_DIM,
        text_dim=_TEXT_DIM,
        freq_dim=256,
        ffn_dim=2 * inner_dim,
        num_layers=2,
        cross_attn_norm=True,
        qk_norm="rms_norm_across_heads",
        image_dim=_CLIP_VISION_DIM if image_to_video else None,
        added_kv_proj_dim=inner_dim if image_to_video else None,
        rope_max_seq_len=1024,
    )


def _wan_scheduler():
    from diffusers import UniPCMultistepScheduler

    # What the Wan2.1 diffusers repos ship: UniPC on flow sigmas with shift 3.
    return UniPCMultistepScheduler(
        prediction_type="flow_prediction", use_flow_sigmas=True, flow_shift=3.0
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


# --- the table: pipeline class name and component builders, each with its own seed ----------

_Builders = dict[str, Callable[[], Any]]

_WAN_T2V: _Builders = {
    "tokenizer": lambda: _byte_tokenizer(512),
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

_FLUX: _Builders = {
    "tokenizer": lambda: _byte_tokenizer(77),
    "text_encoder": lambda: _seeded(201, _clip_text_encoder),
    "tokenizer_2": lambda: _byte_tokenizer(512),
    "text_encoder_2": lambda: _seeded(202, _t5_encoder),
    "vae": lambda: _seeded(203, _flux_vae),
    "scheduler": _flux_scheduler,
    "transformer": lambda: _seeded(204, _flux_transformer),
}

_PRESETS: dict[str, tuple[str, _Builders]] = {
    "tiny-wan": ("WanPipeline", _WAN_T2V),
    "tiny-wan-i2v": ("WanImageToVideoPipeline", _WAN_I2V),
    "tiny-flux": ("FluxPipeline", _FLUX),
}


def preset_pipeline_class(name: str) -> str:
    """The diffusers pipeline class name of preset `name`, without building it."""
    return _preset(name)[0]
