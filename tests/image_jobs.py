"""An image model's job run in this process the way the engine runs it: encode (or take rank 0's
encoded text), the pipeline to latents, the family's tiled decode (split over the ranks or tile by
tile), and the check of sequence parallel at several numbers of ranks against world size 1.
Shared by the tests of the image models."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from paradit.backend.models.families import family_of
from paradit.backend.models.presets import build_preset, preset_components
from paradit.backend.models.vae_tiles import enable_tiles
from paradit.backend.parallel import parallelize
from paradit.backend.parallel.plan import ParallelPlan
from paradit.backend.parallel.vae import decode_tiles
from paradit.backend.request import JobRequest
from paradit.backend.serving.outputs import to_uint8
from paradit.backend.tools.equivalence import FLOAT32, IDENTICAL, WITHIN_ROUNDING, compare

CPU = torch.device("cpu")


def preset_pipeline(name: str, tile: int, *, encoders: bool = True) -> tuple[Any, Any]:
    """The preset as a rank holds it (the ranks that do not encode: without the text encoder),
    with VAE tiles of `tile` pixels, and its family."""
    skip = frozenset() if encoders else frozenset({"text_encoder", "tokenizer"})
    pipe = build_preset(name, components=preset_components(name) - skip)
    pipe.set_progress_bar_config(disable=True)
    enable_tiles(pipe.vae, tile, tile)
    return pipe, family_of(pipe)


def called_directly(pipe: Any, body: dict, **arguments: Any) -> np.ndarray:
    """The diffusers pipeline as a user calls it with the job's prompt, size, steps and seed,
    and `arguments` (its guidance under the pipeline's own name, a negative prompt); uint8."""
    with torch.no_grad():
        images = pipe(
            prompt=body["prompt"],
            height=body["height"],
            width=body["width"],
            num_inference_steps=body["num_inference_steps"],
            generator=torch.Generator().manual_seed(body["seed"]),
            output_type="np",
            **arguments,
        ).images
    return to_uint8(np.asarray(images))


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


def run_image_job(
    pipe: Any,
    family: Any,
    body: dict,
    tensors: dict | None = None,
    *,
    split_decode: bool = False,
    group: dist.ProcessGroup | None = None,
) -> tuple[Any, Any, int]:
    """One job: (image as uint8 on rank 0, else None; final latents; number of VAE tiles).
    `tensors` are rank 0's encoded text (encoded here when None); `split_decode` deals the
    decode's tiles to the ranks of `group` (the world when None)."""
    request = JobRequest.from_body(body, family.limits(pipe, tiny=True))
    generator = torch.Generator().manual_seed(request.seed)
    with torch.no_grad():
        if tensors is None:
            tensors = family.encode(pipe, request, CPU)
        kwargs = family.prepare(pipe, request, tensors)
        latents = pipe(**kwargs, generator=generator, output_type="latent", return_dict=False)[0]
        tiles = family.tiled_decode(pipe, request, latents)
        if split_decode:
            decoded = decode_tiles(tiles, CPU, group)
        else:
            decoded = [tiles.decode_tile(i) for i in range(tiles.num_tiles)]
    family.finish(pipe)
    frames = None if decoded is None else to_uint8(tiles.assemble(decoded))
    return frames, latents.numpy(), tiles.num_tiles


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
                job_pipe, family_of(job_pipe), body, tensors[label], split_decode=True, group=group
            )
            if rank != 0:
                assert frames is None
                continue
            reference = outputs[label]
            result = compare(reference[0], frames, FLOAT32, reference[1], latents)
            assert result.verdict in {IDENTICAL, WITHIN_ROUNDING}, (size, label, result.overall)
