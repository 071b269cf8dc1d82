"""ComfyUI's official templates (the `comfyui-workflow-templates-json` package, read where it is
installed) of the families paradit runs, in their saved form, with the files they name
linked to the tiny ComfyUI files (tests/comfy_workflow_files.py) under the templates' own
names: each imports to the job ComfyUI runs (every field written by hand from the graph, the
widget that gives it named beside it), or is refused naming the node and why; the Z-Image
Turbo one runs end to end on a backend of its tiny files as saved, and every other one whose
tiny files carry weights at a tiny size (`RUN_SMALL`). LTX-2's text-to-video templates
map to paradit's two-stage job (`upscale`) at 24k+17 frames (as saved, at 121 frames, they are
refused: ComfyUI's audio latent would be one longer); the dev one runs end to end at a tiny
size.

Cost: about 20 s (7 s in the suite's two-worker run on 2 cores, 2026-11-29; the tiny runs of
`RUN_SMALL`, 12 s alone, and the rows added since).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
from pathlib import Path

import pytest
import torch
from comfy_files import WAN_PREFIX, quantizable, z_image_original
from comfy_templates import TEMPLATES, widget
from comfy_templates import placeholders as _placeholders
from comfy_templates import shifted as _shifted
from comfy_workflow_files import START_IMAGE, write_comfyui
from conftest import run_job
from lora_files import peft_lora
from PIL import Image
from quant_files import write_int8
from safetensors.torch import save_file

from paradit.backend.config import ServeConfig
from paradit.backend.models.families.ltx2 import upscaler
from paradit.backend.models.presets import build_preset
from paradit.backend.sampling.names import SAMPLERS
from paradit.backend.serving.workflows import plan_for_server
from paradit.backend.tools.workflow import plan_of, run_overrides

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
}  # fmt: skip
IMAGES = ("image_to_video_wan_start_image.png", "video_wan2_2_14B_i2v_input_image.jpg")
"""The start images the templates' LoadImage nodes name (in `input/`)."""
OWN_LINKS = {  # template -> links of its own (Flux.1 dev's `ae` is Flux's real-size VAE header)
    "image_z_image_turbo.json": {"vae/ae": "vae/ae_tiny"},
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


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """The tiny ComfyUI files (written once), the tiny Z-Image DiT as an int8_convrot
    file (ConvRot groups of 64 at the tiny widths: tests/quant_files.py), and for LTX-2 a
    tiny LoRA and a tiny x2 latent upscaler (its config in the file's metadata, as
    Lightricks' file carries it and ComfyUI's loader reads it)."""
    folder = write_comfyui(tmp_path_factory.mktemp("ComfyUI"))
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
    return folder


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
    "flux_dev_full_text_to_image.json": (  # subgraph 194; headers-only Flux.1 dev files
        "flux.1-dev",
        {"prompt": widget("flux_dev_full_text_to_image.json", "194:49", 0),
         "negative_prompt": "",  # ConditioningZeroOut 52
         "width": 1024, "height": 1024, "num_frames": 1,  # EmptySD3LatentImage 48
         # KSampler 50: seed 0, 20 steps, cfg 1, euler/simple; no FluxGuidance: ComfyUI's
         # 3.5; no ModelSamplingFlux: mu 1.15
         "num_inference_steps": 20, "guidance_scale": 3.5, "seed": 0, "sampler": "euler",
         "scheduler": "simple", "shift": pytest.approx(FLUX_SHIFT, rel=1e-12)},
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
         "shift": pytest.approx(FLUX_SHIFT, rel=1e-12)},
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
         "scheduler": "simple", "shift": pytest.approx(FLUX_SHIFT, rel=1e-12)},
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


@pytest.mark.parametrize("template", sorted(EXPECTED))
def test_template_imports_to_the_job_comfyui_runs(base, tmp_path, template):
    comfy = comfy_for(base, template, tmp_path / "ComfyUI")
    plan, variant = plan_of(str(TEMPLATES / template), str(comfy))
    expected_variant, request, serve = EXPECTED[template]
    request = dict(request)
    if "image" in request:
        request["image"] = str(comfy / request["image"])
    models = comfy / "models"
    assert plan.request == request
    assert plan.serve == {
        "model": ",".join(str(models / p) for p in serve["model"].split(",")),
        **{k: [str(models / p) for p in serve[k]] for k in serve if k != "model"},
    }
    assert variant == expected_variant
    assert plan.workflow["format"] == "ui"
    assert (
        plan.workflow["sha256"] == hashlib.sha256((TEMPLATES / template).read_bytes()).hexdigest()
    )


REFUSED = {  # template -> (where, node type, the reason's words)
    # Qwen-Image-Edit's templates map: tests/workflow/test_templates_qwen_edit.py
    # its reference image (LoadImage 46 through ImageScaleToTotalPixels 45, VAEEncode 44,
    # ReferenceLatent 43): the latent's size comes from the scaled image (GetImageSize 72)
    "image_flux2.json": ("node 45", "ImageScaleToTotalPixels", "an image resized for"),
    "video_hunyuan_video_1.5_720p_i2v.json": (
        "node 78", "HunyuanVideo15ImageToVideo", "SigLIP that image squeezed to 384x384",
    ),
    # as saved: 121 frames, whose audio latent ComfyUI makes one longer than paradit's LTX-2
    # (both map at 24k+17 frames: LTX2_TWO_STAGE below)
    "video_ltx2_t2v.json": (
        "subgraph 92 > node 51", "LTXVEmptyLatentAudio", "ComfyUI makes 127 audio latent frames",
    ),
    "video_ltx2_t2v_distilled.json": (
        "subgraph 177 > node 115", "LTXVEmptyLatentAudio",
        "ComfyUI makes 127 audio latent frames",
    ),
    "video_ltx2_i2v.json": (
        "subgraph 92 > node 108", "LTXVImgToVideoInplace", "one H.264 frame at LTXVPreprocess",
    ),
    "video_ltx2_i2v_distilled.json": (
        "subgraph 92 > node 108", "LTXVImgToVideoInplace", "one H.264 frame at LTXVPreprocess",
    ),
}  # fmt: skip
"""The official templates of paradit's families it refuses, each naming the node (its path
inside subgraphs) and why: refused before any file is read, so placeholders stand for the
files they name."""


@pytest.mark.parametrize("template", sorted(REFUSED))
def test_template_refused_names_the_node_and_why(tmp_path, template):
    where, kind, words = REFUSED[template]
    comfy = _placeholders(template, tmp_path / "ComfyUI")
    with pytest.raises(ValueError) as refused:
        plan_of(str(TEMPLATES / template), str(comfy))
    message = str(refused.value)
    assert message.startswith(f"{where} ({kind}): ") and words in message, message


def test_z_image_turbo_template_runs_end_to_end(base, tmp_path, paradit_warm, backends):
    """The template as saved (1024x1024, 8 steps), on a backend of its files linked to the
    tiny Z-Image ones: `workflow run --server` writes the image of its request, sampled on
    res_multistep/simple at shift 3 (ModelSamplingAuraFlow 11)."""
    template = "image_z_image_turbo.json"
    comfy = comfy_for(base, template, tmp_path / "ComfyUI")
    plan, _ = plan_of(str(TEMPLATES / template), str(comfy))
    server = backends.get(plan.serve["model"], 1, *plan.serve_argv()[2:])
    out = tmp_path / "out"
    result = paradit_warm(
        "workflow", "run", str(TEMPLATES / template), "--out", str(out),
        "--comfyui-dir", str(comfy), "--server", server.url,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    record = json.loads((out / "job.json").read_text())
    assert record["workflow"]["variant"] == "tiny-z-image"
    assert record["sampling"]["sigmas"] == pytest.approx(
        [_shifted(1 - k / 8, 3.0) for k in range(8)] + [0.0], abs=1e-6
    )
    with Image.open(out / "image.png") as image:
        assert image.size == (1024, 1024)


def test_values_saved_on_a_subgraph_node_override_the_inner_widgets(base, tmp_path):
    """Wan 2.2 14B I2V's subgraph node saves its promoted widgets' values on itself (in the
    order of its widget inputs: text, width, height, duration, noise_seed, ...): edited
    there, the job takes them."""
    template = "video_wan2_2_14B_i2v.json"
    comfy = comfy_for(base, template, tmp_path / "ComfyUI")
    data = json.loads((TEMPLATES / template).read_text())
    outer = next(n for n in data["nodes"] if n["id"] == 129)
    outer["widgets_values"][:5] = ["a white dragon flies", 480, 320, 2, 5]
    path = comfy / "edited.json"
    path.write_text(json.dumps(data))
    plan, _ = plan_of(str(path), str(comfy))
    # duration 2 s at PrimitiveFloat 162's 16 fps: floor(2 * 16 + 1) = 33 frames
    fields = ("prompt", "width", "height", "num_frames", "seed")
    assert [plan.request[k] for k in fields] == ["a white dragon flies", 480, 320, 33, 5]


# -- LTX-2's two-stage templates --------------------------------------------------------------

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


def _ltxv_scheduler(steps: int, tokens: int) -> list[float]:
    """LTXVScheduler at the templates' settings (max_shift 2.05, base_shift 0.95, stretch to
    terminal 0.1), by LTX-Video's published formula, written out here."""
    mu = 0.95 + (2.05 - 0.95) * (tokens - 1024) / (4096 - 1024)
    shifted = [1 / (1 + math.exp(-mu) * (1 / (1 - k / steps) - 1)) for k in range(steps)]
    return [1 - (1 - s) * 0.9 / (1 - shifted[-1]) for s in shifted] + [0.0]


def _levels(template: str, path: str) -> list[float]:
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
        "sampler": LTX2_SAMPLER, "sigmas": pytest.approx(_ltxv_scheduler(20, 3300), abs=1e-9),
        # LatentUpscaleModelLoader 76 (the tiny upscaler's config: x2); ManualSigmas 73;
        # KSamplerSelect 66; CFGGuider 82: 1; LoraLoaderModelOnly 68 (105 and 106 bypassed)
        "upscale": {"factor": 2, "sigmas": _levels("video_ltx2_t2v.json", "92:73")[:-1],
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
        "sigmas": _levels("video_ltx2_t2v_distilled.json", "177:176"),
        # ManualSigmas 117; KSamplerSelect 129; CFGGuider 124: 1; LoraLoaderModelOnly 170
        # bypassed: no LoRA
        "upscale": {"factor": 2,
                    "sigmas": _levels("video_ltx2_t2v_distilled.json", "177:117")[:-1],
                    "sampler": LTX2_SAMPLER, "guidance_scale": 1.0, "loras": []},
    }),
}  # fmt: skip


def _ltx2_copy(template: str, folder: Path, length: int, **inner: list) -> Path:
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


@pytest.mark.parametrize("template", sorted(LTX2_TWO_STAGE))
def test_ltx2_template_maps_to_the_two_stage_job(base, tmp_path, template):
    """At 113 frames (24k+17), each LTX-2 text-to-video template is paradit's two-stage job:
    stage 1 at half the size on its levels, the upscaler its LatentUpscaleModelLoader names
    (`serve --upscaler`), stage 2 on ManualSigmas' levels with its sampler, guidance and
    LoRA (every field by hand from the graph)."""
    comfy = comfy_for(base, template, tmp_path / "ComfyUI")
    plan, variant = plan_of(str(_ltx2_copy(template, comfy, 113)), str(comfy))
    _, expected_variant, request = LTX2_TWO_STAGE[template]
    assert plan.request == request
    models = comfy / "models"
    checkpoint = {"video_ltx2_t2v.json": "ltx-2-19b-dev-fp8"}.get(template, "ltx-2-19b-distilled")
    assert plan.serve == {
        "model": str(models / f"checkpoints/{checkpoint}.safetensors"),
        "text_encoders": [str(models / p) for p in LTX2_FILES["text_encoders"]],
        "vaes": [], "image_encoders": [],
        "lora_dirs": [str(models / "loras")] if plan.request["upscale"]["loras"] else [],
        "upscaler": str(models / LTX2_FILES["upscaler"]),
    }  # fmt: skip
    assert variant == expected_variant
    assert plan.serve_argv()[-2:] == ["--upscaler", plan.serve["upscaler"]]


TEMPORAL = {"in_channels": 128, "mid_channels": 32, "num_blocks_per_stage": 1, "dims": 3,
            "spatial_upsample": False, "temporal_upsample": True}  # fmt: skip
LTX2_REFUSED = {  # case -> (template, inner node edits, outer widget edits, node, type, words)
    "stage 2 read at its denoised_output after uni_pc": (
        "video_ltx2_t2v.json", {"66": ["uni_pc"]}, {},
        "subgraph 92 > node 70", "SamplerCustomAdvanced", "its denoised_output after uni_pc",
    ),
    "stage 2's ManualSigmas without the final 0": (
        "video_ltx2_t2v.json", {"73": ["0.909375, 0.725, 0.421875"]}, {},
        "subgraph 92 > node 73", "ManualSigmas", "the last must be 0",
    ),
    "a temporal latent upscaler": (
        "video_ltx2_t2v.json", {}, {6: "temporal.safetensors"},
        "subgraph 92 > node 76", "LatentUpscaleModelLoader", "a temporal latent upscaler",
    ),
    # LTXVCropGuides 81's positive relinked to CLIPTextEncode 3 itself (no frame rate)
    "stage 2's prompt without LTXVConditioning": (
        "video_ltx2_t2v.json", {}, {"relink": (81, "positive", 3, 0)},
        "subgraph 92 > node 82", "CFGGuider", "other prompts than the first stage's",
    ),
    "stage 1's ManualSigmas below pure noise": (
        "video_ltx2_t2v_distilled.json", {"176": ["0.975, 0.909375, 0.725, 0.421875, 0.0"]},
        {}, "subgraph 177 > node 176", "ManualSigmas", "a first stage's levels must start at 1",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(LTX2_REFUSED))
def test_ltx2_two_stage_refusals_name_the_node(base, tmp_path, case):
    """What paradit's two-stage job cannot run as ComfyUI does, each refused at its node."""
    template, inner, outer, where, kind, words = LTX2_REFUSED[case]
    comfy = comfy_for(base, template, tmp_path / "ComfyUI")
    temporal = comfy / "models" / "latent_upscale_models" / "temporal.safetensors"
    save_file({"x": torch.zeros(1)}, str(temporal), metadata={"config": json.dumps(TEMPORAL)})
    path = _ltx2_copy(template, comfy, 113, **inner)
    data = json.loads(path.read_text())
    (sub,) = data["definitions"]["subgraphs"]
    node = next(n for n in data["nodes"] if n["type"] == sub["id"])
    for index, value in outer.items():
        if index == "relink":  # (target node, its input, the new origin node, its output)
            target, name, origin, slot = value
            inputs = next(n for n in sub["nodes"] if n["id"] == target)["inputs"]
            link = next(i["link"] for i in inputs if i["name"] == name)
            item = next(k for k in sub["links"] if k["id"] == link)
            item.update(origin_id=origin, origin_slot=slot)
        else:
            node["widgets_values"][index] = value
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError) as refused:
        plan_of(str(path), str(comfy))
    message = str(refused.value)
    assert message.startswith(f"{where} ({kind}): ") and words in message, message


def test_ltx2_t2v_template_runs_end_to_end_as_its_request(base, tmp_path, paradit_warm, backends):
    """The dev template at 17 frames, its size made tiny (the subgraph's width and height
    128x128: stage 1 64x64) and LTXVScheduler at 2 steps, on a backend of the tiny files under
    the template's names: `workflow run` runs both stages (job.json's `upscale`: stage 1 at
    64x64, stage 2's levels and LoRA) and writes the frames and audio of its request."""
    template = "video_ltx2_t2v.json"
    comfy = comfy_for(base, template, tmp_path / "ComfyUI")
    path = _ltx2_copy(template, comfy, 17, **{"9": [2, 2.05, 0.95, True, 0.1]})
    data = json.loads(path.read_text())
    next(n for n in data["nodes"] if n["id"] == 92)["widgets_values"][:2] = [128, 128]
    path.write_text(json.dumps(data))
    plan, _ = plan_of(str(path), str(comfy))
    assert (plan.request["width"], plan.request["height"]) == (128, 128)
    server = backends.get(plan.serve["model"], 1, *plan.serve_argv()[2:])
    out = tmp_path / "out"
    result = paradit_warm(
        "workflow", "run", str(path), "--out", str(out), "--comfyui-dir", str(comfy),
        "--server", server.url,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    record = json.loads((out / "job.json").read_text())
    upscale = record["timings"]["upscale"]  # the two-stage record (runtime/stages.py)
    assert upscale["stage_1"] == {"width": 64, "height": 64, "steps": 2}
    assert upscale["sigmas"] == [0.909375, 0.725, 0.421875]
    assert upscale["loras"] == [{"name": "ltx-2-19b-distilled-lora-384.safetensors",
                                 "strength": 1.0}]  # fmt: skip
    assert record["sampling"]["sigmas"] == pytest.approx(_ltxv_scheduler(2, 3 * 2 * 2), abs=1e-6)
    job, frames = run_job(server, plan.body())
    assert [(out / "frames" / f"{i:06d}.png").read_bytes() for i in range(17)] == frames
    assert (out / "audio.wav").read_bytes() == server.audio(job["id"])
    with Image.open(out / "frames" / "000000.png") as frame:
        assert frame.size == (128, 128)


def test_ltx2_two_stage_files_go_to_the_backend_and_the_server_must_hold_them(base, tmp_path):
    """`workflow run` starts its backend with the upscaler the graph names (a user's own
    --upscaler refused, as --model is), and POST /v1/workflows refuses a two-stage graph on a
    server started without that upscaler, naming its LatentUpscaleModelLoader."""
    template = "video_ltx2_t2v.json"
    comfy = comfy_for(base, template, tmp_path / "ComfyUI")
    path = _ltx2_copy(template, comfy, 113)
    plan, _ = plan_of(str(path), str(comfy))
    flags = dict.fromkeys(("model", "text_encoders", "vaes", "image_encoders", "upscaler"))
    args = argparse.Namespace(**flags, server=None, lora_dirs=None)
    run_overrides(args, plan)
    assert (args.model, args.upscaler) == (plan.serve["model"], plan.serve["upscaler"])
    with pytest.raises(ValueError, match="^--upscaler: the workflow's loader nodes name"):
        run_overrides(argparse.Namespace(**{**flags, "upscaler": "x"}, server=None), plan)
    data = json.loads(path.read_text())
    argv = plan.serve_argv()[2:]
    without = argv[: argv.index("--upscaler")]
    for given, refused in ((without, True), (argv, False)):
        config = ServeConfig.from_argv(given, model=plan.serve["model"], device="cpu")
        if refused:
            with pytest.raises(ValueError) as error:
                plan_for_server(data, "0" * 64, str(comfy), config, SAMPLERS)
            assert str(error.value).startswith(
                "subgraph 92 > node 76 (LatentUpscaleModelLoader): "
                "ltx-2-spatial-upscaler-x2-1.0.safetensors: this server's upscaler is none"
            ), error.value
        else:
            served, _ = plan_for_server(data, "0" * 64, str(comfy), config, SAMPLERS)
            assert served.request == plan.request


def _dual(saved: Path, folder: Path, node: int, scales: list[float]) -> Path:
    """The workflow `saved` with CFGGuider `node` made an LTXVDualCFGGuider at `scales`."""
    data = json.loads(saved.read_text())
    (sub,) = data["definitions"]["subgraphs"]
    guider = next(n for n in sub["nodes"] if n["id"] == node)
    assert guider["type"] == "CFGGuider"
    guider.update(type="LTXVDualCFGGuider", widgets_values=scales)
    edited = folder / f"dual_{node}_{scales[0]}_{scales[1]}.json"
    edited.write_text(json.dumps(data))
    return edited


def test_dual_cfg_guider_at_two_scales_guides_the_audio_at_its_own(base, tmp_path):
    """LTX-2's dev template (113 frames) with its first stage's CFGGuider 47 swapped for
    LTXVDualCFGGuider: at 4 and 7 (ComfyUI's dual CFG: the audio part guided at 7) the job of
    the template with `guidance_terms.audio_guidance_scale` 7 (LTX2Pipeline's per-stream CFG);
    at 4 and 4 (ComfyUI's single CFG) the template's own job; the second stage's guider 82 at
    two scales is refused there (`upscale` guides both streams at one)."""
    template = "video_ltx2_t2v.json"
    comfy = comfy_for(base, template, tmp_path / "ComfyUI")
    saved = _ltx2_copy(template, comfy, 113)
    request = LTX2_TWO_STAGE[template][2]
    plan, _variant = plan_of(str(_dual(saved, tmp_path, 47, [4.0, 7.0])), str(comfy))
    assert plan.request == {**request, "guidance_terms": {"audio_guidance_scale": 7.0}}
    plan, _variant = plan_of(str(_dual(saved, tmp_path, 47, [4.0, 4.0])), str(comfy))
    assert plan.request == request
    with pytest.raises(ValueError) as refused:
        plan_of(str(_dual(saved, tmp_path, 82, [1.0, 3.0])), str(comfy))
    assert str(refused.value).startswith(
        "subgraph 92 > node 82 (LTXVDualCFGGuider): two scales (video and audio) in the second"
    ), refused.value


RUN_SMALL = {  # a template's job at a tiny size: width, height, frames, steps (the rest its own)
    "text_to_video_wan.json": (64, 64, 5, 2),
    "image_to_video_wan.json": (64, 64, 5, 2),
    "video_wan2_2_14B_t2v.json": (64, 64, 5, 2),
    "video_wan2_2_14B_i2v.json": (64, 64, 5, 2),
    "video_wan2_2_5B_ti2v.json": (64, 64, 5, 2),
    "image_z_image.json": (64, 64, 1, 2),
    "image_z_image_int8.json": (64, 64, 1, 2),
    "image_qwen_image.json": (64, 64, 1, 2),
    "image_qwen_Image_2512.json": (64, 64, 1, 2),
    "video_hunyuan_video_1.5_720p_t2v.json": (64, 64, 5, 2),
}
"""The templates whose tiny files carry weights (the others' are headers, run elsewhere: Z-Image
Turbo and LTX-2 above, Flux.1 schnell and FLUX.2-klein base in test_templates_flux.py, the
Qwen-Image-Edit ones in test_templates_qwen_edit.py, Krea 2 in test_templates_qi21_krea2.py)."""


@pytest.mark.parametrize("template", sorted(RUN_SMALL))
def test_template_runs_end_to_end_on_its_tiny_files(base, tmp_path, backends, template):
    """The template's job, as imported, on a backend of the files it names (linked to the tiny
    ones), at a tiny size and 2 steps (Wan 2.2 A14B switching experts after the first): it
    runs, and the backend's record of it is the imported request but for those fields."""
    comfy = comfy_for(base, template, tmp_path / "ComfyUI")
    plan, _variant = plan_of(str(TEMPLATES / template), str(comfy))
    width, height, frames, steps = RUN_SMALL[template]
    small = {"width": width, "height": height, "num_frames": frames,
             "num_inference_steps": steps}  # fmt: skip
    if "switch_step" in plan.request:
        small["switch_step"] = 1
    server = backends.get(plan.serve["model"], 1, *plan.serve_argv()[2:])
    job, frames_png = run_job(server, {**plan.body(), **small})
    assert job["status"] == "succeeded", job
    assert len(frames_png) == frames
    ran = {k: v for k, v in job["request"].items() if v is not None}
    expected = {k: v for k, v in {**plan.request, **small}.items() if k != "image"}
    assert {k: ran[k] for k in expected} == expected
