"""The presets single files map onto: what a file header cannot say, per recognised architecture.

`PRESETS` maps a recognised variant (detect.py) to its `Preset`: the tiny or `random:` preset
whose scheduler, VAE config and pipeline settings apply, the pipeline class, the text encoders
and VAE the family needs (named as a user knows them, for the messages), its image encoder.
The tables below say which pipeline slot each encoder kind fills, which VAE family a DiT family
reads, and which pipeline settings come from the preset.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..families.ltx2 import DISTILLED_SCHEDULER


@dataclass(frozen=True)
class Preset:
    """Where the settings a header cannot hold come from, per recognised architecture."""

    name: str
    """A preset name (tiny or random:) whose scheduler, VAE config and pipeline settings apply;
    empty when the architecture runs only as a pair of experts (Wan 2.2 I2V A14B)."""
    pipeline: str
    encoders: tuple[str, ...]
    """The encoder kinds the family needs, in component order ("umt5"; "clip", "t5")."""
    pair_preset: str = ""
    """The preset for two experts (Wan 2.2 A14B)."""
    vae: str = ""
    """The VAE the family needs, as a user knows it (ComfyUI's file name)."""
    image_encoder: str = ""
    """The CLIP image encoder the family needs (Wan 2.1 image-to-video), "" for none."""
    vision: bool = False
    """Qwen-Image-Edit: the Qwen2.5-VL text encoder is built with its vision tower, and a
    processor hands it the input images (qwen_image_edit.py)."""
    scheduler: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """Scheduler settings over the preset's, for a model that differs from it only there
    (a tiny LTX-2 file named distilled: families.ltx2.DISTILLED_SCHEDULER)."""

    def __post_init__(self) -> None:
        if not (self.name or self.pair_preset):
            raise ValueError(f"a {self.pipeline} preset needs a name or a pair preset")


_WAN21_VAE, _WAN22_VAE = "the Wan 2.1 VAE (wan_2.1_vae)", "the Wan 2.2 VAE (wan2.2_vae)"
_FLUX_VAE = "the Flux VAE (ae)"
_FLUX2_VAE = "the Flux.2 VAE (32 latent channels, in diffusers' names)"
_CLIP_VISION_H = "the CLIP ViT-H/14 image encoder (ComfyUI's clip_vision_h)"
CLIP_VISION_H = {  # laion's ViT-H/14 vision tower, as Wan-AI/Wan2.1-I2V-14B-*-Diffusers ship it
    "hidden_size": 1280,
    "intermediate_size": 5120,
    "num_hidden_layers": 32,
    "num_attention_heads": 16,
    "image_size": 224,
    "patch_size": 14,
    "hidden_act": "gelu",
}
"""What `paradit plan` counts for Wan 2.1 I2V's image encoder (the file is not given there)."""
_HY15_T2V, _HY15_I2V = "HunyuanVideo15Pipeline", "HunyuanVideo15ImageToVideoPipeline"
_HY15_ENCODERS = ("qwen2.5-vl", "t5")  # ByT5 is a T5 encoder
_HY15_VAE = "the HunyuanVideo 1.5 VAE (hunyuanvideo15_vae_fp16)"
_SIGLIP = "the SigLIP image encoder (sigclip_vision_patch14_384)"
_QWEN_IMAGE_VAE = "the Qwen-Image VAE (qwen_image_vae: the Wan 2.1 VAE's key names)"
_EDIT_PLUS, _EDIT = "QwenImageEditPlusPipeline", "QwenImageEditPipeline"
_LTX2_VAE = "the LTX-2 video VAE (in the checkpoint, under vae.)"
PRESETS = {
    "tiny-wan": Preset("tiny-wan", "WanPipeline", ("umt5",), "tiny-wan", _WAN21_VAE),
    "wan2.1-t2v-1.3b": Preset("random:wan2.1-t2v-1.3b", "WanPipeline", ("umt5",), vae=_WAN21_VAE),
    "wan-t2v-14b": Preset(
        "random:wan2.1-t2v-14b", "WanPipeline", ("umt5",), "random:wan2.2-t2v-a14b", _WAN21_VAE
    ),
    "tiny-wan-i2v": Preset(
        "tiny-wan-i2v",
        "WanImageToVideoPipeline",
        ("umt5",),
        vae=_WAN21_VAE,
        image_encoder="the tiny CLIP vision encoder",
    ),
    # Wan 2.1 I2V 14B: the T2V 14B preset's scheduler (UniPC, shift 3: the 480p model's) and VAE
    "wan2.1-i2v-14b": Preset(
        "random:wan2.1-t2v-14b",
        "WanImageToVideoPipeline",
        ("umt5",),
        vae=_WAN21_VAE,
        image_encoder=_CLIP_VISION_H,
    ),
    "tiny-wan2.2-ti2v-5b": Preset(
        "tiny-wan2.2-ti2v-5b", "WanPipeline", ("umt5",), vae="the tiny Wan 2.2 VAE"
    ),
    "wan2.2-ti2v-5b": Preset("random:wan2.2-ti2v-5b", "WanPipeline", ("umt5",), vae=_WAN22_VAE),
    "tiny-wan2.2-i2v-a14b": Preset(
        "", "WanImageToVideoPipeline", ("umt5",), "tiny-wan2.2-i2v-a14b", _WAN21_VAE
    ),
    "wan2.2-i2v-a14b": Preset(
        "", "WanImageToVideoPipeline", ("umt5",), "random:wan2.2-i2v-a14b", _WAN21_VAE
    ),
    **{
        variant: Preset(name, pipeline, _HY15_ENCODERS, vae=_HY15_VAE, image_encoder=image)
        for variant, name, pipeline, image in (
            ("tiny-hunyuanvideo1.5", "tiny-hunyuanvideo1.5", _HY15_T2V, ""),
            ("tiny-hunyuanvideo1.5-i2v", "tiny-hunyuanvideo1.5-i2v", _HY15_I2V, _SIGLIP),
            ("hunyuanvideo1.5-480p-t2v", "random:hunyuanvideo1.5-t2v", _HY15_T2V, ""),
            ("hunyuanvideo1.5-720p-t2v", "random:hunyuanvideo1.5-t2v", _HY15_T2V, ""),
            ("hunyuanvideo1.5-480p-i2v", "random:hunyuanvideo1.5-i2v", _HY15_I2V, _SIGLIP),
            ("hunyuanvideo1.5-720p-i2v", "random:hunyuanvideo1.5-i2v", _HY15_I2V, _SIGLIP),
        )
    },
    "tiny-flux": Preset("tiny-flux", "FluxPipeline", ("clip", "t5"), vae=_FLUX_VAE),
    "flux.1-dev": Preset("random:flux.1-dev", "FluxPipeline", ("clip", "t5"), vae=_FLUX_VAE),
    "tiny-z-image": Preset("tiny-z-image", "ZImagePipeline", ("qwen3",), vae=_FLUX_VAE),
    "z-image-turbo": Preset("random:z-image-turbo", "ZImagePipeline", ("qwen3",), vae=_FLUX_VAE),
    # FLUX.2-dev: Mistral Small 3.1's language model alone (the pipeline reads its hidden states
    # 10, 20 and 30, which the text model gives as the full Mistral3ForConditionalGeneration does)
    "tiny-flux2": Preset("tiny-flux2", "Flux2Pipeline", ("mistral3",), vae=_FLUX2_VAE),
    "flux.2-dev": Preset("random:flux.2-dev", "Flux2Pipeline", ("mistral3",), vae=_FLUX2_VAE),
    "tiny-flux2-klein": Preset(
        "tiny-flux2-klein", "Flux2KleinPipeline", ("qwen3",), vae=_FLUX2_VAE
    ),
    "flux.2-klein-4b": Preset(
        "random:flux.2-klein-4b", "Flux2KleinPipeline", ("qwen3",), vae=_FLUX2_VAE
    ),
    "flux.2-klein-9b": Preset(
        "random:flux.2-klein-9b", "Flux2KleinPipeline", ("qwen3",), vae=_FLUX2_VAE
    ),
    # Qwen-Image: the Qwen2.5-VL language model alone (text-to-image never runs its vision
    # tower; the pipeline reads the last hidden states, which the text model gives as well)
    "tiny-qwen-image": Preset(
        "tiny-qwen-image", "QwenImagePipeline", ("qwen2.5-vl",), vae=_QWEN_IMAGE_VAE
    ),
    "qwen-image": Preset(
        "random:qwen-image", "QwenImagePipeline", ("qwen2.5-vl",), vae=_QWEN_IMAGE_VAE
    ),
    # Qwen-Image-Edit: Qwen-Image's DiT and VAE; Qwen2.5-VL with its vision tower reads the
    # images. The file name tells the Edit-Plus releases (2509, 2511) from the first model.
    **{
        variant: Preset(name, pipeline, ("qwen2.5-vl",), vae=_QWEN_IMAGE_VAE, vision=True)
        for variant, name, pipeline in (
            ("tiny-qwen-image-edit-plus", "tiny-qwen-image-edit", _EDIT_PLUS),
            ("tiny-qwen-image-edit", "tiny-qwen-image-edit", _EDIT),
            ("qwen-image-edit-plus", "random:qwen-image-edit", _EDIT_PLUS),
            ("qwen-image-edit", "random:qwen-image-edit", _EDIT),
        )
    },
    # LTX-2: the checkpoint holds the DiT, connectors, video and audio VAEs and vocoder; Gemma 3's
    # text model is the text encoder (the pipeline reads every hidden state it gives)
    "tiny-ltx2": Preset("tiny-ltx2", "LTX2Pipeline", ("gemma3",), vae=_LTX2_VAE),
    "ltx-2": Preset("random:ltx-2", "LTX2Pipeline", ("gemma3",), vae=_LTX2_VAE),
    # the distilled model: the same shapes and parts, its own schedule (families/ltx2.py)
    "tiny-ltx2-distilled": Preset(
        "tiny-ltx2", "LTX2Pipeline", ("gemma3",), vae=_LTX2_VAE, scheduler=DISTILLED_SCHEDULER
    ),
    "ltx-2-distilled": Preset("random:ltx-2-distilled", "LTX2Pipeline", ("gemma3",), vae=_LTX2_VAE),
}
BUNDLING_FAMILIES = ("flux", "ltx2")
"""Families whose checkpoints may hold their other parts (ComfyUI's `models/checkpoints`)."""
ENCODER_CLASSES = {"Flux2KleinPipeline": {"Qwen3Model": "Qwen3ForCausalLM"}}
"""The text encoder class a pipeline takes where it differs from the file's plain model."""
ENCODER_SLOTS = {
    "clip": "text_encoder",
    "t5": "text_encoder_2",
    "umt5": "text_encoder",
    "qwen3": "text_encoder",
    "qwen2.5-vl": "text_encoder",
    "mistral3": "text_encoder",
    "gemma3": "text_encoder",
}
TOKENIZER_SLOTS = {"text_encoder": "tokenizer", "text_encoder_2": "tokenizer_2"}
PAIR_BOUNDARY = {"tiny-wan": 0.875}  # the other pairs take their preset's boundary_ratio
PIPELINE_SETTINGS = ("boundary_ratio", "expand_timesteps", "is_distilled")
