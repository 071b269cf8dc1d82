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
  tiny-hunyuanvideo1.5-i2v  HunyuanVideo15ImageToVideoPipeline: the same text encoders, a
                VAE whose last level is 16 wide (its encoder needs it), a SigLIP vision encoder
                (32x32 input, 16 tokens) for the start image, and a transformer of its own
                (task "i2v", target size 64: the pipeline's size buckets are tiny, e.g. 80x48).
                The start image's latents fill the first latent frame of the condition channels.
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
  tiny-ltx2     LTX2Pipeline (text to video with its audio track): a DiT of two streams
                (video 4 heads x 16, audio 4 heads x 8, 2 layers) over LTX-2's video VAE
                (32x spatial / 8x temporal: sizes multiples of 32, frames 8k+1; 8 latent
                channels) and its audio VAE (16 kHz mel, 16 bins, stereo) and vocoder (24 kHz),
                a Gemma 3 text model (hidden 32, 2 layers: every hidden state is stacked) with
                the text connectors (8 learnable registers), 32 byte tokens, FlowMatch Euler
                with LTX's token-dependent shift.
  tiny-ltx2-i2v  LTX2ImageToVideoPipeline: tiny-ltx2's components; the start image (through
                the video VAE's encoder) is the first latent frame, kept clean.
  tiny-flux2-klein  Flux2KleinPipeline shaped like FLUX.2-klein-4B (step-distilled): the
                tiny-flux2 DiT without a guidance embedding, the Flux.2 VAE, a Qwen3 causal-LM
                text encoder (hidden 32, 28 layers: the pipeline stacks hidden states 9, 18 and
                27) with Qwen3's chat template, FlowMatch Euler with Flux.2's empirical shift.
                Distilled: no CFG (see `families/flux2_klein.py`).
                Pixtral processor), FlowMatch Euler with Flux.2's empirical shift. With
                reference images it edits (task image-edit; `families/flux2.py`).
  tiny-qwen-image-edit  QwenImageEditPlusPipeline (Qwen-Image-Edit-2509, image-edit, 1 to 3
                input images): tiny-qwen-image's DiT and scheduler, a Qwen2.5-VL text encoder
                whose vision tower (1 layer, width 16) reads the images through a
                `Qwen2VLProcessor` built offline (`qwen_vl.py`), a Qwen-Image VAE 4 channels
                wide without encoder resnets (the pipeline encodes every input image at about
                1024x1024 pixels: 4096 reference tokens).
The byte-level tokenizers give every byte its own token, so any unicode text tokenizes.

diffusers and transformers are imported only when a preset is built (they take seconds); the
names (`PRESET_NAMES`, `is_preset`) are `preset_names.py`'s, torch-free. `random:<model>`
presets (the real architectures with seeded random weights) live in `random_presets.py`; the
functions here take both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from .preset_names import PRESET_NAMES, RANDOM_PRESET_NAMES, is_random_preset
from .random_presets import (
    build_random_preset,
    random_preset_components,
    random_preset_pipeline_class,
    wanted_components,
)
from .tiny import cogvideox, flux, flux2_klein, hunyuan_video15, ltx2, qwen_image, wan, z_image
from .tiny.common import Builders

if TYPE_CHECKING:
    from diffusers import DiffusionPipeline


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


def _preset(name: str) -> tuple[str, Builders]:
    if name not in _PRESETS:
        choices = ", ".join((*PRESET_NAMES, *RANDOM_PRESET_NAMES))
        raise ValueError(f"unknown preset {name!r}: choose one of {choices}")
    return _PRESETS[name]


# --- the table: pipeline class name and component builders, per family module ----------------

_PRESETS: dict[str, tuple[str, Builders]] = {
    **wan.PRESETS,
    **flux.PRESETS,
    **cogvideox.PRESETS,
    **qwen_image.PRESETS,
    **hunyuan_video15.PRESETS,
    **z_image.PRESETS,
    **ltx2.PRESETS,
    **flux2_klein.PRESETS,
}
_PIPELINE_CONFIG: dict[str, dict[str, Any]] = {**wan.PIPELINE_CONFIG, **flux2_klein.PIPELINE_CONFIG}
"""The pipeline's own settings, as the real repos' model_index.json has them."""


def preset_pipeline_class(name: str) -> str:
    """The diffusers pipeline class name of preset `name`, without building it."""
    if is_random_preset(name):
        return random_preset_pipeline_class(name)
    return _preset(name)[0]
