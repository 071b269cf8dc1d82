"""MiniMax H3 with `--save-latents`: a job keeps the packed video rows after its last step
and the audio latents it decoded (`audio_latents.npy`), on replica 0 and on another replica
(through the store), byte for byte world size 1's.

Cost: about 3 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import numpy as np
import torch
from conftest import REFERENCE_FLAGS

from paradit.backend.audio import write_wav
from paradit.backend.models.families import family_of
from paradit.backend.models.families.minimax_h3.tiny_job import BODY
from paradit.backend.models.presets import build_preset

PRESET = "tiny-minimax-h3"


def test_save_latents_keeps_the_last_steps_latents(references, backends, tmp_path):
    """`--save-latents` on an H3 job: `latents.npy` in the job's files, the packed video rows
    after its last step (37 latent frames of one 2x2 patch, 4 channels x 4). The job's steps
    are its DiT calls: the step callback's last call is the job's `num_inference_steps`-th
    (diffusers' scheduler counts one more: its sigma grid's points), so progress ends at it.
    `audio_latents.npy`: the audio latents the job decoded (one item per stereo channel, 8
    channels, 207 latent frames): through the audio VAE they give the job's `audio.wav`."""
    job, _, latents = references.get(PRESET, BODY)
    steps = BODY["num_inference_steps"]
    assert "latents.npy" in job["files"] and "audio_latents.npy" in job["files"]
    assert job["progress"] == {"step": steps, "total": steps}
    assert len(job["timings"]["step_s"]) == steps
    assert len(job["timings"]["sampling"]["sigmas"]) == steps + 1
    assert latents.shape == (37, 16) and latents.dtype == np.float32
    assert np.isfinite(latents).all() and latents.std() > 0
    client = backends.get(PRESET, 1, *REFERENCE_FLAGS)
    audio_latents = client.audio_latents(job["id"])
    assert audio_latents.shape == (2, 8, 207) and audio_latents.dtype == np.float32
    pipe = build_preset(PRESET, components=frozenset({"audio_vae"}))
    track = family_of(pipe).audio(pipe, (None, torch.from_numpy(audio_latents)))
    write_wav(tmp_path / "audio.wav", track)
    assert (tmp_path / "audio.wav").read_bytes() == client.audio(job["id"])
    downloaded = client.download(job, tmp_path / "job")
    assert np.array_equal(np.load(downloaded / "audio_latents.npy"), audio_latents)


def test_a_second_replica_saves_the_same_latents(references, backends):
    """Two replicas of one rank (`--dp-degree 2`): the job that runs on replica 1 hands its
    video and audio latents to rank 0 through the store; both equal world size 1's byte for
    byte (a replica of one rank runs world size 1's kernels)."""
    ref_job, _, ref_latents = references.get(PRESET, BODY)
    reference = backends.get(PRESET, 1, *REFERENCE_FLAGS)
    client = backends.get(PRESET, 2, "--dp-degree", "2", *REFERENCE_FLAGS)
    ids = [client.submit(BODY) for _ in range(2)]
    jobs = [client.wait(job_id, timeout_s=300) for job_id in ids]
    assert {job["replica"] for job in jobs} == {0, 1}
    for job in jobs:
        assert client.latents(job["id"]).tobytes() == ref_latents.tobytes()
        ours, theirs = client.audio_latents(job["id"]), reference.audio_latents(ref_job["id"])
        assert ours.tobytes() == theirs.tobytes()
