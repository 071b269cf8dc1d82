"""MiniMax H3 on 7 ranks: Ulysses 7 over every rank (no CFG to split; the tiny DiT's 28
heads and the released one's 56 both divide by 7), the packed sequence of text, audio and
video rows split seven ways (its length does not divide: the first ranks take one row more),
the DiT FSDP2-sharded over the seven, the video's 7 temporal clips dealt to them, one a rank:
the frames, the final latents and the stereo track equal world size 1's within float32
rounding (`paradit verify`'s measure; not byte for byte: a split sequence's products and
attention sum in another order, 9e-8 relative on the latents, 5 of 380,928 frame values one
level apart). (2, 3 and 4 ranks: the family contract, tests/families/test_family_contract.py,
in its group of 4.)

Cost: about 2 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from conftest import spawn_gloo
from image_jobs import CPU, encoded, preset_pipeline, run_here

from paradit.backend.models.families.minimax_h3.tiny_job import BODY
from paradit.backend.parallel import PLAN, parallelize
from paradit.backend.parallel.plan import ParallelPlan
from paradit.backend.tools.equivalence import FLOAT32, IDENTICAL, WITHIN_ROUNDING, compare

RANKS = 7
JOB = BODY
"""The contract's smallest H3 job: 32x32, 124 frames (37 latent frames, 414 audio rows and
the prompt's), 2 steps (2 DiT calls)."""
TILE = 64
MAX_LATENT_ERROR = 1e-5
"""Relative L2 error of the final latents (float32; 9e-8 measured: the split sequence's
matrix products and attention sum in another order, so not byte for byte)."""
MAX_AUDIO_DRIFT = 1e-3
"""Of the track's peak, as the family contract (1.3e-4 measured)."""


def _world_size_1() -> dict[str, Any]:
    """The job at world size 1 (one thread): rank 0's encoded text, frames, latents, audio."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        pipe, _family = preset_pipeline("tiny-minimax-h3", TILE)
        parallel = parallelize([pipe.transformer], ParallelPlan(1, 1, 1, False, False), CPU)
        tensors = encoded(pipe, JOB)
        frames, result = run_here(pipe, JOB, tensors, parallel=parallel)
    finally:
        torch.set_num_threads(threads)
    return {
        "tensors": tensors,
        "frames": frames,
        "latents": result.latents.numpy(),
        "audio": result.audio.waveform,
        "clips": result.num_tiles,
    }


def _seven(rank: int, world_size: int, reference: dict[str, Any]) -> None:
    """One rank of seven: the DiT sharded, Ulysses 7, the clips dealt; rank 0 compares."""
    pipe, _family = preset_pipeline("tiny-minimax-h3", TILE, encoders=False)
    plan = ParallelPlan(1, world_size, 1, True, True)
    parallel = parallelize([pipe.transformer], plan, CPU)
    # the last block: the first one's hooks split its input (a pre-hook sees it whole)
    blocks = pipe.transformer.transformer_blocks
    tokens: list[int] = []
    hook = blocks[-1].register_forward_pre_hook(
        lambda _m, args, kwargs: tokens.append(
            int((args or (kwargs["hidden_states"],))[0].shape[1])
        ),
        with_kwargs=True,
    )
    try:
        frames, result = run_here(pipe, JOB, reference["tensors"], parallel=parallel)
    finally:
        hook.remove()
    assert result.sequence_layout == PLAN
    assert result.num_tiles == reference["clips"] == world_size  # one clip a rank
    assert tokens and len(set(tokens)) == 1, tokens  # this rank's share, at every call
    shares = torch.zeros(world_size, dtype=torch.long)
    shares[rank] = tokens[0]
    torch.distributed.all_reduce(shares)
    total = int(shares.sum())
    expected = [len(part) for part in np.array_split(np.arange(total), world_size)]
    assert shares.tolist() == expected and len(set(expected)) > 1, (shares, expected)
    if rank != 0:
        assert frames is None
        return
    latents = result.latents.numpy()
    measured = compare(reference["frames"], frames, FLOAT32, reference["latents"], latents)
    assert measured.verdict in {IDENTICAL, WITHIN_ROUNDING}, measured
    error = float(np.linalg.norm(latents - reference["latents"]))
    error /= float(np.linalg.norm(reference["latents"]))
    drift = float(np.abs(result.audio.waveform - reference["audio"]).max())
    peak = float(np.abs(reference["audio"]).max())
    assert error <= MAX_LATENT_ERROR, (error, measured)
    assert drift <= MAX_AUDIO_DRIFT * peak, (drift, peak)


def test_seven_ranks_equal_world_size_1():
    """Seven forked gloo ranks on a free port (a 120 s collective timeout; `spawn_gloo`
    joins them all): each holds a seventh of the packed sequence's rows at every block (an
    uneven split, the first ranks one row more), and rank 0's frames, final latents and
    audio are world size 1's within float32 rounding."""
    reference = _world_size_1()
    assert reference["frames"].shape[0] == JOB["num_frames"]
    spawn_gloo(RANKS, _seven, reference)
