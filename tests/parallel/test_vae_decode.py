"""Wan's and Flux's VAE decoded tile by tile: on one rank, on real gloo groups, in whole jobs.

The tiny presets' VAEs with small tiles, so small latents make several tiles, ragged at the
bottom and right: Wan 32x48-pixel tiles every 24x36 pixels (80x112 pixels: 4 x 4 tiles),
Flux 64-pixel tiles every 48 (80x112 pixels: 2 x 3 tiles). Tile by tile on one rank equals the
VAE's own tiled decode (`vae.enable_tiling(); vae.decode(z)`) and, through the family, the
diffusers pipeline itself, byte for byte; dealt over 2 and 3 ranks it equals one rank's.

Tiled against untiled (TILED_VS_UNTILED): these VAEs have random weights, so a tile sees other
GroupNorm statistics (Flux) and less context (both; Wan's mid-block attention is global) than
the whole picture, and the difference is large next to a trained VAE's. Measured at 160x160
pixels on this project's CPUs, mean |difference| in frame units (0..1): Wan 0.105 with
64-pixel tiles and 0.054 with 128; Flux 0.104 and 0.039; decodes of two unrelated latents
differ by 0.22 (Wan) and 0.25 (Flux). The test asserts the 128-pixel bound and that bigger
tiles come closer.

Cost: about 9 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
import torch
import torch.distributed as dist
from conftest import run_job, spawn_gloo
from PIL import Image

from paradit.backend.models.families import enable_tiles, family_for
from paradit.backend.models.families.flux import vae as kl_vae
from paradit.backend.models.families.wan import vae as wan_vae
from paradit.backend.models.presets import build_preset
from paradit.backend.models.vae_tiles import blend
from paradit.backend.parallel.vae import decode_tiles
from paradit.backend.request import JobRequest
from paradit.backend.runtime.engine import VAE_TILE_ENV, tile_vae_from_env

TILES = {"tiny-wan": (32, 48), "tiny-wan-i2v": (64, 64), "tiny-flux": (64, 64)}
"""Tile sizes in pixels. Wan image-to-video also encodes its image with the VAE, and Wan's
tiled encode fails on tiles as small as 32x48 (a 3x3 convolution meets a 2-pixel-wide piece)."""
NUM_TILES = {"tiny-wan": 16, "tiny-wan-i2v": 6, "tiny-flux": 6}
"""Tiles of an 80x112-pixel picture (10 x 14 latent pixels) at these sizes."""
SIZE = {"width": 112, "height": 80}
TILED_VS_UNTILED = {"tiny-wan": 0.07, "tiny-flux": 0.06}
"""Mean |tiled - untiled| (0..1) at 160x160 pixels with 128-pixel tiles, at most."""


def _image(width: int, height: int) -> str:
    ramp = np.linspace(0, 255, width * height * 3).reshape(height, width, 3).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(ramp).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


def _latents(name: str, vae, seed: int, frames: int = 2) -> torch.Tensor:
    """Pipeline-space latents for SIZE: (1, C, frames, 10, 14) for Wan, packed for Flux."""
    generator = torch.Generator().manual_seed(seed)
    if name == "tiny-flux":
        return torch.randn(1, 5 * 7, vae.config.latent_channels * 4, generator=generator)
    return torch.randn(1, vae.config.z_dim, frames, 10, 14, generator=generator)


def _request(name: str) -> JobRequest:
    frames = 1 if name == "tiny-flux" else 5
    return JobRequest(prompt="x", num_frames=frames, **SIZE)


# -- one rank ---------------------------------------------------------------------------------


@pytest.mark.fast
@pytest.mark.parametrize("name", ["tiny-wan", "tiny-flux"])
def test_tiles_one_by_one_equal_the_vae(name):
    vae = build_preset(name, components=frozenset({"vae"})).vae
    module = kl_vae if name == "tiny-flux" else wan_vae
    generator = torch.Generator().manual_seed(1)
    channels = vae.config.latent_channels if name == "tiny-flux" else vae.config.z_dim
    z = torch.randn(1, channels, *([] if name == "tiny-flux" else [2]), 10, 14, generator=generator)
    with torch.no_grad():
        assert len(module.tile_grid(vae, z).tiles) == 1  # tiling off: one untiled decode
        enable_tiles(vae, *TILES[name])
        grid = module.tile_grid(vae, z)
        sizes = {(t.bottom - t.top, t.right - t.left) for t in grid.tiles}
        assert len(grid.tiles) == NUM_TILES[name] and len(sizes) > 2
        blended = blend(vae, grid, [module.decode_tile(vae, z, t) for t in grid.tiles])
        ours = wan_vae.finish(vae, z, blended) if module is wan_vae else blended
        assert len(module.tile_grid(vae, z[..., :4, :4]).tiles) == 1  # fits one tile
        reference = vae.decode(z, return_dict=False)[0]
    assert ours.shape == reference.shape and torch.equal(ours, reference)


@pytest.mark.fast
def test_tile_sizes_are_checked():
    flux = build_preset("tiny-flux", components=frozenset({"vae"})).vae
    for height, width in ((48, 48), (64, 32), (0, 0)):  # 48: would step 32 but keep 36
        with pytest.raises(ValueError):
            enable_tiles(flux, height, width)
    assert not flux.use_tiling


@pytest.mark.fast
def test_tile_hook_reads_the_environment(monkeypatch):
    pipe = build_preset("tiny-wan", components=frozenset({"vae"}))
    monkeypatch.delenv(VAE_TILE_ENV, raising=False)
    assert tile_vae_from_env(pipe) is None and not pipe.vae.use_tiling
    monkeypatch.setenv(VAE_TILE_ENV, "32x48")
    assert tile_vae_from_env(pipe) == (32, 48) and pipe.vae.use_tiling
    assert pipe.vae.tile_sample_stride_width == 36
    monkeypatch.setenv(VAE_TILE_ENV, "32")
    with pytest.raises(ValueError, match="HxW"):
        tile_vae_from_env(pipe)


def test_tiled_is_close_to_untiled():
    """See TILED_VS_UNTILED and the module docstring for the measured distances."""
    for name, bound in TILED_VS_UNTILED.items():
        vae = build_preset(name, components=frozenset({"vae"})).vae
        channels = vae.config.latent_channels if name == "tiny-flux" else vae.config.z_dim
        frames = [] if name == "tiny-flux" else [2]
        z = torch.randn(1, channels, *frames, 20, 20, generator=torch.Generator().manual_seed(0))
        distances = []
        with torch.no_grad():
            untiled = vae.decode(z, return_dict=False)[0]
            for tile in (64, 128):
                enable_tiles(vae, tile, tile)
                tiled = vae.decode(z, return_dict=False)[0]
                distances.append(((tiled - untiled).abs() / 2).mean().item())
        assert distances[1] <= bound and distances[1] < distances[0], (name, distances)


@pytest.mark.parametrize("name", ["tiny-wan-i2v", "tiny-flux"])
def test_family_decode_equals_the_pipeline(name):
    """The family's latent handling and post-processing are the pipeline's: its tiles, decoded
    one by one, give the frames `pipe(...)` gives, with tiling on and off. (Wan text-to-video
    shares Wan image-to-video's decode; its whole jobs are compared with diffusers below.)"""
    pipe = build_preset(name)
    pipe.set_progress_bar_config(disable=True)
    family = family_for(type(pipe).__name__)
    request = _request(name)
    kwargs = {"prompt": "a fox", "num_inference_steps": 2, "guidance_scale": 1.0, **SIZE}
    if name != "tiny-flux":
        kwargs["num_frames"] = request.num_frames
    if name == "tiny-wan-i2v":
        kwargs["image"] = Image.open(io.BytesIO(base64.b64decode(_image(112, 80))))

    def run(output_type: str):
        generator = torch.Generator().manual_seed(5)
        with torch.no_grad():
            return pipe(**kwargs, generator=generator, output_type=output_type, return_dict=False)

    for tiles in (None, TILES[name]):
        if tiles:
            enable_tiles(pipe.vae, *tiles)
        latents = run("latent")[0]
        with torch.no_grad():
            decode = family.tiled_decode(pipe, request, latents)
            frames = decode.assemble([decode.decode_tile(i) for i in range(decode.num_tiles)])
        direct = np.asarray(run("np")[0])
        expected = direct[:1] if name == "tiny-flux" else direct[0]
        assert decode.num_tiles == (NUM_TILES[name] if tiles else 1)
        np.testing.assert_array_equal(frames, expected)


# -- real gloo groups -------------------------------------------------------------------------


def _check_parallel_decode(rank: int, world_size: int, expected: dict) -> None:
    """One rank of 3: the decode split over all 3, then over ranks 0 and 1 (a group of 2)."""
    pair = dist.new_group([0, 1])  # every rank takes part in creating it
    for (name, tiled), frames in expected.items():
        tiles = _tiled_decode(name, tiled)
        for group, size in ((None, world_size), (pair, 2)):
            if rank >= size:
                continue
            with torch.no_grad():
                decoded = decode_tiles(tiles, torch.device("cpu"), group)
            if rank == 0:  # all tiles, blended as one rank blends them
                np.testing.assert_array_equal(tiles.assemble(decoded), frames, str(size))
            else:
                assert decoded is None


def _tiled_decode(name: str, tiled: bool):
    """The family's tiles of random latents for SIZE: small tiles, or one (tiling off)."""
    pipe = build_preset(name, components=frozenset({"vae"}))
    if tiled:
        enable_tiles(pipe.vae, *TILES[name])
    family = family_for(type(pipe).__name__)
    return family.tiled_decode(pipe, _request(name), _latents(name, pipe.vae, seed=3))


@pytest.fixture(scope="module")
def one_rank() -> dict[str, np.ndarray]:
    """Frames decoded tile by tile on one rank: each model tiled, and Flux untiled (one tile,
    which rank 0 decodes with no collective)."""
    expected = {}
    for key in (("tiny-wan", True), ("tiny-flux", True), ("tiny-flux", False)):
        tiles = _tiled_decode(*key)
        assert (tiles.num_tiles == 1) == (not key[1])
        with torch.no_grad():
            expected[key] = tiles.assemble([tiles.decode_tile(i) for i in range(tiles.num_tiles)])
        assert expected[key].shape == (_request(key[0]).num_frames, 80, 112, 3)
    return expected


def test_parallel_decode_at_3_and_2_ranks_equals_one_rank(one_rank):
    """Wan's and Flux's tiles dealt over 3 ranks, and over 2, blended on rank 0 equal one
    rank's tile-by-tile decode, bit for bit (one launch of 3 processes for both)."""
    spawn_gloo(3, _check_parallel_decode, one_rank)


# -- whole jobs -------------------------------------------------------------------------------


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", ["tiny-wan", "tiny-flux"])
def test_world_size_2_with_tiling_equals_one_rank(backends, name):
    """Tiling on (--vae-tiling on, tiles of PARADIT_VAE_TILE's size): world size 2 decodes in
    parallel tiles, job.json says so (`exact: false`), and
    its frames equal the diffusers pipeline's with the same tiles on one process, which is
    what world size 1 computes (test_family_decode_equals_the_pipeline, and test_equivalence's
    world size 1 against diffusers), and differ from the untiled decode (the tiles took
    effect). Guided, so world size 2 is CFG parallel (bit-identical by construction, see
    test_equivalence.BYTE_IDENTICAL)."""
    from paradit.backend.serving.outputs import to_uint8

    height, width = TILES[name]
    body = {"prompt": "a fox", "seed": 9, "guidance_scale": 4.0, "num_inference_steps": 2}
    body |= {**SIZE, "num_frames": _request(name).num_frames}
    tile = ((VAE_TILE_ENV, f"{height}x{width}"),)
    backend = backends.start(name, 2, "--vae-tiling", "on", env=tile)
    try:
        info = backend.client.info()
        job, pngs = run_job(backend.client, body)
        record = backend.client.record(job["id"])
    finally:
        backends.stop(backend)
    assert job["status"] == "succeeded" and "vae" in info["plan"]["modes"]
    # blended tiles: job.json says the pixels are not the whole decode's
    tiles = NUM_TILES[name]
    assert record["decode"] == {"split": 2, "exact": False, "tiles": tiles, "mode": "split"}
    frames = np.stack([np.asarray(Image.open(io.BytesIO(p))) for p in pngs])

    pipe = build_preset(name)
    pipe.set_progress_bar_config(disable=True)
    request = job["request"]
    names = ("prompt", "negative_prompt", "height", "width", "num_inference_steps")
    kwargs = {k: request[k] for k in (*names, "guidance_scale")}
    if name == "tiny-flux":  # not guidance-distilled: guidance is true CFG
        kwargs["true_cfg_scale"] = request["guidance_scale"]
    else:
        kwargs["num_frames"] = request["num_frames"]
    direct = {}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as a rank runs
    try:
        for tiled in (False, True):
            if tiled:
                enable_tiles(pipe.vae, height, width)
            generator = torch.Generator().manual_seed(request["seed"])
            with torch.no_grad():
                out = pipe(**kwargs, generator=generator, output_type="np", return_dict=False)
            out = np.asarray(out[0])
            direct[tiled] = to_uint8(out[:1] if name == "tiny-flux" else out[0])
    finally:
        torch.set_num_threads(threads)
    np.testing.assert_array_equal(frames, direct[True])
    assert not np.array_equal(frames, direct[False])
