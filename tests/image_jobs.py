"""A job run in this process through the engine's own `run_on_rank` (encode, or take rank 0's
encoded text; the pipeline to latents; the family's tiled decode, split over the ranks or tile
by tile), and the check of sequence parallel at several numbers of ranks against world size 1.
Shared by the tests of the image and video models."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from paradit.backend.models.families import enable_tiles, family_for, family_of
from paradit.backend.models.families.base import called_directly as pipeline_called_directly
from paradit.backend.models.presets import build_preset, preset_components, preset_pipeline_class
from paradit.backend.parallel import parallelize
from paradit.backend.parallel.plan import ParallelPlan
from paradit.backend.request import JobRequest
from paradit.backend.runtime.job import (
    JobHooks,
    RankModel,
    RankResult,
    encode,
    job_message,
    run_on_rank,
)
from paradit.backend.serving.outputs import to_uint8
from paradit.backend.tools.equivalence import FLOAT32, IDENTICAL, WITHIN_ROUNDING, compare

CPU = torch.device("cpu")


def preset_pipeline(name: str, tile: int, *, encoders: bool = True) -> tuple[Any, Any]:
    """The preset as a rank holds it (the ranks that do not encode: without the components
    the engine leaves to the encoding rank, its family's `encoder_components`), with VAE tiles
    of `tile` pixels, and its family."""
    skip = frozenset() if encoders else family_for(preset_pipeline_class(name)).encoder_components
    pipe = build_preset(name, components=preset_components(name) - skip)
    pipe.set_progress_bar_config(disable=True)
    enable_tiles(pipe.vae, tile, tile)
    return pipe, family_of(pipe)


def called_directly(pipe: Any, body: dict, **arguments: Any) -> np.ndarray:
    """The diffusers pipeline as a user calls it with the job's prompt, size, steps and seed,
    and `arguments` (its guidance under the pipeline's own name, a negative prompt); uint8
    (`families.base.called_directly`, the family contract's reference)."""
    return to_uint8(pipeline_called_directly(pipe, body, **arguments))


def rank_groups(
    rank: int, world_size: int, sizes: Sequence[int]
) -> Iterator[tuple[int, dist.ProcessGroup | None]]:
    """(n, the group of the first n ranks) for each n of `sizes` this rank belongs to, largest
    first; None for the whole world (what the engine runs on). Every rank makes every group
    (`new_group` is called by all ranks); the meshes `parallelize` then makes on a group are
    made among its members alone. Group names count up in each process, so a rank must have
    made the same groups as the others of the next group it joins: a rank that leaves a
    layout joins none after it, hence largest first."""
    sizes = sorted(sizes, reverse=True)
    groups = {n: None if n == world_size else dist.new_group(list(range(n))) for n in sizes}
    for n in sizes:
        if rank < n:
            yield n, groups[n]


def save_h3_folder(folder: Any) -> None:
    """tiny-minimax-h3 as `save_pretrained` writes it (a modular pipeline's folder), its
    processor's entry as a released H3 folder names it (transformers' `Qwen3VLProcessor`)."""
    import json

    build_preset("tiny-minimax-h3").save_pretrained(str(folder), overwrite_modular_index=True)
    path = folder / "modular_model_index.json"
    index = json.loads(path.read_text())
    index["processor"][:2] = ["transformers", "Qwen3VLProcessor"]
    path.write_text(json.dumps(index, indent=2))


def encoded(pipe: Any, body: dict, upsampler: Any = None) -> dict:
    """Rank 0's encoded text for `body`, as the engine encodes it (`runtime.job.encode`), for
    jobs that share it (`run_image_job`'s `tensors`); `upsampler`: a two-stage job's."""
    model = RankModel.here(pipe, None, None, upsampler=upsampler)
    return encode(model, JobRequest.from_body(body, model.limits))


def run_image_job(
    pipe: Any,
    body: dict,
    tensors: dict | None = None,
    *,
    parallel: Any = None,
    group: dist.ProcessGroup | None = None,
) -> tuple[Any, Any, int]:
    """One job through `run_on_rank`, as the engine runs it: (image as uint8 on rank 0, else
    None; final latents; number of VAE tiles). `tensors` are rank 0's encoded text (encoded
    here when None); `parallel` what `parallelize` applied to the DiT; the decode's tiles are
    dealt to the ranks of `group` (the world when None) when there are several."""
    frames, result = run_here(pipe, body, tensors, parallel=parallel, group=group)
    return frames, result.latents.numpy(), result.num_tiles


def run_here(
    pipe: Any,
    body: dict,
    tensors: dict | None = None,
    *,
    parallel: Any = None,
    group: dist.ProcessGroup | None = None,
    hooks: JobHooks | None = None,
    cache_alone: bool = False,
    upsampler: Any = None,
) -> tuple[Any, RankResult]:
    """`run_on_rank` on a pipeline built in this process (`RankModel.here`) for `body`: (the
    frames as uint8 on the replica's leader, else None; the rank's result). `tensors`: the
    leader's encoder outputs (encoded here, on every rank, when None: the message needs their
    shapes); `hooks`: the step callbacks; `cache_alone`: this rank takes its step cache
    decisions alone (the sabotage); `upsampler`: the latent upscaler of a two-stage job
    (`families.base.Upsampler`)."""
    model = RankModel.here(pipe, parallel, group, upsampler=upsampler)
    model.cache_alone = cache_alone
    request = JobRequest.from_body(body, model.limits)
    if tensors is None:
        tensors = encode(model, request)
    hooks = hooks or JobHooks()
    hooks.tensors = tensors if model.is_leader else None
    tiled = bool(getattr(pipe.vae, "use_tiling", False))  # as `preset_pipeline` set it
    message = job_message("test", request, tensors, vae_tiling=tiled)
    result = run_on_rank(model, message, hooks)
    frames = None if result.frames is None else to_uint8(result.frames)
    return frames, result


def check_ulysses_layouts(
    rank: int,
    world_size: int,
    references: dict,
    *,
    preset: str,
    tile: int,
    jobs: dict[str, dict],
    sizes: Sequence[int] = (4, 3, 2),
    variant: Callable[[Any, str], Any] | None = None,
    on_group: Callable[[int, dist.ProcessGroup | None], None] | None = None,
) -> None:
    """One rank of `spawn_gloo`: every job of `jobs` on Ulysses over the first n ranks for each
    n of `sizes`, largest first (FSDP2 over the same ranks, the DiT's CFG batched as its family
    says, the decode's tiles dealt to them) from world size 1's text features
    (`references["tensors"]`: rank 0 encodes for all in the engine) against world size 1
    (`references["outputs"]`), within rounding. `variant(pipe, label)` is the pipeline a job
    runs on (its family's); `on_group(n, group)` runs further checks on each group first."""
    outputs, tensors = references["outputs"], references["tensors"]
    for size, group in rank_groups(rank, world_size, sizes):
        if on_group is not None:
            on_group(size, group)
        plan = ParallelPlan(1, size, 1, True, True)
        pipe, family = preset_pipeline(preset, tile, encoders=False)
        parallel = parallelize(
            [pipe.transformer], plan, CPU, batched_cfg=family.batched_cfg, group=group
        )
        assert parallel.layouts, "the sequence is split"
        for label, body in jobs.items():
            job_pipe = pipe if variant is None else variant(pipe, label)
            frames, latents, _tiles = run_image_job(
                job_pipe, body, tensors[label], parallel=parallel, group=group
            )
            if rank != 0:
                assert frames is None
                continue
            reference = outputs[label]
            result = compare(reference[0], frames, FLOAT32, reference[1], latents)
            assert result.verdict in {IDENTICAL, WITHIN_ROUNDING}, (size, label, result.overall)


Combine = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
"""(latents, sigma, cond velocity, uncond velocity) -> the guided velocity, all packed."""


def qwen_image_cfg_loop(pipe: Any, tensors: dict, body: dict, combine: Combine) -> np.ndarray:
    """A Qwen-Image job's steps written out over diffusers' components: the pipeline's
    latents, levels and transformer calls, each step's two velocities combined by `combine`
    (the DiT's level, `t / 1000`, as sigma), stepped by the pipeline's scheduler."""
    from diffusers.pipelines.qwenimage.pipeline_qwenimage import calculate_shift, retrieve_timesteps

    height, width, steps = body["height"], body["width"], body["num_inference_steps"]
    cond, uncond = tensors["prompt_embeds"], tensors["negative_prompt_embeds"]
    generator = torch.Generator("cpu").manual_seed(body["seed"])
    channels = pipe.transformer.config.in_channels // 4
    latents = pipe.prepare_latents(1, channels, height, width, cond.dtype, "cpu", generator)
    shape = [[(1, height // pipe.vae_scale_factor // 2, width // pipe.vae_scale_factor // 2)]]
    config = pipe.scheduler.config
    mu = calculate_shift(latents.shape[1], config.base_image_seq_len, config.max_image_seq_len,
                         config.base_shift, config.max_shift)  # fmt: skip
    sigmas = np.linspace(1.0, 1 / steps, steps)
    timesteps, _ = retrieve_timesteps(pipe.scheduler, steps, "cpu", sigmas=sigmas, mu=mu)
    pipe.scheduler.set_begin_index(0)

    def velocity(embeds: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return pipe.transformer(
            hidden_states=latents,
            timestep=t.expand(1).to(latents.dtype) / 1000,
            encoder_hidden_states=embeds,
            encoder_hidden_states_mask=torch.ones(embeds.shape[:2], dtype=torch.long),
            img_shapes=shape,
            return_dict=False,
        )[0]

    with torch.no_grad():
        for t in timesteps:
            guided = combine(latents, t / 1000, velocity(cond, t), velocity(uncond, t))
            latents = pipe.scheduler.step(guided, t, latents, return_dict=False)[0]
    return latents.numpy()
