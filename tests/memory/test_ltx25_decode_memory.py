"""The memory plan of LTX-2.5 served with its diffusion video VAE (`vae.diffusion_decoder`,
`FamilySpec.vae_decoder`, families/ltx2/memory.py): the VAE's weights count the diffusion
decoder in place of the config's conv decoder, a decode's peak is ComfyUI's budget (Comfy-Org/
ComfyUI comfy/sd.py 35ead008, the diffusion VAE's `memory_used_decode`: 1700 x 8 x 8 x 8
elements of the VAE's dtype a latent voxel) of the whole latents, or with a job's
`decode_tiles` of the largest tile (plus the decoded tiles kept until the gather), and a job
whose whole decode does not fit where ComfyUI's tiles would is refused naming the tiles. The
plan's `decode` says what runs (rank 0, in the job's tiles or whole, whatever `--vae-tiling`
says), and a served job's shape carries its `decode_tiles` (`service.job_shape`).

Cost: about 2 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import itertools

import pytest
import torch

from paradit.backend.decode_tiles import DecodeTiles, spans
from paradit.backend.memory.planner import Budget, MemoryPlanner, TooLarge, Topology
from paradit.backend.memory.settings import JobShape, MemorySettings
from paradit.backend.memory.sizes import sizes_of_pipeline

COMFY_ELEMENTS_PER_VOXEL = 1700 * 512
"""comfy/sd.py: the diffusion VAE's decode budget, elements a latent voxel."""
FLOAT32 = 4
JOB = JobShape(256, 192, 49)
"""7 x 6 x 8 latents (temporal 8, spatial 32)."""


def _params(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


@pytest.fixture(scope="module")
def served():
    """(the conv VAE's sizes, the diffusion VAE's sizes, conv decoder and diffusion decoder
    parameter counts) of tiny-ltx2.5 in float32, the second with a tiny diffusion decoder
    attached as `diffusion_vae.build` attaches the file's."""
    from comfy_files import ltx25_diffusion_decoder

    from paradit.backend.models.families import family_of
    from paradit.backend.models.families.ltx2.diffusion_vae import NoConvDecoder
    from paradit.backend.models.presets import build_preset

    pipe = build_preset("tiny-ltx2.5")
    family = family_of(pipe)
    conv = sizes_of_pipeline(pipe, family, torch.float32)
    conv_decoder = _params(pipe.vae.decoder)
    pipe.vae.decoder = NoConvDecoder()
    pipe.vae.diffusion_decoder = ltx25_diffusion_decoder()
    diffusion = sizes_of_pipeline(pipe, family, torch.float32)
    return conv, diffusion, conv_decoder, _params(pipe.vae.diffusion_decoder)


def test_the_diffusion_vae_is_counted_in_place_of_the_conv_decoder(served):
    """Weights: the conv VAE's less its decoder plus the diffusion decoder (float32); the
    whole decode: ComfyUI's budget of the 7 x 6 x 8 latents, not the conv decoder's dry run."""
    conv, diffusion, conv_decoder, diffusion_decoder = served
    assert conv.vae_decoder is None and diffusion.vae_decoder is not None
    expected = conv.weights["vae"] + (diffusion_decoder - conv_decoder) * FLOAT32
    assert diffusion.weights["vae"] == expected
    assert diffusion.vae_bytes - conv.vae_bytes == (diffusion_decoder - conv_decoder) * FLOAT32
    whole = COMFY_ELEMENTS_PER_VOXEL * 7 * 6 * 8 * FLOAT32
    assert diffusion.decode(JOB, tiled=False) == whole == 1_169_817_600
    assert diffusion.decode(JOB, tiled=True) == whole  # paradit's own tiling does not apply
    assert conv.decode(JOB, tiled=False) != whole
    assert diffusion.tile_costs(JOB) == [49 * 256 * 192]  # one whole decode


def test_a_decode_tiles_jobs_peak_is_its_largest_tiles(served):
    """decode_tiles (128, 32, 32, 8): latent tiles 4 x 4 x 4 sharing 1 x 1 x 1, so frames
    (0, 4), (3, 4); rows (0, 4), (3, 3); columns (0, 4), (3, 4), (6, 2): the peak is a 4 x 4 x 4
    tile's budget and every decoded tile's pixels ((8f - 7) x 32h x 32w x 3) kept."""
    _, diffusion, _, _ = served
    tiles = DecodeTiles(128, 32, 32, 8)
    job = JobShape(256, 192, 49, decode_tiles=tiles)
    axes = [spans(7, 4, 1), spans(6, 4, 1), spans(8, 4, 1)]
    assert axes == [[(0, 4), (3, 4)], [(0, 4), (3, 3)], [(0, 4), (3, 4), (6, 2)]]
    shapes = [tuple(n for _, n in tile) for tile in itertools.product(*axes)]
    largest = COMFY_ELEMENTS_PER_VOXEL * 4 * 4 * 4 * FLOAT32
    kept = sum((8 * f - 7) * 32 * h * 32 * w * 3 * FLOAT32 for f, h, w in shapes)
    assert diffusion.decode(job, tiled=False) == largest + kept
    assert diffusion.tile_costs(job) == [f * h * w for f, h, w in shapes]


def test_a_whole_decode_that_does_not_fit_is_refused_naming_the_tiles(served):
    """Between the tiled job's peak and the whole job's: the tiled job fits, the whole one is
    refused naming the rule and the first suggested decode_tiles that fit (the templates'
    512 is one tile of these latents: the next, 384)."""
    _, diffusion, _, _ = served
    tiled = JobShape(256, 192, 49, decode_tiles=DecodeTiles(384, 64, 48, 16))
    topology = Topology(device_type="cpu")

    def planner(total: int) -> MemoryPlanner:
        budget = Budget(total, "test")
        return MemoryPlanner(diffusion, MemorySettings(), budget, topology, tiled)

    roomy = planner(2**40)
    whole_peak = roomy.plan_job(JOB).prediction.peak
    tiled_peak = roomy.plan_job(tiled).prediction.peak
    assert roomy.plan_job(JOB).prediction.parts["decode"] == diffusion.decode(JOB, tiled=False)
    assert tiled_peak < whole_peak
    tight = planner(int((whole_peak + tiled_peak) / 2 / 0.9))
    assert tight.check(tiled).fits
    with pytest.raises(TooLarge) as refused:
        tight.check(JOB)
    message = str(refused.value)
    assert "decoding it whole" in message and "LTX-2.5's diffusion video decoder" in message
    assert "decode_tiles {tile_size 384, overlap 64, temporal_size 48, temporal_overlap 16}" in (
        message
    )


def test_the_plans_decode_is_what_the_job_runs(served):
    """The plan's `decode` of the diffusion decoder is what the job runs on rank 0 whatever
    `--vae-tiling` says (2 ranks): a `decode_tiles` job "tiled" in its 2 x 2 x 3 tiles (blended:
    not exact), one whose tile covers the latents "tiled" in one (exact), a job without
    decode_tiles "whole"; none split over the replica."""
    _, diffusion, _, _ = served
    tiled = JobShape(256, 192, 49, decode_tiles=DecodeTiles(128, 32, 32, 8))
    one = JobShape(256, 192, 49, decode_tiles=DecodeTiles(512, 64, 64, 8))
    topology = Topology(device_type="cpu", replica_size=2)
    for mode in ("auto", "on", "off"):
        settings = MemorySettings(vae_tiling=mode)
        planner = MemoryPlanner(diffusion, settings, Budget(2**40, "test"), topology, JOB)
        job = planner.plan_job(tiled)
        assert (job.decode, job.tiles, job.to_dict()["decode"]) == ("tiled", 12, "tiled"), mode
        assert job.decode_record() == {"split": 1, "exact": False, "tiles": 12, "mode": "tiled"}
        assert planner.plan_job(one).decode_record()["exact"] is True
        assert planner.plan_job(JOB).decode == "whole", mode


@pytest.mark.fast
def test_a_served_jobs_shape_carries_its_decode_tiles():
    """`service.job_shape`: a request's `decode_tiles` reach the plan's `JobShape` (what its
    decode is counted by); none asked, None."""
    from paradit.backend.contract import TEXT_TO_VIDEO
    from paradit.backend.request import JobRequest, Limits
    from paradit.backend.serving.service import job_shape

    limits = Limits(TEXT_TO_VIDEO, 32, 32, 512, 8, 121, comfy_decode_tiles=True)
    fields = {"tile_size": 384, "overlap": 64, "temporal_size": 48, "temporal_overlap": 16}
    body = {"prompt": "a fox", "width": 256, "height": 192, "num_frames": 49}
    asked = job_shape(JobRequest.from_body({**body, "decode_tiles": fields}, limits), limits)
    assert asked.decode_tiles == DecodeTiles(384, 64, 48, 16)
    assert job_shape(JobRequest.from_body(body, limits), limits).decode_tiles is None
