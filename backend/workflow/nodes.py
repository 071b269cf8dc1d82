"""The ComfyUI core nodes paradit maps, declared once: each node type's widgets in the order
ComfyUI lists them (the UI format saves widget values by position, the API format by name),
and what it becomes in a paradit job (for the messages and docs/workflows.md). Torch-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

SEED_WIDGETS = ("seed", "noise_seed", "value")
"""Widgets the UI may follow with a "control after generate" value in `widgets_values` (a
seed's; PrimitiveInt's value)."""
SEED_CONTROLS = ("fixed", "increment", "decrement", "randomize")

UI_ONLY = ("Note", "MarkdownNote", "Reroute", "PrimitiveNode")
"""UI-format nodes that are no part of the prompt ComfyUI runs: notes, reroutes (their link
passes through), primitives (their value is the widget value of the node they feed)."""


@dataclass(frozen=True)
class NodeSpec:
    """One node type paradit maps."""

    type: str
    widgets: tuple[str, ...]
    """Widget names in the order of the UI format's `widgets_values` (a seed's control value
    not counted)."""
    becomes: str
    """What the node becomes in paradit, in words (docs/workflows.md's table)."""
    more_ok: bool = False
    """Its widgets change nothing paradit maps (a save node's): values a newer version of
    the node saves after the known ones are left unread."""
    dynamic: Mapping[str, Mapping[str, tuple[str, ...]]] = field(default_factory=dict)
    """A dynamic list widget (ComfyUI's dynamic combo) -> its choices -> the widgets each
    shows after it, saved after the list's value and named `list.widget` (as
    `sockets._DYNAMIC` declares them for the frontend)."""


def _spec(type_: str, widgets: tuple[str, ...], becomes: str, **kwargs) -> NodeSpec:
    return NodeSpec(type_, widgets, becomes, **kwargs)


NODE_SPECS: tuple[NodeSpec, ...] = (
    _spec("UNETLoader", ("unet_name", "weight_dtype"), "`--model` (weight_dtype `default`)"),
    _spec("UnetLoaderGGUF", ("unet_name",), "`--model` (a `.gguf` file)"),
    _spec(
        "CheckpointLoaderSimple",
        ("ckpt_name",),
        "`--model` (an all-in-one checkpoint: its CLIP and VAE outputs are the file's own)",
    ),
    _spec("CLIPLoader", ("clip_name", "type", "device"), "`--text-encoder`"),
    _spec("DualCLIPLoader", ("clip_name1", "clip_name2", "type", "device"), "two `--text-encoder`"),
    _spec("VAELoader", ("vae_name",), "`--vae`"),
    _spec("CLIPVisionLoader", ("clip_name",), "`--image-encoder`"),
    _spec(
        "LoraLoaderModelOnly",
        ("lora_name", "strength_model"),
        "`loras` (on Wan 2.2 A14B's experts: `high`/`low` strengths), `--lora-dir` the "
        "models folder's `loras`",
    ),
    _spec("ModelSamplingSD3", ("shift",), "`shift`"),
    _spec(
        "ModelSamplingAuraFlow",
        ("shift", "sampling"),
        "`shift` (sampling `flow`, as older versions save none)",
    ),
    _spec(
        "ModelSamplingFlux",
        ("max_shift", "base_shift", "width", "height"),
        "`shift` (exp of the shift it computes for its width and height), `flow_levels` "
        "10000 (its table)",
    ),
    _spec(
        "CFGNorm",
        ("strength", "pre_cfg"),
        "`cfg_mode` `norm`, `cfg_norm` its strength, where cfg is above 1 (pre_cfg false; "
        "Qwen-Image and Qwen-Image-Edit)",
    ),
    _spec("CLIPTextEncode", ("text",), "`prompt` / `negative_prompt`"),
    _spec(
        "CLIPTextEncodeFlux",
        ("clip_l", "t5xxl", "guidance"),
        "`prompt` (clip_l: CLIP-L's), `prompt_2` (t5xxl: T5's, where it differs); guidance: "
        "`guidance_scale` on a DiT that embeds it (Flux.1 dev; the sampler's cfg must be 1), "
        "ignored on one that does not (schnell), as in ComfyUI",
    ),
    _spec(
        "TextEncodeQwenImageEditPlus",
        ("prompt",),
        "`prompt` / `negative_prompt`, its image1..3 `image` and `images`, `image_prep` "
        "`comfyui` (references and vision input prepared as the node does; Qwen-Image-Edit-Plus)",
    ),
    _spec(
        "TextEncodeQwenImageEdit",
        ("prompt",),
        "`prompt` / `negative_prompt`, its image `image`, `image_prep` `comfyui` (the first "
        "Qwen-Image-Edit)",
    ),
    _spec(
        "TextEncodeQwenImage21",
        ("prompt", "negative_prompt", "resolution"),
        "`prompt`, `negative_prompt`; its images.image_1.. `image` and `images` (vae "
        "connected; at resolution 0 each at its own size, `image_prep` comfyui; else resized "
        "at `resolution` as Qwen-Image 2.1's pipeline resizes them at the output's area, "
        "checked per image); its latent: the first reference's size",
    ),
    _spec(
        "QwenImage21Cache",
        ("device", "dtype"),
        "nothing (dtype default: the prompt prefix's keys and values cached losslessly, as "
        "the pipeline's use_kv_cache; int8 and int4 refused)",
    ),
    _spec(
        "FluxKontextImageScale",
        (),
        "the image sent: the Kontext size nearest its aspect, centre crop, Lanczos",
    ),
    _spec(
        "FluxKontextMultiReferenceLatentMethod",
        ("reference_latents_method",),
        "`reference_method` (`index`, `index_timestep_zero`)",
    ),
    _spec("VAEEncode", (), "`width`, `height` of the image it encodes (at denoise 1)"),
    _spec(
        "ImageScaleToTotalPixels",
        ("upscale_method", "megapixels", "resolution_steps"),
        "the image sent: its aspect at megapixels x 1024 x 1024 pixels, each side rounded to "
        "resolution_steps, without crop (upscale_method lanczos: PIL's Lanczos; nearest-exact: "
        "torch's, copied pixels)",
    ),
    _spec(
        "ReferenceLatent",
        (),
        "`image` (then `images`): its VAEEncode'd image as a FLUX.2 [dev] or [klein] "
        "reference, prepared as the pipeline does (at most 1024x1024 pixels)",
    ),
    _spec("ConditioningZeroOut", (), "an empty `negative_prompt`"),
    _spec(
        "FluxGuidance",
        ("guidance",),
        "`guidance_scale` (the distilled guidance; the sampler's cfg must be 1)",
    ),
    _spec("EmptyLatentImage", ("width", "height", "batch_size"), "`width`, `height`"),
    _spec("EmptySD3LatentImage", ("width", "height", "batch_size"), "`width`, `height`"),
    _spec(
        "EmptyHunyuanLatentVideo",
        ("width", "height", "length", "batch_size"),
        "`width`, `height`, `num_frames`",
    ),
    _spec(
        "EmptyHunyuanVideo15Latent",
        ("width", "height", "length", "batch_size"),
        "`width`, `height`, `num_frames`",
    ),
    _spec(
        "EmptyFlux2LatentImage",
        ("width", "height", "batch_size"),
        "`width`, `height` (multiples of 16: ComfyUI's latent would round them down)",
    ),
    _spec(
        "Flux2Scheduler",
        ("steps", "width", "height"),
        "`num_inference_steps`; its levels are the Flux.2 pipelines' own scheduler's at its "
        "width x height (which must be the latent's), so the job names no sampler, scheduler "
        "or shift (its sampler must be euler, the pipelines' step)",
    ),
    _spec(
        "Wan22ImageToVideoLatent",
        ("width", "height", "length", "batch_size"),
        "`width`, `height`, `num_frames`; its start_image: `image`",
    ),
    _spec(
        "WanImageToVideo",
        ("width", "height", "length", "batch_size"),
        "`width`, `height`, `num_frames`; its start_image: `image`",
    ),
    _spec(
        "HunyuanVideo15ImageToVideo",
        ("width", "height", "length", "batch_size"),
        "`width`, `height`, `num_frames`; its start_image: `image`, with `image_prep` "
        "`comfyui` (the start image centre-cropped to the size's aspect and scaled "
        "bilinearly in float for the VAE; SigLIP given the image's centre square, bicubic "
        "with antialias); start_image and clip_vision_output both required",
    ),
    _spec(
        "CLIPVisionEncode",
        ("crop",),
        "the image encoder's input (crop `center`; `none` for a square image)",
    ),
    _spec("LoadImage", ("image", "upload"), "`image` (the file, from ComfyUI's `input` folder)"),
    _spec(
        "KSampler",
        ("seed", "steps", "cfg", "sampler_name", "scheduler", "denoise"),
        "`seed`, `num_inference_steps`, `guidance_scale` (cfg), `sampler`, `scheduler` (denoise 1)",
    ),
    _spec(
        "KSamplerAdvanced",
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
        "alone: as KSampler; a pair on Wan 2.2 A14B's experts: `switch_step` (the first's "
        "end_at_step), `guidance_scale` / `guidance_scale_low` (their cfg)",
    ),
    _spec(
        "SamplerCustomAdvanced",
        (),
        "one sampler pass, as KSampler: from its noise, guider, sampler and sigmas inputs",
    ),
    _spec("RandomNoise", ("noise_seed",), "`seed`"),
    _spec("CFGGuider", ("cfg",), "`guidance_scale` (cfg), `prompt` / `negative_prompt`"),
    _spec("BasicGuider", (), "`guidance_scale` 1, `prompt` (no negative prompt)"),
    _spec("KSamplerSelect", ("sampler_name",), "`sampler`"),
    _spec(
        "BasicScheduler",
        ("scheduler", "steps", "denoise"),
        "`scheduler`, `num_inference_steps` (denoise 1; its model's ModelSampling gives "
        "`shift`, and must be the guider's)",
    ),
    _spec(
        "LTXAVTextEncoderLoader",
        ("text_encoder", "ckpt_name", "device"),
        "`--text-encoder` (the Gemma file; ckpt_name must be the model's checkpoint, whose "
        "text connectors paradit reads)",
    ),
    _spec(
        "LTXVAudioVAELoader",
        ("ckpt_name",),
        "LTX-2's audio VAE and vocoder (the model's checkpoint's own)",
    ),
    _spec(
        "LTXVConditioning",
        ("frame_rate",),
        "the job's `fps` (LTX-2's frame rate: 1 to 60; its own 24 is left out)",
    ),
    _spec(
        "EmptyLTXVLatentVideo",
        ("width", "height", "length", "batch_size"),
        "`width`, `height`, `num_frames` (ComfyUI's latent: sizes and frames rounded down to "
        "multiples of 32 and 8k+1)",
    ),
    _spec(
        "LTXVEmptyLatentAudio",
        ("frames_number", "frame_rate", "batch_size"),
        "LTX-2's audio track: ceil(frames_number / frame_rate × 25) latent frames, the job's "
        "`audio_latent_frames` where the pipeline would count otherwise",
    ),
    _spec("LTXVConcatAVLatent", (), "the video and audio latents sampled together"),
    _spec(
        "LTXVImgToVideoInplace",
        ("strength", "bypass"),
        "with bypass on: its latent as it came (text to video); with bypass off at strength "
        "1: `image` (LTX-2 image to video) with `image_prep` `comfyui`, in both stages of a "
        "two-stage job; below 1 on the first stage's latent: `image_strength` (ComfyUI's "
        "noise mask of 1 - strength; after the upscaler refused)",
    ),
    _spec(
        "LTXVPreprocess",
        ("img_compression",),
        "`image_crf` (above 51: 51, x264's highest) of the image `LTXVImgToVideoInplace` "
        "writes: one H.264 frame at the size it is given",
    ),
    _spec(
        "ResizeImageMaskNode",
        ("resize_type", "scale_method"),
        "the start image's size, made so when the job is sent: `scale dimensions` (width, "
        "height, crop) or `scale longer dimension` (longer_size), by lanczos (PIL on 8-bit "
        "pixels) or area, bilinear, nearest-exact (torch, float)",
        dynamic={  # comfy_extras/nodes_images.py's choices, each with its widgets
            "resize_type": {
                "scale dimensions": ("width", "height", "crop"),
                "scale by multiplier": ("multiplier",),
                "scale longer dimension": ("longer_size",),
                "scale shorter dimension": ("shorter_size",),
                "scale width": ("width",),
                "scale height": ("height",),
                "scale total pixels": ("megapixels",),
                "match size": ("crop",),
                "scale to multiple": ("multiple",),
            }
        },
    ),
    _spec(
        "LTXVDualCFGGuider",
        ("video_cfg", "audio_cfg"),
        "`guidance_scale` (video_cfg) and, where audio_cfg differs, "
        "`guidance_terms.audio_guidance_scale` (refused in an upscale's second stage)",
    ),
    _spec(
        "LTXVScheduler",
        ("steps", "max_shift", "base_shift", "stretch", "terminal"),
        "`sigmas`: its levels over its latent's video tokens (LTX-Video's formula), "
        "`num_inference_steps`",
    ),
    _spec("LTXVSeparateAVLatent", (), "the sampled video and audio latents, apart"),
    _spec(
        "LatentUpscaleModelLoader",
        ("model_name",),
        "`--upscaler` (the file in `latent_upscale_models`; `upscale.factor` from its config)",
    ),
    _spec(
        "LTXVLatentUpsampler",
        (),
        "`upscale`: a second stage at the latent's size times the factor (`width`, `height` "
        "the final size)",
    ),
    _spec(
        "LTXVCropGuides",
        (),
        "its prompts and latent as they are (no keyframe guides in a graph paradit maps)",
    ),
    _spec(
        "ManualSigmas",
        ("sigmas",),
        "`sigmas` (a first stage's: from 1 to 0) or `upscale.sigmas` (the second stage's)",
    ),
    _spec("EmptyImage", ("width", "height", "batch_size", "color"), "its size, for GetImageSize"),
    _spec(
        "ImageScaleBy",
        ("upscale_method", "scale_by"),
        "its image's size times scale_by, each side rounded, for GetImageSize",
    ),
    _spec("GetImageSize", (), "its image's width and height, where they feed widgets"),
    _spec("LTXVAudioVAEDecode", (), "`audio.wav`, the audio track of `video.mp4`"),
    _spec(
        "MiniMaxH3ImageToVideo",
        ("prompt", "width", "height", "length"),
        "`prompt`, `width`, `height` (multiples of 32), `num_frames` (length snapped up to "
        "17k+5, with its audio track); first_frame: `image` (stretched as ComfyUI does), "
        "`image_prep` `comfyui` (presented to Qwen3-VL, encoded and noised as ComfyUI does); "
        "last_frame refused (ComfyUI crops before it scales, paradit's H3 after)",
    ),
    _spec(
        "EmptyMiniMaxH3LatentAV",
        ("width", "height", "length"),
        "`width`, `height` (multiples of 32), `num_frames` (length snapped up to 17k+5, with "
        "its audio track)",
    ),
    _spec(
        "MiniMaxH3SigmaShift",
        ("shift_video", "shift_audio"),
        "`shift` 12 at the model's own shifts (12, 3); others refused (paradit derives the "
        "audio levels with the model's)",
    ),
    _spec(
        "VAEDecodeAudio",
        (),
        "MiniMax H3's audio VAE (`--vae`, after the video VAE): `audio.wav`, the track of "
        "`video.mp4`",
    ),
    _spec("VAEDecode", (), "the decode paradit runs"),
    _spec(
        "VAEDecodeTiled",
        ("tile_size", "overlap", "temporal_size", "temporal_overlap"),
        "the decode paradit runs (its own tiling, `--vae-tiling`: a decode's tiles change "
        "no field of the job); on LTX-2.5's diffusion video VAE its widgets -> `decode_tiles` "
        "(ComfyUI's tiles, each with its own seed-0 noise, feathered)",
    ),
    _spec(
        "CreateVideo",
        ("fps", "bit_depth", "color_space", "codec"),
        "`video.mp4` (at the job's frame rate; bit_depth 8, or auto with color_space sRGB: "
        "8 bits, as ComfyUI resolves it); its audio: LTX-2's track (its fps) or MiniMax H3's "
        "(24 fps)",
    ),
    _spec(
        "SaveVideo",
        ("filename_prefix", "format", "codec"),
        "`--out DIR`: `video.mp4`, frames (newer versions' further widgets unread)",
        more_ok=True,
    ),
    _spec(
        "SaveImage",
        ("filename_prefix",),
        "`--out DIR`: `image.png` (newer versions' further widgets unread)",
        more_ok=True,
    ),
    _spec("PreviewImage", (), "`--out DIR`: `image.png` or the frames", more_ok=True),
    _spec(
        "SaveImageAdvanced",
        ("filename_prefix", "format", "bit_depth", "color_space"),
        "`--out DIR`: `image.png` (format png, 8-bit, sRGB: what paradit writes)",
        more_ok=True,
    ),
    _spec("PrimitiveInt", ("value",), "its value, where it feeds a widget"),
    _spec("PrimitiveFloat", ("value",), "its value, where it feeds a widget"),
    _spec("PrimitiveBoolean", ("value",), "its value, where it feeds a widget"),
    _spec("PrimitiveString", ("value",), "its value, where it feeds a widget"),
    _spec("PrimitiveStringMultiline", ("value",), "its value, where it feeds a widget"),
    _spec(
        "PreviewAny",
        (),
        "its source, passed on (ComfyUI shows it on the canvas; paradit logs it)",
        more_ok=True,
    ),
    _spec(
        "ImageCompare",
        (),
        "nothing: a viewer (ComfyUI shows its two images side by side on the canvas; nothing "
        "reads it and nothing is saved)",
        more_ok=True,
    ),
    _spec(
        "ComfySwitchNode",
        ("switch",),
        "its on_true or on_false input (a link, or a value the subgraph node gives), as its "
        "switch says (only that branch is read)",
    ),
    _spec(
        "ComfyMathExpression",
        ("expression",),
        "the expression's value over its inputs a, b, c...: FLOAT, INT (truncated); +, -, *, "
        "/, //, %, **, floor, ceil, round, min, max, abs, sqrt",
    ),
    _spec(
        "ResolutionSelector",
        ("aspect_ratio", "megapixels", "multiple", "minimum"),
        "its width and height, where they feed widgets: the aspect ratio's rectangle of "
        "`megapixels` x 1024², each side rounded to the nearest `multiple` (8 in versions "
        "without it)",
    ),
)

SPECS: Mapping[str, NodeSpec] = MappingProxyType({s.type: s for s in NODE_SPECS})


REFUSED: Mapping[str, str] = MappingProxyType(
    {
        "EasyCache": "active (not bypassed): EasyCache skips steps by its own measure of "
        "change, which paradit's step cache does not compute; bypass it (Ctrl+B), as the "
        "template ships it",
        "TextGenerate": "a prompt written at run time by the text encoder's language model "
        "(an LLM prompt enhancer): paradit encodes the prompt as given and generates no text; "
        "turn the enhancer off where the workflow has a switch for it (Krea 2 Turbo's "
        "template: prompt_enhance false) to run the prompt as written",
        "TextGenerateLTX2Prompt": "a prompt written at run time by a language model (LTX-2's "
        "prompt enhancer): paradit encodes the prompt as given and generates no text; turn "
        "the enhancer off (the LTX-2.3 and 2.5 templates: prompt_enhance false) to run the "
        "prompt as written",
        "FluxKVCache": "ComfyUI's cache (`KV_Attn_Input`, comfy_extras/nodes_flux.py) lets "
        "the references attend to the text and the noisy image at the first step (no mask: "
        "comfy/ldm/flux/math.py `attention`) and keeps their keys and values from there, "
        "where FLUX.2 [klein] KV's own pipeline (diffusers' Flux2KleinKVPipeline, which "
        "paradit runs for a file named kv) lets them attend only to themselves; both modulate "
        "them at timestep 0 (`index_timestep_zero`), but from the second block on the cached "
        "keys and values differ, and so would the image",
    }
)
"""Core nodes paradit knows and cannot run faithfully: node type -> why (the refusal names
the node with it, before any node it does not know at all). None is an output node: where
nothing reads one, ComfyUI does not run it and the import passes over it."""


def widget_inputs(spec: NodeSpec, values: list) -> dict[str, object]:
    """A UI node's positional `widgets_values` by widget name (a seed's "control after
    generate" value skipped); ValueError when there are more values than widgets."""
    named: dict[str, object] = {}
    rest = list(values)
    for name in spec.widgets:
        if not rest:
            break
        named[name] = rest.pop(0)
        if name in SEED_WIDGETS and rest and rest[0] in SEED_CONTROLS:
            rest.pop(0)
        for shown in spec.dynamic.get(name, {}).get(str(named[name]), ()):
            if rest:
                named[f"{name}.{shown}"] = rest.pop(0)
    if rest and not spec.more_ok:
        raise ValueError(
            f"{len(values)} widget values where paradit knows {len(spec.widgets)} widgets "
            f"({', '.join(spec.widgets)}): a newer version of the node?"
        )
    return named


def docs_table() -> str:
    """docs/workflows.md's table of the nodes paradit maps (tests check it is there)."""
    rows = ["| node | widgets | becomes |", "| --- | --- | --- |"]
    for spec in NODE_SPECS:
        widgets = ", ".join(spec.widgets) or "-"
        rows.append(f"| `{spec.type}` | {widgets} | {spec.becomes} |")
    return "\n".join(rows)
