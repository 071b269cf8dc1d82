"""Single-file models: check the files, build the pipeline, read each rank's rows.

`SingleFiles` is what the user gave (`--model FILE[,FILE]`, `--text-encoder FILE`...,
`--vae FILE`, `--image-encoder FILE`); `resolve` reads their headers, recognises each file and
checks that they fit together (the DiT's text width against the encoder's, the VAE's latent
channels against the DiT's, the image encoder's width against the DiT's image embedding, two
experts of one architecture), refusing with the file's name and what was expected.
`build_pipeline` assembles the diffusers pipeline: DiTs are built on the meta device and
filled from their files through `DitWeights` (the same row reads that fill an FSDP2 shard),
encoders and VAEs are read whole (components.py). Configs come from the headers (detect.py)
and, for what a header cannot say (scheduler, VAE settings, pipeline settings), from the
presets the package ships: the tiny presets for the tiny test architectures, the `random:`
presets' JSON for real ones. Qwen-Image-Edit's text side (Qwen2.5-VL with its vision tower, its
tokenizer and processor) is built in qwen_image_edit.py.

An all-in-one Flux checkpoint (ComfyUI's `models/checkpoints`: DiT, CLIP-L, T5-XXL and VAE in
one file) needs no --text-encoder or --vae: its parts fill every slot the command leaves
empty, and a file given for a slot wins over the bundled part (to swap an fp8 T5 for an fp16
one, say). Each part is read as a file of its own: the DiT row block by row block, the rest
whole. All-in-one Wan files are refused (rare; ComfyUI ships Wan as separate files).

An LTX-2 checkpoint (Lightricks' `ltx-2-19b-dev.safetensors`) holds every part but the text
encoder: its video VAE is taken as a Flux checkpoint's (`vae.`, unless --vae gives one), its
connectors, audio VAE and vocoder are `Resolved.extras`, built by components.ltx2_component;
only the Gemma 3 file is given besides (detect_ltx2.py, ltx2.py). A DiT alone (a GGUF, a
transformer-only file) takes those parts from more --vae and --text-encoder files, each part
found by its key names with or without the checkpoint's prefix (ltx2.find_parts: ComfyUI's
split files, or the whole checkpoint beside a GGUF).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ..families.ltx2 import DISTILLED_SCHEDULER
from .components import (
    clip_image_processor,
    encoder_model,
    ltx2_component,
    preset_parts,
    siglip_image_processor,
    tokenizer,
    vae_model,
)
from .convert import RowMap, dit_row_map, unused_keys
from .detect import Detection, Part, bundled_parts, detect, recognise
from .ltx2 import EXTRA_COMPONENTS
from .quant import RowReader, check_readable

if TYPE_CHECKING:
    from diffusers import DiffusionPipeline

log = logging.getLogger(__name__)

MODEL_SUFFIXES = (".safetensors", ".sft", ".gguf")
SEPARATOR = ","
"""Wan 2.2 A14B's two experts are given as `--model HIGH,LOW`."""


def is_model_file(text: str) -> bool:
    """Whether a --model value names checkpoint files (`A.safetensors` or `HIGH,LOW`)."""
    parts = [p.strip() for p in text.split(SEPARATOR)]
    return all(p.lower().endswith(MODEL_SUFFIXES) for p in parts) and all(parts)


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
_PRESETS = {
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
_ENCODER_CLASSES = {"Flux2KleinPipeline": {"Qwen3Model": "Qwen3ForCausalLM"}}
"""The text encoder class a pipeline takes where it differs from the file's plain model."""
_ENCODER_SLOTS = {
    "clip": "text_encoder",
    "t5": "text_encoder_2",
    "umt5": "text_encoder",
    "qwen3": "text_encoder",
    "qwen2.5-vl": "text_encoder",
    "mistral3": "text_encoder",
    "gemma3": "text_encoder",
}
_VAE_FAMILY = {"z-image": "flux", "qwen-image": "wan"}
"""The VAE family of a DiT family that uses another's VAE (Z-Image: Flux's `ae`; Qwen-Image's
VAE has the Wan 2.1 VAE's names and shapes, read as one)."""
_TOKENIZER_SLOTS = {"text_encoder": "tokenizer", "text_encoder_2": "tokenizer_2"}
PAIR_BOUNDARY = {"tiny-wan": 0.875}  # the other pairs take their preset's boundary_ratio
_PIPELINE_SETTINGS = ("boundary_ratio", "expand_timesteps", "is_distilled")


@dataclass(frozen=True)
class SingleFiles:
    """A single-file model as given: DiT file(s), text encoder file(s), VAE file."""

    models: tuple[str, ...]
    text_encoders: tuple[str, ...] = ()
    vaes: tuple[str, ...] = ()
    image_encoders: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not 1 <= len(self.models) <= 2:
            raise ValueError(
                "--model takes one checkpoint file, or two for Wan 2.2 A14B (HIGH,LOW), "
                f"got {len(self.models)}"
            )
        if len(self.image_encoders) > 1:
            raise ValueError(f"--image-encoder takes one file, got {len(self.image_encoders)}")

    @classmethod
    def parse(cls, model: str, text_encoders=(), vaes=(), image_encoders=()) -> SingleFiles:
        models = tuple(str(Path(p.strip()).expanduser().absolute()) for p in model.split(SEPARATOR))
        return cls(
            models,
            *(
                tuple(str(Path(p).expanduser().absolute()) for p in paths)
                for paths in (text_encoders, vaes, image_encoders)
            ),
        )


@dataclass(frozen=True)
class Resolved:
    """The checked files of one pipeline."""

    preset: Preset
    dits: dict[str, Part]
    """"transformer" (and "transformer_2": Wan 2.2 A14B's low-noise expert)."""
    encoders: dict[str, Part]
    """Pipeline component -> its text encoder file."""
    vae: Part
    variant: str
    image_encoder: Part | None = None
    """Wan 2.1 image-to-video's CLIP vision encoder."""
    extras: dict[str, Part] = dataclasses.field(default_factory=dict)
    """LTX-2's parts besides the DiT and video VAE (ltx2.PARTS: "connectors",
    "text_projection", "audio_vae", "vocoder"), each a view of the file that holds it, keys in
    the part's own names; components.ltx2_component builds the connectors, audio VAE and
    vocoder from them."""

    @property
    def pipeline_class(self) -> str:
        return self.preset.pipeline

    def summary(self) -> dict[str, Any]:
        parts = {**self.dits, **self.encoders, "vae": self.vae, **self.extras}
        if self.image_encoder is not None:
            parts["image_encoder"] = self.image_encoder
        return {"variant": self.variant, "files": {k: p.summary() for k, p in parts.items()}}


def resolve(files: SingleFiles) -> Resolved:
    """Read and check every file; ValueError naming the file and what was expected."""
    dits = [recognise(p) for p in files.models]
    for part in dits:
        _expect(part, "transformer", "--model")
        check_readable(part.header)
    first = dits[0].detection
    if any(d.detection.bundled for d in dits) and first.family not in BUNDLING_FAMILIES:
        raise ValueError(
            f"{dits[0].header.name} is an {first.label} checkpoint: paradit runs all-in-one "
            "checkpoints of Flux.1 and LTX-2 only (Flux.1's DiT, clip_l, t5xxl and vae in one "
            "file; LTX-2's as Lightricks ships it); give the DiT as its own file "
            "(models/diffusion_models) with --text-encoder and --vae"
        )
    if len(dits) == 2 and any(d.detection.bundled for d in dits):
        raise ValueError(
            f"{dits[0].header.name}, {dits[1].header.name}: two files are a Wan 2.2 A14B "
            "pair, never all-in-one checkpoints"
        )
    if len(dits) == 2 and first.config != dits[1].detection.config:
        raise ValueError(
            f"{dits[0].header.name} and {dits[1].header.name} are not two experts of one "
            f"model: {first.variant} vs {dits[1].detection.variant}"
        )
    preset = _PRESETS.get(first.variant)
    if preset is None or (len(dits) == 2 and not preset.pair_preset):
        supported = ", ".join(k for k in _PRESETS if "hunyuan" not in k)
        raise ValueError(
            f"{dits[0].header.name} is {first.variant} ({'; '.join(first.reasons)}): "
            f"{'a pair of it' if preset else 'it'} is recognised but cannot be run from single "
            f"files yet (runs: {supported}; two files: the Wan 2.2 A14B T2V and I2V pairs)"
        )
    if len(dits) == 1 and not preset.name:
        raise ValueError(
            f"{dits[0].header.name} is one expert of {first.variant}, which takes its two "
            "experts as two files: give --model HIGH,LOW (the high-noise expert first)"
        )
    if len(dits) == 2:
        names = [d.header.name.lower() for d in dits]
        if "low_noise" in names[0] and "high_noise" in names[1]:
            raise ValueError(
                f"--model takes the high-noise expert first: got {dits[0].header.name} first "
                f"(give {dits[1].header.name},{dits[0].header.name})"
            )
        preset = dataclasses.replace(preset, name=preset.pair_preset)
    variant = first.label
    if len(dits) == 2:
        variant += " pair" if first.variant.endswith("a14b") else " A14B pair"
    ltx2_parts: dict[str, Part] = {}
    if first.family == "ltx2":  # its parts from whichever files hold them
        files, ltx2_parts = _ltx2_parts(dits[0], files)
        bundle = {"vae": ltx2_parts["vae"]} if "vae" in ltx2_parts else {}
    else:
        bundle = bundled_parts(dits[0]) if first.bundled else {}
    if len(files.vaes) > 1:
        raise ValueError(f"--vae takes one file, got {len(files.vaes)}")
    encoders = _encoders(files, preset, first, bundle)
    if preset.vision:
        from .qwen_image_edit import check_vision_tower

        check_vision_tower(encoders["text_encoder"], first)
    vae = _vae(files, first, preset, bundle)
    image_encoder = _image_encoder(files, first, preset)
    extras = _ltx2_extras(ltx2_parts, encoders["text_encoder"]) if ltx2_parts else {}
    components = dict(zip(("transformer", "transformer_2"), dits, strict=False))
    return Resolved(preset, components, encoders, vae, variant, image_encoder, extras)


def _ltx2_parts(dit: Part, files: SingleFiles) -> tuple[SingleFiles, dict[str, Part]]:
    """LTX-2's parts besides the DiT (ltx2.PARTS), found by their key names in the --vae and
    --text-encoder files that hold any (ComfyUI's split files, or the whole checkpoint beside
    a GGUF DiT), then in the DiT's own file; a file given wins over the DiT's file. Returns
    the files left for the text encoder and video VAE checks (the Gemma file; a --vae file
    holding no LTX-2 part, refused there by what it is) and the parts; ValueError naming the
    parts no file holds and which files would."""
    from . import ltx2

    encoders, vaes, found = [], [], {}
    for flag, paths in (("--text-encoder", files.text_encoders), ("--vae", files.vaes)):
        for path in paths:
            part = recognise(path)
            held = ltx2.find_parts(part.header) if part.detection.role != "text_encoder" else {}
            if not held:
                (encoders if flag == "--text-encoder" else vaes).append(path)
            for name, header in held.items():
                if name in found:
                    raise ValueError(
                        f"{flag} {part.header.name} and {found[name].header.name} both hold "
                        f"LTX-2's {name}: give one file for each part"
                    )
                found[name] = Part(header, detect(header))
    for name, header in ltx2.find_parts(dit.header).items():
        found.setdefault(name, Part(header, detect(header)))
    if vaes:
        found.pop("vae", None)  # --vae FILE holding no LTX-2 part: refused by _vae as it is
    missing = [name for name in ltx2.PARTS if name not in found and not (name == "vae" and vaes)]
    if missing:
        raise ValueError(
            f"{dit.header.name} holds LTX-2's DiT; no file given holds {', '.join(missing)}: "
            f"give {ltx2.describe_missing(missing)}"
        )
    return dataclasses.replace(files, text_encoders=tuple(encoders), vaes=tuple(vaes)), found


def _ltx2_extras(parts: dict[str, Part], encoder: Part) -> dict[str, Part]:
    """LTX-2's parts for its connectors, audio VAE and vocoder (ltx2.PARTS but the video
    VAE), after checking that the text projection reads the Gemma file's hidden states."""
    from . import ltx2

    config = encoder.detection.config
    stacked = config["hidden_size"] * (config["num_hidden_layers"] + 1)
    projection = parts["text_projection"].header
    reads = ltx2.text_projection_inputs(projection)
    if reads != stacked:
        raise ValueError(
            f"--text-encoder {encoder.header.name} gives {config['num_hidden_layers'] + 1} "
            f"hidden states of width {config['hidden_size']} ({stacked} values a token); the "
            f"text projection of {projection.name} reads {reads}"
        )
    return {name: part for name, part in parts.items() if name != "vae"}


def _where(part: Part, flag: str) -> str:
    """How a message names a file: "--vae ae.safetensors", or for a part of an all-in-one
    checkpoint "flux1-dev-fp8.safetensors (its vae.)"."""
    if part.header.prefix:
        return f"{part.header.name} (its {part.header.prefix})"
    return f"{flag} {part.header.name}"


def _expect(part: Part, role: str, flag: str) -> None:
    found = part.detection
    if found.role == role:
        return
    what = found.label or f"{found.family or ''} {found.role}".strip()
    raise ValueError(
        f"{_where(part, flag)}: expected a {role.replace('_', ' ')} checkpoint, but it is "
        f"a {what} ({'; '.join(found.reasons)})"
    )


def _encoders(
    files: SingleFiles, preset: Preset, dit: Detection, bundle: dict[str, Part]
) -> dict[str, Part]:
    need = " and ".join(preset.encoders)
    if not bundle and len(files.text_encoders) != len(preset.encoders):
        raise ValueError(
            f"{dit.variant} needs {len(preset.encoders)} text encoder file(s) ({need}): give "
            f"--text-encoder FILE for each (got {len(files.text_encoders)})"
        )
    parts: dict[str, Part] = {}
    given = [recognise(path) for path in files.text_encoders]
    # a file given for a slot wins over the bundled part; bundled parts no slot takes (the
    # bundle's VAE, an encoder already given) are not read
    inside = [p for p in bundle.values() if p.detection.role != "vae"]
    for part, bundled in [(p, False) for p in given] + [(p, True) for p in inside]:
        slot = _ENCODER_SLOTS.get(part.detection.family or "")
        if bundled and slot in parts:
            continue
        _expect(part, "text_encoder", "--text-encoder")
        check_readable(part.header)
        kind = part.detection.family or ""
        if kind not in preset.encoders:
            raise ValueError(
                f"{_where(part, '--text-encoder')} is a {kind} encoder; {dit.variant} needs {need}"
            )
        if slot in parts:
            raise ValueError(
                f"--text-encoder {part.header.name} and {parts[slot].header.name} are both "
                f"{kind} encoders; {dit.variant} needs {need}, one file each"
            )
        parts[slot] = part
    missing = [k for k in preset.encoders if _ENCODER_SLOTS[k] not in parts]
    if missing:
        raise ValueError(
            f"{dit.label} needs {need} text encoders; {', '.join(missing)} is in none of the "
            f"files: give --text-encoder FILE for it"
        )
    if dit.family == "hunyuanvideo1.5":  # Qwen2.5-VL's and ByT5's widths
        widths = (
            ("text_encoder", dit.config["text_embed_dim"]),
            ("text_encoder_2", dit.config["text_embed_2_dim"]),
        )
    else:
        expected = (
            dit.config.get("text_dim")
            or dit.config.get("joint_attention_dim")
            or dit.config.get("cap_feat_dim")
        )
        if dit.family == "flux2":  # three of the encoder's hidden states, stacked per token
            expected //= 3
        if dit.family == "ltx2":  # Gemma's hidden states, through the connectors
            expected = dit.config["caption_channels"]
        widths = (("text_encoder_2" if dit.family == "flux" else "text_encoder", expected),)
    for slot, expected in widths:
        config = parts[slot].detection.config
        width = config.get("d_model") or config["hidden_size"]
        if width != expected:
            raise ValueError(
                f"{_where(parts[slot], '--text-encoder')} has width {width}; {dit.variant} "
                f"takes text embeddings of width {expected}"
            )
    if dit.family == "flux":
        pooled = parts["text_encoder"].detection.config["hidden_size"]
        if pooled != dit.config["pooled_projection_dim"]:
            raise ValueError(
                f"{_where(parts['text_encoder'], '--text-encoder')} has width {pooled}; "
                f"{dit.variant} takes pooled CLIP embeddings of width "
                f"{dit.config['pooled_projection_dim']}"
            )
    return parts


def _vae(files: SingleFiles, dit: Detection, preset: Preset, bundle: dict[str, Part]) -> Part:
    needs = f"{dit.variant} needs {preset.vae or 'a VAE'}"
    if files.vaes:  # a file given wins over the bundled VAE
        part = recognise(files.vaes[0])
    elif "vae" in bundle:
        part = bundle["vae"]
    else:
        raise ValueError(f"{needs}: give --vae FILE")
    _expect(part, "vae", "--vae")
    check_readable(part.header)
    latent = part.detection.config.get("z_dim") or part.detection.config.get("latent_channels")
    expected = dit.config.get("out_channels") or dit.config["in_channels"] // 4
    if dit.family == "z-image":  # its in_channels are the latent's, before the 2x2 patches
        expected = dit.config["in_channels"]
    elif dit.family == "flux2":  # 2x2 patches of the latent's channels
        expected = dit.config["in_channels"] // 4
    family = _VAE_FAMILY.get(dit.family or "", dit.family)
    if part.detection.family != family or latent != expected:
        raise ValueError(
            f"{_where(part, '--vae')} is a {part.detection.variant} with {latent} latent "
            f"channels; {needs}: a {family} VAE with {expected}"
        )
    return part


def _image_encoder(files: SingleFiles, dit: Detection, preset: Preset) -> Part | None:
    if not preset.image_encoder:
        if files.image_encoders:
            raise ValueError(
                "--image-encoder goes with Wan 2.1 image-to-video and HunyuanVideo 1.5's; "
                f"{dit.variant} takes none"
            )
        return None
    needs = f"{dit.variant} needs {preset.image_encoder}"
    if not files.image_encoders:
        raise ValueError(f"{needs}: give --image-encoder FILE")
    part = recognise(files.image_encoders[0])
    _expect(part, "clip_vision", "--image-encoder")
    if not part.detection.config:  # e.g. open_clip's `visual.transformer.resblocks.N`
        raise ValueError(
            f"--image-encoder {part.header.name}: {'; '.join(part.detection.reasons)}; paradit "
            "reads CLIP vision files with Hugging Face's names (vision_model.encoder.layers.N), "
            "as ComfyUI's clip_vision_h has them"
        )
    check_readable(part.header)
    kind = "siglip" if dit.family == "hunyuanvideo1.5" else "clip"
    width = part.detection.config["hidden_size"]
    expected = dit.config.get("image_dim") or dit.config["image_embed_dim"]
    if width != expected or part.detection.family != kind:
        raise ValueError(
            f"--image-encoder {part.header.name} is a {part.detection.variant}; {needs}: a "
            f"{'SigLIP' if kind == 'siglip' else 'CLIP'} vision tower of width {expected}"
        )
    return part


# -- reading weights --------------------------------------------------------------------------


class DitWeights:
    """A DiT's weights in one single file, by diffusers parameter name, read row block by row
    block (what `parallel.sharded_load.fill_shards` reads each rank's shard through)."""

    def __init__(self, part: Part):
        self.part = part
        self.row_map: RowMap = dit_row_map(part.header, part.detection)
        extra = unused_keys(part.header, part.detection, self.row_map)
        if extra:
            raise ValueError(
                f"{part.header.name}: {len(extra)} weight(s) no {part.detection.variant} "
                f"parameter takes, e.g. {extra[:3]} (a different architecture?)"
            )
        self._reader: RowReader | None = None

    def __str__(self) -> str:
        return self.part.header.name

    def __enter__(self) -> DitWeights:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def names(self) -> set[str]:
        return set(self.row_map)

    def check(self, model: torch.nn.Module) -> None:
        """ValueError naming the file when a parameter is missing or its rows do not fit."""
        name = self.part.header.name
        missing = [n for n, _ in model.named_parameters() if n not in self.row_map]
        if missing:
            raise ValueError(
                f"{name}: no weights for {missing[:3]} ({len(missing)} in all) of "
                f"{self.part.detection.variant}"
            )
        tensors = self.part.header.tensors
        for param_name, param in model.named_parameters():
            rows = sum(s.rows for s in self.row_map[param_name])
            row_items = 1
            for size in param.shape[1:]:
                row_items *= size
            expected = param.shape[0] if param.dim() else 1
            for seg in self.row_map[param_name]:
                shape = tensors[seg.key].shape
                items = 1
                for size in shape[1:]:
                    items *= size
                if items != row_items or seg.start + seg.rows > (shape[0] if shape else 1):
                    raise ValueError(
                        f"{name}: {seg.key} has shape {list(shape)}, which does not fit "
                        f"{param_name} of shape {list(param.shape)}"
                    )
            if rows != expected:
                raise ValueError(f"{name}: {param_name} takes {expected} rows, the file has {rows}")

    def read_rows(self, name: str, start: int, out: torch.Tensor) -> int:
        if self._reader is None:
            self._reader = RowReader(self.part.header)
        flat = out.reshape(1, *out.shape) if out.dim() == 0 else out
        want_end, read, base = start + flat.shape[0], 0, 0
        for seg in self.row_map[name]:
            lo, hi = max(start, base), min(want_end, base + seg.rows)
            if lo < hi:
                read += self._reader.read_rows(
                    seg.key, seg.start + lo - base, flat[lo - start : hi - start]
                )
            base += seg.rows
        return read

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None


# -- the pipeline -----------------------------------------------------------------------------


def empty_model(config: dict[str, Any], dtype: torch.dtype) -> torch.nn.Module:
    """A diffusers model from its config, parameters on the meta device (as `empty_dit`)."""
    from ...parallel.sharded_load import empty_from_config

    return empty_from_config(config, dtype)


def fill_whole(model: torch.nn.Module, weights: DitWeights) -> None:
    """Read every row of every weight (world size 1, or a DiT that is not sharded)."""
    from ...parallel.sharded_load import fill_shards

    weights.check(model)
    fill_shards(model, weights, torch.device("cpu"))


def build_pipeline(
    resolved: Resolved,
    *,
    skip: frozenset[str] = frozenset(),
    dtype: torch.dtype = torch.float32,
    empty: frozenset[str] = frozenset(),
) -> DiffusionPipeline:
    """The pipeline; components in `skip` are None, DiTs in `empty` stay on meta (the caller
    fills their shards with `dit_weights`)."""
    import diffusers

    preset = resolved.preset
    parts: dict[str, Any] = {}
    for name, part in resolved.dits.items():
        if name in skip:
            parts[name] = None
            continue
        model = empty_model(part.detection.config, dtype)
        if name not in empty:
            with DitWeights(part) as weights:
                fill_whole(model, weights)
        parts[name] = model
    for slot, part in resolved.encoders.items():
        if preset.vision:  # Qwen-Image-Edit: text encoder, tokenizer and processor
            from .qwen_image_edit import edit_text_parts

            parts.update(edit_text_parts(part, preset.name, dtype, skip))
            continue
        wanted = slot not in skip
        classes = _ENCODER_CLASSES.get(preset.pipeline, {})
        model_class = classes.get(part.detection.config.get("_class_name", ""))
        parts[slot] = encoder_model(part, dtype, model_class=model_class) if wanted else None
        tokenizer_slot = _TOKENIZER_SLOTS[slot]
        parts[tokenizer_slot] = tokenizer(part, preset.name, tokenizer_slot) if wanted else None
    parts["vae"] = None if "vae" in skip else vae_model(resolved.vae, preset.name, dtype)
    if resolved.extras:  # LTX-2's connectors, audio VAE and vocoder
        for name in EXTRA_COMPONENTS:
            if name not in skip:
                parts[name] = ltx2_component(name, resolved.extras, preset.name, dtype)
            else:
                parts[name] = None
    if resolved.image_encoder is not None:  # Wan 2.1 and HunyuanVideo 1.5 image-to-video
        part = resolved.image_encoder
        wanted = "image_encoder" not in skip
        parts["image_encoder"] = encoder_model(part, dtype, "--image-encoder") if wanted else None
        size = part.detection.config["image_size"]
        siglip = part.detection.family == "siglip"
        processor = "feature_extractor" if siglip else "image_processor"
        make = siglip_image_processor if siglip else clip_image_processor
        parts[processor] = make(size) if processor not in skip else None
    reference = preset_parts(preset.name, {"scheduler", "guider"})  # guider: HunyuanVideo 1.5
    parts["scheduler"] = reference.scheduler
    if getattr(reference, "guider", None) is not None:
        parts["guider"] = reference.guider
    first = next(iter(resolved.dits.values())).detection
    if first.family == "hunyuanvideo1.5":  # the 720p models' shift differs from the preset's
        parts["scheduler"] = _hunyuan15_scheduler(reference.scheduler, first)
    if preset.scheduler:
        scheduler = reference.scheduler
        parts["scheduler"] = type(scheduler).from_config(scheduler.config, **preset.scheduler)
    # the pipeline's own settings (Wan 2.2: boundary_ratio, expand_timesteps) as its preset's
    settings = {k: reference.config[k] for k in _PIPELINE_SETTINGS if k in reference.config}
    if len(resolved.dits) == 2 and preset.name in PAIR_BOUNDARY:
        settings["boundary_ratio"] = PAIR_BOUNDARY[preset.name]
    pipeline_class = getattr(diffusers, preset.pipeline)
    pipe = pipeline_class(**parts, **settings)
    log.info("built %s from single files: %s", resolved.variant, resolved.summary()["files"])
    return pipe


def _hunyuan15_scheduler(scheduler: Any, dit: Detection) -> Any:
    """The preset's scheduler with the flow shift of the file's resolution and task (the tiny
    presets keep theirs)."""
    from .hunyuan_video15 import SCHEDULER_SHIFTS

    if dit.variant.startswith("tiny-"):
        return scheduler
    resolution = "720p" if "720p" in dit.variant else "480p"
    shift = SCHEDULER_SHIFTS[(resolution, dit.config["task_type"])]
    return type(scheduler).from_config(scheduler.config, shift=shift)


def meta_pipeline_of_files(model: str) -> DiffusionPipeline:
    """A single-file model's pipeline on the meta device for planning: the DiT(s) as their
    headers describe them (in the file's dtype: a quantized file is planned dequantized, as
    it is held), the rest from the preset of the recognised architecture (its reduced text
    encoders: the real ones live on rank 0 only)."""
    from ..presets import build_preset

    files = SingleFiles.parse(model)
    dits = [recognise(p) for p in files.models]
    for part in dits:
        _expect(part, "transformer", "--model")
    preset = _PRESETS.get(dits[0].detection.variant)
    if preset is None:
        raise ValueError(
            f"{dits[0].header.name} is {dits[0].detection.variant}: recognised, but not "
            "runnable from single files yet, so there is nothing to plan"
        )
    name = preset.pair_preset if len(dits) == 2 else preset.name
    if not name:
        raise ValueError(
            f"{dits[0].header.name} is {dits[0].detection.variant}: "
            + ("one expert; it takes two (HIGH,LOW)" if preset.pair_preset else "not a pair")
        )
    pipe = build_preset(name, device="meta")
    for component, part in zip(("transformer", "transformer_2"), dits, strict=False):
        pipe.register_modules(**{component: empty_model(part.detection.config, torch.float32)})
    if type(pipe).__name__ != preset.pipeline and not preset.image_encoder:
        import diffusers  # the first Qwen-Image-Edit on the Edit-Plus preset's components

        pipe = getattr(diffusers, preset.pipeline)(**pipe.components)
    elif type(pipe).__name__ != preset.pipeline:  # Wan 2.1 I2V 14B on the T2V 14B's preset
        import diffusers
        from accelerate import init_empty_weights
        from transformers import CLIPVisionConfig, CLIPVisionModel

        with init_empty_weights(include_buffers=True):
            image_encoder = CLIPVisionModel(CLIPVisionConfig(**CLIP_VISION_H))
        pipe = getattr(diffusers, preset.pipeline)(
            **pipe.components,
            image_encoder=image_encoder,
            image_processor=clip_image_processor(CLIP_VISION_H["image_size"]),
        )
    return pipe
