"""`paradit plan`: the parallel plan and the memory plan for a job, without loading weights.

The same code a backend runs at start (`memory.planner.MemoryPlanner`), on the model built
on the meta device from a preset or a folder's configs (the `*.json` files of a diffusers
repo are enough), for GPUs of `--gpu-memory` GiB: the layout chosen for this job, its decode,
the predicted bytes per rank and why.
"""

from __future__ import annotations

from typing import Any

from ..contract import Limits, edit_size
from ..memory.planner import GIB, Budget, MemoryPlanner, TooLarge, Topology
from ..memory.planner import render as render_memory
from ..memory.settings import JobShape, MemorySettings

DTYPE_OF_DEVICE = {"cuda": "bfloat16", "cpu": "float32"}


def estimate(
    model: str,
    gpus: int,
    gpu_memory_gib: float,
    width: int,
    height: int,
    frames: int,
    *,
    device: str = "cuda",
    dp_degree: int = 1,
    offload: str = "auto",
    vae_tiling: str = "auto",
    weights: str = "auto",
    lora_cache_gib: float | None = None,
    images: int = 0,
    encoder_placement: str = "auto",
    fps: float | None = None,
    audio_latent_frames: int | None = None,
) -> dict[str, Any]:
    """The plan for one job on `gpus` devices of `gpu_memory_gib` GiB each (with LoRAs when
    `lora_cache_gib` is given: serve's `--lora-cache-gib` with a `--lora-dir`). `images` > 0:
    an edit with that many input images of the output's size, each counted as the model
    VAE-encodes it (`contract.reference_sizes`: its tokens join the DiT's sequence). `fps` and
    `audio_latent_frames`: the job's, as a request gives them and checked as its fields are
    (None: the model's own; a model with an audio track counts its rows from them)."""
    import torch

    from ..memory.sizes import file_formats, meta_pipeline, sizes_of_pipeline, stored_weights
    from ..models.families import family_of
    from ..parallel.plan import choose_plan

    if gpus < 1 or dp_degree < 1 or gpus % dp_degree:
        raise ValueError("--gpus must be >= 1 and a multiple of --dp-degree")
    if device not in DTYPE_OF_DEVICE:
        raise ValueError(f"--device must be cuda or cpu, got {device!r}")
    if images < 0:
        raise ValueError(f"--images must be >= 0, got {images}")
    settings = MemorySettings(
        gpu_memory_gib,
        offload,
        vae_tiling,
        f"{JobShape(width, height, frames)}",
        lora_cache_gib=lora_cache_gib,
        weights=weights,
        encoder_placement=encoder_placement,
    )
    pipe = meta_pipeline(model)
    family = family_of(pipe)
    limits = family.limits(pipe, tiny=False)
    shape = JobShape(
        width,
        height,
        frames,
        references=_references(limits, width, height, images),
        **_audio(limits, fps, audio_latent_frames),
    )
    plan = choose_plan(
        gpus // dp_degree,
        supports_cfg=family.supports_cfg(pipe),
        device_type=device,
        tiled_decode=True,
    )
    dtype = getattr(torch, DTYPE_OF_DEVICE[device])
    topology = Topology(
        device_type=device,
        replica_size=gpus // dp_degree,
        sequence_degree=plan.sequence_degree,
        cfg_parallel=plan.cfg_degree > 1,
        batched_cfg=family.batched_cfg,
        shard_weights=plan.shard_weights,
        paired_cfg=plan.pairs_branches and family.supports_cfg(pipe),
        num_replicas=dp_degree,
    )
    stored = stored_weights(weights, file_formats(model))
    planner = MemoryPlanner(
        sizes_of_pipeline(pipe, family, dtype, stored),
        settings,
        Budget(int(gpu_memory_gib * GIB), f"--gpu-memory {gpu_memory_gib:g}"),
        topology,
        shape,
        limits.size_multiple,
    )
    memory = planner.to_dict()
    fits = memory["reference_job"]["fits"]
    return {
        "model": model,
        "pipeline": type(pipe).__name__,
        "gpus": gpus,
        "dp_degree": dp_degree,
        "plan": plan.to_dict(),
        "tokens": limits.tokens(width, height, frames)
        + sum(limits.tokens(w, h, 1) for w, h in shape.references),
        "images": images,
        "memory": memory,
        "fits": fits,
        "advice": [] if fits else [_advice(planner, shape)],
    }


def _audio(limits: Limits, fps: float | None, audio_latent_frames: int | None) -> dict:
    """The job's frame rate and audio length as `JobShape` takes them, each checked as the
    request's field is (`request.find_field`)."""
    from ..request import find_field

    asked = {"fps": fps, "audio_latent_frames": audio_latent_frames}
    return {name: find_field(name).check(v, limits) for name, v in asked.items() if v is not None}


def _references(limits: Limits, width: int, height: int, images: int) -> tuple:
    """`images` input images of the output's size, as the model VAE-encodes them."""
    if not images:
        return ()
    if not limits.edit_pixels:
        raise ValueError(f"--images is for image-edit models; this model's task: {limits.task}")
    if images > limits.max_images:
        raise ValueError(f"this model takes at most {limits.max_images} input images")
    return (edit_size(width, height, limits),) * images


def _advice(planner: MemoryPlanner, shape: JobShape) -> str:
    try:
        planner.check(shape)
    except TooLarge as exc:
        return str(exc)
    return ""


def render(report: dict[str, Any]) -> str:
    plan = report["plan"]
    lines = [
        f"{report['model']} ({report['pipeline']}) on {report['gpus']} GPU(s), "
        f"{report['tokens']} tokens"
        + (f" (with {report['images']} input image(s))" if report.get("images") else ""),
        f"plan: cfg {plan['cfg_degree']} x ulysses {plan['ulysses_degree']} x ring "
        f"{plan['ring_degree']} ({', '.join(plan['modes']) or 'single'})",
        render_memory(report["memory"]),
        *report["advice"],
    ]
    return "\n".join(lines)
