"""ComfyUI's official templates of paradit's families as the tests import them: the tiny
ComfyUI files under the templates' own names (`tiny_files`, `comfy_for`), and each mapped
template's job written by hand from its graph (`EXPECTED`, `LTX2_TWO_STAGE`), or the node it is
refused at (`REFUSED`). Shared by tests/workflow/test_templates.py (the saved form) and
tests/frontends/test_comfyui_templates.py (the API form ComfyUI's frontend exports); each
template's own branch adds its rows here."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from comfy_files import (
    WAN_PREFIX,
    flux2_bfl,
    hunyuan15_original,
    hunyuan15_vae_original,
    krea2_original,
    ltx2_checkpoint,
    ltx25_diffusion_vae,
    mistral3_comfy,
    quantizable,
    qwen3_comfy,
    qwen_image21_vae_comfy,
    write_all_in_one,
    write_safetensors,
    z_image_original,
)
from comfy_templates import TEMPLATES, placeholders, widget
from comfy_workflow_files import START_IMAGE, write_comfyui
from h3_files import write_files
from lora_files import peft_lora
from PIL import Image
from quant_files import write_int8
from safetensors.torch import save_file

from paradit.backend.models.families.ltx2 import upscaler
from paradit.backend.models.presets import build_preset
from paradit.backend.sampling.names import SAMPLERS

WAN_T2V, WAN_I2V = "wan2.1_t2v_tiny_fp32", "wan2.1_i2v_480p_tiny_fp32"
A14B_I2V = "wan2.2_i2v_{}_noise_14B_tiny_fp32"
Z_IMAGE_INT8 = "z_image_tiny_int8_convrot"
LINKS = {  # the file a template names -> the tiny file in its place (models/ or input/)
    "diffusion_models/wan2.1_t2v_1.3B_fp16": f"diffusion_models/{WAN_T2V}",
    "diffusion_models/wan2.1_i2v_480p_14B_fp16": f"diffusion_models/{WAN_I2V}",
    # Wan 2.2 A14B T2V's experts are Wan 2.1 T2V-shaped DiTs: the tiny T2V DiT for both
    "diffusion_models/wan2.2_t2v_high_noise_14B_fp8_scaled": f"diffusion_models/{WAN_T2V}",
    "diffusion_models/wan2.2_t2v_low_noise_14B_fp8_scaled": f"diffusion_models/{WAN_T2V}",
    "diffusion_models/wan2.2_i2v_high_noise_14B_fp8_scaled":
        f"diffusion_models/{A14B_I2V.format('high')}",
    "diffusion_models/wan2.2_i2v_low_noise_14B_fp8_scaled":
        f"diffusion_models/{A14B_I2V.format('low')}",
    "diffusion_models/wan2.2_ti2v_5B_fp16": "diffusion_models/wan2.2_ti2v_5B_tiny_fp32",
    "text_encoders/umt5_xxl_fp8_e4m3fn_scaled": "text_encoders/umt5_tiny",
    "vae/wan_2.1_vae": "vae/wan_2.1_vae_tiny",
    "vae/wan2.2_vae": "vae/wan2.2_vae_tiny",
    "clip_vision/clip_vision_h": "clip_vision/clip_vision_tiny",
    "diffusion_models/z_image_turbo_bf16": "diffusion_models/z_image_turbo_tiny_bf16",
    "diffusion_models/z_image_bf16": "diffusion_models/z_image_turbo_tiny_bf16",
    "diffusion_models/z_image_int8_convrot": f"diffusion_models/{Z_IMAGE_INT8}",
    "text_encoders/qwen_3_4b": "text_encoders/qwen_3_tiny",
    "diffusion_models/qwen_image_fp8_e4m3fn": "diffusion_models/qwen_image_tiny_bf16",
    "diffusion_models/qwen_image_2512_fp8_e4m3fn": "diffusion_models/qwen_image_tiny_bf16",
    "text_encoders/qwen_2.5_vl_7b_fp8_scaled": "text_encoders/qwen_2.5_vl_tiny",
    "vae/qwen_image_vae": "vae/qwen_image_vae_tiny",
    "diffusion_models/hunyuanvideo1.5_720p_t2v_fp16":
        "diffusion_models/hunyuanvideo1.5_480p_t2v_fp32",
    "text_encoders/byt5_small_glyphxl_fp16": "text_encoders/byt5_small_glyphxl_tiny",
    "vae/hunyuanvideo15_vae_fp16": "vae/hunyuanvideo15_vae_tiny",
    "checkpoints/ltx-2-19b-dev-fp8": "checkpoints/ltx-2-19b-dev_tiny",
    "checkpoints/ltx-2-19b-distilled": "checkpoints/ltx-2-19b-dev_tiny",
    "text_encoders/gemma_3_12B_it_fp4_mixed": "text_encoders/gemma_3_tiny",
    "loras/ltx-2-19b-distilled-lora-384": "loras/ltx2_tiny_lora",
    "latent_upscale_models/ltx-2-spatial-upscaler-x2-1.0":
        "latent_upscale_models/ltx2_upscaler_tiny",
    # LTX-2.3 (video_ltx2_3_t2v): tiny-ltx2.3's checkpoint; its Gemma 3 is tiny-ltx2's, its
    # latent channels too (the same tiny upscaler), the distilled LoRA the same tiny one
    # (attn1.to_q: the same shapes in tiny-ltx2.3's DiT)
    "checkpoints/ltx-2.3-22b-dev-fp8": "checkpoints/ltx-2.3-22b-dev_tiny",
    "loras/ltx_2.3_22b_distilled_1.1_lora_dynamic_fro09_avg_rank_111_bf16": "loras/ltx2_tiny_lora",
    "latent_upscale_models/ltx-2.3-spatial-upscaler-x2-1.1":
        "latent_upscale_models/ltx2_upscaler_tiny",
    # LTX-2.5 (video_ltx2_5_t2v): tiny-ltx2.5's separate files (ltx_files), float32 where the
    # template's DiT and encoder are int8_convrot; the convolutional video VAE Lightricks
    # publishes beside the template's diffusion decoder (ltx-2.5-video-vae-conv-bf16)
    "diffusion_models/ltx-2.5-22b-distilled-transformer-comfy-int8-convrot":
        "diffusion_models/ltx-2.5-22b-distilled-transformer_tiny",
    "text_encoders/gemma4-12b-with-proj-ltx-2.5-comfy-int8-convrot":
        "text_encoders/gemma4-12b-with-proj-ltx-2.5_tiny",
    "vae/ltx-2.5-audio-vae-bf16": "vae/ltx-2.5-audio-vae_tiny",
    "vae/ltx-2.5-video-vae-conv-bf16": "vae/ltx-2.5-video-vae-conv_tiny",
    # the template's own video VAE, the diffusion decoder (refused by its keys)
    "vae/ltx-2.5-video-vae-bf16": "vae/ltx-2.5-video-vae_tiny",
    "latent_upscale_models/ltx-2.5-latent-spatial-upscaler-x2-bf16-1.0":
        "latent_upscale_models/ltx2_upscaler_tiny",
}  # fmt: skip
IMAGES = (
    "image_to_video_wan_start_image.png", "video_wan2_2_14B_i2v_input_image.jpg",
    "video_hunyuan_video_1.5_720p_i2v_input_image.png",
    "freckled_curly_girl.png", "snow_bike_jump_crew.png",  # LTX-2's i2v templates
    "egyptian_queen.png", "neon_cyborg_portrait.png",  # LTX-2.3's and 2.5's i2v templates
)  # fmt: skip
"""The start images the templates' LoadImage nodes name (in `input/`)."""
HV15_I2V = ("diffusion_models/hunyuanvideo1.5_i2v_tiny_fp32", "vae/hunyuanvideo15_i2v_vae_tiny",
            "clip_vision/siglip_hunyuan15_tiny")  # fmt: skip
"""tiny-hunyuanvideo1.5-i2v's DiT and VAE in Tencent's names, its SigLIP as ComfyUI's
`sigclip_vision_patch14_384` (`vision_model.` keys); its text encoders are the text-to-video
preset's files."""
OWN_LINKS = {  # template -> links of its own (Flux.1 dev's `ae` is Flux's real-size VAE header)
    "image_z_image_turbo.json": {"vae/ae": "vae/ae_tiny"},
    # tiny-hunyuanvideo1.5-i2v's own DiT, VAE (its last level 16 wide) and SigLIP
    "video_hunyuan_video_1.5_720p_i2v.json": dict(
        zip(
            (
                "diffusion_models/hunyuanvideo1.5_720p_i2v_fp16",
                "vae/hunyuanvideo15_vae_fp16",
                "clip_vision/sigclip_vision_patch14_384",
            ),
            HV15_I2V,
            strict=True,
        )
    ),
    "image_z_image.json": {"vae/ae": "vae/ae_tiny"},
    "image_z_image_int8.json": {"vae/ae": "vae/ae_tiny"},
    # the Flux.2 VAE's header under the name of the one the template names (a real
    # `full_encoder_small_decoder` file is read only where its header is that VAE's)
    "image_flux2_text_to_image.json": {"vae/full_encoder_small_decoder": "vae/flux2-vae"},
    # FLUX.2 [klein] base: the Klein DiTs' headers under the -base names (no weight differs),
    # Qwen3-4B's and -8B's headers, the Flux.2 VAE's
    "image_flux2_klein_text_to_image.json": {
        "diffusion_models/flux-2-klein-base-4b": "diffusion_models/flux-2-klein-4b",
        "text_encoders/qwen_3_4b": "text_encoders/qwen_3_4b_header",
    },
    "image_flux2_text_to_image_9b.json": {
        "diffusion_models/flux-2-klein-base-9b-fp8": "diffusion_models/flux-2-klein-9b",
        "text_encoders/qwen_3_8b_fp8mixed": "text_encoders/qwen_3_8b_header",
        "vae/full_encoder_small_decoder": "vae/flux2-vae",
    },
    # FLUX.1 Krea [dev]: Flux.1 dev's architecture (its header in the fp8_scaled file's place)
    "flux1_krea_dev.json": {
        "diffusion_models/flux1-krea-dev_fp8_scaled": "diffusion_models/flux1-dev"
    },
}


def tiny_files(folder: Path) -> Path:
    """The tiny ComfyUI files written in `folder`, the tiny Z-Image DiT as an int8_convrot
    file (ConvRot groups of 64 at the tiny widths: tests/quant_files.py), and for LTX-2 a
    tiny LoRA and a tiny x2 latent upscaler (its config in the file's metadata, as
    Lightricks' file carries it and ComfyUI's loader reads it)."""
    folder = write_comfyui(folder)
    dit = z_image_original(build_preset("tiny-z-image").transformer.state_dict())
    path = folder / "models" / "diffusion_models" / f"{Z_IMAGE_INT8}.safetensors"
    write_int8(path, dit, quantizable, WAN_PREFIX, 64)
    ltx2 = build_preset("tiny-ltx2")
    (folder / "models" / "loras").mkdir(exist_ok=True)
    peft_lora(folder / "models/loras/ltx2_tiny_lora.safetensors", ltx2.transformer,
              ("attn1.to_q",), seed=3)  # fmt: skip
    channels = ltx2.vae.config.latent_channels
    config = {"in_channels": channels, "mid_channels": 32, "num_blocks_per_stage": 1,
              "dims": 3, "spatial_upsample": True, "temporal_upsample": False,
              "spatial_scale": 2.0, "rational_resampler": True}  # fmt: skip
    path = folder / "models" / "latent_upscale_models" / "ltx2_upscaler_tiny.safetensors"
    path.parent.mkdir(exist_ok=True)
    state = {k: v.contiguous() for k, v in upscaler.tiny(0, channels).state_dict().items()}
    save_file(state, str(path), metadata={"config": json.dumps(config)})
    tiny_weights(folder / "models")
    ltx_files(folder / "models")
    return folder


def ltx_files(models: Path) -> None:
    """LTX-2.3's and LTX-2.5's tiny files as ComfyUI's templates name them: tiny-ltx2.3 as
    Lightricks' all-in-one checkpoint (`ltx2_checkpoint`); tiny-ltx2.5 as LTX-2.5's separate
    files, each part in the checkpoint's names: the DiT with the text connectors beside it
    (`model.diffusion_model.`), the Gemma 4 text model (`model.`) with the text projection
    (`text_embedding_projection.`), the audio VAE (`audio_vae.`) with the vocoder
    (`vocoder.`: ComfyUI's VAELoader tells an LTX audio VAE by its vocoder's keys,
    comfy/sd.py), the video VAE without a prefix; and the diffusion video VAE
    (`ltx25_diffusion_vae`: the conv VAE's encoder beside a tiny diffusion decoder)."""
    save_file(ltx2_checkpoint(build_preset("tiny-ltx2.3")),
              str(models / "checkpoints" / "ltx-2.3-22b-dev_tiny.safetensors"))  # fmt: skip
    tiny = build_preset("tiny-ltx2.5")
    whole = ltx2_checkpoint(tiny)
    text = {"model." + k: v.contiguous() for k, v in tiny.text_encoder.state_dict().items()}
    files = {  # file -> its keys of the checkpoint (prefix, kept as is)
        "diffusion_models/ltx-2.5-22b-distilled-transformer_tiny": ("model.diffusion_model.",),
        "text_encoders/gemma4-12b-with-proj-ltx-2.5_tiny": ("text_embedding_projection.",),
        "vae/ltx-2.5-audio-vae_tiny": ("audio_vae.", "vocoder."),
    }
    for name, prefixes in files.items():
        state = {k: v for k, v in whole.items() if k.startswith(prefixes)}
        state |= text if name.startswith("text_encoders/") else {}
        (models / name).parent.mkdir(exist_ok=True)
        save_file(state, str(models / f"{name}.safetensors"))
    video = {k[len("vae.") :]: v for k, v in whole.items() if k.startswith("vae.")}
    save_file(video, str(models / "vae" / "ltx-2.5-video-vae-conv_tiny.safetensors"))
    state, metadata = ltx25_diffusion_vae(video)
    save_file(state, str(models / "vae" / "ltx-2.5-video-vae_tiny.safetensors"), metadata)


FLUX_ALL_IN_ONE = "checkpoints/flux1_tiny_all_in_one"
"""tiny-flux as ComfyUI's all-in-one checkpoint (DiT, CLIP-L, T5, VAE: flux1-schnell-fp8's
layout; tiny-flux's DiT has no guidance embedding, as schnell's)."""
FLUX2_TINY = {  # preset -> its DiT, text encoder and VAE files (in models/, no suffix)
    "tiny-flux2": ("diffusion_models/flux2_dev_tiny_fp32",
                   "text_encoders/mistral_3_small_flux2_tiny", "vae/flux2_vae_tiny"),
    "tiny-flux2-klein-base": ("diffusion_models/flux2_klein_tiny_fp32",
                              "text_encoders/qwen_3_klein_tiny", "vae/flux2_klein_vae_tiny"),
}  # fmt: skip


def tiny_weights(models: Path) -> None:
    """Weight-carrying tiny files of the templates whose own files are headers: tiny-flux as
    an all-in-one checkpoint (`FLUX_ALL_IN_ONE`), and tiny-flux2's and tiny-flux2-klein-base's
    files as ComfyUI's FLUX.2 templates name them (`FLUX2_TINY`: the DiT in Black Forest Labs'
    names, float32; Mistral 3 and Qwen3 in ComfyUI's names; the Flux.2 VAE in diffusers')."""
    i2v = build_preset("tiny-hunyuanvideo1.5-i2v")
    dit, vae, siglip = (models / f"{name}.safetensors" for name in HV15_I2V)
    write_safetensors(dit, hunyuan15_original(i2v.transformer.state_dict()), "fp32")
    write_safetensors(vae, hunyuan15_vae_original(i2v.vae.state_dict()), "fp32")
    siglip.parent.mkdir(exist_ok=True)
    state = i2v.image_encoder.state_dict()  # ComfyUI's keys: under `vision_model.`
    save_file({("" if k.startswith("vision_model.") else "vision_model.") + k: v.contiguous()
               for k, v in state.items()}, str(siglip))  # fmt: skip
    (models / "checkpoints").mkdir(exist_ok=True)
    write_all_in_one(models / f"{FLUX_ALL_IN_ONE}.safetensors", build_preset("tiny-flux"))
    for preset, (dit, encoder, vae) in FLUX2_TINY.items():
        tiny = build_preset(preset)
        state = flux2_bfl(tiny.transformer.state_dict())
        write_safetensors(models / f"{dit}.safetensors", state, "fp32", WAN_PREFIX)
        if preset == "tiny-flux2":
            text = mistral3_comfy(tiny.text_encoder.state_dict())
        else:
            text = qwen3_comfy(tiny.text_encoder.model.state_dict())
        save_file(text, str(models / f"{encoder}.safetensors"))
        state = {k: v.contiguous() for k, v in tiny.vae.state_dict().items()}
        save_file(state, str(models / f"{vae}.safetensors"))


def comfy_for(base: Path, template: str, folder: Path) -> Path:
    """A ComfyUI folder for one template: the tiny files, and under the names the template
    gives its files, hard links to the tiny ones in their place."""
    for path in base.rglob("*"):
        if path.is_file():
            target = folder / path.relative_to(base)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.link(path, target)
    links = {**LINKS, **OWN_LINKS.get(template, {})}
    for name, tiny in links.items():
        target = folder / "models" / f"{name}.safetensors"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.unlink(missing_ok=True)
        os.link(base / "models" / f"{tiny}.safetensors", target)
    for name in IMAGES:
        os.link(base / "input" / START_IMAGE, folder / "input" / name)
    return folder


def in_folder(request: dict, comfy: Path) -> dict:
    """A request written relative to a ComfyUI folder (`image`, `images` in `input/`) with
    its image paths in `comfy`, as the import gives them."""
    request = dict(request)
    if "image" in request:
        request["image"] = str(comfy / request["image"])
    if "images" in request:
        request["images"] = [str(comfy / image) for image in request["images"]]
    return request


FLUX_SHIFT = math.exp(1.15)
"""ComfyUI's Flux default (ModelSamplingFlux, mu 1.15): the static shift exp(1.15); Qwen-Image's
too (QwenImage sampling_settings shift 1.15 on ModelType.FLUX)."""
UMT5 = ["text_encoders/umt5_xxl_fp8_e4m3fn_scaled.safetensors"]
WAN21_VAE = ["vae/wan_2.1_vae.safetensors"]


EXPECTED = {  # template -> (variant, request, serve settings relative to models/)
    "text_to_video_wan.json": (
        "tiny-wan",
        {"prompt": widget("text_to_video_wan.json", "6", 0),  # CLIPTextEncode 6
         "negative_prompt": widget("text_to_video_wan.json", "7", 0),  # CLIPTextEncode 7
         "width": 832, "height": 480, "num_frames": 33,  # EmptyHunyuanLatentVideo 40
         # KSampler 3: seed, steps 30, cfg 6, uni_pc/simple; ModelSamplingSD3 48: shift 8
         "num_inference_steps": 30, "guidance_scale": 6.0, "seed": 82628696717253,
         "sampler": "uni_pc", "scheduler": "simple", "shift": 8.0},
        {"model": "diffusion_models/wan2.1_t2v_1.3B_fp16.safetensors", "text_encoders": UMT5,
         "vaes": WAN21_VAE, "image_encoders": [], "lora_dirs": []},
    ),
    "image_to_video_wan.json": (
        "tiny-wan-i2v",
        {"prompt": widget("image_to_video_wan.json", "6", 0),
         "negative_prompt": widget("image_to_video_wan.json", "7", 0),
         "width": 512, "height": 512, "num_frames": 33,  # WanImageToVideo 50
         # KSampler 3: seed, steps 20, cfg 6, uni_pc/simple; ModelSamplingSD3 54: shift 8
         "num_inference_steps": 20, "guidance_scale": 6.0, "seed": 987948718394761,
         "sampler": "uni_pc", "scheduler": "simple", "shift": 8.0,
         "image": "input/image_to_video_wan_start_image.png"},  # LoadImage 52
        {"model": "diffusion_models/wan2.1_i2v_480p_14B_fp16.safetensors",
         "text_encoders": UMT5, "vaes": WAN21_VAE,
         "image_encoders": ["clip_vision/clip_vision_h.safetensors"], "lora_dirs": []},
    ),
    "video_wan2_2_14B_t2v.json": (  # subgraph 128, "Enable Lightning LoRA" (129) false
        "tiny-wan A14B pair",
        {"prompt": widget("video_wan2_2_14B_t2v.json", "128:89", 0),
         "negative_prompt": widget("video_wan2_2_14B_t2v.json", "128:72", 0),
         # EmptyHunyuanLatentVideo 74: 640x640; its length from ComfyMathExpression 127,
         # floor(a * b) + 1 of PrimitiveFloat 126 (5 s) and 125 (16 fps): 81
         "width": 640, "height": 640, "num_frames": 81,
         # the switches' on_false branches: steps PrimitiveInt 114 (20), cfg PrimitiveFloat
         # 116 (3.5) on both samplers, the split PrimitiveInt 115 (10); the seed
         # KSamplerAdvanced 81's; euler/simple; ModelSamplingSD3 82 and 86 on the bare
         # experts: shift 5.000000000000001, as saved; no LoRA on that branch
         "num_inference_steps": 20, "guidance_scale": 3.5, "guidance_scale_low": 3.5,
         "switch_step": 10, "seed": 923510416338945, "sampler": "euler",
         "scheduler": "simple", "shift": 5.000000000000001},
        {"model": "diffusion_models/wan2.2_t2v_high_noise_14B_fp8_scaled.safetensors,"
                  "diffusion_models/wan2.2_t2v_low_noise_14B_fp8_scaled.safetensors",
         "text_encoders": UMT5, "vaes": WAN21_VAE, "image_encoders": [], "lora_dirs": []},
    ),
    "video_wan2_2_14B_i2v.json": (  # subgraph 129, saved with its widget values on the node
        "tiny-wan2.2-i2v-a14b pair",
        {"prompt": widget("video_wan2_2_14B_i2v.json", "129", 0),  # the subgraph's text
         "negative_prompt": widget("video_wan2_2_14B_i2v.json", "129:89", 0),
         # WanImageToVideo 98: width, height the subgraph's 640, 640; length
         # ComfyMathExpression 163, floor(a * b + 1) of the subgraph's duration 5 and
         # PrimitiveFloat 162 (16): 81
         "width": 640, "height": 640, "num_frames": 81,
         # switches on_false: steps 128 (20), cfg 126 (3.5), split 127 (10); seed the
         # subgraph's noise_seed; ModelSamplingSD3 103/104: 5.000000000000001
         "num_inference_steps": 20, "guidance_scale": 3.5, "guidance_scale_low": 3.5,
         "switch_step": 10, "seed": 264244520398999, "sampler": "euler",
         "scheduler": "simple", "shift": 5.000000000000001,
         "image": "input/video_wan2_2_14B_i2v_input_image.jpg"},  # LoadImage 97
        {"model": "diffusion_models/wan2.2_i2v_high_noise_14B_fp8_scaled.safetensors,"
                  "diffusion_models/wan2.2_i2v_low_noise_14B_fp8_scaled.safetensors",
         "text_encoders": UMT5, "vaes": WAN21_VAE, "image_encoders": [], "lora_dirs": []},
    ),
    "video_wan2_2_5B_ti2v.json": (  # LoadImage 56 bypassed: no start image, text to video
        "tiny-wan2.2-ti2v-5b",
        {"prompt": widget("video_wan2_2_5B_ti2v.json", "6", 0),
         "negative_prompt": widget("video_wan2_2_5B_ti2v.json", "7", 0),
         "width": 1280, "height": 704, "num_frames": 121,  # Wan22ImageToVideoLatent 55
         # KSampler 3: seed, 20 steps, cfg 5, uni_pc/simple; ModelSamplingSD3 48: 8
         "num_inference_steps": 20, "guidance_scale": 5.0, "seed": 898471028164125,
         "sampler": "uni_pc", "scheduler": "simple", "shift": 8.0},
        {"model": "diffusion_models/wan2.2_ti2v_5B_fp16.safetensors", "text_encoders": UMT5,
         "vaes": ["vae/wan2.2_vae.safetensors"], "image_encoders": [], "lora_dirs": []},
    ),
    "image_z_image_turbo.json": (  # subgraph 57
        "tiny-z-image",
        {"prompt": widget("image_z_image_turbo.json", "57:27", 0),
         "negative_prompt": "",  # ConditioningZeroOut 33
         "width": 1024, "height": 1024, "num_frames": 1,  # EmptySD3LatentImage 13
         # KSampler 3: seed 0, 8 steps, cfg 1, res_multistep/simple; ModelSamplingAuraFlow
         # 11: shift 3
         "num_inference_steps": 8, "guidance_scale": 1.0, "seed": 0,
         "sampler": "res_multistep", "scheduler": "simple", "shift": 3.0},
        {"model": "diffusion_models/z_image_turbo_bf16.safetensors",
         "text_encoders": ["text_encoders/qwen_3_4b.safetensors"],
         "vaes": ["vae/ae.safetensors"], "image_encoders": [], "lora_dirs": []},
    ),
    **{
        name: (  # subgraph 76; its width_1/height_1 from ResolutionSelector 94 (1:1, 1 MP, 8)
            "tiny-z-image",
            {"prompt": widget(name, "76:67", 0),
             "negative_prompt": "",  # CLIPTextEncode 71's empty text
             # EmptySD3LatentImage 68: ResolutionSelector 94's sqrt(1 * 1024^2 / (1 * 1)) =
             # 1024, rounded to a multiple of 8: 1024 x 1024
             "width": 1024, "height": 1024, "num_frames": 1,
             # KSampler 69: its seed, 25 steps, cfg 4, res_multistep/simple;
             # ModelSamplingAuraFlow 70: shift 3
             "num_inference_steps": 25, "guidance_scale": 4.0, "seed": 677498465340151,
             "sampler": "res_multistep", "scheduler": "simple", "shift": 3.0},
            {"model": f"diffusion_models/{dit}.safetensors",
             "text_encoders": ["text_encoders/qwen_3_4b.safetensors"],
             "vaes": ["vae/ae.safetensors"], "image_encoders": [], "lora_dirs": []},
        )
        for name, dit in (("image_z_image.json", "z_image_bf16"),
                          ("image_z_image_int8.json", "z_image_int8_convrot"))
    },
    "image_qwen_image.json": (  # subgraph 76, "Enable Lightning LoRA" (86) false
        "tiny-qwen-image",
        {"prompt": widget("image_qwen_image.json", "76:6", 0),
         "negative_prompt": "",  # CLIPTextEncode 7
         "width": 1328, "height": 1328, "num_frames": 1,  # EmptySD3LatentImage 58
         # switches on_false: steps PrimitiveInt 84 (20), cfg PrimitiveFloat 85 (4), the
         # bare model; KSampler 3's seed, euler/simple; ModelSamplingAuraFlow 66: 3.1
         "num_inference_steps": 20, "guidance_scale": 4.0, "seed": 50347169638278,
         "sampler": "euler", "scheduler": "simple", "shift": 3.1000000000000005,
         # KSampler's plain CFG, not the Qwen-Image pipeline's rescale
         "cfg_mode": "plain"},
        {"model": "diffusion_models/qwen_image_fp8_e4m3fn.safetensors",
         "text_encoders": ["text_encoders/qwen_2.5_vl_7b_fp8_scaled.safetensors"],
         "vaes": ["vae/qwen_image_vae.safetensors"], "image_encoders": [], "lora_dirs": []},
    ),
    "video_hunyuan_video_1.5_720p_t2v.json": (  # EasyCache and the 1080p stage bypassed
        "tiny-hunyuanvideo1.5",
        {"prompt": widget("video_hunyuan_video_1.5_720p_t2v.json", "44", 0),
         "negative_prompt": "",  # CLIPTextEncode 93
         "width": 1280, "height": 720, "num_frames": 121,  # EmptyHunyuanVideo15Latent 124
         # RandomNoise 129's seed, BasicScheduler 128: 20 steps, simple, on the loader's
         # model: ComfyUI's HunyuanVideo 1.5 default shift 7; CFGGuider 131: 6; euler
         "num_inference_steps": 20, "guidance_scale": 6.0, "seed": 887963123424675,
         "sampler": "euler", "scheduler": "simple", "shift": 7.0},
        {"model": "diffusion_models/hunyuanvideo1.5_720p_t2v_fp16.safetensors",
         "text_encoders": ["text_encoders/qwen_2.5_vl_7b_fp8_scaled.safetensors",
                           "text_encoders/byt5_small_glyphxl_fp16.safetensors"],
         "vaes": ["vae/hunyuanvideo15_vae_fp16.safetensors"], "image_encoders": [],
         "lora_dirs": []},
    ),
    "video_hunyuan_video_1.5_720p_i2v.json": (  # EasyCache and the 1080p stage bypassed
        "tiny-hunyuanvideo1.5-i2v",
        {"prompt": widget("video_hunyuan_video_1.5_720p_i2v.json", "44", 0),
         "negative_prompt": "",  # CLIPTextEncode 93
         # HunyuanVideo15ImageToVideo 78: 1280x720, 121 frames; LoadImage 80's image, as
         # ComfyUI prepares it (CLIPVisionEncode 79: crop center)
         "width": 1280, "height": 720, "num_frames": 121,
         "image": "input/video_hunyuan_video_1.5_720p_i2v_input_image.png",
         "image_prep": "comfyui",
         # RandomNoise 127's seed, BasicScheduler 126: 20 steps, simple; ModelSamplingSD3
         # 130: 7; CFGGuider 129: 6; KSamplerSelect 128: euler
         "num_inference_steps": 20, "guidance_scale": 6.0, "seed": 887963123424675,
         "sampler": "euler", "scheduler": "simple", "shift": 7.0},
        {"model": "diffusion_models/hunyuanvideo1.5_720p_i2v_fp16.safetensors",
         "text_encoders": ["text_encoders/qwen_2.5_vl_7b_fp8_scaled.safetensors",
                           "text_encoders/byt5_small_glyphxl_fp16.safetensors"],
         "vaes": ["vae/hunyuanvideo15_vae_fp16.safetensors"],
         "image_encoders": ["clip_vision/sigclip_vision_patch14_384.safetensors"],
         "lora_dirs": []},
    ),
    "flux_dev_full_text_to_image.json": (  # subgraph 194; headers-only Flux.1 dev files
        "flux.1-dev",
        {"prompt": widget("flux_dev_full_text_to_image.json", "194:49", 0),
         "negative_prompt": "",  # ConditioningZeroOut 52
         "width": 1024, "height": 1024, "num_frames": 1,  # EmptySD3LatentImage 48
         # KSampler 50: seed 0, 20 steps, cfg 1, euler/simple; no FluxGuidance: ComfyUI's
         # 3.5; no ModelSamplingFlux: mu 1.15
         "num_inference_steps": 20, "guidance_scale": 3.5, "seed": 0, "sampler": "euler",
         "scheduler": "simple", "shift": pytest.approx(FLUX_SHIFT, rel=1e-12),
         "flow_levels": 10000},
        {"model": "diffusion_models/flux1-dev.safetensors",
         "text_encoders": ["text_encoders/clip_l.safetensors",
                           "text_encoders/t5xxl_fp16.safetensors"],
         "vaes": ["vae/ae.safetensors"], "image_encoders": [], "lora_dirs": []},
    ),
    "image_qwen_Image_2512.json": (  # subgraph 238, "Enable Lightning LoRA" (229) false
        "tiny-qwen-image",
        {"prompt": widget("image_qwen_Image_2512.json", "238:227", 0),
         "negative_prompt": widget("image_qwen_Image_2512.json", "238:228", 0),
         "width": 1328, "height": 1328, "num_frames": 1,  # EmptySD3LatentImage 232
         # switches on_false: steps PrimitiveInt 224 (50), cfg PrimitiveFloat 223 (4);
         # KSampler 230's seed, euler/simple; ModelSamplingAuraFlow 222: 3.1000000000000005
         "num_inference_steps": 50, "guidance_scale": 4.0, "seed": 464857551335368,
         "sampler": "euler", "scheduler": "simple", "shift": 3.1000000000000005,
         "cfg_mode": "plain"},
        {"model": "diffusion_models/qwen_image_2512_fp8_e4m3fn.safetensors",
         "text_encoders": ["text_encoders/qwen_2.5_vl_7b_fp8_scaled.safetensors"],
         "vaes": ["vae/qwen_image_vae.safetensors"], "image_encoders": [], "lora_dirs": []},
    ),
    "flux_dev_checkpoint_example.json": (  # subgraph 56; no FluxGuidance, no ModelSampling
        "flux.1-dev",
        {"prompt": widget("flux_dev_checkpoint_example.json", "56:51", 0),
         "negative_prompt": "",  # ConditioningZeroOut 54
         "width": 1024, "height": 1024, "num_frames": 1,  # EmptySD3LatentImage 50
         # KSampler 52: its seed, 20 steps, cfg 1, euler/simple; ComfyUI's Flux defaults:
         # guidance 3.5, mu 1.15
         "num_inference_steps": 20, "guidance_scale": 3.5, "seed": 53943644181156,
         "sampler": "euler", "scheduler": "simple",
         "shift": pytest.approx(FLUX_SHIFT, rel=1e-12), "flow_levels": 10000},
        {"model": "diffusion_models/flux1-dev.safetensors",
         "text_encoders": ["text_encoders/clip_l.safetensors",
                           "text_encoders/t5xxl_fp16.safetensors"],
         "vaes": ["vae/ae.safetensors"], "image_encoders": [], "lora_dirs": []},
    ),
    "image_flux2_text_to_image.json": (  # subgraph 98; headers-only FLUX.2-dev files
        "flux.2-dev",
        {"prompt": widget("image_flux2_text_to_image.json", "98:6", 0),
         "negative_prompt": "",  # BasicGuider 22: no negative
         "width": 1024, "height": 1024, "num_frames": 1,  # EmptyFlux2LatentImage 47
         # Flux2Scheduler 48: steps from the switch 103's on_false, PrimitiveInt 100 (20),
         # at 1024x1024 (the latent's): the Flux.2 pipeline's own levels, so no sampler,
         # scheduler or shift (KSamplerSelect 16: euler, its step); FluxGuidance 26: 4 with
         # BasicGuider 22 (cfg 1); RandomNoise 25's seed; the Turbo LoRA switch (102) false
         "num_inference_steps": 20, "guidance_scale": 4.0, "seed": 1027111520328378},
        {"model": "diffusion_models/flux2_dev_fp8mixed.safetensors",
         "text_encoders": ["text_encoders/mistral_3_small_flux2_bf16.safetensors"],
         "vaes": ["vae/full_encoder_small_decoder.safetensors"], "image_encoders": [],
         "lora_dirs": []},
    ),
    # FLUX.2 [klein] base (headers at the real widths): the file's name says base, so the
    # undistilled pipeline with true CFG; the prompt's Qwen3 and an empty negative's
    "image_flux2_klein_text_to_image.json": (  # subgraph 75 (77, the distilled one, bypassed)
        "flux.2-klein-base-4b",
        {"prompt": widget("image_flux2_klein_text_to_image.json", "76", 0),  # its String 76
         "negative_prompt": "",  # CLIPTextEncode 67's empty text
         # EmptyFlux2LatentImage 66 and Flux2Scheduler 62 at PrimitiveInt 68 x 69
         "width": 1024, "height": 1024, "num_frames": 1,
         # Flux2Scheduler 62: 20 steps, the pipeline's own levels (KSamplerSelect 61: euler);
         # CFGGuider 63: cfg 5 (two branches); RandomNoise 73's seed 0
         "num_inference_steps": 20, "guidance_scale": 5.0, "seed": 0},
        {"model": "diffusion_models/flux-2-klein-base-4b.safetensors",
         "text_encoders": ["text_encoders/qwen_3_4b.safetensors"],
         "vaes": ["vae/flux2-vae.safetensors"], "image_encoders": [], "lora_dirs": []},
    ),
    "image_flux2_text_to_image_9b.json": (  # subgraph 75, its values saved on the node
        "flux.2-klein-base-9b",
        {"prompt": widget("image_flux2_text_to_image_9b.json", "75", 0),  # the subgraph's text
         "negative_prompt": "",  # CLIPTextEncode 67's empty text
         "width": 1024, "height": 1024, "num_frames": 1,  # the subgraph's width, height
         # Flux2Scheduler 62: 20 steps; CFGGuider 63: cfg 5; the subgraph's noise_seed
         "num_inference_steps": 20, "guidance_scale": 5.0, "seed": 145965955694731},
        {"model": "diffusion_models/flux-2-klein-base-9b-fp8.safetensors",
         "text_encoders": ["text_encoders/qwen_3_8b_fp8mixed.safetensors"],
         "vaes": ["vae/full_encoder_small_decoder.safetensors"], "image_encoders": [],
         "lora_dirs": []},
    ),
    "flux1_krea_dev.json": (  # subgraph 200; no FluxGuidance, no ModelSampling
        "flux.1-dev",
        {"prompt": widget("flux1_krea_dev.json", "200:195", 0),
         "negative_prompt": "",  # ConditioningZeroOut 199
         "width": 1024, "height": 1024, "num_frames": 1,  # EmptySD3LatentImage 196
         # KSampler 197: seed 0, 20 steps, cfg 1, euler/simple; ComfyUI's Flux dev defaults:
         # guidance 3.5, mu 1.15
         "num_inference_steps": 20, "guidance_scale": 3.5, "seed": 0, "sampler": "euler",
         "scheduler": "simple", "shift": pytest.approx(FLUX_SHIFT, rel=1e-12),
         "flow_levels": 10000},
        {"model": "diffusion_models/flux1-krea-dev_fp8_scaled.safetensors",
         "text_encoders": ["text_encoders/clip_l.safetensors",
                           "text_encoders/t5xxl_fp16.safetensors"],
         "vaes": ["vae/ae.safetensors"], "image_encoders": [], "lora_dirs": []},
    ),
    "flux_schnell.json": (  # ComfyUI's all-in-one flux1-schnell-fp8 as a header
        "all-in-one flux.1-schnell (DiT, clip_l, t5xxl, vae)",
        {"prompt": widget("flux_schnell.json", "6", 0),  # CLIPTextEncode 6
         "negative_prompt": "",  # CLIPTextEncode 33's empty text
         "width": 1024, "height": 1024, "num_frames": 1,  # EmptySD3LatentImage 27
         # KSampler 31: its seed, 4 steps, cfg 1, euler/simple; ComfyUI's schnell shift 1
         "num_inference_steps": 4, "guidance_scale": 1.0, "seed": 173805153958730,
         "sampler": "euler", "scheduler": "simple", "shift": 1.0},
        {"model": "checkpoints/flux1-schnell-fp8.safetensors",  # CheckpointLoaderSimple 30
         "text_encoders": [], "vaes": [], "image_encoders": [], "lora_dirs": []},
    ),
    "flux_schnell_full_text_to_image.json": (  # headers-only Flux.1 schnell files
        "flux.1-schnell",
        # CLIPTextEncodeFlux 41: clip_l -> prompt (CLIP-L), t5xxl -> prompt_2 (T5); its
        # guidance 3.5 ignored, as ComfyUI's Flux does without a guidance embedding
        {"prompt": widget("flux_schnell_full_text_to_image.json", "41", 0),
         "prompt_2": widget("flux_schnell_full_text_to_image.json", "41", 1),
         "negative_prompt": "",  # ConditioningZeroOut 42
         "width": 1024, "height": 1024, "num_frames": 1,  # EmptySD3LatentImage 27
         # KSampler 31: its seed, 4 steps, cfg 1, euler/simple; no ModelSampling node:
         # ComfyUI's FluxSchnell default, flow shift 1
         "num_inference_steps": 4, "guidance_scale": 1.0, "seed": 167447334682596,
         "sampler": "euler", "scheduler": "simple", "shift": 1.0},
        {"model": "diffusion_models/flux1-schnell.safetensors",
         "text_encoders": ["text_encoders/clip_l.safetensors",
                           "text_encoders/t5xxl_fp16.safetensors"],
         "vaes": ["vae/ae.safetensors"], "image_encoders": [], "lora_dirs": []},
    ),
}  # fmt: skip


REFUSED = {  # template -> (where, node type, the reason's words)
    # Qwen-Image-Edit's templates map: tests/workflow/test_templates_qwen_edit.py
    # image_flux2.json (a FLUX.2 reference image) maps: tests/workflow/test_templates_flux.py
    # LTX-2's text- and image-to-video templates map as saved: tests/workflow/test_templates_ltx.py
    # FLUX.2 [klein]'s image-edit templates map: tests/workflow/test_templates_klein_edit.py
    "image_flux2_klein_9b_kv_image_edit.json": (
        "node 139", "FluxKVCache", "attend to the text and the noisy image at the first step "
        "(no mask",
    ),
}  # fmt: skip
"""The official templates of paradit's families it refuses, each naming the node (its path
inside subgraphs) and why: refused before any file is read, so placeholders stand for the
files they name."""


ANCESTRAL = "euler_ancestral" in SAMPLERS
"""The templates' samplers (KSamplerSelect euler_ancestral on both stages): where paradit runs
euler_ancestral they map as saved; until then the copies below say euler."""
LTX2_SAMPLER = "euler_ancestral" if ANCESTRAL else "euler"
LTX2_FILES = {
    "text_encoders": ["text_encoders/gemma_3_12B_it_fp4_mixed.safetensors"],
    "vaes": [], "image_encoders": [],
    "upscaler": "latent_upscale_models/ltx-2-spatial-upscaler-x2-1.0.safetensors",
}  # fmt: skip
LTX2_PARTS = "(DiT, connectors, vae, audio_vae, vocoder)"


def ltx2_serve(comfy: Path, checkpoint: str, lora: bool) -> dict:
    """An LTX-2 template's serve settings (`plan.serve`) on the ComfyUI folder `comfy`: the
    checkpoint `checkpoint` (its name without `.safetensors`), `LTX2_FILES`, and the LoRA
    folder where stage 2 loads a LoRA (`lora`)."""
    models = comfy / "models"
    return {
        "model": str(models / f"checkpoints/{checkpoint}.safetensors"),
        "text_encoders": [str(models / p) for p in LTX2_FILES["text_encoders"]],
        "vaes": [], "image_encoders": [],
        "lora_dirs": [str(models / "loras")] if lora else [],
        "upscaler": str(models / LTX2_FILES["upscaler"]),
    }  # fmt: skip


def ltxv_scheduler(steps: int, tokens: int) -> list[float]:
    """LTXVScheduler at the templates' settings (max_shift 2.05, base_shift 0.95, stretch to
    terminal 0.1), by LTX-Video's published formula, written out here."""
    mu = 0.95 + (2.05 - 0.95) * (tokens - 1024) / (4096 - 1024)
    shifted = [1 / (1 + math.exp(-mu) * (1 / (1 - k / steps) - 1)) for k in range(steps)]
    return [1 - (1 - s) * 0.9 / (1 - shifted[-1]) for s in shifted] + [0.0]


def levels(template: str, path: str) -> list[float]:
    """A ManualSigmas node's comma-separated levels, as the file saves them."""
    return [float(x) for x in widget(template, path, 0).split(",")]


LTX2_TWO_STAGE = {  # template -> (the subgraph node's widget index of the length, the tiny
    # checkpoint's variant under the template's name, request)
    "video_ltx2_t2v.json": (2, f"all-in-one tiny-ltx2 {LTX2_PARTS}", {  # subgraph 92
        "prompt": widget("video_ltx2_t2v.json", "92", 3),  # the subgraph's text
        "negative_prompt": widget("video_ltx2_t2v.json", "92:4", 0),  # CLIPTextEncode 4
        # EmptyImage 89 (the subgraph's 1280x720) through ImageScaleBy 90 (0.5): 640x360,
        # by GetImageSize 91 into EmptyLTXVLatentVideo 43, whose latent ComfyUI makes
        # 640 // 32 x 360 // 32 tokens (640x352); LTXVLatentUpsampler 84 doubles it
        "width": 1280, "height": 704, "num_frames": 113,  # PrimitiveInt 62 (edited: 113)
        # LTXVScheduler 9: 20 steps over 15 x 11 x 20 tokens; CFGGuider 47: 4; RandomNoise
        # 11: the subgraph's noise_seed 10; KSamplerSelect 8
        "num_inference_steps": 20, "guidance_scale": 4.0, "seed": 10,
        "sampler": LTX2_SAMPLER, "sigmas": pytest.approx(ltxv_scheduler(20, 3300), abs=1e-9),
        # LatentUpscaleModelLoader 76 (the tiny upscaler's config: x2); ManualSigmas 73;
        # KSamplerSelect 66; CFGGuider 82: 1; LoraLoaderModelOnly 68 (105 and 106 bypassed)
        "upscale": {"factor": 2, "sigmas": levels("video_ltx2_t2v.json", "92:73")[:-1],
                    "sampler": LTX2_SAMPLER, "guidance_scale": 1.0,
                    "loras": [{"name": "ltx-2-19b-distilled-lora-384.safetensors",
                               "strength": 1.0}]},
    }),
    "video_ltx2_t2v_distilled.json": (4, f"all-in-one tiny-ltx2-distilled {LTX2_PARTS}", {
        # subgraph 177
        # PrimitiveStringMultiline 109 (the subgraph's value) into CLIPTextEncode 102, which
        # LTXVConditioning 103 takes as both prompts
        "prompt": widget("video_ltx2_t2v_distilled.json", "177", 0),
        "negative_prompt": widget("video_ltx2_t2v_distilled.json", "177", 0),
        # EmptyImage 131 (1280x720) through ImageScaleBy 121 (0.5): 640x360 -> 640x352, x2
        "width": 1280, "height": 704, "num_frames": 113,  # PrimitiveInt 113 (edited: 113)
        # ManualSigmas 176's 9 levels: 8 steps; CFGGuider 127: 1; RandomNoise 123: 45
        "num_inference_steps": 8, "guidance_scale": 1.0, "seed": 45, "sampler": LTX2_SAMPLER,
        "sigmas": levels("video_ltx2_t2v_distilled.json", "177:176"),
        # ManualSigmas 117; KSamplerSelect 129; CFGGuider 124: 1; LoraLoaderModelOnly 170
        # bypassed: no LoRA
        "upscale": {"factor": 2,
                    "sigmas": levels("video_ltx2_t2v_distilled.json", "177:117")[:-1],
                    "sampler": LTX2_SAMPLER, "guidance_scale": 1.0, "loras": []},
    }),
}  # fmt: skip


LTX2_AS_SAVED = {  # template -> (the tiny checkpoint's variant, the request), as saved
    # the two-stage job at 113 frames (LTX2_TWO_STAGE, by hand from the graph)
    # at the saved 121 frames (PrimitiveInt 62): EmptyLTXVLatentVideo 43 makes 16 latent
    # frames of 20 x 11 tokens, so LTXVScheduler 9's 20 steps run over 3520 tokens;
    # LTXVEmptyLatentAudio 51: 121 frames at PrimitiveInt 103's 24 fps, ceil(121 / 24 x 25) =
    # 127 audio latent frames (LTX2Pipeline's round(...) = 126)
    "video_ltx2_t2v.json": (LTX2_TWO_STAGE["video_ltx2_t2v.json"][1], {
        **LTX2_TWO_STAGE["video_ltx2_t2v.json"][2], "num_frames": 121,
        "sigmas": pytest.approx(ltxv_scheduler(20, 16 * 11 * 20), abs=1e-9),
        "audio_latent_frames": 127,
    }),
    # PrimitiveInt 113's 121 frames; LTXVEmptyLatentAudio 115 at PrimitiveInt 106's 24 fps:
    # 127; ManualSigmas 176's levels whatever the tokens
    "video_ltx2_t2v_distilled.json": (LTX2_TWO_STAGE["video_ltx2_t2v_distilled.json"][1], {
        **LTX2_TWO_STAGE["video_ltx2_t2v_distilled.json"][2], "num_frames": 121,
        "audio_latent_frames": 127,
    }),
}  # fmt: skip


LTX2_I2V = {  # template -> (the tiny checkpoint's variant, the request), as saved
    # LoadImage 98 through ResizeImageMaskNode 102 (scale dimensions 1280x720, centre-cut,
    # lanczos) into subgraph 92: GetImageSize 106 gives EmptyImage 89 its 1280x720, through
    # ImageScaleBy 90 (0.5) 640x360, by GetImageSize 91 into EmptyLTXVLatentVideo 43: 640x352
    # (20 x 11 tokens), 121 frames (PrimitiveInt 62); LTXVLatentUpsampler 84 doubles it.
    # ResizeImageMaskNode 113 (longer side 1536, area: 1536x864), LTXVPreprocess 99 (33),
    # LTXVImgToVideoInplace 107 (stage 1) and 108 (after the upscaler), strength 1, bypass off
    "video_ltx2_i2v.json": (f"all-in-one tiny-ltx2 {LTX2_PARTS}", {
        "prompt": widget("video_ltx2_i2v.json", "92", 1),  # the subgraph's text
        "negative_prompt": widget("video_ltx2_i2v.json", "92:4", 0),  # CLIPTextEncode 4
        "width": 1280, "height": 704, "num_frames": 121,
        # LTXVScheduler 9: 20 steps over 16 x 11 x 20 tokens; CFGGuider 47: 4; RandomNoise
        # 11: the subgraph's noise_seed 10; KSamplerSelect 8: euler
        "num_inference_steps": 20, "guidance_scale": 4.0, "seed": 10, "sampler": "euler",
        "image": "input/freckled_curly_girl.png", "image_prep": "comfyui", "image_crf": 33,
        "sigmas": pytest.approx(ltxv_scheduler(20, 16 * 11 * 20), abs=1e-9),
        "fps": 25.0,  # LTXVConditioning 22 (LTXVEmptyLatentAudio 51: 121 frames at 25: 121)
        # ManualSigmas 73; KSamplerSelect 66: gradient_estimation; CFGGuider 82: 1;
        # LoraLoaderModelOnly 68 (109 bypassed)
        "upscale": {"factor": 2, "sigmas": levels("video_ltx2_i2v.json", "92:73")[:-1],
                    "sampler": "gradient_estimation", "guidance_scale": 1.0,
                    "loras": [{"name": "ltx-2-19b-distilled-lora-384.safetensors",
                               "strength": 1.0}]},
    }),
    # the same graph with ResizeImageMaskNode 115 (longer side 1536, lanczos), ManualSigmas
    # 113's 9 levels (8 steps), CFGGuider 47: 1, ConditioningZeroOut 112: no negative prompt
    "video_ltx2_i2v_distilled.json": (f"all-in-one tiny-ltx2-distilled {LTX2_PARTS}", {
        "prompt": widget("video_ltx2_i2v_distilled.json", "92", 1), "negative_prompt": "",
        "width": 1280, "height": 704, "num_frames": 121,
        "num_inference_steps": 8, "guidance_scale": 1.0, "seed": 10, "sampler": "euler",
        "image": "input/snow_bike_jump_crew.png", "image_prep": "comfyui", "image_crf": 33,
        "sigmas": levels("video_ltx2_i2v_distilled.json", "92:113"), "fps": 25.0,
        # ManualSigmas 73; KSamplerSelect 66; CFGGuider 82: 1; LoraLoaderModelOnly 110
        # bypassed: no LoRA
        "upscale": {"factor": 2,
                    "sigmas": levels("video_ltx2_i2v_distilled.json", "92:73")[:-1],
                    "sampler": "gradient_estimation", "guidance_scale": 1.0, "loras": []},
    }),
}  # fmt: skip
LTX2_I2V_RESIZES = {  # template -> ResizeImageMaskNode's resizes (width, height, method, crop)
    "video_ltx2_i2v.json": [(1280, 720, "lanczos", True), (1536, 864, "area", False)],
    "video_ltx2_i2v_distilled.json": [(1280, 720, "lanczos", True), (1536, 864, "lanczos", False)],
}  # fmt: skip


T23_I2V = "video_ltx2_3_i2v.json"
LTX23_I2V_LORA = [{"name": widget(T23_I2V, "320:285", 0), "strength": 0.5}]  # LoraLoader.. 285
LTX23_I2V = {  # template -> (the tiny checkpoint's variant, the request), as saved
    # LoadImage 269 through ResizeImageMaskNode 290 (scale dimensions: the subgraph's 1280x720,
    # centre-cut, lanczos) and 330 (longer side 1536, area: 1536x864), LTXVPreprocess 289
    # (CRF 18) into LTXVImgToVideoInplace 296 at 0.7 on EmptyLTXVLatentVideo 295 (1280x720
    # halved by ComfyMathExpression 292/294: 640x352) and 288 at 1 after LTXVLatentUpsampler
    # 287 (1280x704); length 5 s x 25 fps + 1 (ComfyMathExpression 323) = 126: the video
    # latent's 121 frames, LTXVEmptyLatentAudio 305's 126 audio latent frames; stage 1:
    # RandomNoise 277 (the subgraph's seed), CFGGuider 314 (1), KSamplerSelect 291 (euler),
    # ManualSigmas 306; stage 2: CFGGuider 282, KSamplerSelect 280, ManualSigmas 281 without
    # its 0; LoraLoaderModelOnly 285 (0.5) on both; ComfySwitchNode 327 with prompt_enhance
    # off: the subgraph's text; CLIPTextEncode 313 the negative; LTXVConditioning 304 at 25 fps
    T23_I2V: ("all-in-one tiny-ltx2.3 (DiT, connectors, vae, audio_vae, vocoder)", {
        "prompt": widget(T23_I2V, "320", 0), "negative_prompt": widget(T23_I2V, "320:313", 0),
        "width": 1280, "height": 704, "num_frames": 121, "num_inference_steps": 8,
        "guidance_scale": 1.0, "seed": widget(T23_I2V, "320", 6), "sampler": "euler",
        "image": "input/egyptian_queen.png", "image_prep": "comfyui", "image_crf": 18,
        "image_strength": 0.7, "sigmas": levels(T23_I2V, "320:306"), "fps": 25.0,
        "audio_latent_frames": 126, "loras": LTX23_I2V_LORA,
        "upscale": {"factor": 2, "sigmas": levels(T23_I2V, "320:281")[:-1], "sampler": "euler",
                    "guidance_scale": 1.0, "loras": LTX23_I2V_LORA},
    }),
}  # fmt: skip
LTX23_I2V_RESIZES = [(1280, 720, "lanczos", True), (1536, 864, "area", False)]


def ltx2_copy(template: str, folder: Path, length: int, **inner: list) -> Path:
    """The template with its length (on the subgraph node) set to `length`, its samplers
    euler where paradit runs no euler_ancestral, and inner nodes' widget values replaced
    (`inner`: node id -> widgets_values), saved in `folder`."""
    data = json.loads((TEMPLATES / template).read_text())
    (sub,) = data["definitions"]["subgraphs"]
    outer = next(n for n in data["nodes"] if n["type"] == sub["id"])
    outer["widgets_values"][LTX2_TWO_STAGE[template][0]] = length
    for node in sub["nodes"]:
        if node["type"] == "KSamplerSelect" and not ANCESTRAL:
            node["widgets_values"] = ["euler"]
        if str(node["id"]) in inner:
            node["widgets_values"] = inner[str(node["id"])]
    path = folder / template
    path.write_text(json.dumps(data))
    return path


# -- Qwen-Image-Edit (tests/workflow/test_templates_qwen_edit.py) ----------------------------

E2509, E2511, INT8 = (f"image_qwen_image_edit_{v}.json" for v in ("2509", "2511", "2511_int8"))
FIRST = "image_qwen_image_edit.json"
EDIT_IMAGES = {  # the input files the templates name -> (width, height) of the seeded stand-in
    "image_qwen_image_edit_input_image.png": (64, 48),  # sides of 16: VAEEncode's size
    "image_qwen_image_edit_2509_input_image.png": (60, 40),
    "lily_girl_blue.png": (60, 40),
}


def seeded_png(path: Path, size: tuple[int, int], seed: int) -> None:
    """A PNG of seeded random pixels."""
    width, height = size
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path, format="PNG")


def qwen_edit_files(root: Path) -> Path:
    """A ComfyUI folder in `root`: every file the Qwen-Image-Edit templates name, tiny."""
    models = root / "models"
    for sub in ("diffusion_models", "text_encoders", "vae", "loras"):
        (models / sub).mkdir(parents=True)
    (root / "input").mkdir()
    tiny = build_preset("tiny-qwen-image-edit")
    dits = models / "diffusion_models"
    state = tiny.transformer.state_dict()
    names = ("qwen_image_edit_fp8_e4m3fn", "qwen_image_edit_2509_fp8_e4m3fn",
             "qwen_image_edit_2511_fp8mixed")  # fmt: skip
    for name in names:
        write_safetensors(dits / f"{name}.safetensors", state, "bf16")
    write_int8(dits / "qwen_image_edit_2511_int8_convrot.safetensors", state, quantizable,
               group=64)  # fmt: skip
    encoder = {
        k.replace("model.language_model.", "model.").replace("model.visual.", "visual."): v
        for k, v in tiny.text_encoder.state_dict().items()
    }
    save_file(encoder, str(models / "text_encoders" / "qwen_2.5_vl_7b_fp8_scaled.safetensors"))
    save_file(tiny.vae.state_dict(), str(models / "vae" / "qwen_image_vae.safetensors"))
    for release in ("2509", "2511"):
        name = f"Qwen-Image-Edit-{release}-Lightning-4steps-V1.0-bf16.safetensors"
        peft_lora(models / "loras" / name, tiny.transformer, ("attn.to_q",), seed=3)
    for seed, (name, size) in enumerate(EDIT_IMAGES.items()):
        seeded_png(root / "input" / name, size, seed)
    for name in template_images(E2511):
        if name not in EDIT_IMAGES:
            seeded_png(root / "input" / name, (40, 56), 7)
    return root


def template_images(template: str) -> list[str]:
    data = json.loads((TEMPLATES / template).read_text())
    return [n["widgets_values"][0] for n in data["nodes"] if n["type"] == "LoadImage"]


EDIT_EXPECTED = {  # template -> (request, serve settings relative to models/), by hand
    FIRST: (  # subgraph 102, Lightning (PrimitiveBoolean 111) false; ImageScaleToTotalPixels
        # 93 feeds nothing: passed over, as ComfyUI does not run it
        {"prompt": widget(FIRST, "102:76", 0),  # TextEncodeQwenImageEdit 76
         "negative_prompt": widget(FIRST, "102:77", 0),  # 77: the same image
         # VAEEncode 88 of the loaded image itself (64x48)
         "width": 64, "height": 48, "num_frames": 1,
         # switches on_false: PrimitiveInt 106 (20), PrimitiveFloat 107 (2.5); KSampler 3
         "num_inference_steps": 20, "guidance_scale": 2.5, "seed": widget(FIRST, "102:3", 0),
         "sampler": "euler", "scheduler": "simple", "shift": 3.0,  # ModelSamplingAuraFlow 66
         "image": "input/image_qwen_image_edit_input_image.png", "image_prep": "comfyui",
         "cfg_mode": "norm", "cfg_norm": 1.0},  # CFGNorm 75
        {"model": "diffusion_models/qwen_image_edit_fp8_e4m3fn.safetensors",
         "text_encoders": ["text_encoders/qwen_2.5_vl_7b_fp8_scaled.safetensors"],
         "vaes": ["vae/qwen_image_vae.safetensors"], "image_encoders": [], "lora_dirs": []},
    ),
    E2509: (  # subgraph 433, "Enable Lightning LoRA" (PrimitiveBoolean 443) true
        {"prompt": widget(E2509, "433:111", 0),  # TextEncodeQwenImageEditPlus 111
         "negative_prompt": widget(E2509, "433:110", 0),  # 110: the same image
         # VAEEncode 88 of FluxKontextImageScale 117: a 60x40 image's Kontext size
         "width": 1248, "height": 832, "num_frames": 1,
         # switches 441/442 on_true: PrimitiveInt 436 (4), PrimitiveFloat 437 (1); KSampler
         # 3's seed, euler/simple; ModelSamplingAuraFlow 66: 3; CFGNorm 75 at cfg 1: none
         "num_inference_steps": 4, "guidance_scale": 1.0, "seed": widget(E2509, "433:3", 0),
         "sampler": "euler", "scheduler": "simple", "shift": 3.0,
         "image": "input/image_qwen_image_edit_2509_input_image.png", "image_prep": "comfyui",
         # switch 440 on_true: LoraLoaderModelOnly 89
         "loras": [{"name": "Qwen-Image-Edit-2509-Lightning-4steps-V1.0-bf16.safetensors",
                    "strength": 1.0}]},
        {"model": "diffusion_models/qwen_image_edit_2509_fp8_e4m3fn.safetensors",
         "text_encoders": ["text_encoders/qwen_2.5_vl_7b_fp8_scaled.safetensors"],
         "vaes": ["vae/qwen_image_vae.safetensors"], "image_encoders": [],
         "lora_dirs": ["loras"]},
    ),
    E2511: (  # subgraph 170, Lightning (PrimitiveBoolean 168) false
        {"prompt": widget(E2511, "170:151", 0), "negative_prompt": widget(E2511, "170:149", 0),
         # VAEEncode 156 of FluxKontextImageScale 160: a 40x56 image's Kontext size
         "width": 880, "height": 1184, "num_frames": 1,
         # switches on_false: PrimitiveInt 166 (40), PrimitiveFloat 154 (4); KSampler 169
         "num_inference_steps": 40, "guidance_scale": 4.0, "seed": widget(E2511, "170:169", 0),
         "sampler": "euler", "scheduler": "simple", "shift": 3.1,  # ModelSamplingAuraFlow 145
         # image1 the Kontext-scaled LoadImage 41, image2 LoadImage 83 as loaded
         "image": "input/leather_sofa.png", "images": ["input/texture_fur.png"],
         "image_prep": "comfyui", "reference_method": "index_timestep_zero",  # 147, 148
         "cfg_mode": "norm", "cfg_norm": 1.0},  # CFGNorm 152
        {"model": "diffusion_models/qwen_image_edit_2511_fp8mixed.safetensors",
         "text_encoders": ["text_encoders/qwen_2.5_vl_7b_fp8_scaled.safetensors"],
         "vaes": ["vae/qwen_image_vae.safetensors"], "image_encoders": [], "lora_dirs": []},
    ),
    INT8: (  # 2511's graph on the int8_convrot file, one image
        {"prompt": widget(INT8, "170:151", 0), "negative_prompt": widget(INT8, "170:149", 0),
         "width": 1248, "height": 832, "num_frames": 1,
         "num_inference_steps": 40, "guidance_scale": 4.0, "seed": widget(INT8, "170:169", 0),
         "sampler": "euler", "scheduler": "simple", "shift": 3.1,
         "image": "input/lily_girl_blue.png", "image_prep": "comfyui",
         "reference_method": "index_timestep_zero", "cfg_mode": "norm", "cfg_norm": 1.0},
        {"model": "diffusion_models/qwen_image_edit_2511_int8_convrot.safetensors",
         "text_encoders": ["text_encoders/qwen_2.5_vl_7b_fp8_scaled.safetensors"],
         "vaes": ["vae/qwen_image_vae.safetensors"], "image_encoders": [], "lora_dirs": []},
    ),
}  # fmt: skip


# -- Krea 2 Turbo (tests/workflow/test_templates_qi21_krea2.py) ----------------------------

KREA2 = ("image_krea2_turbo_t2i.json", "image_krea2_turbo_t2i_int8.json")
KREA2_SHIFT = math.exp(1.15)
"""Krea 2's own sampling in ComfyUI (no ModelSampling node in the graph): ModelSamplingFlux's
mu 1.15, a static shift e^1.15 at any size."""


def krea2_files(folder: Path) -> Path:
    """A ComfyUI folder in `folder` with the tiny Krea 2 preset's files under the templates'
    names: the DiT fp8_scaled and int8_convrot (ConvRot groups of 64 over the blocks' linears), the
    Qwen3-VL encoder fp8_scaled (`model.language_model.`), the Qwen-Image VAE; the LoRA the
    templates name (off in both) as an empty placeholder."""
    models = folder / "models"
    for kind in ("diffusion_models", "text_encoders", "vae", "loras"):
        (models / kind).mkdir(parents=True)
    (folder / "input").mkdir()
    tiny = build_preset("tiny-krea2")
    dit = krea2_original(tiny.transformer.state_dict())
    write_safetensors(
        models / "diffusion_models/krea2_turbo_fp8_scaled.safetensors",
        dit,
        "fp8_scaled",
        WAN_PREFIX,
    )

    def blocks(name: str, tensor: torch.Tensor) -> bool:
        return tensor.dim() == 2 and name.startswith("blocks.")

    int8 = models / "diffusion_models/krea2_turbo_int8_convrot.safetensors"
    write_int8(int8, dit, blocks, WAN_PREFIX, 64)
    encoder = models / "text_encoders/qwen3vl_4b_fp8_scaled.safetensors"
    write_safetensors(
        encoder, tiny.text_encoder.state_dict(), "fp8_scaled", "model.language_model."
    )
    save_file(tiny.vae.state_dict(), str(models / "vae/qwen_image_vae.safetensors"))
    (models / "loras/krea2_darkbrush.safetensors").touch()
    return folder


def enhancer_off(template: str, folder: Path, megapixels: float = 1) -> Path:
    """The template with its outer `prompt_enhance` widget (the subgraph node's second value,
    saved true) turned off, as a user turns it off; `megapixels`: ResolutionSelector 49's (1
    as saved: 1024x1024)."""
    data = json.loads((TEMPLATES / template).read_text())
    outer = next(node for node in data["nodes"] if node["id"] == 30)
    assert outer["widgets_values"][1] is True  # prompt_enhance, as saved
    outer["widgets_values"][1] = False
    size = next(node for node in data["nodes"] if node["id"] == 49)
    assert size["widgets_values"][1] == 1
    size["widgets_values"][1] = megapixels
    path = folder / template
    path.write_text(json.dumps(data))
    return path


def krea2_request(template: str) -> dict:
    """The job of a Krea 2 Turbo template with its enhancer off (`enhancer_off`), by hand."""
    return {
        "prompt": widget(template, "30", 0),  # the subgraph's prompt, through the switches
        "negative_prompt": "",  # ConditioningZeroOut 13
        # EmptyLatentImage 5: the subgraph's width and height (ResolutionSelector 49: 1:1, 1 MP)
        "width": 1024, "height": 1024, "num_frames": 1,
        # KSampler 3: the subgraph's seed, 8 steps, cfg 1, euler/simple; no ModelSampling
        # node: Krea 2's own mu 1.15
        "num_inference_steps": 8, "guidance_scale": 1.0, "seed": widget(template, "30", 6),
        "sampler": "euler", "scheduler": "simple",
        "shift": pytest.approx(KREA2_SHIFT, rel=1e-12), "flow_levels": 10000,
    }  # fmt: skip


# -- FLUX.2 [klein] (tests/workflow/test_templates_flux.py) ----------------------------------

KLEIN = "image_flux2_klein_text_to_image.json"


def klein_folder(comfy: Path, folder: Path) -> Path:
    """The Klein template's files as headers at their real widths: both DiTs (base and
    distilled: no weight tells them apart) FLUX.2-klein-4B's, Qwen3-4B, the Flux.2 VAE."""
    dit = "diffusion_models/flux-2-klein-4b"
    for name, held in ((dit.replace("4b", "base-4b"), dit), (dit, dit),
                       ("text_encoders/qwen_3_4b", "text_encoders/qwen_3_4b_header"),
                       ("vae/flux2-vae", "vae/flux2-vae")):  # fmt: skip
        target = folder / "models" / f"{name}.safetensors"
        target.parent.mkdir(parents=True, exist_ok=True)
        os.link(comfy / "models" / f"{held}.safetensors", target)
    return folder


def klein_distilled(folder: Path) -> Path:
    """The Klein template with its distilled subgraph (77) switched on and the base one (75)
    bypassed, as a user picks the distilled model, saved in `folder`."""
    data = json.loads((TEMPLATES / KLEIN).read_text())
    for node in data["nodes"]:
        if node["id"] in (9, 75):
            node["mode"] = 4
        if node["id"] in (77, 78):
            node["mode"] = 0
    path = folder / KLEIN
    path.write_text(json.dumps(data))
    return path


KLEIN_DISTILLED = {  # klein_distilled's job, by hand from the graph
    "prompt": widget(KLEIN, "76", 0),  # PrimitiveStringMultiline 76
    "negative_prompt": "",  # ConditioningZeroOut 76's empty negative
    # EmptyFlux2LatentImage 66 and Flux2Scheduler 62 at PrimitiveInt 68 x 69
    "width": 1024, "height": 1024, "num_frames": 1,
    # Flux2Scheduler 62's 4 steps (the pipeline's own levels: no sampler, scheduler or
    # shift); CFGGuider 63: cfg 1; RandomNoise 73's seed
    "num_inference_steps": 4, "guidance_scale": 1.0, "seed": widget(KLEIN, "77:73", 0),
}  # fmt: skip


# -- Qwen-Image 2.1 (tests/workflow/test_templates_qi21_krea2.py) ---------------------------

QWEN21_T2I = ("image_qwen_image_2_1_t2i.json", "image_qwen_image_2_1_turbo_t2i.json")
QWEN21_EDIT = ("image_qwen_image_2_1_image_edit.json", "image_qwen_image_2_1_turbo_image_edit.json")
QWEN21_TURBO_SIGMAS = [1.0, 0.978453, 0.95418, 0.926626, 0.89508, 0.845148, 0.704534, 0.414568, 0.0]
"""The Turbo templates' ManualSigmas (484 / 502), as saved."""
QWEN21_INPUTS = {  # the edit templates' LoadImage files -> the tiny test image's size
    "portrait_model_denim.png": (96, 64),
    "clothing_light_blue_denim_shirt.png": (64, 64),
    "ballet_dancer_photography_minimalist_architecture.png": (96, 64),
}


def qwen21_files(folder: Path) -> Path:
    """A ComfyUI folder in `folder` with the tiny Qwen-Image 2.1 preset's files under the
    templates' names: the DiT (base and turbo: one tiny DiT, diffusers' names under
    `model.diffusion_model.`, each block's gate and up projections fused, gate rows first, the
    blocks' linears int8 ConvRot in groups of 64), the Qwen3-VL encoder in ComfyUI's names
    (`model.` and `visual.`, no lm_head), the VAE as ComfyUI's file holds it (the Wan 2.2 VAE's
    original names, causal convolutions 3D of time 1: `comfy_files.qwen_image21_vae_comfy`);
    the edit templates' input images (`QWEN21_INPUTS`, seeded noise)."""
    models = folder / "models"
    for kind in ("diffusion_models", "text_encoders", "vae"):
        (models / kind).mkdir(parents=True)
    (folder / "input").mkdir()
    tiny = build_preset("tiny-qwen-image2.1")
    dit = {}
    state = tiny.transformer.state_dict()
    for name, value in state.items():
        if name.endswith("img_mlp.gate_layer.weight"):
            dit[name.replace("gate_layer", "gate_up")] = torch.cat(
                [value, state[name.replace("gate_layer", "proj")]]
            )
        elif not name.endswith("img_mlp.proj.weight"):
            dit[name] = value

    def blocks(name: str, tensor: torch.Tensor) -> bool:
        return tensor.dim() == 2 and name.startswith("transformer_blocks.")

    for name in ("qwen_image_2.1_int8_convrot", "qwen_image_2.1_turbo_int8_convrot"):
        write_int8(models / f"diffusion_models/{name}.safetensors", dit, blocks, WAN_PREFIX, 64)
    encoder = {
        k.replace("model.language_model.", "model.").replace("model.visual.", "visual."): v
        for k, v in tiny.text_encoder.state_dict().items()
        if k != "lm_head.weight"
    }
    save_file(encoder, str(models / "text_encoders/qwen3vl_8b_int8_convrot.safetensors"))
    vae = qwen_image21_vae_comfy(tiny.vae.state_dict())
    save_file(vae, str(models / "vae/qwen_image_2.1_vae_bf16.safetensors"))
    rng = np.random.default_rng(21)
    for name, (width, height) in QWEN21_INPUTS.items():
        pixels = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(folder / "input" / name)
    return folder


def qwen21_sized(template: str, folder: Path, megapixels: float = 1) -> Path:
    """The template with its ResolutionSelector 13's megapixels (1 as saved: 1024x1024) set,
    as a user sets them (the text-to-image templates)."""
    data = json.loads((TEMPLATES / template).read_text())
    size = next(node for node in data["nodes"] if node["id"] == 13)
    assert size["widgets_values"][1] == 1
    size["widgets_values"][1] = megapixels
    path = folder / template
    path.write_text(json.dumps(data))
    return path


def qwen21_turbo_t2i_request(size: int = 1024) -> dict:
    """The Turbo text-to-image template's job, by hand from its graph (subgraph 459)."""
    template = QWEN21_T2I[1]
    return {
        # the outer prompt through ComfySwitchNode 474 (switch false: on_false, the prompt as
        # written) and PreviewAny 472; the outer negative_prompt
        "prompt": widget(template, "459", 0), "negative_prompt": widget(template, "459", 4),
        # EmptyLatentImage 456: the outer width/height (ResolutionSelector 13: 1:1, 1 MP)
        "width": size, "height": size, "num_frames": 1,
        # RandomNoise 488's own seed (the outer seed feeds only the enhancer), CFGGuider 489:
        # cfg 1, KSamplerSelect 487: the outer euler, ManualSigmas 484: 8 steps at its levels;
        # QwenImage21Cache 490: auto/default, nothing
        "num_inference_steps": 8, "guidance_scale": 1.0, "seed": widget(template, "459:488", 0),
        "sampler": "euler", "sigmas": QWEN21_TURBO_SIGMAS,
    }  # fmt: skip


def qwen21_turbo_edit_request(folder: Path, size: tuple[int, int] | None = None) -> dict:
    """The Turbo edit template's job, by hand from its graph (subgraph 459): its one
    reference, LoadImage 470, at its own size (resolution 0: ComfyUI's preparation,
    `image_prep` comfyui) is the output's size (`size` where the outer `switch` takes
    ResolutionSelector's instead)."""
    template = QWEN21_EDIT[1]
    width, height = size or QWEN21_INPUTS["ballet_dancer_photography_minimalist_architecture.png"]
    return {
        # the outer prompt through ComfySwitchNode 484 (switch_1 false) and PreviewAny 480
        "prompt": widget(template, "459", 1), "negative_prompt": widget(template, "459", 5),
        # ComfySwitchNode 468 (switch false): TextEncodeQwenImage21 474's latent, image_1's
        # size rounded to sides of 32 (resolution 0)
        "width": width, "height": height, "num_frames": 1,
        # RandomNoise 504: the outer seed; CFGGuider 507: the outer cfg 1; euler; ManualSigmas
        # 502's levels
        "num_inference_steps": 8, "guidance_scale": 1.0, "seed": widget(template, "459", 11),
        "sampler": "euler", "sigmas": QWEN21_TURBO_SIGMAS,
        "image": str(folder / "input/ballet_dancer_photography_minimalist_architecture.png"),
        # TextEncodeQwenImage21 474 at resolution 0: each reference at its own size
        "image_prep": "comfyui",
    }  # fmt: skip


QWEN21_MU = 0.69
"""Qwen-Image 2.1's own sampling in ComfyUI (no ModelSampling node in the base templates):
ModelSamplingFlux at mu 0.69 (QwenImage21's sampling_settings; its provenance:
families/qwen_image21/comfyui.json), the same at every size."""


def qwen21_comfy_sigmas(steps: int, mu: float = QWEN21_MU) -> list[float]:
    """KSampler's euler/simple levels on Qwen-Image 2.1's own model sampling, worked by hand
    from ComfyUI's formulas: ModelSamplingFlux (comfy/model_sampling.py, Comfy-Org 38a99a82)
    holds 10000 levels sigma(i / 10000), i = 1..10000, sigma(t) = e^mu / (e^mu + 1/t - 1);
    simple_scheduler (comfy/samplers.py, e0d4ea77) takes index -(1 + int(x * 10000 / steps))
    for x = 0..steps-1, then 0."""
    table = 10000
    times = [(table - int(x * table / steps)) / table for x in range(steps)]
    return [math.exp(mu) / (math.exp(mu) + 1 / t - 1) for t in times] + [0.0]


def qwen21_t2i_request(size: int = 1024) -> dict:
    """The base text-to-image template's job, by hand from its graph (subgraph 459)."""
    template = QWEN21_T2I[0]
    return {
        # the outer prompt through ComfySwitchNode 474 (switch false: the prompt as written)
        # and PreviewAny 472; the outer negative_prompt (empty) into TextEncodeQwenImage21 452
        "prompt": widget(template, "459", 0), "negative_prompt": widget(template, "459", 4),
        # EmptyLatentImage 456: the outer width/height (ResolutionSelector 13: 1:1, 1 MP)
        "width": size, "height": size, "num_frames": 1,
        # KSampler 458: the outer seed, steps 25, cfg 1, euler/simple, denoise 1; no
        # ModelSampling node: Qwen-Image 2.1's own mu 0.69, the static shift e^0.69
        "num_inference_steps": 25, "guidance_scale": 1.0, "seed": widget(template, "459", 11),
        "sampler": "euler", "scheduler": "simple",
        "shift": pytest.approx(math.exp(QWEN21_MU), rel=1e-12), "flow_levels": 10000,
    }  # fmt: skip


def qwen21_edit_request(folder: Path) -> dict:
    """The base edit template's job, by hand from its graph (subgraph 459): LoadImage 470
    (image_1) and 475 (image_2) at their own sizes (the outer resolution 0); the output is
    image_1's size (ComfySwitchNode 468 false: TextEncodeQwenImage21 474's latent)."""
    template = QWEN21_EDIT[0]
    width, height = QWEN21_INPUTS["portrait_model_denim.png"]
    return {
        # the outer prompt through ComfySwitchNode 484 (switch_1 false) and PreviewAny 480
        "prompt": widget(template, "459", 1), "negative_prompt": widget(template, "459", 5),
        "width": width, "height": height, "num_frames": 1,
        # KSampler 458: the outer seed, steps 25 and cfg 1, euler/simple; ComfyUI's own mu
        "num_inference_steps": 25, "guidance_scale": 1.0, "seed": widget(template, "459", 13),
        "sampler": "euler", "scheduler": "simple",
        "image": str(folder / "input/portrait_model_denim.png"),
        "images": [str(folder / "input/clothing_light_blue_denim_shirt.png")],
        "image_prep": "comfyui",  # TextEncodeQwenImage21 474 at resolution 0
        "shift": pytest.approx(math.exp(QWEN21_MU), rel=1e-12), "flow_levels": 10000,
    }  # fmt: skip


# -- FLUX.2 [dev] with a reference image (tests/workflow/test_templates_flux.py) -------------

REF = "image_flux2.json"
REF_INPUT = "image_flux2_input_image.png"  # LoadImage 46's file
FLUX2_REF_REQUEST = {  # the template's job as saved on a 512x512 input, by hand
    "prompt": widget(REF, "68:6", 0),  # CLIPTextEncode 6 (the subgraph's text: none)
    "negative_prompt": "",  # BasicGuider 22: no negative
    "width": 1024, "height": 1024, "num_frames": 1,  # GetImageSize 72 of the scaled image
    # PrimitiveInt 91 through switch 93 (PrimitiveBoolean 94 false): 20 steps on
    # Flux2Scheduler 48's levels (the model's own); FluxGuidance 26: 4; RandomNoise 25
    "num_inference_steps": 20, "guidance_scale": 4.0, "seed": widget(REF, "68:25", 0),
    # ReferenceLatent 43's image; no image_prep: the pipeline's own
    "image": f"input/{REF_INPUT}",
}  # fmt: skip
"""Relative to the ComfyUI folder (`in_folder`); the image sent is ImageScaleToTotalPixels 45's
(lanczos, 1 megapixel: 1024x1024)."""


def flux2_ref_folder(
    folder: Path, dit: Path, encoder: Path, vae: Path, size: tuple[int, int]
) -> Path:
    """A ComfyUI folder with image_flux2's files (hard links to `dit`, `encoder`, `vae`) and a
    seeded input image of `size`."""
    links = {"diffusion_models/flux2_dev_fp8mixed": dit, "vae/full_encoder_small_decoder": vae,
             "text_encoders/mistral_3_small_flux2_bf16": encoder}  # fmt: skip
    for name, source in links.items():
        (folder / "models" / name).parent.mkdir(parents=True, exist_ok=True)
        os.link(source, folder / "models" / f"{name}.safetensors")
    (folder / "input").mkdir()
    seeded_png(folder / "input" / REF_INPUT, size, 5)
    return folder


def flux2_ref_headers(comfy: Path, folder: Path, size: tuple[int, int]) -> Path:
    """image_flux2's files as FLUX.2-dev's headers (tests/comfy_workflow_files.py's, in the
    ComfyUI folder `comfy`) in a ComfyUI folder `folder`, its input image of `size`."""
    models = comfy / "models"
    return flux2_ref_folder(
        folder,
        models / "diffusion_models/flux2_dev_fp8mixed.safetensors",
        models / "text_encoders/mistral_3_small_flux2_bf16.safetensors",
        models / "vae/flux2-vae.safetensors",
        size,
    )


def flux2_ref_copy(folder: Path, **inner: list) -> Path:
    """image_flux2 with inner nodes' widgets of subgraph 68 replaced (`outer` 45's with the
    key "45"), saved in `folder`."""
    data = json.loads((TEMPLATES / REF).read_text())
    (sub,) = data["definitions"]["subgraphs"]
    for node in [*sub["nodes"], *data["nodes"]]:
        if str(node["id"]) in inner:
            node["widgets_values"] = inner[str(node["id"])]
    path = folder / REF
    path.write_text(json.dumps(data))
    return path


# -- FLUX.2 [klein] image edit (tests/workflow/test_templates_klein_edit.py) ------------------

B4, D4 = (
    "image_flux2_klein_image_edit_4b_base.json",
    "image_flux2_klein_image_edit_4b_distilled.json",
)
B9, D9 = (
    "image_flux2_klein_image_edit_9b_base.json",
    "image_flux2_klein_image_edit_9b_distilled.json",
)

KLEIN_EDIT_FILES = {  # template -> its DiT, text encoder and VAE (models/, no suffix), its image
    B4: ("diffusion_models/flux-2-klein-base-4b-fp8", "text_encoders/qwen_3_4b",
         "vae/full_encoder_small_decoder", "robed_women.png"),
    D4: ("diffusion_models/flux-2-klein-4b-fp8", "text_encoders/qwen_3_4b",
         "vae/flux2-vae", "handbag_white.png"),
    B9: ("diffusion_models/flux-2-klein-base-9b-fp8", "text_encoders/qwen_3_8b_fp8mixed",
         "vae/full_encoder_small_decoder", "car_interior_white.jpeg"),
    D9: ("diffusion_models/flux-2-klein-9b-fp8", "text_encoders/qwen_3_8b_fp8mixed",
         "vae/full_encoder_small_decoder", "bold_outfit_woman.jpeg"),
}  # fmt: skip
KLEIN_EDIT_OTHER_IMAGES = ("pink_tone_chair.png", "comfy_logo_blue.png", "handbag_white.png")
"""LoadImage files of the bypassed two-image subgraphs (92), there for the graph."""

KLEIN_EDIT = {  # template -> (variant on header files, the job by hand from subgraph 75)
    # CLIPTextEncode 74 of the subgraph's text (its value on node 75), CLIPTextEncode 67's
    # empty negative, both with ReferenceLatent 124 / 122 of VAEEncode 123's latent;
    # ImageScaleToTotalPixels 80 (nearest-exact, 1 megapixel, steps 1): the 512x512 input to
    # 1024x1024, into GetImageSize 100 -> EmptyFlux2LatentImage 66 and Flux2Scheduler 62:
    # 20 steps, the pipeline's own levels (KSamplerSelect 61 euler); CFGGuider 63: cfg 5;
    # RandomNoise 73: the subgraph's noise_seed
    B4: ("flux.2-klein-base-4b", {"negative_prompt": "", "num_inference_steps": 20,
                                  "guidance_scale": 5.0}, "nearest-exact"),
    # the same graph with ConditioningZeroOut 82 as the negative; Flux2Scheduler 62: 4 steps;
    # CFGGuider 63: cfg 1
    D4: ("flux.2-klein-4b", {"negative_prompt": "", "num_inference_steps": 4,
                             "guidance_scale": 1.0}, "nearest-exact"),
    # as B4; ImageScaleToTotalPixels 80 lanczos
    B9: ("flux.2-klein-base-9b", {"negative_prompt": "", "num_inference_steps": 20,
                                  "guidance_scale": 5.0}, "lanczos"),
    # as D4; ImageScaleToTotalPixels 80 nearest-exact
    D9: ("flux.2-klein-9b", {"negative_prompt": "", "num_inference_steps": 4,
                             "guidance_scale": 1.0}, "nearest-exact"),
}  # fmt: skip


def klein_edit_request(template: str, image: Path) -> dict:
    """A Klein image-edit template's job as saved on a 512x512 input (`image`), by hand."""
    _, fields, _ = KLEIN_EDIT[template]
    return {
        "prompt": widget(template, "75", 3),  # the subgraph's text
        **{k: v for k, v in fields.items() if k == "negative_prompt"},
        "width": 1024, "height": 1024, "num_frames": 1,
        **{k: v for k, v in fields.items() if k != "negative_prompt"},
        "seed": widget(template, "75", 4),  # the subgraph's noise_seed
        "image": str(image),  # ReferenceLatent 124's image; no image_prep: the pipeline's own
    }  # fmt: skip


def klein_edit_folder(
    folder: Path, template: str, files: tuple[Path, Path, Path], size: tuple[int, int]
) -> Path:
    """A ComfyUI folder with a Klein image-edit template's files (hard links to `files`) and
    seeded input images of `size`."""
    *names, image = KLEIN_EDIT_FILES[template]
    for name, source in zip(names, files, strict=True):
        target = folder / "models" / f"{name}.safetensors"
        target.parent.mkdir(parents=True, exist_ok=True)
        os.link(source, target)
    (folder / "input").mkdir(parents=True)
    for i, name in enumerate((image, *KLEIN_EDIT_OTHER_IMAGES)):
        if not (folder / "input" / name).exists():
            seeded_png(folder / "input" / name, size, 5 + i)
    return folder


def klein_edit_headers(comfy: Path, template: str) -> tuple[Path, Path, Path]:
    """The FLUX.2 [klein] DiT's, Qwen3's and the Flux.2 VAE's headers at their real widths
    (tests/comfy_workflow_files.py's, in the ComfyUI folder `comfy`) of the template's size."""
    models = comfy / "models"
    nine = "9b" in template
    return (
        models / f"diffusion_models/flux-2-klein-{'9b' if nine else '4b'}.safetensors",
        models / f"text_encoders/qwen_3_{'8b' if nine else '4b'}_header.safetensors",
        models / "vae/flux2-vae.safetensors",
    )


# -- MiniMax H3 (tests/workflow/test_templates_h3.py) -----------------------------------------

H3_OUTER = {"video_minimax_h3_t2v.json": "140", "video_minimax_h3_i2v.json": "105"}
"""The subgraph node ("Image to Video (MiniMax H3)") whose saved widget values the
template's promoted widgets take (prompt, the duration, the seed, the turbo switch...)."""

# By hand from each graph: the prompt and the seed are the subgraph node's promoted widget
# values (not the inner node's own); the size is ResolutionSelector's (16:9 at 0.4 MP in
# multiples of 32: 864x480, as the template's note tabulates; 1:1: 640x640); the length is
# ComfyMathExpression's snap of 5 s x 24 = 120 frames up to 17k+5: 124; the steps the
# turbo switch's false branch (PrimitiveInt 20); BasicGuider: cfg 1; KSamplerSelect
# res_multistep; BasicScheduler simple; no ModelSampling node (ComfyUI's default shift 12 is
# filled in with the files, check_files). The i2v template's LoadImage is first_frame; its
# ImageScaleToTotalPixels and GetImageSize are connected to nothing (not run).
H3_EXPECTED = {
    "video_minimax_h3_t2v.json": {"width": 864, "height": 480},
    "video_minimax_h3_i2v.json": {
        "width": 640,
        "height": 640,
        "image": "input/transparent_rgb_gaming_mouse.png",
        "image_prep": "comfyui",  # the first frame ComfyUI's way (families/minimax_h3)
    },
}


def h3_request(template: str, comfy: Path) -> dict:
    """An H3 template's job as saved, by hand (`H3_EXPECTED`), its image in `comfy`; without
    the shift the files fill in (ComfyUI's default 12 where no node sets one)."""
    outer = H3_OUTER[template]
    request = {
        "prompt": widget(template, outer, 0),
        "negative_prompt": "",
        "num_frames": 124,
        "num_inference_steps": 20,
        "guidance_scale": 1.0,
        "seed": 757358688076805,
        "sampler": "res_multistep",
        "scheduler": "simple",
        **H3_EXPECTED[template],
    }
    return in_folder(request, comfy)


def h3_folder(comfy: Path) -> Path:
    """A ComfyUI folder `comfy` with both H3 templates' names: tiny-minimax-h3 written as the
    four files the templates load, in the formats they name (int8_convrot DiT and video VAE,
    the Qwen3-VL encoder's language model nvfp4_awq), the templates' input images."""
    for template in sorted(H3_OUTER):
        if comfy.exists():
            data = json.loads((TEMPLATES / template).read_text())
            for node in data["nodes"]:
                if node["type"] == "LoadImage":
                    name = node["widgets_values"][0]
                    Image.new("RGB", (32, 32)).save(comfy / "input" / name)
        else:
            placeholders(template, comfy)
    write_files(comfy / "models", build_preset("tiny-minimax-h3"), int8=True, nvfp4_encoder=True)
    return comfy


# -- LTX-2.3's and LTX-2.5's text-to-video templates (tests/workflow/test_templates_ltx.py) --

T23 = "video_ltx2_3_t2v.json"
LTX23_FILES = {  # relative to models/, as the 2.3 template names them
    "model": "checkpoints/ltx-2.3-22b-dev-fp8.safetensors",
    "text_encoders": ["text_encoders/gemma_3_12B_it_fp4_mixed.safetensors"],
    "upscaler": "latent_upscale_models/ltx-2.3-spatial-upscaler-x2-1.1.safetensors",
}
LTX23_LORA = [{"name": widget(T23, "267:232", 0), "strength": 0.5}]  # LoraLoaderModelOnly 232


def ltx23_job(seconds: int) -> dict:
    """The 2.3 text-to-video template's job with prompt_enhance off, by hand from the graph:
    the subgraph's 1280x720 halved by ComfyMathExpression 256/259 (a/2) into
    EmptyLTXVLatentVideo 228 (640x360: ComfyUI's latent 640 // 32 x 360 // 32 tokens, 640x352)
    and doubled by LTXVLatentUpsampler 253: 1280x704; length a * b + 1 (ComfyMathExpression 277:
    seconds x PrimitiveInt 260's 25 fps + 1) rounded by the latent to ((n - 1) // 8) * 8 + 1;
    LTXVEmptyLatentAudio 214 counts ceil(n / 25 x 25) = n audio latent frames where the
    pipeline makes round(frames / 25 x 25) = frames; stage 1: RandomNoise 237's seed (the
    subgraph's), CFGGuider 231 (1), KSamplerSelect 209 (euler), ManualSigmas 252 (8 steps);
    stage 2: CFGGuider 213, KSamplerSelect 246, ManualSigmas 211 without its final 0; the
    distilled LoRA at 0.5 on the model of both stages; the prompt the subgraph's text
    (ComfySwitchNode 329 with prompt_enhance off), the negative CLIPTextEncode 247's."""
    length = seconds * 25 + 1
    frames = (length - 1) // 8 * 8 + 1
    job = {
        "prompt": widget(T23, "267", 0), "negative_prompt": widget(T23, "267:247", 0),
        "width": 1280, "height": 704, "num_frames": frames, "num_inference_steps": 8,
        "guidance_scale": 1.0, "seed": widget(T23, "267", 6), "sampler": "euler",
        "sigmas": levels(T23, "267:252"), "fps": 25.0, "loras": LTX23_LORA,
        "upscale": {"factor": 2, "sigmas": levels(T23, "267:211")[:-1], "sampler": "euler",
                    "guidance_scale": 1.0, "loras": LTX23_LORA},
    }  # fmt: skip
    if length != frames:  # the audio of ComfyUI's length, not of the rounded video's
        job["audio_latent_frames"] = length
    return job


def ltx23_copy(folder: Path, seconds: int, size: tuple[int, int] = (1280, 720)) -> Path:
    """The 2.3 text-to-video template with prompt_enhance off, at `seconds` and `size`."""
    data = json.loads((TEMPLATES / T23).read_text())
    outer = next(n for n in data["nodes"] if n["id"] == 267)
    assert outer["widgets_values"][1:6] == [True, 1280, 720, 5, 25]  # as saved
    outer["widgets_values"][1:5] = [False, *size, seconds]  # prompt_enhance off
    path = folder / T23
    path.write_text(json.dumps(data))
    return path


T25 = "video_ltx2_5_t2v.json"
CONV_VAE = "ltx-2.5-video-vae-conv-bf16.safetensors"
DIFFUSION_VAE = "ltx-2.5-video-vae-bf16.safetensors"


def ltx25_copy(
    folder: Path, size: tuple[int, int] = (1280, 720), seconds: int = 5, vae: str = CONV_VAE
) -> Path:
    """The 2.5 text-to-video template (prompt_enhance off as saved) with `vae` in place of the
    saved video VAE (default: Lightricks' convolutional one; `DIFFUSION_VAE`, the saved
    diffusion decoder), at `size` (a square other than the saved size: ResolutionSelector
    409's, which feeds the subgraph's width and height) and `seconds` (its length widget)."""
    data = json.loads((TEMPLATES / T25).read_text())
    outer = next(n for n in data["nodes"] if n["id"] == 405)
    assert outer["widgets_values"][1:5] == [False, 5, 1280, 720]  # as saved
    assert outer["widgets_values"][8] == DIFFUSION_VAE
    outer["widgets_values"][2:5] = [seconds, *size]
    outer["widgets_values"][8] = vae
    if size != (1280, 720):  # the subgraph's width and height come from ResolutionSelector 409
        assert size[0] == size[1], "a square: 1:1 at (side / 1024)^2 mebipixels"
        selector = next(n for n in data["nodes"] if n["id"] == 409)
        selector["widgets_values"] = ["1:1 (Square)", (size[0] / 1024) ** 2, 64]
    path = folder / T25
    path.write_text(json.dumps(data))
    return path


LTX25_JOB = {  # ltx25_copy's job (the conv VAE, as saved otherwise), by hand: 1280x720
    # halved (ComfyMathExpression 353/355) into EmptyLTXVLatentVideo 356 (640x352) and doubled
    # by the upsampler: 1280x704; 5 s x 24 fps + 1 = 121 frames, the audio ceil(121 / 24 x 25)
    # = 127 latent frames (the pipeline's 126); LTXVDualCFGGuider 388 at 1 and 1;
    # euler_ancestral (KSamplerSelect 352, 341); ManualSigmas 404 and 395
    "prompt": widget(T25, "405", 0), "negative_prompt": widget(T25, "405:373", 0),
    "width": 1280, "height": 704, "num_frames": 121, "num_inference_steps": 8,
    "guidance_scale": 1.0, "seed": widget(T25, "405", 5), "sampler": "euler_ancestral",
    "sigmas": levels(T25, "405:404"), "audio_latent_frames": 127,
    "upscale": {"factor": 2, "sigmas": levels(T25, "405:395")[:-1],
                "sampler": "euler_ancestral", "guidance_scale": 1.0, "loras": []},
}  # fmt: skip
LTX25_SAVED = {  # video_ltx2_5_t2v as saved: LTX25_JOB's with its own diffusion video VAE,
    # whose VAEDecodeTiled 374 (512, 64, 64, 16) decodes in ComfyUI's tiles
    **LTX25_JOB,
    "decode_tiles": {"tile_size": 512, "overlap": 64, "temporal_size": 64, "temporal_overlap": 16},
}  # fmt: skip
T25_I2V = "video_ltx2_5_i2v.json"
LTX25_I2V_SAVED = {  # video_ltx2_5_i2v as saved, by hand: 1280x720 (subgraph 398's widgets 3,
    # 4) halved into the first stage and doubled by the upsampler: 1280x704; 5 s x 24 fps + 1
    # = 121 frames, the audio ceil(121 / 24 x 25) = 127 latent frames; LoadImage 395's image
    # through LTXVPreprocess 350 (CRF 18) into LTXVImgToVideoInplace 357 at 0.7 (stage 2's
    # 349 at 1); DualCFG at 1 and 1; euler_ancestral; ManualSigmas 397 and 396; its
    # diffusion video VAE's VAEDecodeTiled 374 (512, 64, 64, 16) -> decode_tiles
    "prompt": widget(T25_I2V, "398", 0), "negative_prompt": widget(T25_I2V, "398:373", 0),
    "width": 1280, "height": 704, "num_frames": 121, "num_inference_steps": 8,
    "guidance_scale": 1.0, "seed": widget(T25_I2V, "398", 5), "sampler": "euler_ancestral",
    "image": f"input/{widget(T25_I2V, '395', 0)}", "image_prep": "comfyui",
    "image_crf": widget(T25_I2V, "398:350", 0), "image_strength": widget(T25_I2V, "398:357", 0),
    "sigmas": levels(T25_I2V, "398:397"), "audio_latent_frames": 127,
    "decode_tiles": dict(zip(("tile_size", "overlap", "temporal_size", "temporal_overlap"),
                             widget(T25_I2V, "398:374", slice(0, 4)), strict=True)),
    "upscale": {"factor": 2, "sigmas": levels(T25_I2V, "398:396")[:-1],
                "sampler": "euler_ancestral", "guidance_scale": 1.0, "loras": []},
}  # fmt: skip
