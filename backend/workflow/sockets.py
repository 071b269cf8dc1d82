"""The inputs and outputs of the ComfyUI nodes paradit knows, as data: what ComfyUI's frontend
needs to lay out a node it loads (its linked inputs, its widgets' kinds, its outputs), beside
the widget orders `nodes.py` declares. Written from paradit's own reading of each node; the
nodes of `nodes.SPECS`, those of `nodes.REFUSED`, and the core nodes the official templates of
paradit's families hold where paradit passes over them (bypassed, or feeding nothing it reads).

`node_definition` turns one node's entry into the definition ComfyUI's server gives its
frontend (`/api/object_info`): the frontend then exports a workflow to the API format from
it, and the tests compare that export's job with the saved form's (tests/frontends/
test_comfyui_templates.py). A node of `nodes.SPECS` takes its widgets' order from there: the
entry names their kinds only. Torch-free.

An entry is `"inputs -> outputs"`; an input is `name:KIND`, where KIND is a link's type
(`MODEL`, `*` for any), or a widget's (`INT`, `FLOAT`, `STRING`, `BOOLEAN`, `COMBO`), with
`+` after a widget's kind when the frontend follows it with its "control after generate"
value, `=value` for the value a node saved without it takes (JSON, else a string), and `?`
before the name of an optional input. `upload:UPLOAD` is LoadImage's upload button, which the
frontend adds to the image's list itself. A `DYNAMIC` list (ComfyUI's dynamic combo) shows
further widgets after it by its choice: `_DYNAMIC` gives each choice's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from .nodes import SPECS

WIDGET_KINDS = ("INT", "FLOAT", "STRING", "BOOLEAN", "COMBO", "UPLOAD", "DYNAMIC")


@dataclass(frozen=True)
class Socket:
    """One input of a node: a link's type, or a widget's kind."""

    name: str
    kind: str
    optional: bool = False
    control: bool = False
    """A widget the frontend follows with its "control after generate" value (a seed's)."""
    default: Any = None
    choices: tuple[tuple[str, tuple[Socket, ...]], ...] = ()
    """A DYNAMIC list's choices, each with the widgets it shows after the list (ComfyUI names
    them `list.widget`, and saves their values after the list's)."""

    def __post_init__(self) -> None:
        if not self.name or not self.kind:
            raise ValueError(f"an input needs a name and a kind: {self.name!r}:{self.kind!r}")
        if self.control and self.kind != "INT":
            raise ValueError(f"{self.name}: only an INT widget has a control after generate")
        if (self.kind == "DYNAMIC") != bool(self.choices):
            raise ValueError(f"{self.name}: a DYNAMIC list, and only one, has choices")

    @property
    def widget(self) -> bool:
        return self.kind in WIDGET_KINDS


@dataclass(frozen=True)
class NodeSockets:
    """A node type's inputs (in ComfyUI's order) and outputs (their types)."""

    type: str
    inputs: tuple[Socket, ...]
    outputs: tuple[str, ...]

    def __post_init__(self) -> None:
        names = [s.name for s in self.inputs]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.type}: an input named twice in {names}")
        spec = SPECS.get(self.type)
        mine = {s.name for s in self.inputs if s.widget and s.kind != "UPLOAD"}
        if spec is not None and mine != set(spec.widgets) - {"upload"}:
            raise ValueError(
                f"{self.type}: the widgets {sorted(mine)} must be nodes.SPECS' "
                f"{sorted(spec.widgets)}"
            )

    @property
    def widgets(self) -> tuple[Socket, ...]:
        """The widgets in the order the UI format saves them: nodes.SPECS' order where the node
        is there, else this entry's."""
        own = [s for s in self.inputs if s.widget]
        spec = SPECS.get(self.type)
        if spec is None:
            return tuple(own)
        by_name = {s.name: s for s in own}
        return tuple(by_name[name] for name in spec.widgets if name in by_name)


def _socket(text: str, dynamic: Mapping[str, Mapping[str, str]]) -> Socket:
    name, _, kind = text.partition(":")
    optional = name.startswith("?")
    name = name.removeprefix("?")
    kind, _, default = kind.partition("=")
    control = kind.endswith("+")
    value: Any = None
    if default:
        try:
            value = json.loads(default)
        except ValueError:
            value = default
    choices = tuple(
        (key, tuple(_socket(w, {}) for w in widgets.split()))
        for key, widgets in (dynamic.get(name) or {}).items()
    )
    return Socket(name, kind.removesuffix("+"), optional, control, value, choices)


def _sockets(
    type_: str, text: str, dynamic: Mapping[str, Mapping[str, str]] = MappingProxyType({})
) -> NodeSockets:
    """One entry read; `dynamic`: a DYNAMIC list's name -> its choices -> their widgets."""
    inputs, arrow, outputs = text.partition("->")
    if not arrow:
        raise ValueError(f"{type_}: an entry is 'inputs -> outputs', got {text!r}")
    sockets = tuple(_socket(item, dynamic) for item in inputs.split())
    return NodeSockets(type_, sockets, tuple(outputs.split()))


_LATENT_SIZE = "width:INT height:INT length:INT batch_size:INT=1"
_TEXT_GENERATE = (
    "clip:CLIP ?image:IMAGE ?video:IMAGE ?audio:AUDIO ?system_prompt:* prompt:STRING "
    "max_length:INT sampling_mode:DYNAMIC thinking:BOOLEAN use_default_template:BOOLEAN -> STRING"
)
_DYNAMIC = {  # node type -> its DYNAMIC list -> each choice's widgets (in the entries' syntax)
    "TextGenerate": {
        "sampling_mode": {
            "on": "temperature:FLOAT top_k:INT top_p:FLOAT min_p:FLOAT "
            "repetition_penalty:FLOAT seed:INT presence_penalty:FLOAT",
            "off": "",
        }
    },
    "ResizeImageMaskNode": {  # comfy_extras/nodes_images.py's choices (match size's image
        # input left out: no template of the package uses it)
        "resize_type": {
            "scale dimensions": "width:INT height:INT crop:COMBO",
            "scale by multiplier": "multiplier:FLOAT",
            "scale longer dimension": "longer_size:INT",
            "scale shorter dimension": "shorter_size:INT",
            "scale width": "width:INT",
            "scale height": "height:INT",
            "scale total pixels": "megapixels:FLOAT",
            "match size": "crop:COMBO",
            "scale to multiple": "multiple:INT",
        }
    },
}
_DYNAMIC["TextGenerateLTX2Prompt"] = _DYNAMIC["TextGenerate"]
_ENTRIES = {
    # loaders
    "UNETLoader": "unet_name:COMBO weight_dtype:COMBO=default -> MODEL",
    "UnetLoaderGGUF": "unet_name:COMBO -> MODEL",
    "CheckpointLoaderSimple": "ckpt_name:COMBO -> MODEL CLIP VAE",
    "CLIPLoader": "clip_name:COMBO type:COMBO ?device:COMBO=default -> CLIP",
    "DualCLIPLoader": "clip_name1:COMBO clip_name2:COMBO type:COMBO ?device:COMBO=default -> CLIP",
    "VAELoader": "vae_name:COMBO -> VAE",
    "CLIPVisionLoader": "clip_name:COMBO -> CLIP_VISION",
    "LoraLoaderModelOnly": "model:MODEL lora_name:COMBO strength_model:FLOAT=1.0 -> MODEL",
    "LTXAVTextEncoderLoader": "text_encoder:COMBO ckpt_name:COMBO device:COMBO=default -> CLIP",
    "LTXVAudioVAELoader": "ckpt_name:COMBO -> VAE",
    "LatentUpscaleModelLoader": "model_name:COMBO -> LATENT_UPSCALE_MODEL",
    # the model's sampling
    "ModelSamplingSD3": "model:MODEL shift:FLOAT -> MODEL",
    "ModelSamplingAuraFlow": "model:MODEL shift:FLOAT sampling:COMBO=flow -> MODEL",
    "ModelSamplingFlux": "model:MODEL max_shift:FLOAT base_shift:FLOAT width:INT height:INT "
    "-> MODEL",
    # prompts
    "CLIPTextEncode": "text:STRING clip:CLIP -> CONDITIONING",
    "ConditioningZeroOut": "conditioning:CONDITIONING -> CONDITIONING",
    "FluxGuidance": "conditioning:CONDITIONING guidance:FLOAT -> CONDITIONING",
    "LTXVConditioning": "positive:CONDITIONING negative:CONDITIONING frame_rate:FLOAT "
    "-> CONDITIONING CONDITIONING",
    "CLIPVisionEncode": "clip_vision:CLIP_VISION image:IMAGE crop:COMBO=none -> CLIP_VISION_OUTPUT",
    # latents
    "EmptyLatentImage": "width:INT height:INT batch_size:INT=1 -> LATENT",
    "EmptySD3LatentImage": "width:INT height:INT batch_size:INT=1 -> LATENT",
    "EmptyHunyuanLatentVideo": f"{_LATENT_SIZE} -> LATENT",
    "EmptyHunyuanVideo15Latent": f"{_LATENT_SIZE} -> LATENT",
    "EmptyLTXVLatentVideo": f"{_LATENT_SIZE} -> LATENT",
    "Wan22ImageToVideoLatent": f"vae:VAE {_LATENT_SIZE} ?start_image:IMAGE -> LATENT",
    "WanImageToVideo": f"positive:CONDITIONING negative:CONDITIONING vae:VAE {_LATENT_SIZE} "
    "?clip_vision_output:CLIP_VISION_OUTPUT ?start_image:IMAGE "
    "-> CONDITIONING CONDITIONING LATENT",
    "LTXVEmptyLatentAudio": "frames_number:INT frame_rate:INT batch_size:INT=1 audio_vae:VAE "
    "-> LATENT",
    "LTXVConcatAVLatent": "video_latent:LATENT audio_latent:LATENT -> LATENT",
    "LTXVSeparateAVLatent": "av_latent:LATENT -> LATENT LATENT",
    "LTXVLatentUpsampler": "samples:LATENT upscale_model:LATENT_UPSCALE_MODEL vae:VAE -> LATENT",
    "LTXVCropGuides": "positive:CONDITIONING negative:CONDITIONING latent:LATENT "
    "-> CONDITIONING CONDITIONING LATENT",
    # images
    "LoadImage": "image:COMBO upload:UPLOAD -> IMAGE MASK",
    "EmptyImage": "width:INT height:INT batch_size:INT=1 color:INT=0 -> IMAGE",
    "ImageScaleBy": "image:IMAGE upscale_method:COMBO scale_by:FLOAT -> IMAGE",
    "GetImageSize": "image:IMAGE -> INT INT INT",
    "ResolutionSelector": "aspect_ratio:COMBO megapixels:FLOAT multiple:INT=8 minimum:INT=0 "
    "-> INT INT",
    # sampling
    "KSampler": "model:MODEL seed:INT+ steps:INT cfg:FLOAT sampler_name:COMBO scheduler:COMBO "
    "positive:CONDITIONING negative:CONDITIONING latent_image:LATENT denoise:FLOAT=1.0 -> LATENT",
    "KSamplerAdvanced": "model:MODEL add_noise:COMBO noise_seed:INT+ steps:INT cfg:FLOAT "
    "sampler_name:COMBO scheduler:COMBO positive:CONDITIONING negative:CONDITIONING "
    "latent_image:LATENT start_at_step:INT end_at_step:INT return_with_leftover_noise:COMBO "
    "-> LATENT",
    "SamplerCustomAdvanced": "noise:NOISE guider:GUIDER sampler:SAMPLER sigmas:SIGMAS "
    "latent_image:LATENT -> LATENT LATENT",
    "RandomNoise": "noise_seed:INT+ -> NOISE",
    "LTXVDualCFGGuider": "model:MODEL positive:CONDITIONING negative:CONDITIONING "
    "video_cfg:FLOAT audio_cfg:FLOAT -> GUIDER",
    "CFGGuider": "model:MODEL positive:CONDITIONING negative:CONDITIONING cfg:FLOAT -> GUIDER",
    "BasicGuider": "model:MODEL conditioning:CONDITIONING -> GUIDER",
    "KSamplerSelect": "sampler_name:COMBO -> SAMPLER",
    "BasicScheduler": "model:MODEL scheduler:COMBO steps:INT denoise:FLOAT=1.0 -> SIGMAS",
    "LTXVScheduler": "steps:INT max_shift:FLOAT base_shift:FLOAT stretch:BOOLEAN terminal:FLOAT "
    "?latent:LATENT -> SIGMAS",
    "ManualSigmas": "sigmas:STRING -> SIGMAS",
    # decoding and saving
    "VAEDecode": "samples:LATENT vae:VAE -> IMAGE",
    "VAEDecodeTiled": "samples:LATENT vae:VAE tile_size:INT overlap:INT temporal_size:INT "
    "temporal_overlap:INT -> IMAGE",
    "LTXVAudioVAEDecode": "samples:LATENT audio_vae:VAE -> AUDIO",
    "CreateVideo": "images:IMAGE fps:FLOAT bit_depth:COMBO=auto color_space:COMBO=sRGB codec:COMBO "
    "?audio:AUDIO -> VIDEO",
    "SaveVideo": "video:VIDEO filename_prefix:STRING format:COMBO codec:COMBO ->",
    "SaveImage": "images:IMAGE filename_prefix:STRING ->",
    "PreviewImage": "images:IMAGE ->",
    "SaveImageAdvanced": "images:IMAGE filename_prefix:STRING format:COMBO=png "
    "bit_depth:COMBO=8-bit color_space:COMBO ->",
    "PreviewAny": "source:* -> STRING",
    # values computed in the graph
    "PrimitiveInt": "value:INT+ -> INT",
    "PrimitiveFloat": "value:FLOAT -> FLOAT",
    "PrimitiveBoolean": "value:BOOLEAN -> BOOLEAN",
    "PrimitiveString": "value:STRING -> STRING",
    "PrimitiveStringMultiline": "value:STRING -> STRING",
    "ComfySwitchNode": "switch:BOOLEAN ?on_false:* ?on_true:* -> *",
    "ComfyMathExpression": "expression:STRING ?values.a:* ?values.b:* ?values.c:* "
    "-> FLOAT INT BOOLEAN",
    # refused (nodes.REFUSED), and below the nodes passed over: paradit reads none of their
    # widgets, so only their links and outputs are checked (the widgets of TextGenerate and
    # ResizeImageMaskNode, whose lists change with a mode widget, are not ComfyUI's exactly)
    "CFGNorm": "model:MODEL strength:FLOAT pre_cfg:BOOLEAN=false -> MODEL",
    "EasyCache": "model:MODEL reuse_threshold:FLOAT start_percent:FLOAT end_percent:FLOAT "
    "verbose:BOOLEAN -> MODEL",
    "FluxKVCache": "model:MODEL -> MODEL",
    "LTXVImgToVideoInplace": "vae:VAE image:IMAGE latent:LATENT strength:FLOAT bypass:BOOLEAN "
    "-> LATENT",
    "EmptyFlux2LatentImage": "width:INT height:INT batch_size:INT=1 -> LATENT",
    "Flux2Scheduler": "steps:INT width:INT height:INT -> SIGMAS",
    "HunyuanVideo15ImageToVideo": f"positive:CONDITIONING negative:CONDITIONING vae:VAE "
    f"{_LATENT_SIZE} ?start_image:IMAGE ?clip_vision_output:CLIP_VISION_OUTPUT "
    "-> CONDITIONING CONDITIONING LATENT",
    "TextEncodeQwenImageEditPlus": "clip:CLIP prompt:STRING ?vae:VAE ?image1:IMAGE "
    "?image2:IMAGE ?image3:IMAGE -> CONDITIONING",
    "TextEncodeQwenImageEdit": "clip:CLIP prompt:STRING ?vae:VAE ?image:IMAGE -> CONDITIONING",
    "ImageScaleToTotalPixels": "image:IMAGE upscale_method:COMBO megapixels:FLOAT "
    "resolution_steps:INT -> IMAGE",
    "VAEEncode": "pixels:IMAGE vae:VAE -> LATENT",
    "TextGenerate": _TEXT_GENERATE,
    "TextGenerateLTX2Prompt": _TEXT_GENERATE,
    "QwenImage21Cache": "model:MODEL device:COMBO dtype:COMBO -> MODEL",
    "TextEncodeQwenImage21": "clip:CLIP vae:VAE prompt:STRING negative_prompt:STRING "
    "resolution:INT "
    + " ".join(f"?images.image_{i}:IMAGE" for i in range(1, 17))
    + " -> CONDITIONING CONDITIONING LATENT",
    "MiniMaxH3ImageToVideo": "clip:CLIP vae:VAE ?first_frame:IMAGE ?last_frame:IMAGE "
    "prompt:STRING width:INT height:INT length:INT -> CONDITIONING LATENT",
    "EmptyMiniMaxH3LatentAV": "width:INT height:INT length:INT -> LATENT",
    "MiniMaxH3SigmaShift": "model:MODEL shift_video:FLOAT shift_audio:FLOAT -> MODEL",
    "CLIPTextEncodeFlux": "clip:CLIP clip_l:STRING t5xxl:STRING guidance:FLOAT -> CONDITIONING",
    # passed over where the official templates hold them (bypassed, or feeding nothing read)
    "DisableNoise": "-> NOISE",
    "SplitSigmas": "sigmas:SIGMAS step:INT -> SIGMAS SIGMAS",
    "FluxKontextImageScale": "image:IMAGE -> IMAGE",
    "FluxKontextMultiReferenceLatentMethod": "conditioning:CONDITIONING "
    "reference_latents_method:COMBO -> CONDITIONING",
    "ReferenceLatent": "conditioning:CONDITIONING ?latent:LATENT -> CONDITIONING",
    "HunyuanVideo15LatentUpscaleWithModel": "model:LATENT_UPSCALE_MODEL samples:LATENT "
    "upscale_method:COMBO width:INT height:INT crop:COMBO -> LATENT",
    "HunyuanVideo15SuperResolution": "positive:CONDITIONING negative:CONDITIONING vae:VAE "
    "latent:LATENT ?start_image:IMAGE ?clip_vision_output:CLIP_VISION_OUTPUT "
    "noise_augmentation:FLOAT -> CONDITIONING CONDITIONING LATENT",
    "LTXVPreprocess": "image:IMAGE img_compression:INT -> IMAGE",
    "ResizeImageMaskNode": "input:* resize_type:DYNAMIC scale_method:COMBO -> *",
    "LoraLoader": "model:MODEL clip:CLIP lora_name:COMBO strength_model:FLOAT "
    "strength_clip:FLOAT -> MODEL CLIP",
    "VAEDecodeAudio": "samples:LATENT vae:VAE -> AUDIO",
    "ImageCompare": "?image_a:IMAGE ?image_b:IMAGE ->",
    "BatchImagesNode": " ".join(f"?images.image{i}:IMAGE" for i in range(12)) + " -> IMAGE",
    "StringConcatenate": "string_a:STRING string_b:STRING delimiter:STRING -> STRING",
}

SOCKETS: Mapping[str, NodeSockets] = MappingProxyType(
    {type_: _sockets(type_, text, _DYNAMIC.get(type_, {})) for type_, text in _ENTRIES.items()}
)


def node_definition(sockets: NodeSockets) -> dict[str, Any]:
    """The node as ComfyUI's server describes it to its frontend (the fields the frontend
    reads): inputs in order with their options, outputs. A list widget offers its default
    only (a value a workflow saves is kept as it is, in the list or not)."""
    widgets = {s.name: s for s in sockets.widgets}
    ordered = [*widgets.values(), *(s for s in sockets.inputs if not s.widget)]
    groups: dict[str, dict[str, list]] = {"required": {}, "optional": {}}
    upload = any(s.kind == "UPLOAD" for s in ordered)
    for socket in ordered:
        if socket.kind == "UPLOAD":
            continue
        groups["optional" if socket.optional else "required"][socket.name] = _input(socket, upload)
    return {
        "name": sockets.type,
        "display_name": sockets.type,
        "description": "",
        "category": "paradit",
        "python_module": "nodes",
        "input": groups,
        "input_order": {key: list(group) for key, group in groups.items()},
        "output": list(sockets.outputs),
        "output_is_list": [False] * len(sockets.outputs),
        "output_name": list(sockets.outputs),
        "output_node": not sockets.outputs,
    }


def _input(socket: Socket, upload: bool = False) -> list:
    """One input as ComfyUI's node definitions write it: [kind, options]."""
    if socket.kind == "DYNAMIC":
        shown = [
            {"key": key, "inputs": {"required": {s.name: _input(s) for s in widgets}}}
            for key, widgets in socket.choices
        ]
        return ["COMFY_DYNAMICCOMBO_V3", {"options": shown}]
    options: dict[str, Any] = {}
    if socket.default is not None:
        options["default"] = socket.default
    if socket.control:
        options["control_after_generate"] = True
    if socket.kind in ("INT", "FLOAT"):
        options.update(min=-(2**53), max=2**53, step=1 if socket.kind == "INT" else 0.001)
        if socket.kind == "FLOAT":
            options["round"] = False
    if socket.kind == "STRING":
        options["multiline"] = True
    if socket.kind != "COMBO":
        return [socket.kind, options]
    if upload and socket.name == "image":
        options["image_upload"] = True
    return [[] if socket.default is None else [socket.default], options]
