"""Wan 2.2 TI2V-5B (text- and image-to-video in one model) and I2V-A14B (two experts with
image conditioning): presets, limits, plans at real size, the experts at world size 1 and
swapped, and two data-parallel replicas. World size 1 against diffusers called directly and
world sizes 2, 3 and 4 against world size 1 are the family contract's Wan 2.2 jobs
(`wan/tiny_job.py`, tests/families/test_family_contract.py).

Jobs run as a rank runs them (the family encodes, prepares and picks the pipeline; the VAE
decodes tile by tile), judged with `paradit verify`'s measure (tools/equivalence.py, float32
thresholds, frames and final latents); served groups check the engine's path.

Cost: about 10 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
import torch
from conftest import run_job
from image_jobs import run_image_job
from PIL import Image

from paradit.backend.contract import IMAGE_TO_VIDEO, TEXT_TO_VIDEO
from paradit.backend.memory.swap import ExpertSwap
from paradit.backend.models.families import enable_tiles, family_for, family_of
from paradit.backend.models.presets import build_preset
from paradit.backend.models.random_presets import build_random_preset
from paradit.backend.request import JobRequest
from paradit.backend.tools.equivalence import (
    DIFFERENT,
    FLOAT32,
    IDENTICAL,
    compare,
)
from paradit.backend.tools.verify import decode_png

TI2V, I2V = "tiny-wan2.2-ti2v-5b", "tiny-wan2.2-i2v-a14b"
CPU = torch.device("cpu")


def png_b64(width: int, height: int) -> str:
    ramp = np.linspace(0, 255, width * height * 3).reshape(height, width, 3).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(ramp).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


# TI2V: 160x160 px and 5 frames are 2 latent frames of 5 x 5 tokens (16x, then 2x2 patches):
# 50 tokens, which 3 ranks do not divide (nor the 4 heads); its VAE decodes in 2 x 2 tiles of
# 128 px. I2V-A14B: 112x80 px and 9 frames through the 8x VAE are 105 tokens, which 2 ranks
# do not divide; 2 x 3 tiles of 64 px. Both guided (two branches), two steps: with shift 3
# the timesteps are ~999 and ~750, so I2V-A14B's high-noise expert runs the first step and
# its low-noise one (below 900) the second.
TI2V_TEXT = {"prompt": "a red fox in snow", "negative_prompt": "blurry", "seed": 5}
TI2V_TEXT.update(width=160, height=160, num_frames=5, num_inference_steps=2, guidance_scale=5.0)
TI2V_IMAGE = {**TI2V_TEXT, "prompt": "ein Boot 🚤", "image": png_b64(160, 160)}
I2V_IMAGE = {"prompt": "a lighthouse", "seed": 9, "width": 112, "height": 80, "num_frames": 9}
I2V_IMAGE.update(num_inference_steps=2, guidance_scale=4.0, image=png_b64(112, 80))
JOBS = {  # label: (preset, body)
    "ti2v text": (TI2V, TI2V_TEXT),
    "ti2v image": (TI2V, TI2V_IMAGE),
    "i2v-a14b": (I2V, I2V_IMAGE),
}
TILES = {TI2V: 128, I2V: 64}


def _pipeline(name: str):
    """The preset as a rank holds it, with the test's VAE tiles, and its family."""
    pipe = build_preset(name)
    pipe.set_progress_bar_config(disable=True)
    enable_tiles(pipe.vae, TILES[name], TILES[name])
    return pipe, family_of(pipe)


def _run(pipe, body: dict, *, parallel=None, group=None):
    """One job through the engine's `run_on_rank` on the ranks of `group` (None: all): (frames
    as uint8 on rank 0, else None; final latents)."""
    return run_image_job(pipe, body, parallel=parallel, group=group)[:2]


@pytest.fixture(scope="module")
def references() -> dict:
    """World size 1, one thread: every job's (frames, latents), and the DiT calls per expert."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        pipes = {name: _pipeline(name) for name in TILES}
        calls = {"transformer": 0, "transformer_2": 0}
        pipe = pipes[I2V][0]
        for name in calls:
            getattr(pipe, name).register_forward_hook(
                lambda *_args, name=name: calls.__setitem__(name, calls[name] + 1)
            )
        outputs = {label: _run(pipes[name][0], body) for label, (name, body) in JOBS.items()}
    finally:
        torch.set_num_threads(threads)
    return {"outputs": outputs, "calls": calls, "pipes": pipes}


# -- presets, limits, real sizes ----------------------------------------------------------------


def test_presets_have_the_real_structure_and_limits():
    ti2v, i2v = build_preset(TI2V), build_preset(I2V)
    assert type(ti2v).__name__ == "WanPipeline" and ti2v.config.expand_timesteps
    assert ti2v.vae.config.z_dim == ti2v.transformer.config.in_channels == 48
    assert ti2v.vae_scale_factor_spatial == 16 and ti2v.vae.config.patch_size == 2
    assert ti2v.scheduler.config.flow_shift == 5.0
    assert type(i2v).__name__ == "WanImageToVideoPipeline" and i2v.config.boundary_ratio == 0.9
    assert i2v.transformer.config.in_channels == i2v.transformer_2.config.in_channels == 36
    assert i2v.transformer.config.image_dim is None and i2v.image_encoder is None
    assert not torch.equal(i2v.transformer.proj_out.weight, i2v.transformer_2.proj_out.weight)

    family = family_of(ti2v)
    assert family.name == "wan2.2-ti2v" and family_for("WanPipeline").name == "wan-t2v"
    tiny = family.limits(ti2v, tiny=True)
    assert tiny.task == TEXT_TO_VIDEO and tiny.accepts_image and not tiny.needs_image
    assert (tiny.size_multiple, tiny.min_size, tiny.fps) == (32, 32, 24)
    text = JobRequest.from_body({"prompt": "x"}, tiny)
    assert text.image is None and (text.width, text.num_frames) == (64, 5)
    image = JobRequest.from_body({"prompt": "x", "image": png_b64(8, 8)}, tiny)
    assert type(family.pipeline_for_job(ti2v, image)).__name__ == "WanImageToVideoPipeline"
    assert family.pipeline_for_job(ti2v, text) is ti2v
    with pytest.raises(ValueError, match="multiple of 32, got 48"):
        JobRequest.from_body({"prompt": "x", "width": 48}, tiny)
    with pytest.raises(ValueError, match="4k\\+1"):
        JobRequest.from_body({"prompt": "x", "num_frames": 8}, tiny)

    i2v_family = family_of(i2v)
    limits = i2v_family.limits(i2v, tiny=True)
    assert i2v_family.name == "wan2.2-i2v" and limits.needs_image and limits.task == IMAGE_TO_VIDEO
    assert limits.default_guidance == 3.5 and limits.size_multiple == 16
    with pytest.raises(ValueError, match="image is required"):
        JobRequest.from_body({"prompt": "x"}, limits)


@pytest.mark.fast
def test_frontends_offer_the_optional_image():
    """The request rule, the ComfyUI image-to-video node and the web form take TI2V-5B's
    optional image; a text-to-video model still refuses one."""
    from paradit.backend.contract import Limits
    from paradit.nodes import params
    from paradit.nodes.run import check_task
    from paradit.web.forms import form_fields

    base = {"task": TEXT_TO_VIDEO, "size_multiple": 32, "min_size": 32, "max_size": 2048}
    base.update(frame_multiple=4, max_frames=257)
    both, text_only = Limits(**base, accepts_image=True), Limits(**base)
    body = {"prompt": "x", "image": png_b64(8, 8)}
    assert JobRequest.from_body(body, both).image == body["image"]
    assert JobRequest.from_body({"prompt": "x"}, both).image is None
    with pytest.raises(ValueError, match="only accepted by image-to-video models"):
        JobRequest.from_body(body, text_only)
    info = {"model": TI2V, "task": TEXT_TO_VIDEO, "limits": both.to_dict()}
    check_task(params.IMAGE_TO_VIDEO, info)
    check_task(params.TEXT_TO_VIDEO, info)
    with pytest.raises(ValueError, match="runs image-to-video"):
        check_task(params.IMAGE_TO_VIDEO, {**info, "limits": text_only.to_dict()})
    assert "image" in [f.name for f in form_fields(TEXT_TO_VIDEO, both.to_dict())]
    assert "image" not in [f.name for f in form_fields(TEXT_TO_VIDEO, text_only.to_dict())]


# DiT parameters on the meta device: Wan2.2-TI2V-5B ("5B") and each expert of Wan2.2-I2V-A14B
# ("27B total, 14B active"; its experts take 36 input channels, 14.3B each).
TI2V_5B_DIT = 4_999_787_712
I2V_A14B_EXPERT = 14_288_901_184


@pytest.mark.fast
def test_random_presets_count_the_published_parameters():
    ti2v = build_random_preset("random:wan2.2-ti2v-5b", device="meta")
    assert sum(p.numel() for p in ti2v.transformer.parameters()) == TI2V_5B_DIT
    assert ti2v.transformer_2 is None and ti2v.config.expand_timesteps
    assert ti2v.vae.config.z_dim == 48 and len(ti2v.vae.config.latents_std) == 48
    limits = family_of(ti2v).limits(ti2v, tiny=False)
    assert (limits.default_width, limits.default_height, limits.default_frames) == (1280, 704, 121)
    assert (limits.fps, limits.default_steps, limits.default_guidance) == (24, 50, 5.0)
    i2v = build_random_preset("random:wan2.2-i2v-a14b", device="meta")
    for expert in (i2v.transformer, i2v.transformer_2):
        assert sum(p.numel() for p in expert.parameters()) == I2V_A14B_EXPERT
    assert i2v.config.boundary_ratio == 0.9 and i2v.image_encoder is None
    limits = family_of(i2v).limits(i2v, tiny=False)
    assert (limits.default_width, limits.default_height, limits.default_frames) == (832, 480, 81)


def test_plans_at_real_size():
    """`paradit plan`: TI2V-5B's 720p job of 121 frames (31 latent frames of 22 x 40 tokens)
    and the 48-channel VAE's decode; I2V-A14B's two experts both counted."""
    from paradit.backend.tools.plan import estimate

    ti2v = estimate("random:wan2.2-ti2v-5b", 4, 80, 1280, 704, 121)
    assert ti2v["tokens"] == 31 * 22 * 40 and ti2v["fits"]
    assert ti2v["memory"]["weights_bytes"]["transformer"] == TI2V_5B_DIT * 2  # bf16
    assert ti2v["plan"]["modes"] == ["cfg", "ulysses", "fsdp", "vae"]
    assert ti2v["memory"]["reference_job"]["parts_bytes"]["decode"] > 0
    i2v = estimate("random:wan2.2-i2v-a14b", 1, 80, 832, 480, 81)
    weights = i2v["memory"]["weights_bytes"]
    assert weights["transformer"] == weights["transformer_2"] == I2V_A14B_EXPERT * 2
    assert i2v["tokens"] == 21 * 30 * 52 and i2v["plan"]["modes"] == []


# -- world size 1 ---------------------------------------------------------------------------------


def test_world_size_1_runs_each_expert_and_the_image_matters(references):
    """I2V-A14B's high-noise expert runs the first step, its low-noise one the second (CFG: two
    calls a step); TI2V-5B's image changes the video. (Against diffusers called directly,
    and on 4, 3 and 2 ranks: the family contract's Wan 2.2 jobs, `wan/tiny_job.py`.)"""
    assert references["calls"] == {"transformer": 2, "transformer_2": 2}
    text, image = references["outputs"]["ti2v text"], references["outputs"]["ti2v image"]
    assert compare(text[0], image[0], FLOAT32).verdict == DIFFERENT, "the image matters"


def test_served_model_picks_the_pipeline_per_job(backends, references):
    """The engine's path (`paradit serve`, world size 1; the parallel runs are above): one
    loaded model runs an image job, then a text job, each equal to the references."""
    backend = backends.start(
        TI2V, 1, "--save-latents", "--vae-tiling", "on", "--vae-tile", "128x128"
    )
    try:
        info = backend.client.info()
        assert info["family"] == "wan2.2-ti2v" and info["task"] == TEXT_TO_VIDEO
        assert info["limits"]["accepts_image"] and info["limits"]["fps"] == 24
        for label in ("ti2v image", "ti2v text"):
            job, pngs = run_job(backend.client, JOBS[label][1])
            assert job["status"] == "succeeded"
            frames = np.stack([decode_png(p) for p in pngs])
            reference = references["outputs"][label]
            # The engine keeps the last step's latents: for an image job the pipeline then
            # puts the image's latent back into the first latent frame, so compare the rest.
            latents = backend.client.latents(job["id"])
            result = compare(
                reference[0], frames, FLOAT32, reference[1][:, :, 1:], latents[:, :, 1:]
            )
            assert result.verdict == IDENTICAL, (label, result.overall)
    finally:
        backends.stop(backend)


# -- experts one at a time (memory level 4) ------------------------------------------------------


def test_only_the_running_expert_is_on_the_device(references):
    """`ExpertSwap` on a pipeline in this process: at every forward of either expert, its
    parameters are the device copy and the other's are its host copy (on CPU the device copy
    is a copy in host memory); the frames and latents equal both experts resident."""
    pipe, _ = _pipeline(I2V)
    experts = {"transformer": pipe.transformer, "transformer_2": pipe.transformer_2}
    swap = ExpertSwap(experts, CPU)
    seen = []

    def check(name):
        other = "transformer_2" if name == "transformer" else "transformer"
        seen.append((name, swap.is_resident(name), swap.is_resident(other)))

    for name, dit in experts.items():
        dit.register_forward_hook(lambda *_args, name=name: check(name))
    swap.begin_job(lambda: 0)
    frames, latents = _run(pipe, I2V_IMAGE)
    assert [name for name, *_ in seen] == ["transformer"] * 2 + ["transformer_2"] * 2
    assert all(mine and not other for _, mine, other in seen), seen
    assert [swap_["expert"] for swap_ in swap.record] == ["transformer_2"]
    frames_1, latents_1 = references["outputs"]["i2v-a14b"]
    assert np.array_equal(frames, frames_1) and np.array_equal(latents, latents_1)


def test_two_replicas_swapping_experts_serve_the_same_bytes_and_time_the_swaps(
    backends, references
):
    """Data-parallel replicas (`--dp-degree 2`, one rank each) of I2V-A14B, both experts on
    each, one at a time (`--offload experts`, forced: on CPU the plan never needs it): the
    same job twice runs once on each replica, each byte-identical to world size 1 with both
    experts resident (seeds per replica: tests/serving/test_replicas.py), and so does the
    next pair. job.json's `expert_swaps` names each swap, its step and its time: the
    low-noise expert comes in at the switch step (step 1 here), the high-noise one at the
    replica's next job's first step."""
    backend = backends.start(
        I2V,
        2,
        "--dp-degree",
        "2",
        "--offload",
        "experts",
        "--save-latents",
        "--vae-tiling",
        "on",
        "--vae-tile",
        "64x64",
    )
    try:
        client = backend.client
        info = client.info()
        assert info["plan"]["dp_degree"] == 2
        assert (info["memory"]["dit"], info["memory"]["offload"]) == ("offload-experts", "experts")
        reference = references["outputs"]["i2v-a14b"]
        expected = [[(1, "transformer_2")], [(0, "transformer"), (1, "transformer_2")]]
        for swaps in expected:  # each replica's first job, then its second
            ids = [client.submit(I2V_IMAGE) for _ in range(2)]
            jobs = [client.wait(job_id, timeout_s=300) for job_id in ids]
            assert {job["replica"] for job in jobs} == {0, 1}
            for job in jobs:
                frames = [client.frame(job["id"], i) for i in range(job["num_frames"])]
                frames = np.stack([decode_png(png) for png in frames])
                latents = client.latents(job["id"])
                result = compare(reference[0], frames, FLOAT32, reference[1], latents)
                assert result.verdict == IDENTICAL, (job["replica"], result.overall)
                record = client.record(job["id"])
                assert record["sampling"]["experts"] == ["high", "low"]
                swapped = record["expert_swaps"]
                assert [(s["step"], s["expert"]) for s in swapped["swaps"]] == swaps, swapped
                assert all(s["seconds"] > 0 and s["bytes"] > 0 for s in swapped["swaps"])
                assert swapped["resident"] == "transformer_2" and swapped["seconds"] > 0
    finally:
        backends.stop(backend)
