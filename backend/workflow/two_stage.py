"""LTX-2's two-stage graphs (ComfyUI's LTX-2 templates) as paradit's two-stage job (the
request's `upscale`, backend/upscale.py). Torch-free.

ComfyUI's graph: stage 1 samples the joined video and audio latent at a reduced size
(`EmptyImage` -> `ImageScaleBy` -> `GetImageSize` give it), `LTXVSeparateAVLatent` splits it,
`LTXVCropGuides` passes it on (it only removes keyframe guides, which no graph paradit maps
adds), `LTXVLatentUpsampler` runs the video latent through the upscaler of
`LatentUpscaleModelLoader` (un-normalised with the VAE's per-channel statistics, upsampled,
normalised again: what diffusers' `LTX2LatentUpsamplePipeline` does to the pipeline's
de-normalised latent output, which paradit's stage 2 normalises again), `LTXVConcatAVLatent`
joins it to stage 1's audio latent, and a second `SamplerCustomAdvanced` noises both to its
first level (sigma x noise + (1 - sigma) x latent: diffusers' `noise_scale`) and samples them
over `ManualSigmas`' levels with its own sampler, guider and LoRAs.

The handlers take the `handlers.Mapper` as `m` (not imported: it imports this module).
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from .graph import Node, WorkflowError
from .values import (
    AudioLatent,
    Conditioning,
    Guider,
    Image,
    Noise,
    Refusal,
    Sampled,
    SampledAudio,
    SamplerName,
    Sigmas,
    SizedImage,
    Stage,
    Upscale,
    Upscaled,
    UpscaledAV,
    Upscaler,
    Vae,
)

DENOISED_LAST = ("euler", "euler_ancestral", "gradient_estimation")
"""Samplers whose last step, to level 0, leaves the model's denoised latent itself (ComfyUI's
euler_ancestral and gradient_estimation set x = denoised there; euler's x + (0 - sigma)
(x - denoised) / sigma is it up to rounding): after them SamplerCustomAdvanced's
denoised_output is its output."""

_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


# -- sizes: EmptyImage -> ImageScaleBy -> GetImageSize ----------------------------------------


def empty_image(m: Any, node: Node) -> tuple[Any, ...]:
    width, height = m.widget(node, "width", int), m.widget(node, "height", int)
    m.say(node, f"{width}x{height} (its size only)")
    return (SizedImage(width, height, node),)


def image_scale_by(m: Any, node: Node) -> tuple[Any, ...]:
    image = m.input(node, "image", SizedImage)
    scale = m.widget(node, "scale_by", float)
    # ComfyUI's ImageScaleBy: each side round(side x scale_by) (Python's round), then resized
    width, height = round(image.width * scale), round(image.height * scale)
    if width < 1 or height < 1:
        raise WorkflowError(node, f"scale_by {scale:g} leaves no pixels ({width}x{height})")
    m.say(node, f"{image.width}x{image.height} x {scale:g} = {width}x{height}")
    return (SizedImage(width, height, node),)


def get_image_size(m: Any, node: Node) -> tuple[Any, ...]:
    image = m.input(node, "image", (SizedImage, Image))
    width, height = (image.width, image.height) if isinstance(image, SizedImage) else image.size()
    m.say(node, f"{width}x{height}")
    return (width, height, 1)


# -- the upscaler -----------------------------------------------------------------------------


def upscaler_factor(metadata: dict[str, Any]) -> int:
    """The spatial factor of an LTX latent upscaler from its file's metadata `config`, which
    ComfyUI's LatentUpscaleModelLoader builds the model from (Lightricks' LatentUpsampler
    config: `spatial_upsample`, `temporal_upsample`, `rational_resampler`, `spatial_scale`,
    2.0 where absent; a plain pixel shuffle doubles); ValueError for one paradit's two-stage
    job does not take (temporal, or not a whole factor of at least 2)."""
    text = metadata.get("config")
    if not isinstance(text, str):
        raise ValueError(
            "its metadata holds no config (ComfyUI's LatentUpscaleModelLoader builds the LTX "
            "upscaler from it): not an LTX latent upscaler file"
        )
    try:
        config = json.loads(text)
    except json.JSONDecodeError:
        raise ValueError("its metadata's config is not JSON") from None
    if not isinstance(config, dict):
        raise ValueError("its metadata's config is not an object")
    if config.get("temporal_upsample", False) or not config.get("spatial_upsample", True):
        raise ValueError(
            "a temporal latent upscaler (it changes the frame count): paradit's two-stage job "
            "takes a spatial one (ltx-2-spatial-upscaler-x2)"
        )
    scale = config.get("spatial_scale", 2.0) if config.get("rational_resampler", False) else 2.0
    if not isinstance(scale, (int, float)) or scale != int(scale) or scale < 2:
        raise ValueError(
            f"spatial_scale {scale}: paradit's two-stage job takes whole factors of 2 or more"
        )
    return int(scale)


def upscale_model_loader(m: Any, node: Node) -> tuple[Any, ...]:
    from ..models.single_file.header import read_header

    path = m.model_file(node, "latent_upscale_models", "model_name")
    try:
        factor = upscaler_factor(read_header(path).metadata or {})
    except ValueError as exc:
        raise WorkflowError(node, f"{path.name}: {exc}") from None
    m.say(node, f"{m.relative(path)} -> --upscaler (x{factor}: upscale.factor)")
    return (Upscaler(path, node, factor),)


def crop_guides(m: Any, node: Node) -> tuple[Any, ...]:
    positive = m.input(node, "positive", Conditioning)
    negative = m.input(node, "negative", Conditioning)
    latent = m.input(node, "latent", Sampled)
    m.say(node, "no keyframe guides to crop: its prompts and latent as they are")
    return (positive, negative, latent)


def latent_upsampler(m: Any, node: Node) -> tuple[Any, ...]:
    sampled = m.input(node, "samples", Sampled)
    upscaler = m.input(node, "upscale_model", Upscaler)
    vae = m.input(node, "vae", Vae)
    if not sampled.separated or sampled.latent.audio is None or not sampled.latent.ltxv:
        source = sampled.stages[-1].node
        raise WorkflowError(
            node,
            f"samples from node {source.id} ({source.type}): paradit upscales the video latent "
            "LTXVSeparateAVLatent splits from LTX-2's sampled audio-video latent",
        )
    if sampled.upscale is not None:
        raise WorkflowError(node, "a second upscale: paradit runs one (two stages)")
    model = sampled.stages[0].model
    separate = not model.checkpoint and vae.file is not None  # checked against the decode's
    if not separate and (vae.checkpoint is None or vae.checkpoint != model.files[0]):
        raise WorkflowError(
            node,
            "its vae is not the model's checkpoint's: ComfyUI normalises the latent with that "
            "VAE's statistics, paradit with the model's",
        )
    m.say(node, f"x{upscaler.factor} through the upscaler (the VAE's statistics around it)")
    return (Upscaled(sampled, upscaler, node, vae if separate else None),)


def concat_upscaled(m: Any, node: Node, video: Upscaled) -> tuple[Any, ...]:
    """LTXVConcatAVLatent of an upscaled video latent: stage 1's own audio latent with it."""
    audio = m.input(node, "audio_latent", (SampledAudio, AudioLatent))
    if not isinstance(audio, SampledAudio) or audio.sampled.stages != video.sampled.stages:
        raise WorkflowError(
            node,
            "audio_latent must be the audio sampled with the upscaled video (the "
            "LTXVSeparateAVLatent of its first stage): paradit's second stage samples both on",
        )
    m.say(node, "the upscaled video and the first stage's audio, joined for the second stage")
    return (UpscaledAV(video, node),)


# -- the levels -------------------------------------------------------------------------------


def manual_sigmas(m: Any, node: Node) -> tuple[Any, ...]:
    text = m.widget(node, "sigmas", str)
    found = _NUMBER.findall(text)
    if not found or _NUMBER.sub("", text).replace(",", "").strip():
        raise WorkflowError(node, f"sigmas {text!r}: numbers separated by commas")
    levels = tuple(float(s) for s in found)
    if len(levels) < 2 or levels[-1] != 0.0:
        raise WorkflowError(
            node,
            f"sigmas {text!r}: the last must be 0 (the sampler returns the noise left at the "
            "last level otherwise; paradit's stages run to the end)",
        )
    if any(b >= a for a, b in zip(levels, levels[1:], strict=False)) or levels[0] > 1:
        raise WorkflowError(node, f"sigmas {text!r}: levels from at most 1, strictly falling")
    shown = ", ".join(f"{s:g}" for s in levels)
    m.say(node, f"[{shown}] -> sigmas")
    return (Sigmas(None, "manual", len(levels) - 1, node, levels=levels),)


def first_stage_levels(sigmas: Sigmas) -> None:
    """A first stage's explicit levels start at 1: the job starts from pure noise (ComfyUI
    would scale an empty latent's noise by the first level)."""
    if sigmas.levels is not None and sigmas.levels[0] != 1.0:
        raise WorkflowError(
            sigmas.node,
            f"a first stage's levels must start at 1 (pure noise, as paradit starts every job), "
            f"got {sigmas.levels[0]:g}",
        )


# -- the second stage -------------------------------------------------------------------------


def second_stage(
    m: Any,
    node: Node,
    latent: UpscaledAV,
    noise: Noise,
    guider: Guider,
    sampler: SamplerName,
    sigmas: Sigmas,
) -> Sampled:
    """SamplerCustomAdvanced on an upscaled latent: the first stage's Sampled with its
    `upscale` (the stage's settings), as paradit's two-stage job runs them."""
    upscaled = latent.upscaled
    first = upscaled.sampled.stages[0]
    start = upscaled.sampled.latent.image
    if upscaled.image != start:
        where = upscaled.image.crf_node or upscaled.node if upscaled.image else upscaled.node
        raise WorkflowError(
            node,
            f"the upscaled latent from node {upscaled.node.id} "
            + ("has no start image written into it" if upscaled.image is None else
               f"has another image than the first stage's (through node {where.id})")
            + ": paradit's two-stage image to video writes the first stage's start image, "
            "prepared at the final size, into stage 2's first frame (LTXVImgToVideoInplace "
            "after the upscaler, as ComfyUI's templates do)",
        )  # fmt: skip
    if sigmas.levels is None:
        raise WorkflowError(
            sigmas.node,
            "a second stage on a scheduler's levels: paradit's second stage runs explicit "
            "levels (ManualSigmas, e.g. 0.909375, 0.725, 0.421875, 0.0)",
        )
    if guider.model.files != first.model.files:
        raise WorkflowError(
            guider.node, "another model than the first stage's: paradit runs one model per job"
        )
    if guider.model.shift_node is not None:
        raise WorkflowError(
            guider.model.shift_node,
            "a ModelSampling node on the second stage's model beside its levels: in ComfyUI "
            "it replaces the model's own sampling, which paradit keeps; remove it",
        )
    for ours, theirs in ((guider.positive, first.positive), (guider.negative, first.negative)):
        if (ours.text, ours.clip, ours.frame_rate) != (theirs.text, theirs.clip, theirs.frame_rate):
            raise WorkflowError(
                guider.node,
                "other prompts than the first stage's (their text, encoder or LTXVConditioning "
                "frame rate): paradit runs one prompt through both stages",
            )
    if guider.audio_cfg is not None:
        raise WorkflowError(
            guider.node,
            "two scales (video and audio) in the second stage: paradit's upscale guides both "
            "streams at one (upscale.guidance_scale); give both the same value",
        )
    stage = Stage(
        node,
        guider.model,
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
    )
    m.say(
        noise.node,
        f"seed {noise.seed}: not mapped (paradit's stage 2 draws its noise from the job's "
        "generator after stage 1's, as diffusers' two-stage example does)",
    )
    upscale = Upscale(upscaled.upscaler, upscaled.node, stage, upscaled.vae)
    return dataclasses.replace(upscaled.sampled, separated=False, upscale=upscale)


def denoised_output(node: Node, sampled: Sampled, sampler: str) -> Sampled | Refusal:
    """SamplerCustomAdvanced's denoised_output: its output where the last step returns the
    denoised latent (`DENOISED_LAST`), else a refusal for the node that reads it."""
    if sampler in DENOISED_LAST:
        return sampled
    return Refusal(
        node,
        f"its denoised_output after {sampler}: paradit's job gives the sampler's output, "
        f"which is the last denoised latent only after {', '.join(DENOISED_LAST)}; read its "
        "output",
    )


def upscale_request(sampled: Sampled) -> dict[str, Any]:
    """The request's `upscale` for a Sampled with a second stage."""
    upscale = sampled.upscale
    stage = upscale.stage
    return {
        "factor": upscale.upscaler.factor,
        "sigmas": list(stage.sigmas[:-1]),  # without the final 0, as UpscaleSettings keeps them
        "sampler": stage.sampler,
        "guidance_scale": stage.cfg,
        "loras": [{"name": name, "strength": s} for name, s in stage.model.loras],
    }
