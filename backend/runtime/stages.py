"""A two-stage job on one rank (the request's `upscale`, `backend/upscale.py`).

Stage 1 runs the job at width/factor x height/factor with its steps, guidance, sampling and
LoRAs; the family's `second_stage` takes stage 1's output through the latent upscaler (every
rank the same: it is replicated) and gives stage 2's inputs; stage 2 runs at the final size
over its own levels, with its sampler, guidance and LoRAs (switched in for stage 2 only); the
job's one generator goes on from stage 1 into stage 2's re-noising. The sequence plan begins
again for each stage's token count (`RankModel.denoise` calls `parallel.begin_job`), so CFG
parallel is simply inactive in a stage without guidance. Progress counts both stages' steps
and a cancel stops either at its next step boundary on every rank. The decode and the audio
are stage 2's (`run_on_rank`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch

from ..lora import JobLora
from ..lora.patch import Applied
from ..request import JobRequest
from ..sampling.names import DEFAULT
from ..upscale import UpscaleSettings


@dataclass
class StageCall:
    """One stage of a two-stage job (`stages.py`) as `RankModel.denoise` runs it."""

    generator: torch.Generator
    """The job's generator: stage 2 draws its re-noising where stage 1 stopped."""
    first_step: int
    """The steps of the stages before (its progress counts on from there)."""
    total: int
    """The steps of all the stages."""
    inputs: dict[str, Any] = field(default_factory=dict)
    """More pipeline arguments (stage 2: the upscaled latents, their noise, the levels)."""
    scheduler: Any = None
    """The scheduler the stage runs with in place of the pipeline's (None: the pipeline's)."""
    previews: bool = True
    """The leader's previews see this stage's latents (at the request's size)."""


def stage_requests(request: JobRequest, limits: Any) -> tuple[JobRequest, JobRequest]:
    """Stage 1's request (the reduced size, one stage) and stage 2's (the final size, its
    levels as its step count, its guidance, sampler and LoRAs, no sampling field of stage 1;
    `upscale` kept: the family's `second_stage` reads its factor and levels)."""
    settings = UpscaleSettings.parse(request.upscale)
    width, height = settings.stage_one_size(request.width, request.height, limits)
    first = request.replace(width=width, height=height, upscale=None)
    named = settings.sampler != DEFAULT
    second = request.replace(
        num_inference_steps=settings.num_steps,
        guidance_scale=settings.guidance_scale,
        guidance_scale_low=None,
        sampler=settings.sampler,
        scheduler=DEFAULT,
        shift=None,
        # a named sampler runs over the levels (FlowSampler); the model's own is given them
        sigmas=[*settings.sigmas, 0.0] if named else None,
        switch_step=None,
        recipe="",
        loras=request.upscale["loras"] or None,
        cache=None,
        guidance_terms=None,  # the job's terms guide stage 1 (stage 2 has its own guidance)
        audio_latent_frames=None,  # stage 1's audio latents carry their length into stage 2
        image_strength=None,  # stage 2 writes the start image at full strength
    )
    return first, second


def two_stages(
    model: Any,
    request: JobRequest,
    tensors: dict[str, torch.Tensor],
    hooks: Any,
    job_id: str,
    loras: tuple[list[JobLora], list[JobLora]],
) -> tuple[Any, str, Applied | None]:
    """Both stages of `request`; stage 2's pipeline output (latents first), its sequence
    layout, and stage 1's LoRA switch. `loras`: stage 1's and stage 2's. job.json's `upscale`
    record goes into `hooks.clock.notes`. (`model`: the `job.RankModel`; `hooks`: its
    `job.JobHooks`.)"""
    if model.upsampler is None:  # refused at submit; a direct caller gets the same reason
        raise ValueError("upscale needs the latent upscaler: start with --upscaler FILE")
    clock = hooks.clock
    first, second = stage_requests(request, model.limits)
    generator = torch.Generator("cpu").manual_seed(request.seed)
    total = request.total_steps
    begin = time.perf_counter()
    with model.lora_switch(loras[0]) as applied:
        # previews render at the request's (final) size: stage 2's only
        call = StageCall(generator, 0, total, previews=False)
        output, first_layout, _ = model.denoise(first, tensors, hooks, job_id, call)
    sampling = clock.notes.get("sampling")
    stage_1_end = time.perf_counter()
    with torch.no_grad():
        plan = model.family.second_stage(model.pipe, second, output, model.upsampler)
    upsampled = time.perf_counter()
    call = StageCall(generator, first.num_inference_steps, total, plan.inputs, plan.scheduler)
    with model.lora_switch(loras[1]) as applied_2:
        output, layout, _ = model.denoise(second, tensors, hooks, job_id, call)
    end = time.perf_counter()
    record = {
        **UpscaleSettings.parse(request.upscale).to_dict(),
        "loras": [dict(item) for item in request.upscale["loras"]],
        "stage_1": {
            "width": first.width,
            "height": first.height,
            "steps": first.num_inference_steps,
        },
        "stage_1_s": round(stage_1_end - begin, 4),
        "upsample_s": round(upsampled - stage_1_end, 4),
        "stage_2_s": round(end - upsampled, 4),
        "stage_2_sampling": clock.notes.get("sampling"),
    }
    if first_layout != layout:
        record["stage_1_sequence_layout"] = first_layout
    if applied_2 is not None:
        record["lora_apply_s"] = round(applied_2.apply_s, 4)
        record["lora_remove_s"] = round(applied_2.remove_s, 4)
    clock.notes["upscale"] = record
    if sampling is not None:
        clock.notes["sampling"] = sampling  # job.json's `sampling` stays stage 1's
    return output, layout, applied
