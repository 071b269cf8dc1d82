"""A workflow graph as a paradit job: the request, the serve settings, one line per node.

The graph is evaluated from its one output node back, as ComfyUI runs it; each node type's
handler (handlers.py, one per `nodes.NODE_SPECS` entry) turns its inputs into a value paradit
knows: a `Model` (its files, LoRAs and shift), a `Clip`, a `Vae`, a `Conditioning` (a prompt),
a `Latent` (a size), `Sampled` (the sampler's settings, one stage or Wan 2.2 A14B's two),
and so on (values.py). `_job` then reads the job off the output's value. A node, a value or a
combination paradit would run differently from ComfyUI is refused (`WorkflowError` naming the
node): an unknown node, a sampler or scheduler paradit lacks, a missing file, two models in
one graph, a denoise below 1, a batch above 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..sampling.names import CFG_NORM, CFG_PLAIN
from .defaults import default_for
from .edit_nodes import edit_request
from .files import ComfyFolders
from .graph import Graph, Link, Node, WorkflowError, unknown_node
from .handlers import LTX2_FRAME_RATE, OUTPUT_NODES, Mapper, ltx2_audio_latents
from .nodes import REFUSED, SPECS
from .two_stage import upscale_request
from .values import Clip, Conditioning, Decoded, Image, Latent, Model, Sampled, Stage, WorkflowPlan

# -- the job ----------------------------------------------------------------------------------


def map_workflow(graph: Graph, folders: ComfyFolders) -> WorkflowPlan:
    """The request and serve settings `graph` maps to; WorkflowError naming the node that
    cannot be mapped faithfully."""
    _refuse_unknown_ends(graph)
    outputs = [n for n in graph.nodes.values() if n.type in OUTPUT_NODES]
    if not outputs:
        raise WorkflowError(
            None, f"{Path(graph.source).name}: no output node ({', '.join(OUTPUT_NODES)})"
        )
    if len(outputs) > 1:
        raise WorkflowError(
            outputs[1],
            f"a second output node (node {outputs[0].id} is the first): a paradit job has one "
            "output; keep one save node",
        )
    mapper = Mapper(graph, folders)
    (decoded,) = mapper.evaluate(outputs[0])
    request, serve, images = _job(mapper, decoded)
    workflow = {
        "file": graph.source,
        "sha256": graph.sha256,
        "format": graph.format,
        "comfyui_models": str(folders.models),
    }
    lines = tuple(mapper.lines.values())
    sampler = decoded.sampled.stages[0].node
    upscale = decoded.sampled.upscale
    second = upscale.stage.node if upscale is not None else None
    positive = decoded.sampled.stages[0].positive
    text_guidance = None
    if positive.text_2 is not None:
        text_guidance = (positive.guidance_node, positive.guidance)
    own = decoded.sampled.stages[0].own_levels
    edit = positive.edit
    reference = edit.node if edit is not None and edit.reference_latent else None
    steps_node = decoded.sampled.stages[0].steps_node or sampler
    start = decoded.sampled.latent.image
    resized = {}
    if start is not None and start.crf is not None:  # made as LTXVPreprocess reads it
        resized = {str(start.file): start.resizes}
    return WorkflowPlan(
        request,
        serve,
        lines,
        workflow,
        mapper.loaders,
        sampler,
        second,
        own,
        text_guidance,
        images=images,
        steps_node=steps_node,
        reference=reference,
        resized=resized,
    )


def _refuse_unknown_ends(graph: Graph) -> None:
    """ComfyUI runs its output nodes and what they need, nothing else: a node paradit does
    not know is refused where the output needs it (when evaluated), or where nothing reads
    its outputs (it may be an output node of its own, which ComfyUI would run). A core node
    paradit knows it cannot map (`nodes.REFUSED`: none an output node) is refused only where
    the output needs it."""
    read = {v.node for n in graph.nodes.values() for v in n.inputs.values() if isinstance(v, Link)}
    for node in graph.nodes.values():
        if node.id not in read and node.type not in SPECS and node.type not in REFUSED:
            raise unknown_node(node)


def _job(m: Mapper, decoded: Decoded) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    sampled = decoded.sampled
    first = _stages(sampled)
    last = sampled.stages[-1]
    positive, negative = first.positive, first.negative
    for stage in sampled.stages[1:]:
        if (stage.positive, stage.negative) != (positive, negative):
            raise WorkflowError(
                stage.node, "other prompts than the first sampler's: paradit runs one prompt"
            )
    clip = positive.clip
    if clip is None:
        raise WorkflowError(first.node, "a zeroed positive conditioning: give it a prompt")
    if negative.clip is not None and negative.clip != clip:
        raise WorkflowError(
            first.node,
            f"its negative prompt is encoded by node {negative.clip.loader.id}, the positive by "
            f"node {clip.loader.id}: paradit encodes both with one text encoder",
        )
    latent = sampled.latent
    request: dict[str, Any] = {
        "prompt": positive.text,
        "negative_prompt": negative.text,
        "width": latent.width,
        "height": latent.height,
        "num_frames": latent.frames,
        "num_inference_steps": first.steps,
        "guidance_scale": first.cfg,
        "seed": first.seed,
        "sampler": first.sampler,
        "scheduler": first.scheduler,
    }
    _second_prompt(request, positive, negative, first)
    image = _start_image(first, latent)
    if image is not None:
        request["image"] = str(image.file)
        if latent.image_prep is not None:
            request["image_prep"] = latent.image_prep
    if image is not None and image.crf is not None:  # LTXVPreprocess -> LTXVImgToVideoInplace
        request.update(image_prep="comfyui", image_crf=image.crf)
    if image is not None and latent.image_strength != 1.0:  # LTXVImgToVideoInplace below 1
        request["image_strength"] = latent.image_strength
    edit = edit_request(positive, negative, first.node, (latent.width, latent.height))
    request.update(edit.get("fields", {}))
    guidance = _guidance(positive, first)
    if guidance is not None:
        request["guidance_scale"] = guidance
    if first.audio_cfg is not None:  # LTXVDualCFGGuider at two scales
        request["guidance_terms"] = {"audio_guidance_scale": first.audio_cfg}
    models = [first.model] + ([last.model] if last is not first else [])
    if first.own_levels is not None:  # the model's own scheduler: no sampler, no shift
        del request["sampler"], request["scheduler"]
    elif first.sigmas is not None:  # the levels themselves: no scheduler, no shift
        del request["scheduler"]
        request["sigmas"] = list(first.sigmas)
    elif _shift(models, first) is not None:
        request["shift"] = _shift(models, first)
        if first.model.flow_levels is not None:  # ModelSamplingFlux's table
            request["flow_levels"] = first.model.flow_levels
    _audio_video(decoded, positive, negative, first)
    if latent.audio is not None and latent.audio.frame_rate != LTX2_FRAME_RATE:
        request["fps"] = latent.audio.frame_rate
    request.update(_audio_length(latent))
    if len(sampled.stages) == 2:
        request["guidance_scale_low"] = last.cfg
        request["switch_step"] = first.end
    request.update(_cfg_norm(models, request["guidance_scale"]))
    if decoded.decode_tiles is not None:  # VAEDecodeTiled on LTX-2.5's diffusion decoder
        request["decode_tiles"] = dict(decoded.decode_tiles)
    loras = _loras(models)
    if loras:
        request["loras"] = loras
    serve = _serve(m, models, clip, decoded, latent)
    if sampled.upscale is not None and sampled.upscale.vae not in (None, decoded.vae):
        raise WorkflowError(
            sampled.upscale.node,
            f"its vae is not the decode's (node {decoded.node.id}): ComfyUI normalises the "
            "latent with that VAE's statistics, paradit with the model's VAE",
        )
    if sampled.upscale is not None:  # the final size: the first stage's times the factor
        upscale = request["upscale"] = upscale_request(sampled)
        request["width"] = latent.width * upscale["factor"]
        request["height"] = latent.height * upscale["factor"]
        serve["upscaler"] = str(sampled.upscale.upscaler.file)
        if upscale["loras"] and not serve["lora_dirs"]:
            serve["lora_dirs"] = [str(m.folders.models / "loras")]
    return request, serve, edit.get("images", {})


def _stages(sampled: Sampled) -> Stage:
    """The first stage, after checking the chain runs as one paradit job: one sampler node, or
    Wan 2.2 A14B's pair (the high-noise expert from step 0 to the switch, the low-noise one
    from there to the end)."""
    stages = sampled.stages
    first = stages[0]
    if len(stages) > 2:
        raise WorkflowError(
            stages[2].node, "a third sampler: paradit runs one or two (Wan 2.2 A14B)"
        )
    if first.start != 0 or not first.add_noise:
        raise WorkflowError(
            first.node, "the first sampler must add noise and start at step 0 (a job starts from "
            "pure noise)"
        )  # fmt: skip
    if len(stages) == 1:
        if first.end < first.steps or first.leftover:
            raise WorkflowError(
                first.node,
                f"it stops at step {first.end} of {first.steps} with noise left and no second "
                "sampler takes over",
            )
        return first
    second = stages[1]
    if not first.leftover or first.end >= first.steps:
        raise WorkflowError(
            first.node,
            "two samplers: the first must stop before the last step and return with leftover "
            "noise (Wan 2.2 A14B's high-noise expert)",
        )
    if second.add_noise or second.leftover or second.end < second.steps:
        raise WorkflowError(
            second.node,
            "the second sampler must add no noise, return none and run to the last step (Wan "
            "2.2 A14B's low-noise expert)",
        )
    if second.start != first.end:
        raise WorkflowError(
            second.node,
            f"it starts at step {second.start} where the first stops at {first.end}: paradit "
            "switches experts at one step",
        )
    for name in ("steps", "sampler", "scheduler"):
        if getattr(second, name) != getattr(first, name):
            raise WorkflowError(
                second.node,
                f"{name} {getattr(second, name)} where the first sampler has "
                f"{getattr(first, name)}: paradit runs both experts on one schedule",
            )
    if second.model.files == first.model.files:
        raise WorkflowError(
            second.node,
            "both samplers run one model: paradit splits steps only between Wan 2.2 A14B's "
            "two experts",
        )
    return first


def _audio_video(
    decoded: Decoded, positive: Conditioning, negative: Conditioning, first: Stage
) -> None:
    """LTX-2's audio-video graph: its frame rate in both prompts, its audio track decoded
    into the video, the audio VAE the checkpoint's own. MiniMax H3's: its audio decoded into
    the video (its VAE a `--vae` file: `_serve`)."""
    latent = decoded.sampled.latent
    if latent.joint_audio and decoded.audio is None:
        raise WorkflowError(
            decoded.node,
            "MiniMax H3's audio is sampled and never decoded: paradit writes its audio track "
            "into video.mp4; decode it with VAEDecodeAudio into CreateVideo's audio",
        )
    if latent.ltxv and latent.audio is None:
        raise WorkflowError(
            first.node,
            f"the video latent of node {latent.node.id} without an audio latent: paradit runs "
            "LTX-2 with its audio track; join an LTXVEmptyLatentAudio with LTXVConcatAVLatent",
        )
    if latent.audio is None:
        return
    for cond in (positive, negative):
        if cond.frame_rate is None:
            raise WorkflowError(
                first.node,
                "a prompt without LTXVConditioning's frame rate: ComfyUI then runs LTX-2 at "
                "its model's default rate, paradit at 24; add LTXVConditioning (24)",
            )
        if cond.frame_rate != latent.audio.frame_rate:
            raise WorkflowError(
                latent.audio.node,
                f"frame_rate {latent.audio.frame_rate:g} where the prompt's LTXVConditioning "
                f"says {cond.frame_rate:g}: paradit runs the video and its audio at one rate "
                "(the request's fps); give both the same",
            )
    if decoded.audio is None:
        raise WorkflowError(
            decoded.node,
            "the audio latent is sampled and never decoded: paradit writes LTX-2's audio "
            "track into video.mp4; decode it with LTXVAudioVAEDecode into CreateVideo",
        )
    checkpoint = first.model.files[0] if first.model.checkpoint else None
    vae = latent.audio.vae
    if checkpoint is not None and vae.file != checkpoint:
        raise WorkflowError(
            vae.loader,
            f"{vae.file.name} is not the model's checkpoint: paradit runs the audio VAE and "
            "vocoder of the checkpoint it loads",
        )


def _audio_length(latent: Latent) -> dict[str, int]:
    """LTX-2's audio latent as long as ComfyUI makes it: `audio_latent_frames` where its count
    (LTXVEmptyLatentAudio: ceil of the duration's) differs from the pipeline's for the
    video's frames (round), else nothing (the pipeline's own)."""
    audio = latent.audio
    if audio is None:
        return {}
    comfy, ours = ltx2_audio_latents(audio.frames, audio.frame_rate, latent.frames)
    return {} if comfy == ours else {"audio_latent_frames": comfy}


def _start_image(first: Stage, latent: Latent) -> Image | None:
    starts = {first.positive.start, first.negative.start}
    if latent.in_conditioning:
        if starts != {latent}:
            raise WorkflowError(
                first.node,
                f"the latent of node {latent.node.id} ({latent.node.type}) without its "
                "positive and negative outputs: connect all three to the sampler",
            )
    elif starts != {None}:
        start = next(s for s in starts if s is not None)
        raise WorkflowError(
            first.node,
            f"conditioning from node {start.node.id} ({start.node.type}) with another latent: "
            "connect its latent output to the sampler",
        )
    return latent.image


def _second_prompt(
    request: dict[str, Any], positive: Conditioning, negative: Conditioning, first: Stage
) -> None:
    """CLIPTextEncodeFlux's t5xxl text, where it is not its clip_l one: `prompt_2`. paradit
    gives the negative prompt to both encoders, so a guided negative needs one text."""
    if positive.text_2 is not None and positive.text_2 != positive.text:
        request["prompt_2"] = positive.text_2
    if negative.text_2 not in (None, negative.text) and first.cfg > 1:
        raise WorkflowError(
            first.node,
            f"a negative prompt with two texts (node {negative.guidance_node.id}): paradit "
            "encodes the negative prompt with both encoders; give clip_l and t5xxl one text",
        )


def _guidance(positive: Conditioning, first: Stage) -> float | None:
    if positive.guidance is None or positive.text_2 is not None:
        return None  # CLIPTextEncodeFlux's: check_files applies it where the DiT embeds it
    if first.cfg != 1.0:
        raise WorkflowError(
            first.node,
            f"cfg {first.cfg:g} with FluxGuidance (node {positive.guidance_node.id}): paradit "
            "runs Flux dev with its distilled guidance only; set cfg to 1",
        )
    return positive.guidance


def _shift(models: list[Model], first: Stage) -> float | None:
    """The shift the graph's ModelSampling node sets; None where none does (ComfyUI then runs
    the architecture's default: `check_files` fills it in from the family's data)."""
    shifts = {model.shift for model in models}
    if len(shifts) > 1:
        node = models[1].shift_node or models[0].shift_node
        shown = ["none" if m.shift is None else format(m.shift, "g") for m in models]
        raise WorkflowError(
            node,
            f"shift {shown[1]} where the high-noise expert's is {shown[0]}: paradit runs both "
            "experts on one schedule",
        )
    return shifts.pop()


def _cfg_norm(models: list[Model], cfg: float) -> dict[str, Any]:
    """CFGNorm on the model: `cfg_mode` norm at its strength where the sampler guides. At cfg
    1 ComfyUI's node scales the one branch's denoised image by |c| / (|c| + 1e-8) x strength:
    at strength 1 that is the branch as it is (to 1e-8 of its norm), other strengths are
    refused."""
    strengths = {model.cfg_norm for model in models}
    if len(strengths) > 1:
        node = next(m.cfg_norm_node or m.loader for m in models)
        raise WorkflowError(node, "CFGNorm on one expert and not the other (or another strength)")
    (strength,) = strengths
    if strength is None:
        return {}
    if cfg > 1:
        return {"cfg_mode": CFG_NORM, "cfg_norm": strength}
    if strength != 1:
        raise WorkflowError(
            models[0].cfg_norm_node,
            f"strength {strength:g} at cfg {cfg:g}: ComfyUI scales the one branch's denoised "
            "image by it; paradit applies CFGNorm only where cfg is above 1 (strength 1 "
            "changes nothing there)",
        )
    return {}


def _loras(models: list[Model]) -> list[dict[str, Any]]:
    if len(models) == 1:
        return [{"name": name, "strength": s} for name, s in models[0].loras]
    high, low = (dict(model.loras) for model in models)
    for model in models:
        names = [name for name, _ in model.loras]
        if len(set(names)) != len(names):
            raise WorkflowError(model.loader, "one LoRA twice on one expert")
    order = [name for name, _ in models[0].loras]
    order += [name for name, _ in models[1].loras if name not in high]
    return [{"name": n, "high": high.get(n, 0.0), "low": low.get(n, 0.0)} for n in order]


def _serve(
    m: Mapper, models: list[Model], clip: Clip, decoded: Decoded, latent: Latent
) -> dict[str, Any]:
    files = tuple(f for model in models for f in model.files)
    checkpoint = files[0] if models[0].checkpoint else None
    for part in (clip, decoded.vae):
        if part.checkpoint is not None and part.checkpoint != checkpoint:
            raise WorkflowError(
                part.loader,
                "a second model in one graph: its CLIP or VAE comes from another checkpoint "
                "than the model's",
            )
    if latent.vae is not None and latent.vae != decoded.vae:
        raise WorkflowError(latent.node, f"another VAE than the decode's (node {decoded.node.id})")
    serve: dict[str, Any] = {
        "model": ",".join(str(f) for f in files),
        "text_encoders": [str(f) for f in clip.files],
        "vaes": [str(decoded.vae.file)] if decoded.vae.file is not None else [],
        "image_encoders": [],
        "lora_dirs": [],
    }
    audio = latent.audio
    if audio is not None and audio.vae.file != checkpoint:  # LTX-2.5's audio VAE file: --vae
        serve["vaes"].append(str(audio.vae.file))
    if latent.joint_audio and decoded.audio is not None:  # H3's audio VAE: the second --vae
        serve["vaes"].append(str(decoded.audio.vae.file))
    if latent.clip_vision is not None:
        serve["image_encoders"] = [str(latent.clip_vision.vision.file)]
    if any(model.loras for model in models):
        serve["lora_dirs"] = [str(m.folders.models / "loras")]
    return serve


# -- the files' headers -----------------------------------------------------------------------


def check_files(plan: WorkflowPlan, graph: Graph) -> str:
    """Read the serve settings' files as `paradit serve` would (headers only) and check what
    the graph asks of them; returns the model's variant. WorkflowError naming the loader node
    of the file that does not fit (two different models, a FluxGuidance on a DiT without a
    guidance embedding, a Flux dev DiT without FluxGuidance...)."""
    from ..models.single_file.detect import recognise
    from ..models.single_file.load import SingleFiles, resolve

    def node_of(path: str) -> Node | None:
        return plan.loaders.get(path)

    models = plan.serve["model"].split(",")
    detections = [recognise(p).detection for p in models]
    if len(models) == 2 and detections[0].config != detections[1].config:
        raise WorkflowError(
            node_of(models[1]),
            f"two different models in one graph: {Path(models[0]).name} is "
            f"{detections[0].variant}, {Path(models[1]).name} is {detections[1].variant}; "
            "paradit runs one model per job (two files only as Wan 2.2 A14B's experts)",
        )
    files = SingleFiles.parse(
        plan.serve["model"],
        plan.serve["text_encoders"],
        plan.serve["vaes"],
        plan.serve["image_encoders"],
    )
    try:
        resolved = resolve(files)
    except ValueError as exc:  # a refused file (FileRefused) names its own loader node
        node = node_of(getattr(exc, "path", "")) or node_of(models[0])
        raise WorkflowError(node, str(exc)) from None
    embeds = bool(detections[0].config.get("guidance_embeds"))
    _second_prompt_fits(plan, resolved.pipeline_class, resolved.variant)
    _references_fit(plan, resolved)
    _own_levels_fit(plan, resolved)
    _fixed_levels_fit(plan, resolved, detections[0].variant)
    if plan.text_guidance is not None and embeds:
        _text_guidance(plan)
    guided = [graph.nodes[i] for i, t, _ in plan.lines if t == "FluxGuidance"]
    if guided and not embeds:
        raise WorkflowError(
            guided[0],
            f"{resolved.variant} has no guidance embedding (FluxGuidance changes nothing "
            "there in ComfyUI): remove it and set the sampler's cfg",
        )
    unguided = embeds and not guided and plan.text_guidance is None
    _comfy_defaults(plan, detections[0], resolved.variant, unguided)
    _plain_cfg(plan, graph, resolved.pipeline_class, resolved.variant)
    return resolved.variant


def _own_levels_fit(plan: WorkflowPlan, resolved: Any) -> None:
    """A job left to the model's own scheduler (Flux2Scheduler's levels): the model's family
    must run that node's levels as its own (`Family.own_levels`), and run the job's guidance
    as ComfyUI's sampler would (`Family.workflow_refusal`)."""
    from ..models.families import family_for

    family = family_for(resolved.pipeline_class)
    node = plan.own_levels
    if node is not None and node.type not in family.own_levels:
        raise WorkflowError(
            node,
            f"its levels are not {resolved.variant}'s own scheduler's: paradit runs "
            f"{node.type} only on a model whose pipeline makes the same levels",
        )
    reason = family.workflow_refusal(resolved.preset.name, plan.request)
    if reason:
        raise WorkflowError(plan.sampler, reason)


def _references_fit(plan: WorkflowPlan, resolved: Any) -> None:
    """ReferenceLatent's images run as the job's `image` and `images` only on a model whose
    pipeline prepares them as ComfyUI does (`Family.reference_latents`)."""
    from ..models.families import family_for

    if plan.reference is not None and not family_for(resolved.pipeline_class).reference_latents:
        raise WorkflowError(
            plan.reference,
            f"a reference image on {resolved.variant}: paradit runs ReferenceLatent only where "
            "the pipeline's own references are ComfyUI's (FLUX.2 [dev] and [klein]; not "
            "FLUX.2 [klein] KV's, cached after attending only to themselves, where ComfyUI "
            "without FluxKVCache recomputes them every step)",
        )


def _fixed_levels_fit(plan: WorkflowPlan, resolved: Any, dit_variant: str) -> None:
    """A model that runs only its own levels (`Family.fixed_levels` of the DiT's variant: the
    server's `limits.sigmas`) takes exactly that many steps: another count is refused at the
    node that gives it (ManualSigmas, a scheduler, the sampler), as the server would refuse
    the job."""
    from ..models.families import family_for

    levels = family_for(resolved.pipeline_class).fixed_levels(dit_variant)
    variant = resolved.variant
    steps = plan.request["num_inference_steps"]
    if not levels or steps == len(levels):
        return
    count = len(levels)
    given = f"{steps + 1} levels ({steps} steps)" if "sigmas" in plan.request else f"{steps} steps"
    raise WorkflowError(
        plan.steps_node,
        f"{given} on {variant}, which runs only its own {count}-step schedule (the server's "
        f"limits.sigmas; no other step count): give {count} steps"
        + (f" ({count + 1} levels ending in 0)" if "sigmas" in plan.request else ""),
    )


def _second_prompt_fits(plan: WorkflowPlan, pipeline_class: str, variant: str) -> None:
    from ..models.families import family_for

    if "prompt_2" in plan.request and not family_for(pipeline_class).second_prompt:
        raise WorkflowError(
            plan.text_guidance[0],
            f"two prompts (clip_l and t5xxl): {variant} has no second text encoder that takes "
            "its own prompt; give both one text",
        )


def _text_guidance(plan: WorkflowPlan) -> None:
    """CLIPTextEncodeFlux's guidance on a DiT that embeds it: the distilled guidance, as
    FluxGuidance's (ComfyUI runs the sampler's cfg besides, so it must be 1)."""
    node, guidance = plan.text_guidance
    if plan.request["guidance_scale"] != 1.0:
        raise WorkflowError(
            plan.sampler,
            f"cfg {plan.request['guidance_scale']:g} with CLIPTextEncodeFlux's guidance (node "
            f"{node.id}): paradit runs Flux dev with its distilled guidance only; set cfg to 1",
        )
    plan.request["guidance_scale"] = guidance


def _plain_cfg(plan: WorkflowPlan, graph: Graph, pipeline_class: str, variant: str) -> None:
    """ComfyUI's samplers guide plainly (uncond + cfg x (cond - uncond)); a model whose
    pipeline combines the branches otherwise (`Family.plain_cfg`: Qwen-Image rescales to the
    conditional norm) runs the graph's job with `cfg_mode` plain. A graph's CFGNorm (`cfg_mode`
    norm) needs a family that declares its packed pixels (`Family.cfg_norm_pixels`)."""
    from ..models.families import family_for

    family = family_for(pipeline_class)
    if plan.request.get("cfg_mode") == CFG_NORM:
        if not (family.plain_cfg and family.cfg_norm_pixels):
            node = next(graph.nodes[i] for i, t, _ in plan.lines if t == "CFGNorm")
            raise WorkflowError(
                node,
                f"paradit runs CFGNorm on Qwen-Image's and Qwen-Image-Edit's pipelines only "
                f"(their packed latent pixels known), not on {variant}'s",
            )
        return
    if plan.request["guidance_scale"] > 1 and family.plain_cfg:
        plan.request["cfg_mode"] = CFG_PLAIN


def _comfy_defaults(plan: WorkflowPlan, dit: Any, variant: str, unguided: bool) -> None:
    """What ComfyUI gives a graph that sets no shift (no ModelSampling node) or no distilled
    guidance (no FluxGuidance on a DiT that embeds it): the architecture's defaults, declared
    in its family's folder (defaults.py), written into the plan's request."""
    request = plan.request
    no_shift = "shift" not in request and "sigmas" not in request and plan.own_levels is None
    if not (no_shift or unguided):
        return
    default = default_for(dit.family, dit.config)
    if default is None or (unguided and default.guidance is None):
        what = "ModelSampling node sets its shift" if no_shift else "FluxGuidance node sets it"
        raise WorkflowError(
            plan.sampler,
            f"no {what}, and paradit knows no ComfyUI default for {variant} (its family's "
            "comfyui.json): add the node",
        )
    if no_shift:
        request["shift"] = default.static_shift
        if default.flow_levels is not None:
            request["flow_levels"] = default.flow_levels
    if unguided:
        if request["guidance_scale"] != 1.0:
            raise WorkflowError(
                plan.sampler,
                f"cfg {request['guidance_scale']:g} on {variant}, which embeds its guidance "
                f"({default.guidance:g} where no FluxGuidance sets it): ComfyUI then runs "
                "both, paradit the distilled guidance only; set cfg to 1",
            )
        request["guidance_scale"] = default.guidance
    plan.workflow["comfyui_defaults"] = default.describe()


def model_samplers(plan: WorkflowPlan) -> tuple[str, ...]:
    """The samplers the plan's model runs (its family's; () for only its own scheduler)."""
    from ..models.families import family_for
    from ..models.single_file.load import SingleFiles, resolve

    serve = plan.serve
    files = SingleFiles.parse(
        serve["model"], serve["text_encoders"], serve["vaes"], serve["image_encoders"]
    )
    return family_for(resolve(files).pipeline_class).samplers


def check_sampler(plan: WorkflowPlan, samplers: tuple[str, ...], runner: str) -> None:
    """WorkflowError naming the sampler node when `runner` (the model, a server) does not run
    the plan's sampler."""
    wanted = [(plan.sampler, plan.request["sampler"])] if "sampler" in plan.request else []
    if plan.upscale_sampler is not None:
        wanted.append((plan.upscale_sampler, plan.request["upscale"]["sampler"]))
    for node, sampler in wanted:
        if sampler in samplers:
            continue
        runs = f"runs {', '.join(samplers)}" if samplers else "runs its own scheduler only"
        raise WorkflowError(
            node,
            f"sampler {sampler}: {runner} {runs} (GET /v1/info limits.samplers), so the "
            "workflow cannot run as ComfyUI runs it",
        )
