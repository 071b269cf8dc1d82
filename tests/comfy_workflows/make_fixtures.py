"""Writes the workflow fixtures of this folder: each graph below in ComfyUI's API format
(`NAME.api.json`) and in its UI format (`NAME.ui.json`, as the menu's Save writes it), for
tests/workflow/test_workflow_import.py. Written for paradit from the core nodes' documented inputs,
in the shapes of ComfyUI's templates (loaders, ModelSampling, prompts, latent, sampler,
decode, save), at tiny sizes; the files they name are the tiny ones the tests write
(tests/comfy_workflow_files.py).

The UI form is made here with its own table of each node's widget order and outputs (not the
importer's), so a wrong order in the importer shows as a difference between the two forms.

Run `python tests/comfy_workflows/make_fixtures.py` after changing a graph.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).parent

# -- the graphs (API format: node id -> {class_type, inputs}; a link is [node id, output]) --


def _node(class_type: str, title: str = "", **inputs) -> dict:
    return {"class_type": class_type, "inputs": inputs, "_meta": {"title": title or class_type}}


def _tail(prefix: str, decode_from: str, vae: str, video: bool, fps: float = 16) -> dict:
    """VAEDecode, then CreateVideo + SaveVideo, or SaveImage."""
    nodes = {"8": _node("VAEDecode", samples=[decode_from, 0], vae=[vae, 0])}
    if video:
        nodes["50"] = _node("CreateVideo", images=["8", 0], fps=fps)
        nodes["49"] = _node(
            "SaveVideo", video=["50", 0], filename_prefix=prefix, format="auto", codec="auto"
        )
    else:
        nodes["9"] = _node("SaveImage", images=["8", 0], filename_prefix=prefix)
    return nodes


WAN_NEGATIVE = "static, blurry, low quality, worst quality, deformed"


def wan21_t2v() -> dict:
    return {
        "37": _node("UNETLoader", unet_name="wan2.1_t2v_tiny_fp32.safetensors",
                    weight_dtype="default"),
        "38": _node("CLIPLoader", clip_name="umt5_tiny.safetensors", type="wan",
                    device="default"),
        "39": _node("VAELoader", vae_name="wan_2.1_vae_tiny.safetensors"),
        "48": _node("ModelSamplingSD3", model=["37", 0], shift=8.0),
        "6": _node("CLIPTextEncode", "CLIP Text Encode (Positive Prompt)",
                   text="a red fox running through snow", clip=["38", 0]),
        "7": _node("CLIPTextEncode", "CLIP Text Encode (Negative Prompt)", text=WAN_NEGATIVE,
                   clip=["38", 0]),
        "40": _node("EmptyHunyuanLatentVideo", width=32, height=32, length=5, batch_size=1),
        "3": _node("KSampler", model=["48", 0], positive=["6", 0], negative=["7", 0],
                   latent_image=["40", 0], seed=3, steps=4, cfg=6.0, sampler_name="uni_pc",
                   scheduler="simple", denoise=1.0),
        **_tail("video/wan2.1_t2v", "3", "39", video=True),
    }  # fmt: skip


def wan21_i2v() -> dict:
    return {
        "37": _node("UNETLoader", unet_name="wan2.1_i2v_480p_tiny_fp32.safetensors",
                    weight_dtype="default"),
        "38": _node("CLIPLoader", clip_name="umt5_tiny.safetensors", type="wan",
                    device="default"),
        "39": _node("VAELoader", vae_name="wan_2.1_vae_tiny.safetensors"),
        "59": _node("CLIPVisionLoader", clip_name="clip_vision_tiny.safetensors"),
        "52": _node("LoadImage", image="fox.png"),
        "51": _node("CLIPVisionEncode", clip_vision=["59", 0], image=["52", 0], crop="none"),
        "54": _node("ModelSamplingSD3", model=["37", 0], shift=8.0),
        "6": _node("CLIPTextEncode", text="the fox turns its head", clip=["38", 0]),
        "7": _node("CLIPTextEncode", text=WAN_NEGATIVE, clip=["38", 0]),
        "63": _node("WanImageToVideo", positive=["6", 0], negative=["7", 0], vae=["39", 0],
                     clip_vision_output=["51", 0], start_image=["52", 0], width=32, height=32,
                     length=5, batch_size=1),
        "3": _node("KSampler", model=["54", 0], positive=["63", 0], negative=["63", 1],
                   latent_image=["63", 2], seed=4, steps=4, cfg=6.0, sampler_name="uni_pc",
                   scheduler="simple", denoise=1.0),
        **_tail("video/wan2.1_i2v", "3", "39", video=True),
    }  # fmt: skip


def _wan22_a14b(steps: int, cfg: float, switch: int, shift: float, loras: bool) -> dict:
    nodes = {
        "37": _node("UNETLoader", "Load Diffusion Model (high noise)",
                    unet_name="wan2.2_i2v_high_noise_14B_tiny_fp32.safetensors",
                    weight_dtype="default"),
        "56": _node("UNETLoader", "Load Diffusion Model (low noise)",
                    unet_name="wan2.2_i2v_low_noise_14B_tiny_fp32.safetensors",
                    weight_dtype="default"),
        "38": _node("CLIPLoader", clip_name="umt5_tiny.safetensors", type="wan",
                    device="default"),
        "39": _node("VAELoader", vae_name="wan_2.1_vae_tiny.safetensors"),
        "52": _node("LoadImage", image="fox.png"),
        "6": _node("CLIPTextEncode", text="the fox jumps over a log", clip=["38", 0]),
        "7": _node("CLIPTextEncode", text=WAN_NEGATIVE, clip=["38", 0]),
        "63": _node("WanImageToVideo", positive=["6", 0], negative=["7", 0], vae=["39", 0],
                     start_image=["52", 0], width=32, height=32, length=5, batch_size=1),
        "54": _node("ModelSamplingSD3", model=["60" if loras else "37", 0], shift=shift),
        "55": _node("ModelSamplingSD3", model=["61" if loras else "56", 0], shift=shift),
        "57": _node("KSamplerAdvanced", "KSamplerAdvanced (high noise)", model=["54", 0],
                    positive=["63", 0], negative=["63", 1], latent_image=["63", 2],
                    add_noise="enable", noise_seed=5, steps=steps, cfg=cfg,
                    sampler_name="euler", scheduler="simple", start_at_step=0,
                    end_at_step=switch, return_with_leftover_noise="enable"),
        "58": _node("KSamplerAdvanced", "KSamplerAdvanced (low noise)", model=["55", 0],
                    positive=["63", 0], negative=["63", 1], latent_image=["57", 0],
                    add_noise="disable", noise_seed=0, steps=steps, cfg=cfg,
                    sampler_name="euler", scheduler="simple", start_at_step=switch,
                    end_at_step=10000, return_with_leftover_noise="disable"),
        **_tail("video/wan2.2_i2v", "58", "39", video=True),
    }  # fmt: skip
    if loras:
        nodes["60"] = _node("LoraLoaderModelOnly", model=["37", 0],
                            lora_name="lightx2v_i2v_4steps_high_noise_tiny.safetensors",
                            strength_model=1.0)  # fmt: skip
        nodes["61"] = _node("LoraLoaderModelOnly", model=["56", 0],
                            lora_name="lightx2v_i2v_4steps_low_noise_tiny.safetensors",
                            strength_model=1.0)  # fmt: skip
    return nodes


def wan22_i2v_a14b_4step() -> dict:
    """The 4-step group: the lightx2v LoRAs on both experts, euler/simple, cfg 1, shift 5,
    the high-noise expert for steps 0-2."""
    return _wan22_a14b(steps=4, cfg=1.0, switch=2, shift=5.0, loras=True)


def wan22_i2v_a14b_20step() -> dict:
    """The 20-step group: no LoRAs, cfg 3.5, the split at 10, shift 8."""
    return _wan22_a14b(steps=20, cfg=3.5, switch=10, shift=8.0, loras=False)


def wan22_ti2v_5b() -> dict:
    return {
        "37": _node("UNETLoader", unet_name="wan2.2_ti2v_5B_tiny_fp32.safetensors",
                    weight_dtype="default"),
        "38": _node("CLIPLoader", clip_name="umt5_tiny.safetensors", type="wan",
                    device="default"),
        "39": _node("VAELoader", vae_name="wan2.2_vae_tiny.safetensors"),
        "48": _node("ModelSamplingSD3", model=["37", 0], shift=8.0),
        "6": _node("CLIPTextEncode", text="a paper boat on a pond", clip=["38", 0]),
        "7": _node("CLIPTextEncode", text=WAN_NEGATIVE, clip=["38", 0]),
        "52": _node("LoadImage", image="fox.png"),
        "55": _node("Wan22ImageToVideoLatent", vae=["39", 0], start_image=["52", 0], width=32,
                    height=32, length=5, batch_size=1),
        "3": _node("KSampler", model=["48", 0], positive=["6", 0], negative=["7", 0],
                   latent_image=["55", 0], seed=6, steps=4, cfg=5.0, sampler_name="uni_pc",
                   scheduler="simple", denoise=1.0),
        **_tail("video/wan2.2_ti2v_5b", "3", "39", video=True, fps=24),
    }  # fmt: skip


def flux_dev() -> dict:
    return {
        "12": _node("UNETLoader", unet_name="flux1-dev.safetensors", weight_dtype="default"),
        "11": _node("DualCLIPLoader", clip_name1="clip_l.safetensors",
                    clip_name2="t5xxl_fp16.safetensors", type="flux", device="default"),
        "10": _node("VAELoader", vae_name="ae.safetensors"),
        "30": _node("ModelSamplingFlux", model=["12", 0], max_shift=1.15, base_shift=0.5,
                    width=1024, height=1024),
        "6": _node("CLIPTextEncode", text="a cup of coffee on a wooden table", clip=["11", 0]),
        "26": _node("FluxGuidance", conditioning=["6", 0], guidance=3.5),
        "33": _node("ConditioningZeroOut", conditioning=["6", 0]),
        "27": _node("EmptySD3LatentImage", width=1024, height=1024, batch_size=1),
        "3": _node("KSampler", model=["30", 0], positive=["26", 0], negative=["33", 0],
                   latent_image=["27", 0], seed=7, steps=20, cfg=1.0, sampler_name="euler",
                   scheduler="simple", denoise=1.0),
        **_tail("flux_dev", "3", "10", video=False),
    }  # fmt: skip


def qwen_image() -> dict:
    return {
        "37": _node("UNETLoader", unet_name="qwen_image_tiny_bf16.safetensors",
                    weight_dtype="default"),
        "38": _node("CLIPLoader", clip_name="qwen_2.5_vl_tiny.safetensors",
                    type="qwen_image", device="default"),
        "39": _node("VAELoader", vae_name="qwen_image_vae_tiny.safetensors"),
        "66": _node("ModelSamplingAuraFlow", model=["37", 0], shift=3.1),
        "6": _node("CLIPTextEncode", text='a shop sign that reads "paradit"', clip=["38", 0]),
        "7": _node("CLIPTextEncode", text="", clip=["38", 0]),
        "58": _node("EmptySD3LatentImage", width=32, height=32, batch_size=1),
        "3": _node("KSampler", model=["66", 0], positive=["6", 0], negative=["7", 0],
                   latent_image=["58", 0], seed=8, steps=4, cfg=2.5, sampler_name="euler",
                   scheduler="simple", denoise=1.0),
        **_tail("qwen_image", "3", "39", video=False),
    }  # fmt: skip


def z_image_turbo() -> dict:
    return {
        "37": _node("UNETLoader", unet_name="z_image_turbo_tiny_bf16.safetensors",
                    weight_dtype="default"),
        "38": _node("CLIPLoader", clip_name="qwen_3_tiny.safetensors", type="lumina2",
                    device="default"),
        "39": _node("VAELoader", vae_name="ae_tiny.safetensors"),
        "11": _node("ModelSamplingAuraFlow", model=["37", 0], shift=3.0),
        "6": _node("CLIPTextEncode", text="a lighthouse at dusk", clip=["38", 0]),
        "7": _node("ConditioningZeroOut", conditioning=["6", 0]),
        "13": _node("EmptySD3LatentImage", width=32, height=32, batch_size=1),
        "3": _node("KSampler", model=["11", 0], positive=["6", 0], negative=["7", 0],
                   latent_image=["13", 0], seed=9, steps=8, cfg=1.0,
                   sampler_name="res_multistep", scheduler="simple", denoise=1.0),
        **_tail("z_image", "3", "39", video=False),
    }  # fmt: skip


def hunyuan15_t2v() -> dict:
    """HunyuanVideo 1.5 T2V in the shape of ComfyUI's template (its Custom Sampler subgraph
    unpacked): SamplerCustomAdvanced fed by RandomNoise, CFGGuider on the ModelSamplingSD3
    model, KSamplerSelect, and BasicScheduler on the loader's own model (so its levels take
    ComfyUI's default shift for HunyuanVideo 1.5, 7, not the ModelSampling node's)."""
    return {
        "12": _node("UNETLoader", unet_name="hunyuanvideo1.5_480p_t2v_fp32.safetensors",
                    weight_dtype="default"),
        "11": _node("DualCLIPLoader", clip_name1="qwen_2.5_vl_hunyuan15_tiny.safetensors",
                    clip_name2="byt5_small_glyphxl_tiny.safetensors", type="hunyuan_video_15",
                    device="default"),
        "10": _node("VAELoader", vae_name="hunyuanvideo15_vae_tiny.safetensors"),
        "44": _node("CLIPTextEncode", "CLIP Text Encode (Positive Prompt)",
                    text="a paper airplane gliding between towers", clip=["11", 0]),
        "93": _node("CLIPTextEncode", "CLIP Text Encode (Negative Prompt)", text="",
                    clip=["11", 0]),
        "107": _node("EmptyHunyuanVideo15Latent", width=32, height=32, length=5, batch_size=1),
        "67": _node("ModelSamplingSD3", model=["12", 0], shift=7.0),
        "98": _node("CFGGuider", model=["67", 0], positive=["44", 0], negative=["93", 0],
                    cfg=6.0),
        "95": _node("BasicScheduler", model=["12", 0], scheduler="simple", steps=4,
                    denoise=1.0),
        "96": _node("RandomNoise", noise_seed=11),
        "97": _node("KSamplerSelect", sampler_name="euler"),
        "99": _node("SamplerCustomAdvanced", noise=["96", 0], guider=["98", 0],
                    sampler=["97", 0], sigmas=["95", 0], latent_image=["107", 0]),
        **_tail("video/hunyuan_video_1.5", "99", "10", video=True, fps=24),
    }  # fmt: skip


def hunyuan15_t2v_shift() -> dict:
    """The HunyuanVideo 1.5 T2V template with its BasicScheduler on the ModelSamplingSD3
    model (the guider's): its levels take the node's shift 7, as paradit runs them."""
    graph = hunyuan15_t2v()
    graph["95"]["inputs"]["model"] = ["67", 0]
    return graph


def hunyuan15_t2v_easycache() -> dict:
    """The HunyuanVideo 1.5 T2V template with its EasyCache node active (the template ships
    it bypassed) between the loader and ModelSamplingSD3: paradit refuses it."""
    graph = hunyuan15_t2v()
    graph["105"] = _node("EasyCache", model=["12", 0], reuse_threshold=0.2, start_percent=0.15,
                         end_percent=0.95, verbose=False)  # fmt: skip
    graph["67"]["inputs"]["model"] = ["105", 0]
    return graph


def ltx2_t2v() -> dict:
    """LTX-2 T2V in the shape of ComfyUI's template (one sampling stage): the checkpoint
    with its Gemma text encoder and audio VAE, LTXVConditioning's frame rate, empty video
    and audio latents joined, SamplerCustomAdvanced on LTXVScheduler's levels, the joint
    latent split and both decoded into one video. At 24 fps (paradit's LTX-2 rate) and 17
    frames: 24k+17 frames make as many audio latent frames in ComfyUI as in paradit."""
    ckpt = "ltx-2-19b-dev_tiny.safetensors"
    return {
        "1": _node("CheckpointLoaderSimple", ckpt_name=ckpt),
        "2": _node("LTXAVTextEncoderLoader", text_encoder="gemma_3_tiny.safetensors",
                   ckpt_name=ckpt, device="default"),
        "3": _node("LTXVAudioVAELoader", ckpt_name=ckpt),
        "6": _node("CLIPTextEncode", "CLIP Text Encode (Positive Prompt)",
                   text="a drummer on a rooftop at sunset", clip=["2", 0]),
        "7": _node("CLIPTextEncode", "CLIP Text Encode (Negative Prompt)",
                   text="blurry, low quality, still frame", clip=["2", 0]),
        "22": _node("LTXVConditioning", positive=["6", 0], negative=["7", 0], frame_rate=24.0),
        "43": _node("EmptyLTXVLatentVideo", width=64, height=64, length=17, batch_size=1),
        "44": _node("LTXVEmptyLatentAudio", frames_number=17, frame_rate=24.0, batch_size=1,
                    audio_vae=["3", 0]),
        "45": _node("LTXVConcatAVLatent", video_latent=["43", 0], audio_latent=["44", 0]),
        "11": _node("RandomNoise", noise_seed=10),
        "12": _node("KSamplerSelect", sampler_name="euler"),
        "13": _node("LTXVScheduler", steps=4, max_shift=2.05, base_shift=0.95, stretch=True,
                    terminal=0.1, latent=["45", 0]),
        "14": _node("CFGGuider", model=["1", 0], positive=["22", 0], negative=["22", 1],
                    cfg=4.0),
        "15": _node("SamplerCustomAdvanced", noise=["11", 0], guider=["14", 0],
                    sampler=["12", 0], sigmas=["13", 0], latent_image=["45", 0]),
        "16": _node("LTXVSeparateAVLatent", av_latent=["15", 0]),
        "8": _node("VAEDecode", samples=["16", 0], vae=["1", 2]),
        "17": _node("LTXVAudioVAEDecode", samples=["16", 1], audio_vae=["3", 0]),
        "50": _node("CreateVideo", images=["8", 0], audio=["17", 0], fps=24.0),
        "49": _node("SaveVideo", video=["50", 0], filename_prefix="video/ltx2_t2v",
                    format="auto", codec="auto"),
    }  # fmt: skip


GRAPHS = {
    "wan21_t2v": wan21_t2v,
    "wan21_i2v": wan21_i2v,
    "wan22_i2v_a14b_4step": wan22_i2v_a14b_4step,
    "wan22_i2v_a14b_20step": wan22_i2v_a14b_20step,
    "wan22_ti2v_5b": wan22_ti2v_5b,
    "flux_dev": flux_dev,
    "qwen_image": qwen_image,
    "z_image_turbo": z_image_turbo,
    "hunyuan15_t2v": hunyuan15_t2v,
    "hunyuan15_t2v_shift": hunyuan15_t2v_shift,
    "hunyuan15_t2v_easycache": hunyuan15_t2v_easycache,
    "ltx2_t2v": ltx2_t2v,
}

# -- the UI format ----------------------------------------------------------------------------

# node type -> (widgets in `widgets_values` order, outputs as (name, type)); a seed widget is
# followed by its "control after generate" value
UI_TABLE: dict[str, tuple[tuple[str, ...], tuple[tuple[str, str], ...]]] = {
    "UNETLoader": (("unet_name", "weight_dtype"), (("MODEL", "MODEL"),)),
    "CLIPLoader": (("clip_name", "type", "device"), (("CLIP", "CLIP"),)),
    "DualCLIPLoader": (("clip_name1", "clip_name2", "type", "device"), (("CLIP", "CLIP"),)),
    "VAELoader": (("vae_name",), (("VAE", "VAE"),)),
    "CLIPVisionLoader": (("clip_name",), (("CLIP_VISION", "CLIP_VISION"),)),
    "LoadImage": (("image", "upload"), (("IMAGE", "IMAGE"), ("MASK", "MASK"))),
    "CLIPVisionEncode": (("crop",), (("CLIP_VISION_OUTPUT", "CLIP_VISION_OUTPUT"),)),
    "LoraLoaderModelOnly": (("lora_name", "strength_model"), (("MODEL", "MODEL"),)),
    "ModelSamplingSD3": (("shift",), (("MODEL", "MODEL"),)),
    "ModelSamplingAuraFlow": (("shift",), (("MODEL", "MODEL"),)),
    "CFGNorm": (("strength", "pre_cfg"), (("MODEL", "MODEL"),)),
    "ModelSamplingFlux": (("max_shift", "base_shift", "width", "height"), (("MODEL", "MODEL"),)),
    "CLIPTextEncode": (("text",), (("CONDITIONING", "CONDITIONING"),)),
    "FluxGuidance": (("guidance",), (("CONDITIONING", "CONDITIONING"),)),
    "ConditioningZeroOut": ((), (("CONDITIONING", "CONDITIONING"),)),
    "EmptySD3LatentImage": (("width", "height", "batch_size"), (("LATENT", "LATENT"),)),
    "EmptyHunyuanLatentVideo": (
        ("width", "height", "length", "batch_size"),
        (("LATENT", "LATENT"),),
    ),
    "Wan22ImageToVideoLatent": (
        ("width", "height", "length", "batch_size"),
        (("LATENT", "LATENT"),),
    ),
    "WanImageToVideo": (
        ("width", "height", "length", "batch_size"),
        (("positive", "CONDITIONING"), ("negative", "CONDITIONING"), ("latent", "LATENT")),
    ),
    "KSampler": (
        ("seed", "steps", "cfg", "sampler_name", "scheduler", "denoise"),
        (("LATENT", "LATENT"),),
    ),
    "KSamplerAdvanced": (
        (
            "add_noise",
            "noise_seed",
            "steps",
            "cfg",
            "sampler_name",
            "scheduler",
            "start_at_step",
            "end_at_step",
            "return_with_leftover_noise",
        ),
        (("LATENT", "LATENT"),),
    ),  # fmt: skip
    "EmptyHunyuanVideo15Latent": (
        ("width", "height", "length", "batch_size"),
        (("LATENT", "LATENT"),),
    ),
    "CheckpointLoaderSimple": (
        ("ckpt_name",),
        (("MODEL", "MODEL"), ("CLIP", "CLIP"), ("VAE", "VAE")),
    ),
    "RandomNoise": (("noise_seed",), (("NOISE", "NOISE"),)),
    "KSamplerSelect": (("sampler_name",), (("SAMPLER", "SAMPLER"),)),
    "CFGGuider": (("cfg",), (("GUIDER", "GUIDER"),)),
    "BasicScheduler": (("scheduler", "steps", "denoise"), (("SIGMAS", "SIGMAS"),)),
    "SamplerCustomAdvanced": ((), (("output", "LATENT"), ("denoised_output", "LATENT"))),
    "LTXAVTextEncoderLoader": (("text_encoder", "ckpt_name", "device"), (("CLIP", "CLIP"),)),
    "LTXVAudioVAELoader": (("ckpt_name",), (("Audio VAE", "VAE"),)),
    "LTXVConditioning": (
        ("frame_rate",),
        (("positive", "CONDITIONING"), ("negative", "CONDITIONING")),
    ),
    "EmptyLTXVLatentVideo": (("width", "height", "length", "batch_size"), (("LATENT", "LATENT"),)),
    "LTXVEmptyLatentAudio": (
        ("frames_number", "frame_rate", "batch_size"),
        (("Latent", "LATENT"),),
    ),
    "LTXVConcatAVLatent": ((), (("latent", "LATENT"),)),
    "LTXVScheduler": (
        ("steps", "max_shift", "base_shift", "stretch", "terminal"),
        (("SIGMAS", "SIGMAS"),),
    ),
    "LTXVSeparateAVLatent": ((), (("video_latent", "LATENT"), ("audio_latent", "LATENT"))),
    "LTXVAudioVAEDecode": ((), (("Audio", "AUDIO"),)),
    "VAEDecode": ((), (("IMAGE", "IMAGE"),)),
    "CreateVideo": (("fps",), (("VIDEO", "VIDEO"),)),
    "SaveVideo": (("filename_prefix", "format", "codec"), ()),
    "SaveImage": (("filename_prefix",), ()),
    "EasyCache": (
        ("reuse_threshold", "start_percent", "end_percent", "verbose"),
        (("MODEL", "MODEL"),),
    ),
}
INPUT_TYPES = {
    "model": "MODEL", "clip": "CLIP", "vae": "VAE", "clip_vision": "CLIP_VISION",
    "image": "IMAGE", "images": "IMAGE", "start_image": "IMAGE", "positive": "CONDITIONING",
    "negative": "CONDITIONING", "conditioning": "CONDITIONING", "latent_image": "LATENT",
    "samples": "LATENT", "clip_vision_output": "CLIP_VISION_OUTPUT", "video": "VIDEO",
    "noise": "NOISE", "guider": "GUIDER", "sampler": "SAMPLER", "sigmas": "SIGMAS",
    "latent": "LATENT", "video_latent": "LATENT", "audio_latent": "LATENT",
    "av_latent": "LATENT", "audio_vae": "VAE", "audio": "AUDIO",
}  # fmt: skip


def to_ui(api: dict) -> dict:
    """The API graph as ComfyUI's menu saves it: numeric node ids, links listed once,
    widget values by position (a seed followed by "fixed"), a note beside the graph."""
    ids = {key: index + 1 for index, key in enumerate(api)}
    links, nodes = [], []
    outputs: dict[tuple[str, int], list[int]] = {}
    for key, node in api.items():
        for name, value in node["inputs"].items():
            if isinstance(value, list):
                link_id = len(links) + 1
                source = api[value[0]]["class_type"]
                kind = UI_TABLE[source][1][value[1]][1]
                links.append([link_id, ids[value[0]], value[1], ids[key], None, kind, name])
                outputs.setdefault((value[0], value[1]), []).append(link_id)
    for order, (key, node) in enumerate(api.items()):
        widgets, outs = UI_TABLE[node["class_type"]]
        values = []
        for name in widgets:
            if name in node["inputs"]:
                values.append(node["inputs"][name])
            elif name == "upload":
                values.append("image")
            if name in ("seed", "noise_seed"):
                values.append("fixed")
        inputs = []
        for link in links:
            if link[3] == ids[key]:
                link[4] = len(inputs)
                inputs.append({"name": link[6], "type": INPUT_TYPES[link[6]], "link": link[0]})
        nodes.append({
            "id": ids[key],
            "type": node["class_type"],
            "pos": [100 + 320 * (order % 5), 100 + 260 * (order // 5)],
            "size": [300, 120],
            "flags": {},
            "order": order,
            "mode": 0,
            "inputs": inputs,
            "outputs": [
                {"name": n, "type": t, "links": outputs.get((key, i), []), "slot_index": i}
                for i, (n, t) in enumerate(outs)
            ],
            "title": node["_meta"]["title"],
            "properties": {"Node name for S&R": node["class_type"]},
            "widgets_values": values,
        })  # fmt: skip
    note_id = len(nodes) + 1
    nodes.append({
        "id": note_id, "type": "Note", "pos": [100, -200], "size": [400, 100], "flags": {},
        "order": len(nodes), "mode": 0, "inputs": [], "outputs": [], "properties": {},
        "widgets_values": ["Written for paradit's tests (tiny files)."],
    })  # fmt: skip
    return {
        "last_node_id": note_id,
        "last_link_id": len(links),
        "nodes": nodes,
        "links": [link[:6] for link in links],
        "groups": [],
        "config": {},
        "extra": {"ds": {"scale": 1, "offset": [0, 0]}},
        "version": 0.4,
    }


def main() -> None:
    for name, graph in GRAPHS.items():
        api = graph()
        for suffix, data in (("api", api), ("ui", to_ui(api))):
            path = HERE / f"{name}.{suffix}.json"
            path.write_text(json.dumps(data, indent=2) + "\n")


if __name__ == "__main__":
    main()
