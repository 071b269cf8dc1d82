"""The exact split decode (`parallel/vae_bands.py`): every VAE a family declares splittable
(`FamilySpec.vae_split`), decoded in row bands over 4, 3 and 2 ranks of a real gloo group,
equals its whole decode on one rank up to float rounding, and the wrapped layers are restored;
a 2-rank tiny-wan job under `--vae-tiling auto` splits its decode so and equals one rank's;
`paradit verify` fails a blended decode unless `--accept-blended-decode` accepts it.

One launch of 4 processes serves all three group sizes (the world, and sub-groups of its first
3 and first 2 ranks). The latents are 8-11 rows high, so 4 ranks get bands of 2-3 rows: every
3x3 convolution's halo and every GroupNorm's statistics cross a band edge, at every resolution
of the decoder. The VAEs are the tiny presets' (random weights: no learned smoothness hides a
missing halo or a per-band statistic).

Cost: about 19 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import io
from functools import partial

import numpy as np
import pytest
import torch
import torch.distributed as dist
from conftest import run_job, spawn_gloo
from PIL import Image

from paradit.backend.models.families import SPECS, vae_split_of
from paradit.backend.models.presets import build_preset
from paradit.backend.parallel.vae_bands import Bands, band_rows, decode_bands

LATENTS = {
    # preset: latent (frames, rows, columns); frames None for an image VAE
    "tiny-wan": (3, 11, 14),  # AutoencoderKLWan: causal convs with a per-frame cache
    "tiny-wan2.2-ti2v-5b": (2, 9, 7),  # AutoencoderKLWan as Wan 2.2's: patchified
    "tiny-qwen-image": (1, 11, 14),  # AutoencoderKLQwenImage
    "tiny-flux": (None, 11, 14),  # AutoencoderKL (Flux.1, Z-Image): GroupNorm everywhere
    "tiny-flux2": (None, 9, 10),  # AutoencoderKLFlux2
    "tiny-hunyuanvideo1.5": (2, 9, 7),  # replicate-padded causal convs, causal attention
    "tiny-ltx2": (2, 8, 6),  # reflect-padded convs, 32x: a small latent makes a big picture
}
MAX_ABS = 1e-4
"""Largest |split - whole| of a sample in -1..1 (float32; measured up to 6e-6)."""


def _vae(name: str):
    return build_preset(name, components=frozenset({"vae"})).vae


def _latent(name: str, vae) -> torch.Tensor:
    frames, rows, cols = LATENTS[name]
    channels = getattr(vae.config, "z_dim", None) or vae.config.latent_channels
    shape = (1, channels, rows, cols) if frames is None else (1, channels, frames, rows, cols)
    return torch.randn(*shape, generator=torch.Generator().manual_seed(3))


def _decode(vae, z: torch.Tensor) -> torch.Tensor:
    return vae.decode(z, return_dict=False)[0]


def _to_uint8(sample: torch.Tensor) -> torch.Tensor:
    return ((sample / 2 + 0.5).clamp(0, 1) * 255).round().to(torch.uint8)


@pytest.mark.fast
def test_band_rows_are_even_and_checked():
    assert band_rows(11, 4) == [3, 3, 3, 2] and band_rows(8, 2) == [4, 4]
    with pytest.raises(ValueError, match="a latent row per rank"):
        band_rows(3, 4)
    with pytest.raises(ValueError):
        Bands((3, 0), 0, None)
    bands = Bands((3, 3, 2), 2, None)
    assert bands.heights(16) == [24, 24, 16] and bands.heights_of_whole(64) == [24, 24, 16]


@pytest.mark.fast
def test_every_splittable_vae_is_tested_here():
    """A family that declares a VAE splittable adds it to LATENTS (so its split is shown
    exact at 2, 3 and 4 ranks)."""
    declared = {kind for spec in SPECS for kind in spec.vae_split}
    tested = {type(_vae(name)).__name__ for name in LATENTS}
    assert declared == tested


def _check_bands(rank: int, world_size: int, expected: dict[str, torch.Tensor]) -> None:
    """Every VAE at 4, 3 and 2 ranks; rank 0 compares, and raises only once every rank is
    done (so the failure shown is the comparison, not a peer's broken connection)."""
    groups = {4: None, 3: dist.new_group([0, 1, 2]), 2: dist.new_group([0, 1])}
    failures = []
    for name, whole in expected.items():
        vae = _vae(name)
        z = _latent(name, vae)
        whole_frame = vae_split_of(vae)
        assert whole_frame is not None, name
        for size, group in groups.items():
            if rank >= size:
                continue
            with torch.no_grad():
                split = decode_bands(partial(_decode, vae), vae, z, whole_frame, group)
            if rank != 0:
                assert split is None
                continue
            if split.shape != whole.shape:
                failures.append(f"{name} at {size} ranks: shape {split.shape} != {whole.shape}")
                continue
            error = (split - whole).abs().max().item()
            off = (_to_uint8(split).int() - _to_uint8(whole).int()).abs()
            if error > MAX_ABS or off.max() > 1 or (off > 0).float().mean() >= 1e-3:
                failures.append(f"{name} at {size} ranks: max |split - whole| {error:.3g}")
        wrapped = [m for m in vae.modules() if {"forward", "_conv_forward"} & vars(m).keys()]
        assert not wrapped, name  # every wrapper undone
    dist.barrier()
    assert not failures, failures


def test_split_decode_at_4_3_and_2_ranks_equals_the_whole_decode():
    torch.set_num_threads(1)
    expected = {}
    for name in LATENTS:
        vae = _vae(name)
        with torch.no_grad():
            expected[name] = _decode(vae, _latent(name, vae))
    spawn_gloo(4, _check_bands, expected)


# -- a whole job ------------------------------------------------------------------------------

JOB = {"prompt": "a fox", "seed": 9, "guidance_scale": 4.0, "num_inference_steps": 2}
JOB_SIZE = {"width": 256, "height": 256, "num_frames": 17}
"""The smallest tiny-wan job `auto` splits: 256 x 256 x 17 = 1,114,112 pixels, at least
`planner.SPLIT_MIN_PIXELS`; 32 latent rows, 16 a rank."""


@pytest.mark.timeout(600)
def test_world_size_2_auto_splits_exactly_and_equals_one_rank(backends):
    """World size 2 with `--vae-tiling auto` (the default) splits tiny-wan's decode in bands:
    job.json says `{split: 2, exact: true}` and the frames equal the diffusers pipeline's
    untiled decode on one process (what world size 1 computes), at most 1/255 off in rare
    pixels. Guided, so world size 2 is CFG parallel: the DiT's output is bit-identical
    (test_equivalence.BYTE_IDENTICAL) and any difference is the decode's."""
    from paradit.backend.serving.outputs import to_uint8

    backend = backends.start("tiny-wan", 2)
    try:
        job, pngs = run_job(backend.client, {**JOB, **JOB_SIZE})
        record = backend.client.record(job["id"])
    finally:
        backends.stop(backend)
    assert job["status"] == "succeeded"
    assert record["decode"] == {"split": 2, "exact": True, "tiles": 1, "mode": "bands"}
    frames = np.stack([np.asarray(Image.open(io.BytesIO(p))) for p in pngs])

    pipe = build_preset("tiny-wan")
    pipe.set_progress_bar_config(disable=True)
    names = ("prompt", "negative_prompt", "height", "width", "num_frames")
    kwargs = {k: record["request"][k] for k in (*names, "guidance_scale", "num_inference_steps")}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as a rank runs
    try:
        generator = torch.Generator().manual_seed(JOB["seed"])
        with torch.no_grad():
            out = pipe(**kwargs, generator=generator, output_type="np", return_dict=False)
    finally:
        torch.set_num_threads(threads)
    whole = to_uint8(np.asarray(out[0])[0])
    off = np.abs(frames.astype(np.int16) - whole.astype(np.int16))
    assert frames.shape == whole.shape and off.max() <= 1 and (off > 0).mean() < 1e-3


# -- `paradit verify` -------------------------------------------------------------------------


def test_verify_fails_a_blended_decode_unless_accepted(paradit_warm):
    """World size 2 with `--vae-tiling on` (6 blended tiles): `paradit verify` judges it
    `different` (exit 1) against world size 1's whole decode; with `--accept-blended-decode`
    the reference decodes the same tiles and the plan passes (CFG parallel: identical)."""
    import json

    from paradit.backend.runtime.engine import VAE_TILE_ENV

    args = ["verify", "--device", "cpu", "--model", "tiny-flux", "--world-size", "2"]
    args += ["--prompt", "a cat", "--guidance", "4", "--width", "112", "--height", "80"]
    args += ["--steps", "2", "--vae-tiling", "on"]
    env = {"PARADIT_LOG": "WARNING", VAE_TILE_ENV: "64x64"}
    reports = {}
    for accept in (False, True):
        result = paradit_warm(*args, *(["--accept-blended-decode"] if accept else []), env=env)
        reports[accept] = (result.returncode, json.loads(result.stdout), result.stderr)
    code, report, stderr = reports[False]
    assert code == 1 and report["verdict"] == "different", stderr
    assert any("blended its decode from 6 tiles" in r for r in report["reasons"]), report
    assert report["runs"][1]["decode"] == {"split": 2, "exact": False, "tiles": 6, "mode": "split"}
    assert report["runs"][0]["decode"]["exact"]  # the reference decoded whole
    code, report, stderr = reports[True]
    assert code == 0 and report["verdict"] == "identical", (stderr, report.get("reasons"))
    assert report["runs"][0]["decode"]["tiles"] == 6
