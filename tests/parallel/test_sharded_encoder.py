"""The text encoder sharded over the ranks with FSDP2 (the memory plan's `sharded` encoder).

- On 2 gloo ranks each rank holds half of the encoder's parameters; every rank runs the encode
  together (`runtime.job.encode_together`) and gets world size 1's prompt embeddings byte for
  byte: tiny-wan's UMT5 and tiny-minimax-h3's Qwen3-VL (FSDP2 gathers each layer whole, so
  every kernel runs on the shapes world size 1 runs).
- A whole tiny-wan job through `run_on_rank` with the encoder sharded (rank 0 encodes nothing
  alone: `encode` gives nothing, the message carries no tensors) makes world size 1's frames
  and latents byte for byte (CFG halves: each branch as world size 1 runs it).
- Served (`paradit serve --encoder-placement sharded` on 2 ranks): the plan says so in
  /v1/info, every rank loads and shards the encoder, each job's encode runs on both ranks
  (job.json's `encode_s`), and the frames and final latents equal world size 1's.
- `parallelize` refuses to shard an encoder on a plan of one rank.

Cost: about 4 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from conftest import run_job, spawn_gloo
from image_jobs import CPU, encoded, preset_pipeline, run_here

from paradit.backend.models.families.minimax_h3.tiny_job import TINY_JOBS as H3_JOBS
from paradit.backend.models.families.wan.tiny_job import TINY_JOB
from paradit.backend.parallel import local_param_bytes, parallelize
from paradit.backend.parallel.fsdp import encoder_layers
from paradit.backend.parallel.plan import ParallelPlan
from paradit.backend.request import JobRequest
from paradit.backend.runtime.job import RankModel, dits_of, encode, encode_together

H3 = H3_JOBS[0]
CFG_HALVES = ParallelPlan(cfg_degree=2, shard_weights=True)
"""2 ranks, one CFG branch each, weights sharded: each branch runs as world size 1 runs it."""
SEQUENCE = ParallelPlan(ulysses_degree=2, shard_weights=True)


def _sharded_embeddings(rank: int, preset: str, tile: int, body: dict) -> dict:
    """`preset`'s prompt embeddings with its encoder sharded over the 2 ranks (on a plan that
    shards the DiT too, as the engine's); asserts each rank holds about half the encoder."""
    pipe, _ = preset_pipeline(preset, tile)
    whole = local_param_bytes(pipe.text_encoder)
    parallel = parallelize(dits_of(pipe), SEQUENCE, CPU, encoders=[pipe.text_encoder])
    held = local_param_bytes(pipe.text_encoder)
    assert held <= whole // 2 + whole // 20, (rank, held, whole)
    model = RankModel.here(pipe, parallel)
    assert model.layout.text_encoder == "sharded"
    request = JobRequest.from_body(body, model.limits)
    assert encode(model, request) == {}  # no rank encodes alone
    return encode_together(model, request, "test")


def _check_ranks(rank: int, world_size: int, reference: dict) -> None:
    for preset, tile, body in (
        (TINY_JOB.preset, TINY_JOB.tile, dict(TINY_JOB.body)),
        (H3.preset, H3.tile, dict(H3.body)),
    ):
        tensors = _sharded_embeddings(rank, preset, tile, body)
        expected = reference["embeddings"][preset]
        assert sorted(tensors) == sorted(expected), preset
        for name, tensor in tensors.items():
            assert torch.equal(tensor, expected[name]), (rank, preset, name)

    # a whole job: the encode inside run_on_rank, on every rank
    pipe, _ = preset_pipeline(TINY_JOB.preset, TINY_JOB.tile)
    parallel = parallelize(dits_of(pipe), CFG_HALVES, CPU, encoders=[pipe.text_encoder])
    frames, result = run_here(pipe, dict(TINY_JOB.body), parallel=parallel)
    assert "encode_s" in result.clock.notes
    assert torch.equal(result.latents, reference["latents"]), rank
    if rank == 0:
        assert (frames == reference["frames"]).all()
    parallel.check_at_rest()


@pytest.fixture(scope="module")
def world_size_1() -> dict[str, Any]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        embeddings = {}
        for preset, tile, body in (
            (TINY_JOB.preset, TINY_JOB.tile, TINY_JOB.body),
            (H3.preset, H3.tile, H3.body),
        ):
            pipe, _ = preset_pipeline(preset, tile)
            embeddings[preset] = encoded(pipe, dict(body))
        pipe, _ = preset_pipeline(TINY_JOB.preset, TINY_JOB.tile)
        frames, result = run_here(pipe, dict(TINY_JOB.body))
    finally:
        torch.set_num_threads(threads)
    return {"embeddings": embeddings, "frames": frames, "latents": result.latents}


def test_sharded_encoder_on_2_ranks_equals_world_size_1(world_size_1):
    spawn_gloo(2, _check_ranks, world_size_1)


SERVED = {"prompt": "a sharded encoder", "num_inference_steps": 2, "seed": 4}


def test_served_with_the_encoder_sharded_equals_world_size_1(backends, references):
    client = backends.get("tiny-wan", 2, "--encoder-placement", "sharded", "--save-latents")
    memory = client.info()["memory"]
    assert memory["text_encoder"] == "sharded" and memory["settings"]["encoder_placement"]
    one, frames_one, latents_one = references.get("tiny-wan", SERVED)
    two, frames_two = run_job(client, SERVED)
    assert two["timings"]["encode_s"] > 0
    assert client.record(two["id"])["memory"]["decode"] == "whole"
    assert frames_two == frames_one
    assert np.array_equal(client.latents(two["id"]), latents_one)


@pytest.mark.fast
def test_encoder_layers_are_the_models_unsplittable_modules():
    pipe, _ = preset_pipeline(TINY_JOB.preset, TINY_JOB.tile)
    encoder = pipe.text_encoder
    layers = encoder_layers(encoder)
    assert layers and {type(layer).__name__ for layer in layers} == set(encoder._no_split_modules)
    with pytest.raises(ValueError, match="several ranks"):
        parallelize(dits_of(pipe), ParallelPlan(), CPU, encoders=[encoder])
