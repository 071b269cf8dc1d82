"""The node handlers: one per node type of `nodes.NODE_SPECS`, each turning its node's inputs
into a value of `values.py` (or refusing the node), and `Mapper`, which evaluates a graph from
its output node back, each node once, keeping one line per node saying how it was mapped.
Torch-free."""

from __future__ import annotations

import ast
import dataclasses
import math
import operator
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..sampling.names import SAMPLERS, SCHEDULERS
from ..sampling.schedules import FLUX_LEVELS
from . import edit_nodes, h3_nodes, ltx_nodes, qwen21_nodes, reference_nodes, resize, two_stage
from .files import ComfyFolders
from .graph import Graph, Link, Node, WorkflowError, unknown_node
from .nodes import SPECS
from .sizes import selected_resolution
from .values import (
    AudioLatent,
    AudioVae,
    Clip,
    ClipVision,
    ClipVisionOutput,
    Conditioning,
    Decoded,
    DecodedAudio,
    Guider,
    Image,
    Latent,
    Model,
    Noise,
    Refusal,
    Sampled,
    SampledAudio,
    SamplerName,
    Sigmas,
    Stage,
    Upscaled,
    UpscaledAV,
    Vae,
    Video,
)

# -- evaluation -------------------------------------------------------------------------------


class Mapper:
    """Evaluates nodes on demand (each once) and keeps one line per node."""

    def __init__(self, graph: Graph, folders: ComfyFolders):
        self.graph = graph
        self.folders = folders
        self.outputs: dict[str, tuple[Any, ...]] = {}
        self.lines: dict[str, tuple[str, str, str]] = {}
        self.loaders: dict[str, Node] = {}
        self._busy: set[str] = set()

    def evaluate(self, node: Node) -> tuple[Any, ...]:
        if node.id in self.outputs:
            return self.outputs[node.id]
        if node.id in self._busy:
            raise WorkflowError(node, "its inputs loop back to it")
        if node.type not in HANDLERS:
            raise unknown_node(node)
        if node.problem:
            raise WorkflowError(node, node.problem)
        self._busy.add(node.id)
        out = HANDLERS[node.type](self, node)
        self._busy.discard(node.id)
        self.outputs[node.id] = out
        return out

    def say(self, node: Node, text: str) -> None:
        self.lines[node.id] = (node.id, node.type, text)

    def input(self, node: Node, name: str, kind: type | tuple[type, ...] | None = None) -> Any:
        """A linked input's value (its node evaluated); WorkflowError when missing."""
        value = node.inputs.get(name)
        if value is None:
            raise WorkflowError(node, f"input {name} is not connected")
        if not isinstance(value, Link):
            raise WorkflowError(node, f"input {name} must be a link, got {value!r}")
        source = self.graph.node(value.node, node)
        outputs = self.evaluate(source)
        if not 0 <= value.output < len(outputs):
            raise WorkflowError(
                node,
                f"input {name} links to output {value.output} of node {source.id} "
                f"({source.type}), which has none",
            )
        got = outputs[value.output]
        if isinstance(got, Refusal):
            raise WorkflowError(got.node, f"{got.reason} (node {node.id} reads it)")
        if kind is not None and not isinstance(got, kind):
            raise WorkflowError(
                node,
                f"input {name} comes from node {source.id} ({source.type}) where paradit expects "
                f"{_names(kind)}",
            )
        prepared = isinstance(got, Image) and (got.resizes or got.crf is not None)
        if prepared and node.type not in PREPARED_READERS:
            raise WorkflowError(
                node,
                f"input {name}: an image ResizeImageMaskNode or LTXVPreprocess prepared (node "
                f"{source.id}), which paradit makes only for LTX-2's LTXVImgToVideoInplace",
            )
        return got

    def optional(self, node: Node, name: str, kind: type | tuple[type, ...]) -> Any:
        return self.input(node, name, kind) if node.inputs.get(name) is not None else None

    def widget(self, node: Node, name: str, kind: type | tuple[type, ...]) -> Any:
        """A widget's value, of `kind` (int accepted for float): its own, or the value a
        linked node gives it (a primitive, a switch, a math expression)."""
        if name not in node.inputs:
            raise WorkflowError(node, f"widget {name} has no value")
        value = node.inputs[name]
        if isinstance(value, Link):
            value = self.input(node, name)
            if not isinstance(value, (bool, int, float, str)):
                source = self.graph.node(node.inputs[name].node, node)
                raise WorkflowError(
                    node,
                    f"widget {name} comes from {source.where} ({source.type}), which gives "
                    "no value paradit reads",
                )
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if float in kinds:
            kinds = (*kinds, int)
        if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
            raise WorkflowError(node, f"widget {name} must be {_names(kind)}, got {value!r}")
        return float(value) if kind is float else value

    def model_file(self, node: Node, kind: str, widget: str) -> Path:
        name = self.widget(node, widget, str)
        try:
            path = self.folders.model_file(kind, name)
        except ValueError as exc:
            raise WorkflowError(node, str(exc)) from None
        if path is None:
            raise WorkflowError(node, f"{name}: no such file in {self.folders.where(kind)}")
        self.loaders.setdefault(str(path), node)
        return path

    def relative(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.folders.models))
        except ValueError:
            return str(path)


def _names(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    words = {int: "a whole number", float: "a number", str: "text", bool: "true or false"}
    return " or ".join(words.get(k, k.__name__) for k in kinds)


# -- handlers: one per node type --------------------------------------------------------------

Handler = Callable[[Mapper, Node], tuple[Any, ...]]


def _unet(m: Mapper, node: Node) -> tuple[Any, ...]:
    path = m.model_file(node, "diffusion_models", "unet_name")
    dtype = node.inputs.get("weight_dtype", "default")
    if dtype != "default":
        raise WorkflowError(
            node,
            f"weight_dtype {dtype}: ComfyUI casts the weights on loading, which paradit does "
            "not; set it to default (paradit keeps the file's weights as its memory plan "
            "decides)",
        )
    m.say(node, f"{m.relative(path)} -> --model")
    return (Model((path,), node),)


def _checkpoint(m: Mapper, node: Node) -> tuple[Any, ...]:
    path = m.model_file(node, "checkpoints", "ckpt_name")
    m.say(node, f"{m.relative(path)} -> --model (its CLIP and VAE: the file's own)")
    return (
        Model((path,), node, checkpoint=True),
        Clip((), node, checkpoint=path),
        Vae(None, node, checkpoint=path),
    )


def _clip_loader(m: Mapper, node: Node) -> tuple[Any, ...]:
    names = ("clip_name1", "clip_name2") if node.type == "DualCLIPLoader" else ("clip_name",)
    paths = tuple(m.model_file(node, "text_encoders", name) for name in names)
    kind = node.inputs.get("type", "")
    shown = ", ".join(m.relative(p) for p in paths)
    m.say(node, f"{shown} (type {kind}) -> --text-encoder")
    return (Clip(paths, node),)


def _vae_loader(m: Mapper, node: Node) -> tuple[Any, ...]:
    path = m.model_file(node, "vae", "vae_name")
    m.say(node, f"{m.relative(path)} -> --vae")
    return (Vae(path, node),)


def _clip_vision_loader(m: Mapper, node: Node) -> tuple[Any, ...]:
    path = m.model_file(node, "clip_vision", "clip_name")
    m.say(node, f"{m.relative(path)} -> --image-encoder")
    return (ClipVision(path, node),)


def _lora(m: Mapper, node: Node) -> tuple[Any, ...]:
    model = m.input(node, "model", Model)
    path = m.model_file(node, "loras", "lora_name")
    strength = m.widget(node, "strength_model", float)
    name = str(path.relative_to(m.folders.models / "loras")).replace("\\", "/")
    m.say(node, f"{name} at {strength:g} -> loras")
    return (dataclasses.replace(model, loras=(*model.loras, (name, strength))),)


def _model_sampling(m: Mapper, node: Node) -> tuple[Any, ...]:
    model = m.input(node, "model", Model)
    levels = None
    if node.type == "ModelSamplingFlux":
        high = m.widget(node, "max_shift", float)
        base = m.widget(node, "base_shift", float)
        width, height = m.widget(node, "width", int), m.widget(node, "height", int)
        # ComfyUI's ModelSamplingFlux: mu linear in the latent tokens (16x16 pixels each)
        # between 256 tokens (base_shift) and 4096 (max_shift); its levels are
        # exp(mu) / (exp(mu) + 1/t - 1), the static shift exp(mu), on a table of 10000
        slope = (high - base) / (4096 - 256)
        mu = width * height / 256 * slope + base - slope * 256
        shift, levels = math.exp(mu), FLUX_LEVELS
        m.say(
            node,
            f"mu {mu:.6g} for {width}x{height} -> shift {shift:.6g} (exp(mu)), flow_levels "
            f"{levels}",
        )
    else:
        shift = m.widget(node, "shift", float)
        sampling = node.inputs.get("sampling", "flow")
        if node.type == "ModelSamplingAuraFlow" and sampling != "flow":
            raise WorkflowError(
                node, f"sampling {sampling}: paradit runs flow sampling (sampling flow)"
            )
        m.say(node, f"shift {shift:g} -> shift")
    if not shift > 0:
        raise WorkflowError(node, f"shift must be above 0, got {shift}")
    return (model.shifted(shift, node, levels),)


def _cfg_norm(m: Mapper, node: Node) -> tuple[Any, ...]:
    model = m.input(node, "model", Model)
    strength = m.widget(node, "strength", float)
    if not 0 <= strength <= 100:
        raise WorkflowError(node, f"strength must be between 0 and 100, got {strength:g}")
    # pre_cfg (newer versions; absent: false) rescales the combined prediction before the
    # sampler's combination, unclamped: another method than the post-CFG one paradit runs
    if node.inputs.get("pre_cfg", False) is not False:
        raise WorkflowError(
            node,
            "pre_cfg true rescales the combined prediction before the sampler's CFG, up or "
            "down: paradit runs CFGNorm's post-CFG form only (pre_cfg false, its default)",
        )
    if model.cfg_norm_node is not None:
        raise WorkflowError(
            node, f"a second CFGNorm on one model (after node {model.cfg_norm_node.id})"
        )
    m.say(node, f"strength {strength:g} -> cfg_mode norm, cfg_norm (with cfg above 1)")
    return (dataclasses.replace(model, cfg_norm=strength, cfg_norm_node=node),)


def _text_encode(m: Mapper, node: Node) -> tuple[Any, ...]:
    clip = m.input(node, "clip", Clip)
    text = m.widget(node, "text", str)
    m.say(node, f"{_quote(text)}")
    return (Conditioning(text, clip),)


def _text_encode_flux(m: Mapper, node: Node) -> tuple[Any, ...]:
    """CLIPTextEncodeFlux: clip_l's text through CLIP-L (the pooled vector), t5xxl's through
    T5 (the text tokens), as diffusers' Flux pipeline takes `prompt` and `prompt_2`; its
    guidance rides in the conditioning (FluxGuidance's, where the DiT embeds guidance)."""
    clip = m.input(node, "clip", Clip)
    text, text_2 = m.widget(node, "clip_l", str), m.widget(node, "t5xxl", str)
    guidance = m.widget(node, "guidance", float)
    second = "" if text_2 == text else f", T5 {_quote(text_2)} -> prompt_2"
    m.say(
        node,
        f"CLIP-L {_quote(text)}{second}; guidance {guidance:g} -> guidance_scale where the "
        "DiT embeds guidance (Flux.1 dev; schnell's ignores it, as ComfyUI's does)",
    )
    return (Conditioning(text, clip, text_2, guidance=guidance, guidance_node=node),)


def _zero_out(m: Mapper, node: Node) -> tuple[Any, ...]:
    m.input(node, "conditioning", Conditioning)
    m.say(node, "empty negative prompt")
    return (Conditioning("", None),)


def _flux_guidance(m: Mapper, node: Node) -> tuple[Any, ...]:
    cond = m.input(node, "conditioning", Conditioning)
    guidance = m.widget(node, "guidance", float)
    m.say(node, f"guidance {guidance:g} -> guidance_scale")
    return (dataclasses.replace(cond, guidance=guidance, guidance_node=node),)


def _batch_of_one(m: Mapper, node: Node) -> None:
    batch = m.widget(node, "batch_size", int) if "batch_size" in node.inputs else 1
    if batch != 1:
        raise WorkflowError(
            node, f"batch_size {batch}: a paradit job makes one output (use paradit batch)"
        )


def _empty_latent(m: Mapper, node: Node) -> tuple[Any, ...]:
    width, height = m.widget(node, "width", int), m.widget(node, "height", int)
    frames = m.widget(node, "length", int) if "length" in SPECS[node.type].widgets else 1
    _batch_of_one(m, node)
    if node.type == "Wan22ImageToVideoLatent":
        vae = m.input(node, "vae", Vae)
        image = m.optional(node, "start_image", Image)
        latent = Latent(node, width, height, frames, image=image, vae=vae)
    else:
        latent = Latent(node, width, height, frames)
    m.say(node, _size_line(latent))
    return (latent,)


def _empty_flux2_latent(m: Mapper, node: Node) -> tuple[Any, ...]:
    """EmptyFlux2LatentImage: 128 channels at 1/16 of the size, the tokens paradit's Flux.2
    runs; ComfyUI rounds a side down to a multiple of 16, paradit takes only such sides."""
    width, height = m.widget(node, "width", int), m.widget(node, "height", int)
    if width % 16 or height % 16:
        raise WorkflowError(
            node,
            f"{width}x{height}: ComfyUI's latent rounds each side down to a multiple of 16, "
            "paradit takes sizes that need no rounding; give multiples of 16",
        )
    return _empty_latent(m, node)


def _wan_image_to_video(m: Mapper, node: Node) -> tuple[Any, ...]:
    positive = m.input(node, "positive", Conditioning)
    negative = m.input(node, "negative", Conditioning)
    vae = m.input(node, "vae", Vae)
    width, height = m.widget(node, "width", int), m.widget(node, "height", int)
    frames = m.widget(node, "length", int)
    _batch_of_one(m, node)
    image = m.optional(node, "start_image", Image)
    vision = m.optional(node, "clip_vision_output", ClipVisionOutput)
    if vision is not None and image is not None and vision.image.file != image.file:
        raise WorkflowError(
            node, "its clip_vision_output encodes another image than its start_image"
        )
    latent = Latent(node, width, height, frames, image, vision, vae, in_conditioning=True)
    m.say(node, _size_line(latent))
    return (
        dataclasses.replace(positive, start=latent),
        dataclasses.replace(negative, start=latent),
        latent,
    )


def _hunyuan15_image_to_video(m: Mapper, node: Node) -> tuple[Any, ...]:
    """WanImageToVideo's mapping, the start image and SigLIP's input prepared as ComfyUI
    prepares them (`image_prep` comfyui: families/hunyuan_video15/comfyui_prep.py)."""
    positive, negative, latent = _wan_image_to_video(m, node)
    if latent.image is None or latent.clip_vision is None:
        missing = "start_image" if latent.image is None else "clip_vision_output"
        raise WorkflowError(
            node,
            f"no {missing}: ComfyUI then runs the image-to-video model without the image's "
            "latents or SigLIP tokens, where paradit's image-to-video pipeline takes both; "
            "connect LoadImage to start_image and CLIPVisionEncode to clip_vision_output",
        )
    latent = dataclasses.replace(latent, image_prep="comfyui")
    m.say(node, "the start image prepared as ComfyUI's nodes prepare it -> image_prep comfyui")
    return (
        dataclasses.replace(positive, start=latent),
        dataclasses.replace(negative, start=latent),
        latent,
    )


def _size_line(latent: Latent) -> str:
    size = (
        f"{latent.width}x{latent.height}, {latent.frames} frame{'s' if latent.frames > 1 else ''}"
    )
    fields = "width, height, num_frames" if latent.frames != 1 else "width, height"
    image = f"; start image {latent.image.file.name} -> image" if latent.image else ""
    return f"{size} -> {fields}{image}"


def _clip_vision_encode(m: Mapper, node: Node) -> tuple[Any, ...]:
    vision = m.input(node, "clip_vision", ClipVision)
    image = m.input(node, "image", Image)
    crop = node.inputs.get("crop", "none")
    # paradit's CLIP image processor scales the shortest side and centre-crops, as ComfyUI's
    # crop center does; crop none stretches the whole image, the same only for a square one
    if crop not in ("center", "none"):
        raise WorkflowError(node, f"crop {crop}: paradit knows center and none")
    if crop == "none":
        from PIL import Image as PILImage

        with PILImage.open(image.file) as opened:
            width, height = opened.size
        if width != height:
            raise WorkflowError(
                node,
                f"crop none stretches the {width}x{height} image to a square for the image "
                "encoder; paradit centre-crops it, as crop center does: set crop to center",
            )
    m.say(node, f"{image.file.name} through the image encoder (crop {crop})")
    return (ClipVisionOutput(vision, image),)


def _load_image(m: Mapper, node: Node) -> tuple[Any, ...]:
    name = m.widget(node, "image", str)
    try:
        path = m.folders.input_file(name)
    except ValueError as exc:
        raise WorkflowError(node, str(exc)) from None
    if path is None:
        raise WorkflowError(node, f"{name}: no such file in {m.folders.input}")
    m.say(node, f"{path.name} -> image")
    return (Image(path, node), None)


def _ksampler(m: Mapper, node: Node) -> tuple[Any, ...]:
    latent = m.input(node, "latent_image", (Latent, Sampled))  # a first stage's lines first
    model = m.input(node, "model", Model)
    positive = m.input(node, "positive", Conditioning)
    negative = m.input(node, "negative", Conditioning)
    advanced = node.type == "KSamplerAdvanced"
    steps = m.widget(node, "steps", int)
    stage = Stage(
        node,
        model,
        positive,
        negative,
        seed=m.widget(node, "noise_seed" if advanced else "seed", int),
        steps=steps,
        cfg=m.widget(node, "cfg", float),
        sampler=_choice(m, node, "sampler_name", SAMPLERS, "sampler"),
        scheduler=_choice(m, node, "scheduler", SCHEDULERS, "scheduler"),
        start=m.widget(node, "start_at_step", int) if advanced else 0,
        end=m.widget(node, "end_at_step", int) if advanced else steps,
        add_noise=_switch(m, node, "add_noise") if advanced else True,
        leftover=_switch(m, node, "return_with_leftover_noise") if advanced else False,
    )
    if not advanced:
        denoise = m.widget(node, "denoise", float)
        if denoise != 1.0:
            raise WorkflowError(
                node, f"denoise {denoise:g}: paradit starts every job from pure noise (denoise 1)"
            )
    if isinstance(latent, Sampled):
        if not (advanced and latent.stages[-1].node.type == "KSamplerAdvanced"):
            source = latent.stages[-1].node
            raise WorkflowError(
                node,
                f"latent_image comes from node {source.id} ({source.type}): a second pass on "
                "a sampled latent; paradit starts every job from noise (two samplers only as "
                "Wan 2.2 A14B's KSamplerAdvanced pair)",
            )
        sampled = Sampled(latent.latent, (*latent.stages, stage))
    else:
        sampled = Sampled(latent, (stage,))
    m.say(node, _stage_line(stage))
    return (sampled,)


# SamplerCustomAdvanced and the nodes that feed it: the same stage as a KSampler, its settings
# spread over RandomNoise (seed), CFGGuider / BasicGuider (model, prompts, cfg), KSamplerSelect
# (sampler) and BasicScheduler (scheduler, steps; the levels of its model's ModelSampling)


def _random_noise(m: Mapper, node: Node) -> tuple[Any, ...]:
    seed = m.widget(node, "noise_seed", int)
    m.say(node, f"seed {seed} -> seed")
    return (Noise(seed, node),)


def _guider(m: Mapper, node: Node) -> tuple[Any, ...]:
    model = m.input(node, "model", Model)
    if node.type == "BasicGuider":
        positive = m.input(node, "conditioning", Conditioning)
        # no negative branch runs: it shares the positive's latent (an image in it)
        negative, cfg = Conditioning("", None, start=positive.start), 1.0
        m.say(node, "cfg 1 (no negative prompt) -> guidance_scale")
    else:
        positive = m.input(node, "positive", Conditioning)
        negative = m.input(node, "negative", Conditioning)
        cfg = m.widget(node, "cfg", float)
        m.say(node, f"cfg {cfg:g} -> guidance_scale")
    return (Guider(model, positive, negative, cfg, node),)


def _sampler_select(m: Mapper, node: Node) -> tuple[Any, ...]:
    name = _choice(m, node, "sampler_name", SAMPLERS, "sampler")
    m.say(node, f"{name} -> sampler")
    return (SamplerName(name, node),)


def _basic_scheduler(m: Mapper, node: Node) -> tuple[Any, ...]:
    model = m.input(node, "model", Model)
    scheduler = _choice(m, node, "scheduler", SCHEDULERS, "scheduler")
    steps = m.widget(node, "steps", int)
    denoise = m.widget(node, "denoise", float)
    if denoise != 1.0:
        raise WorkflowError(
            node, f"denoise {denoise:g}: paradit starts every job from pure noise (denoise 1)"
        )
    m.say(node, f"{steps} steps, {scheduler} -> num_inference_steps, scheduler")
    return (Sigmas(model, scheduler, steps, node),)


def _flux2_scheduler(m: Mapper, node: Node) -> tuple[Any, ...]:
    """Flux2Scheduler: the levels of the Flux.2 pipelines' own scheduler for its steps at its
    width x height (Flux.2's empirical mu over the image tokens: tests/workflow/
    test_flux2_levels.py), so the job leaves them to the model's own scheduler."""
    steps = m.widget(node, "steps", int)
    width, height = m.widget(node, "width", int), m.widget(node, "height", int)
    m.say(node, f"{steps} steps at {width}x{height}: the model's own levels -> num_inference_steps")
    return (Sigmas(None, "", steps, node, own_size=(width, height)),)


def _own_levels_stage(
    m: Mapper, node: Node, latent: Latent, guider: Guider, sampler: SamplerName, sigmas: Sigmas
) -> Stage:
    """A SamplerCustomAdvanced on Flux2Scheduler's levels: the model's own scheduler's, at the
    latent's size, stepped by euler (its flow-matching Euler step)."""
    if sigmas.own_size != (latent.width, latent.height):
        raise WorkflowError(
            sigmas.node,
            f"levels for {sigmas.own_size[0]}x{sigmas.own_size[1]} where the latent (node "
            f"{latent.node.id}) is {latent.width}x{latent.height}: paradit's model sets its "
            "levels for the image it makes; give both one size",
        )
    if sampler.name != "euler":
        raise WorkflowError(
            sampler.node,
            f"sampler {sampler.name} on {sigmas.node.type}'s levels: paradit runs them with the "
            "model's own scheduler, which steps as euler; set euler",
        )
    if guider.model.shift_node is not None:
        raise WorkflowError(
            guider.model.shift_node,
            f"a ModelSampling node beside node {sigmas.node.id}'s ({sigmas.node.type}) levels: "
            "paradit runs the model's own; remove it",
        )
    return dataclasses.replace(
        Stage(
            node,
            guider.model,
            guider.positive,
            guider.negative,
            seed=m.input(node, "noise", Noise).seed,
            steps=sigmas.steps,
            cfg=guider.cfg,
            sampler=sampler.name,
            scheduler="",
            start=0,
            end=sigmas.steps,
            add_noise=True,
            leftover=False,
        ),
        own_levels=sigmas.node,
        steps_node=sigmas.node,
    )


def _sampler_custom_advanced(m: Mapper, node: Node) -> tuple[Any, ...]:
    latent = m.input(node, "latent_image", (Latent, Sampled, UpscaledAV))
    noise = m.input(node, "noise", Noise)
    guider = m.input(node, "guider", Guider)
    sampler = m.input(node, "sampler", SamplerName)
    sigmas = m.input(node, "sigmas", Sigmas)
    if isinstance(latent, UpscaledAV):  # LTX-2's second stage
        sampled = two_stage.second_stage(m, node, latent, noise, guider, sampler, sigmas)
        m.say(node, "second stage: " + _stage_line(sampled.upscale.stage))
        return (sampled, two_stage.denoised_output(node, sampled, sampler.name))
    two_stage.first_stage_levels(sigmas)
    if isinstance(latent, Sampled):
        source = latent.stages[-1].node
        raise WorkflowError(
            node,
            f"latent_image comes from node {source.id} ({source.type}): a second pass on a "
            "sampled latent; paradit starts every job from noise",
        )
    if sigmas.own_size is not None:
        stage = _own_levels_stage(m, node, latent, guider, sampler, sigmas)
        m.say(node, f"seed {stage.seed}, {stage.steps} steps, cfg {stage.cfg:g}, the model's own")
        sampled = Sampled(latent, (stage,))
        return (sampled, two_stage.denoised_output(node, sampled, sampler.name))
    model = guider.model
    if sigmas.levels is not None:
        if model.shift_node is not None:
            raise WorkflowError(
                model.shift_node,
                f"a ModelSampling node on the guider's model beside node {sigmas.node.id}'s "
                f"({sigmas.node.type}) levels: in ComfyUI it replaces the model's own sampling "
                "(how a level becomes the DiT's timestep), which paradit keeps; remove it",
            )
    elif sigmas.model.files != model.files:
        raise WorkflowError(
            sigmas.node,
            f"its model is not the guider's (node {guider.node.id}): paradit runs one model "
            "per job",
        )
    elif model.shift != sigmas.model.shift:
        # ComfyUI's levels are the scheduler's model's (its ModelSampling node, or the
        # architecture's default); the guider's flow sampling turns a level into the DiT's
        # timestep without its shift, so the job's shift is the scheduler's
        shown = "none" if model.shift is None else format(model.shift, "g")
        m.say(
            sigmas.node,
            f"{m.lines[sigmas.node.id][2]} (the levels of its model's shift, not the "
            f"guider's {shown})",
        )
        model = dataclasses.replace(
            model, shift=sigmas.model.shift, shift_node=sigmas.model.shift_node
        )
    stage = Stage(
        node,
        model,
        guider.positive,
        guider.negative,
        seed=noise.seed,
        steps=sigmas.steps,
        cfg=guider.cfg,
        sampler=sampler.name,
        scheduler=sigmas.scheduler,
        start=0,
        end=sigmas.steps,
        add_noise=True,
        leftover=False,
        sigmas=sigmas.levels,
        audio_cfg=guider.audio_cfg,
        steps_node=sigmas.node,
    )
    m.say(node, _stage_line(stage))
    sampled = Sampled(latent, (stage,))
    return (sampled, two_stage.denoised_output(node, sampled, sampler.name))


# LTX-2's audio-video graph (ComfyUI's LTX-2 T2V template): the checkpoint's DiT and VAE, its
# Gemma text encoder (LTXAVTextEncoderLoader) and audio VAE (LTXVAudioVAELoader), the frame
# rate in the conditioning (LTXVConditioning), empty video and audio latents joined for one
# sampler pass (LTXVConcatAVLatent) on LTXVScheduler's levels, split after it
# (LTXVSeparateAVLatent) and decoded each (VAEDecode, LTXVAudioVAEDecode) into one video

LTX2_FRAME_RATE = 24.0
"""The frame rate paradit runs LTX-2 at by default (families/ltx2's FPS; tests check they
agree): its video positions and the length of its audio."""
LTX2_FRAME_RATES = (1.0, 60.0)
"""The frame rates a job may ask for (the request's `fps`; families/ltx2's FPS_RANGE, tests
check they agree)."""
LTX2_AUDIO_LATENTS_PER_SECOND = 25.0
"""LTX-2's audio latent frames a second: its audio VAE's 16 kHz over its mel hop of 160 over
its temporal compression of 4 (tests check the tiny pipeline's)."""


def ltx2_audio_latents(
    frames: int, rate: float = LTX2_FRAME_RATE, video_frames: int | None = None
) -> tuple[int, int]:
    """The audio latent frames at `rate` fps: (ComfyUI's for LTXVEmptyLatentAudio's `frames`,
    paradit's for the video's `video_frames`, `frames` when None). ComfyUI rounds the
    duration's latent count up, diffusers' LTX-2 pipeline (paradit's) to the nearest; at 24
    fps, with 8k+1 frames, they agree only for 24k+17 frames; at 25 fps for every count."""
    video = frames if video_frames is None else video_frames
    per_frame = LTX2_AUDIO_LATENTS_PER_SECOND / rate
    return math.ceil(frames * per_frame), round(video * per_frame)


def _frame_rate(m: Mapper, node: Node, widget: str) -> float:
    rate = m.widget(node, widget, float)
    low, high = LTX2_FRAME_RATES
    if not low <= rate <= high:
        raise WorkflowError(
            node,
            f"{widget} {rate:g}: paradit runs LTX-2 at {low:g} to {high:g} frames a second (its "
            f"video positions and its audio's length; the request's fps)",
        )
    return rate


def _ltxav_text_encoder(m: Mapper, node: Node) -> tuple[Any, ...]:
    path = m.model_file(node, "text_encoders", "text_encoder")
    ckpt = m.model_file(node, "checkpoints", "ckpt_name")
    device = node.inputs.get("device", "default")  # where ComfyUI runs it: as CLIPLoader's
    m.say(
        node,
        f"{m.relative(path)} (device {device}) -> --text-encoder (its connectors: {ckpt.name}'s)",
    )
    return (Clip((path,), node, checkpoint=ckpt),)


def _ltxv_audio_vae_loader(m: Mapper, node: Node) -> tuple[Any, ...]:
    name = m.widget(node, "ckpt_name", str)
    try:
        path = m.folders.model_file("vae", name) or m.folders.model_file("checkpoints", name)
    except ValueError as exc:
        raise WorkflowError(node, str(exc)) from None
    if path is None:
        raise WorkflowError(
            node,
            f"{name}: no such file in {m.folders.where('vae')} or {m.folders.where('checkpoints')}",
        )
    m.loaders.setdefault(str(path), node)
    m.say(node, f"{m.relative(path)} -> the model's audio VAE and vocoder")
    return (AudioVae(path, node),)


def _audio_vae(m: Mapper, node: Node) -> AudioVae:
    """The audio VAE input: LTXVAudioVAELoader's, or a plain VAELoader's file (LTX-2.5's
    `ltx-2.5-audio-vae-bf16`, which ComfyUI's VAELoader tells by its vocoder's keys,
    comfy/sd.py; paradit's serve finds its audio VAE and vocoder by their key names)."""
    vae = m.input(node, "audio_vae", (AudioVae, Vae))
    if isinstance(vae, AudioVae):
        return vae
    if vae.file is None:
        raise WorkflowError(
            node,
            f"audio_vae is node {vae.loader.id}'s checkpoint VAE (the video VAE): give "
            "LTXVAudioVAELoader, or a VAELoader of the audio VAE file",
        )
    return AudioVae(vae.file, vae.loader)


def _ltxv_conditioning(m: Mapper, node: Node) -> tuple[Any, ...]:
    positive = m.input(node, "positive", Conditioning)
    negative = m.input(node, "negative", Conditioning)
    rate = _frame_rate(m, node, "frame_rate")
    m.say(
        node, f"frame rate {rate:g} -> fps" + (" (LTX-2's own)" if rate == LTX2_FRAME_RATE else "")
    )
    return (
        dataclasses.replace(positive, frame_rate=rate),
        dataclasses.replace(negative, frame_rate=rate),
    )


def _empty_ltxv_video(m: Mapper, node: Node) -> tuple[Any, ...]:
    width, height = m.widget(node, "width", int), m.widget(node, "height", int)
    frames = m.widget(node, "length", int)
    _batch_of_one(m, node)
    if frames < 1 or width < 32 or height < 32:
        raise WorkflowError(
            node,
            f"{width}x{height}, {frames} frames: ComfyUI's latent of 32-pixel tokens and "
            "8k+1 frames needs at least 32x32 and 1 frame",
        )
    # ComfyUI's latent: width // 32 x height // 32 tokens and (length - 1) // 8 + 1 latent
    # frames, which decode to ((length - 1) // 8) * 8 + 1 frames: the size paradit runs
    latent = Latent(node, width // 32 * 32, height // 32 * 32, (frames - 1) // 8 * 8 + 1, ltxv=True)
    rounded = ""
    if (latent.width, latent.height, latent.frames) != (width, height, frames):
        rounded = f"{width}x{height}, {frames} frames: ComfyUI's latent rounds it down to "
    m.say(node, rounded + _size_line(latent))
    return (latent,)


def _ltxv_empty_audio(m: Mapper, node: Node) -> tuple[Any, ...]:
    frames = m.widget(node, "frames_number", int)
    rate = _frame_rate(m, node, "frame_rate")
    _batch_of_one(m, node)
    vae = _audio_vae(m, node)
    m.say(node, f"the audio of {frames} frames at {rate:g} fps (LTX-2's audio track)")
    return (AudioLatent(node, frames, rate, vae),)


def _ltxv_concat(m: Mapper, node: Node) -> tuple[Any, ...]:
    video = m.input(node, "video_latent", (Latent, Upscaled))
    if isinstance(video, Upscaled):
        return two_stage.concat_upscaled(m, node, video)
    audio = m.input(node, "audio_latent", AudioLatent)
    if not video.ltxv or video.audio is not None:
        raise WorkflowError(
            node,
            f"video_latent comes from node {video.node.id} ({video.node.type}): paradit joins "
            "an EmptyLTXVLatentVideo's latent to the audio",
        )
    rate = audio.frame_rate
    comfy, ours = ltx2_audio_latents(audio.frames, rate, video.frames)
    length = ""
    if comfy != ours:  # the job sets ComfyUI's length (the request's audio_latent_frames)
        length = (
            f" (ceil({audio.frames} / {rate:g} x 25), ComfyUI's count; LTX2Pipeline's for the "
            f"video's {video.frames} frames, {ours}: -> audio_latent_frames {comfy})"
        )
    m.say(
        node,
        f"the video and {comfy} audio latent frames sampled together (LTX-2's audio track){length}",
    )
    return (dataclasses.replace(video, audio=audio),)


def _ltxv_scheduler(m: Mapper, node: Node) -> tuple[Any, ...]:
    steps = m.widget(node, "steps", int)
    high = m.widget(node, "max_shift", float)
    base = m.widget(node, "base_shift", float)
    stretch = m.widget(node, "stretch", bool)
    terminal = m.widget(node, "terminal", float)
    latent = m.optional(node, "latent", Latent)
    if steps < 1:
        raise WorkflowError(node, f"steps must be at least 1, got {steps}")
    tokens = latent.ltxv_tokens() if latent is not None else 4096  # ComfyUI's without one
    levels = ltxv_levels(steps, high, base, stretch, terminal, tokens)
    if any(b >= a for a, b in zip(levels, levels[1:], strict=False)):
        raise WorkflowError(node, f"its levels do not fall from 1 to 0: {levels}")
    shown = ", ".join(f"{s:.4g}" for s in levels)
    m.say(node, f"{steps} steps over {tokens} tokens: [{shown}] -> sigmas")
    return (Sigmas(None, "manual", steps, node, levels=levels),)


def ltxv_levels(
    steps: int, max_shift: float, base_shift: float, stretch: bool, terminal: float, tokens: int
) -> tuple[float, ...]:
    """LTXVScheduler's noise levels (Lightricks' LTX-Video schedule, by its published
    formula): t = 1, 1 - 1/steps, ..., 1/steps; mu linear in the token count from
    base_shift at 1024 tokens to max_shift at 4096; sigma = e^mu / (e^mu + 1/t - 1); with
    stretch, 1 - sigma scaled so that the last level is `terminal`; then 0."""
    mu = base_shift + (max_shift - base_shift) * (tokens - 1024) / (4096 - 1024)
    shift = math.exp(mu)
    shifted = [shift / (shift + (1 / (1 - k / steps) - 1)) for k in range(steps)]
    if stretch:
        scale = (1 - shifted[-1]) / (1 - terminal)
        shifted = [1 - (1 - s) / scale for s in shifted]
    return (*shifted, 0.0)


def _ltxv_separate(m: Mapper, node: Node) -> tuple[Any, ...]:
    sampled = m.input(node, "av_latent", Sampled)
    if sampled.latent.audio is None:
        source = sampled.stages[-1].node
        raise WorkflowError(
            node, f"av_latent from node {source.id} ({source.type}) holds no audio latent"
        )
    m.say(node, "the sampled video and audio latents, apart")
    return (dataclasses.replace(sampled, separated=True), SampledAudio(sampled, node))


def _ltxv_audio_decode(m: Mapper, node: Node) -> tuple[Any, ...]:
    audio = m.input(node, "samples", SampledAudio)
    vae = _audio_vae(m, node)
    if vae.file != audio.sampled.latent.audio.vae.file:
        raise WorkflowError(
            node,
            f"another audio VAE than the empty audio latent's (node "
            f"{audio.sampled.latent.audio.node.id})",
        )
    m.say(node, "-> audio.wav, the track of video.mp4")
    return (DecodedAudio(audio, vae, node),)


def _choice(m: Mapper, node: Node, widget: str, allowed: tuple[str, ...], what: str) -> str:
    value = m.widget(node, widget, str)
    if value not in allowed:
        raise WorkflowError(node, f"{what} {value}: paradit runs the {what}s {', '.join(allowed)}")
    return value


def _switch(m: Mapper, node: Node, widget: str) -> bool:
    value = m.widget(node, widget, str)
    if value not in ("enable", "disable"):
        raise WorkflowError(node, f"widget {widget} must be enable or disable, got {value!r}")
    return value == "enable"


def _stage_line(stage: Stage) -> str:
    steps = f"{stage.steps} steps"
    if stage.start or stage.end < stage.steps:
        steps += f" (runs {stage.start} to {min(stage.end, stage.steps)})"
    names = f"{stage.sampler}/{stage.scheduler}"
    if stage.sigmas is not None:
        names = f"{stage.sampler} on its sigmas' levels"
    return f"seed {stage.seed}, {steps}, cfg {stage.cfg:g}, {names}"


def _vae_decode(m: Mapper, node: Node) -> tuple[Any, ...]:
    sampled = m.input(node, "samples", Sampled)
    vae = m.input(node, "vae", Vae)
    if sampled.latent.audio is not None and not sampled.separated:
        raise WorkflowError(
            node, "samples hold the audio latent too: split them with LTXVSeparateAVLatent"
        )
    tiles = " (its own tiles)" if node.type != "VAEDecode" else ""
    decode_tiles = None
    if node.type == "VAEDecodeTiled":  # LTX-2.5's diffusion decoder: ComfyUI's tiles
        factor = sampled.upscale.upscaler.factor if sampled.upscale is not None else 1
        diffusion = ltx_nodes.diffusion_decoder_tiles(m, node, sampled.latent, factor, vae)
        if diffusion is not None:
            tiles, decode_tiles = diffusion
    m.say(node, "the decode paradit runs" + tiles)
    return (Decoded(sampled, vae, node, decode_tiles=decode_tiles),)


def _create_video(m: Mapper, node: Node) -> tuple[Any, ...]:
    decoded = m.input(node, "images", Decoded)
    fps = m.widget(node, "fps", float)
    audio = _video_audio(m, node, decoded, fps)
    _eight_bit_srgb(node)
    rest = ", ".join(f"{k} {node.inputs[k]}" for k in ("color_space", "codec") if k in node.inputs)
    track = "; its audio -> video.mp4's track" if audio is not None else ""
    m.say(
        node,
        f"fps {fps:g}{', ' + rest if rest else ''} (video.mp4 at the job's frame rate, "
        f"H.264){track}",
    )
    return (Video(decoded, fps, audio),)


def _eight_bit_srgb(node: Node) -> None:
    """CreateVideo's bit_depth and color_space as ComfyUI resolves them
    (comfy_extras/nodes_video.py: `auto` is 8 bits for sRGB, 10 for HDR and HDR PQ): paradit
    writes 8-bit sRGB frames, so `auto` or 8 with sRGB; anything else is refused."""
    space = node.inputs.get("color_space", "sRGB")
    if space != "sRGB":
        raise WorkflowError(
            node,
            f"color_space {space}: ComfyUI writes the frames as BT.2020 HDR, paradit as sRGB; "
            "set sRGB",
        )
    depth = node.inputs.get("bit_depth", "auto")
    if str(depth) not in ("auto", "8"):
        raise WorkflowError(node, f"bit_depth {depth}: paradit writes 8-bit frames; set 8 or auto")


def _video_audio(m: Mapper, node: Node, decoded: Decoded, fps: float) -> DecodedAudio | None:
    """CreateVideo's audio: the decoded audio of the images' own sampling (LTX-2's track,
    MiniMax H3's)."""
    sampled = decoded.sampled
    audio = m.optional(node, "audio", DecodedAudio)
    if sampled.latent.joint_audio:
        return _joint_audio(node, sampled, audio, fps)
    if sampled.latent.audio is None:
        if node.inputs.get("audio") is not None:
            raise WorkflowError(node, "an audio input: paradit writes the model's own audio only")
        return None
    same = audio is not None and audio.audio.sampled.stages == sampled.stages
    if not same or audio.audio.sampled.upscale != sampled.upscale:
        raise WorkflowError(
            node,
            "paradit writes the audio sampled with these images into video.mp4: connect their "
            "LTXVAudioVAEDecode to the audio input",
        )
    rate = sampled.latent.audio.frame_rate
    if fps != rate:
        raise WorkflowError(
            node,
            f"fps {fps:g}: the audio track lasts the frames at {rate:g} fps (the audio latent's "
            f"frame_rate), paradit's video.mp4 plays them at that rate; set {rate:g}",
        )
    return audio


def _joint_audio(
    node: Node, sampled: Sampled, audio: DecodedAudio | None, fps: float
) -> DecodedAudio:
    """CreateVideo on MiniMax H3's AV latent: its audio the same sampling's (VAEDecodeAudio),
    the video at H3's 24 fps (the audio lasts the frames at that rate)."""
    if audio is None or audio.audio.sampled.stages != sampled.stages:
        raise WorkflowError(
            node,
            "paradit writes the audio sampled with these images into video.mp4: connect the "
            "VAEDecodeAudio of the same sampler to the audio input",
        )
    if fps != h3_nodes.H3_FPS:
        raise WorkflowError(
            node,
            f"fps {fps:g}: MiniMax H3's audio lasts its frames at {h3_nodes.H3_FPS:g} fps, "
            f"paradit's video.mp4 plays them at that rate; set {h3_nodes.H3_FPS:g}",
        )
    return audio


def _save(m: Mapper, node: Node) -> tuple[Any, ...]:
    if node.type == "SaveImageAdvanced":
        for widget, wanted in (("format", "png"), ("bit_depth", "8-bit")):
            value = node.inputs.get(widget, wanted)
            if value != wanted:
                raise WorkflowError(
                    node, f"{widget} {value}: paradit writes {wanted} images; set {wanted}"
                )
    if node.type == "SaveVideo":
        video = m.input(node, "video", Video)
        track = ", audio.wav" if video.audio is not None else ""
        m.say(node, f"-> --out DIR: video.mp4, frames/{track}, job.json")
        return (dataclasses.replace(video.decoded, audio=video.audio),)
    decoded = m.input(node, "images", Decoded)
    m.say(node, "-> --out DIR: image.png (or video.mp4), frames/, job.json")
    return (decoded,)


# values computed in the graph: primitives, switches, math expressions


def _primitive(m: Mapper, node: Node) -> tuple[Any, ...]:
    kind = {"PrimitiveInt": int, "PrimitiveFloat": float, "PrimitiveBoolean": bool}
    value = m.widget(node, "value", kind.get(node.type, str))
    m.say(node, f"{_quote(value) if isinstance(value, str) else value!r}")
    return (value,)


def _switch_node(m: Mapper, node: Node) -> tuple[Any, ...]:
    """ComfySwitchNode is lazy in ComfyUI: only the branch its switch picks is evaluated (the
    other's nodes, and the files only they name, are not needed)."""
    switch = m.widget(node, "switch", bool)
    branch = "on_true" if switch else "on_false"
    given = node.inputs.get(branch)
    # a branch given as a value (a subgraph input promoted to the outer node's widget)
    literal = isinstance(given, (bool, int, float, str)) and not isinstance(given, Link)
    value = given if literal else m.input(node, branch)
    m.say(node, f"switch {str(switch).lower()} -> {branch}")
    return (value,)


def _preview_any(m: Mapper, node: Node) -> tuple[Any, ...]:
    """PreviewAny shows its source on ComfyUI's canvas and passes it on unchanged."""
    value = m.input(node, "source")
    m.say(node, "passed on")
    return (value,)


def _viewer(m: Mapper, node: Node) -> tuple[Any, ...]:
    """A viewer with no outputs (ImageCompare): ComfyUI shows its images on the canvas and
    saves nothing, so no job reads it; it is never the job's output (`OUTPUT_NODES`)."""
    m.say(node, "a viewer: nothing saved")
    return ()


def _resolution_selector(m: Mapper, node: Node) -> tuple[Any, ...]:
    ratio = m.widget(node, "aspect_ratio", str)
    megapixels = m.widget(node, "megapixels", float)
    multiple = m.widget(node, "multiple", int) if "multiple" in node.inputs else 8
    minimum = m.widget(node, "minimum", int) if "minimum" in node.inputs else 0
    try:
        width, height = selected_resolution(ratio, megapixels, multiple, minimum)
    except ValueError as exc:
        raise WorkflowError(node, str(exc)) from None
    m.say(node, f"{ratio} at {megapixels:g} MP, multiples of {multiple}: {width}x{height}")
    return (width, height)


def _math_expression(m: Mapper, node: Node) -> tuple[Any, ...]:
    text = m.widget(node, "expression", str)
    names = {}
    for name in node.inputs:
        if name.startswith("values.") and node.inputs[name] is not None:
            value = m.widget(node, name, (int, float))
            names[name.removeprefix("values.")] = value
    try:
        result = evaluate_expression(text, names)
    except ValueError as exc:
        raise WorkflowError(node, f"expression {text!r}: {exc}") from None
    m.say(node, f"{text} = {result:g}")
    return (float(result), int(result))


_FUNCTIONS: dict[str, Callable[..., float]] = {
    "floor": math.floor, "ceil": math.ceil, "round": round, "min": min, "max": max,
    "abs": abs, "sqrt": math.sqrt, "int": int, "float": float,
}  # fmt: skip
_OPERATORS: dict[type, Callable[..., float]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow, ast.USub: operator.neg, ast.UAdd: operator.pos,
}  # fmt: skip


def evaluate_expression(text: str, names: dict[str, float]) -> float:
    """A ComfyMathExpression's arithmetic over its named inputs (numbers, + - * / // % **,
    parentheses and `_FUNCTIONS`); ValueError for anything else (never Python's eval)."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"not an expression ({exc.msg})") from None

    def value(item: ast.AST) -> float:
        if isinstance(item, ast.Constant) and type(item.value) in (int, float):
            return item.value
        if isinstance(item, ast.Name):
            if item.id not in names:
                raise ValueError(f"{item.id} is not an input it has")
            return names[item.id]
        if isinstance(item, ast.BinOp) and type(item.op) in _OPERATORS:
            return _OPERATORS[type(item.op)](value(item.left), value(item.right))
        if isinstance(item, ast.UnaryOp) and type(item.op) in _OPERATORS:
            return _OPERATORS[type(item.op)](value(item.operand))
        if (
            isinstance(item, ast.Call)
            and isinstance(item.func, ast.Name)
            and item.func.id in _FUNCTIONS
            and not item.keywords
        ):
            return _FUNCTIONS[item.func.id](*(value(a) for a in item.args))
        raise ValueError(f"{ast.unparse(item)}: paradit reads numbers, + - * / // % ** and "
                         f"{', '.join(_FUNCTIONS)}")  # fmt: skip

    try:
        return value(tree.body)
    except (ArithmeticError, TypeError) as exc:
        raise ValueError(str(exc)) from None


PREPARED_READERS = (
    "ResizeImageMaskNode",
    "LTXVPreprocess",
    "LTXVImgToVideoInplace",
    "GetImageSize",
)
"""The nodes that read an image ResizeImageMaskNode or LTXVPreprocess prepared (`resize.py`,
`ltx_nodes.py`: the image is made so when the job is sent for LTX-2's image to video;
GetImageSize reads its size only)."""

HANDLERS: dict[str, Handler] = {
    "UNETLoader": _unet,
    "UnetLoaderGGUF": _unet,
    "CheckpointLoaderSimple": _checkpoint,
    "CLIPLoader": _clip_loader,
    "DualCLIPLoader": _clip_loader,
    "VAELoader": _vae_loader,
    "CLIPVisionLoader": _clip_vision_loader,
    "LoraLoaderModelOnly": _lora,
    "ModelSamplingSD3": _model_sampling,
    "ModelSamplingAuraFlow": _model_sampling,
    "ModelSamplingFlux": _model_sampling,
    "CFGNorm": _cfg_norm,
    "FluxKontextImageScale": edit_nodes.image_scale,
    "VAEEncode": edit_nodes.vae_encode,
    "TextEncodeQwenImageEditPlus": edit_nodes.text_encode_edit_plus,
    "TextEncodeQwenImageEdit": edit_nodes.text_encode_edit,
    "TextEncodeQwenImage21": qwen21_nodes.text_encode,
    "QwenImage21Cache": qwen21_nodes.cache,
    "FluxKontextMultiReferenceLatentMethod": edit_nodes.reference_method,
    "ImageScaleToTotalPixels": reference_nodes.image_scale_to_total_pixels,
    "ReferenceLatent": reference_nodes.reference_latent,
    "CLIPTextEncode": _text_encode,
    "CLIPTextEncodeFlux": _text_encode_flux,
    "ConditioningZeroOut": _zero_out,
    "FluxGuidance": _flux_guidance,
    "EmptyLatentImage": _empty_latent,
    "EmptySD3LatentImage": _empty_latent,
    "EmptyHunyuanLatentVideo": _empty_latent,
    "EmptyHunyuanVideo15Latent": _empty_latent,
    "EmptyFlux2LatentImage": _empty_flux2_latent,
    "Flux2Scheduler": _flux2_scheduler,
    "Wan22ImageToVideoLatent": _empty_latent,
    "WanImageToVideo": _wan_image_to_video,
    "HunyuanVideo15ImageToVideo": _hunyuan15_image_to_video,
    "CLIPVisionEncode": _clip_vision_encode,
    "LoadImage": _load_image,
    "KSampler": _ksampler,
    "KSamplerAdvanced": _ksampler,
    "SamplerCustomAdvanced": _sampler_custom_advanced,
    "RandomNoise": _random_noise,
    "CFGGuider": _guider,
    "BasicGuider": _guider,
    "KSamplerSelect": _sampler_select,
    "BasicScheduler": _basic_scheduler,
    "LTXAVTextEncoderLoader": _ltxav_text_encoder,
    "LTXVAudioVAELoader": _ltxv_audio_vae_loader,
    "LTXVConditioning": _ltxv_conditioning,
    "EmptyLTXVLatentVideo": _empty_ltxv_video,
    "LTXVEmptyLatentAudio": _ltxv_empty_audio,
    "LTXVConcatAVLatent": _ltxv_concat,
    "LTXVScheduler": _ltxv_scheduler,
    "LTXVSeparateAVLatent": _ltxv_separate,
    "LTXVAudioVAEDecode": _ltxv_audio_decode,
    "LatentUpscaleModelLoader": two_stage.upscale_model_loader,
    "LTXVLatentUpsampler": two_stage.latent_upsampler,
    "LTXVCropGuides": two_stage.crop_guides,
    "LTXVImgToVideoInplace": ltx_nodes.img_to_video_inplace,
    "LTXVPreprocess": ltx_nodes.preprocess,
    "ResizeImageMaskNode": resize.resize_image_mask,
    "LTXVDualCFGGuider": ltx_nodes.dual_cfg_guider,
    "ManualSigmas": two_stage.manual_sigmas,
    "EmptyImage": two_stage.empty_image,
    "ImageScaleBy": two_stage.image_scale_by,
    "GetImageSize": two_stage.get_image_size,
    "MiniMaxH3ImageToVideo": h3_nodes.image_to_video,
    "EmptyMiniMaxH3LatentAV": h3_nodes.empty_latent_av,
    "MiniMaxH3SigmaShift": h3_nodes.sigma_shift,
    "VAEDecodeAudio": h3_nodes.decode_audio,
    "VAEDecode": _vae_decode,
    "VAEDecodeTiled": _vae_decode,
    "CreateVideo": _create_video,
    "SaveVideo": _save,
    "SaveImage": _save,
    "SaveImageAdvanced": _save,
    "PreviewImage": _save,
    "PrimitiveInt": _primitive,
    "PrimitiveFloat": _primitive,
    "PrimitiveBoolean": _primitive,
    "PrimitiveString": _primitive,
    "PrimitiveStringMultiline": _primitive,
    "ComfySwitchNode": _switch_node,
    "PreviewAny": _preview_any,
    "ImageCompare": _viewer,
    "ComfyMathExpression": _math_expression,
    "ResolutionSelector": _resolution_selector,
}
OUTPUT_NODES = ("SaveVideo", "SaveImage", "PreviewImage", "SaveImageAdvanced")

if set(HANDLERS) != set(SPECS):  # one table each, kept together
    raise RuntimeError(f"workflow handlers and specs differ: {set(HANDLERS) ^ set(SPECS)}")


def _quote(text: str, limit: int = 60) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[: limit - 3] + "...")
