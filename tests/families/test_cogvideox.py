"""CogVideoX: its families and presets, our context-parallel plan for its joint attention,
CFG parallel for its batched branches, and its VAE decoded in parallel tiles.

Whole jobs are compared with `paradit verify`'s measure (tools/equivalence.py: frames and
final latents against world size 1, float32 thresholds); the parallel transformer's output
directly against diffusers' processor. World size 1, the reference, runs in
this process as a rank runs it (`runtime.job.run_on_rank` through tests/image_jobs.py, the
VAE's tiles at the real size decoded one after another) and equals diffusers' pipeline called
directly. The parallel jobs here run on `paradit serve` groups (Ulysses 3; CFG 2 on a folder
loaded shard by shard). What the family contract (tests/families/test_family_contract.py)
runs on CogVideoX's tiny jobs (`cogvideox/tiny_job.py`) is not run again here: the guided
job on CFG 2 x Ulysses 2, Ulysses 3 and CFG 2 with the step cache's decisions, 2B's
positions, the unguided job spread with its tiles and temporal chunks, image to video and
CogVideoX 1.5 on the ranks.

Cost: about 12 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
import torch
from conftest import run_job
from image_jobs import CPU, run_here
from PIL import Image

from paradit.backend.client.http import BackendError
from paradit.backend.contract import IMAGE_TO_VIDEO, Limits
from paradit.backend.models.families import family_for, family_of
from paradit.backend.models.families.cogvideox.tiny_job import cfg_batch
from paradit.backend.models.preset_names import RANDOM_PRESET_NAMES
from paradit.backend.models.presets import build_preset
from paradit.backend.models.random_presets import (
    build_random_preset,
    random_preset_spec,
)
from paradit.backend.parallel import parallelize
from paradit.backend.parallel.plan import ParallelPlan, choose_plan
from paradit.backend.parallel.vae import deal
from paradit.backend.request import JobRequest
from paradit.backend.serving.outputs import to_uint8
from paradit.backend.tools.equivalence import DIFFERENT, FLOAT32, IDENTICAL, compare

# 720x480 with 1 frame: 1 latent frame x 30 x 45 patches = 1350 video tokens (+ 226 text),
# which 3 ranks do not divide (1576 of both); the VAE decodes it in 3 x 3 tiles of 240x360
# pixels, the real size. One frame: the 720x480 decode was this file's largest cost, and what
# it proves is the tiles' and the tokens' (UNGUIDED's 5 latent frames are split and decoded
# in chunks; the family contract decodes its tiles and chunks at once on 4 and 3 ranks,
# byte for byte: `_check_decode`).
BIG = {"width": 720, "height": 480, "num_frames": 1, "num_inference_steps": 2}
GUIDED = {"prompt": "a red fox in snow", "negative_prompt": "blurry", "seed": 7, **BIG}
# 112x80 with 17 frames: 5 x 5 x 7 = 175 tokens; no CFG (one branch, batch 1).
UNGUIDED = {
    "prompt": "ein Boot 🚤 auf dem See",
    "seed": 11,
    "guidance_scale": 1.0,
    "width": 112,
    "height": 80,
    "num_frames": 17,
    "num_inference_steps": 2,
}

# The step cache on the batched branches: the conditional row decides (random weights move
# 0.9-1.6 between steps: threshold 1 skips steps 1 and 3). One frame: 5 x 7 = 35 tokens,
# which 3 ranks do not divide; its decisions are what it checks, not the decode.
CACHED = {
    **UNGUIDED,
    "guidance_scale": 6.0,
    "num_frames": 1,
    "num_inference_steps": 5,
    "cache": {"method": "first-block", "threshold": 1.0},
}


def _pixels(frames: list[bytes]) -> np.ndarray:
    return np.stack([np.asarray(Image.open(io.BytesIO(f)).convert("RGB")) for f in frames])


Output = tuple[dict, np.ndarray, np.ndarray]
"""One finished job: the job (served: job.json; run here: its float `frames` and step
`cache` record), its frames (uint8, F x H x W x 3) and its final latents."""


def world_size_1(pipe, bodies: list[dict]) -> list[Output]:
    """`bodies` at world size 1 in this process, one thread, as a rank runs them (the step
    cache's hooks on the DiT; the VAE's tiles at the real size, decoded one after another):
    the parallel runs' reference."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        pipe.set_progress_bar_config(disable=True)
        pipe.vae.enable_tiling()
        parallel = parallelize([pipe.transformer], ParallelPlan(1, 1, 1, False, False), CPU)
        outputs = []
        for body in bodies:
            frames, result = run_here(pipe, body, parallel=parallel)
            job = {"frames": result.frames, "cache": result.cache}
            outputs.append((job, frames, result.latents.numpy()))
    finally:
        torch.set_num_threads(threads)
    return outputs


def assert_equivalent(reference: Output, other: Output, what: str):
    """`paradit verify`'s measure and float32 thresholds, frames and latents."""
    result = compare(reference[1], other[1], FLOAT32, reference[2], other[2])
    assert result.verdict != DIFFERENT, (what, result.reasons, result.overall)
    return result


def png_b64(width: int, height: int, scale: float = 1.0) -> str:
    ramp = np.linspace(0, 255 * scale, width * height * 3).reshape(height, width, 3)
    ramp = ramp.astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(ramp).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


# -- pure logic -----------------------------------------------------------------------------


@pytest.mark.fast
def test_deal_balances_tiles_and_is_deterministic():
    costs = [900, 900, 300, 900, 900, 300, 300, 300, 100]
    owners = deal(costs, 3)
    assert owners == deal(costs, 3)
    loads = [sum(c for c, o in zip(costs, owners, strict=True) if o == r) for r in range(3)]
    assert sorted(loads) == [1500, 1600, 1800]  # four 900s on 3 ranks: 1800 is the best max
    assert deal(costs, 1) == [0] * len(costs)
    assert sorted(set(deal([5, 5], 4))) == [0, 1]  # more ranks than tiles: the rest idle
    with pytest.raises(ValueError, match="num_ranks"):
        deal(costs, 0)


@pytest.mark.fast
def test_plan_says_the_decode_is_split():
    plan = choose_plan(4, supports_cfg=True, device_type="cpu", tiled_decode=True)
    doc = plan.to_dict()
    assert doc["vae_parallel"] is True and doc["modes"] == ["cfg", "ulysses", "fsdp", "vae"]
    one = choose_plan(1, supports_cfg=True, device_type="cpu", tiled_decode=True)
    assert one.vae_parallel is False and one.to_dict()["modes"] == []
    two = choose_plan(2, supports_cfg=True, device_type="cpu", tiled_decode=True)
    assert two.to_dict()["modes"] == ["cfg", "fsdp", "vae"]  # tiny-cogvideox-i2v's, served
    wan = choose_plan(4, supports_cfg=True, device_type="cpu")
    assert wan.vae_parallel is False
    with pytest.raises(ValueError, match="more than one rank"):
        ParallelPlan(vae_parallel=True)


@pytest.mark.fast
def test_limits_temporal_patch_and_fixed_size():
    base = {
        "task": IMAGE_TO_VIDEO,
        "size_multiple": 16,
        "min_size": 16,
        "max_size": 2048,
        "frame_multiple": 4,
        "max_frames": 161,
        "needs_image": True,
    }
    v15 = Limits(**base, temporal_patch=2)
    assert v15.tokens(1360, 768, 81) == 11 * 85 * 48  # 21 latent frames, padded to 22
    fixed = Limits(**base, fixed_width=720, fixed_height=480, default_width=720, default_height=480)
    body = {"prompt": "x", "image": png_b64(8, 8), "num_frames": 9}
    assert JobRequest.from_body(body, fixed).width == 720
    with pytest.raises(ValueError, match="only takes 720x480, got 736x480"):
        JobRequest.from_body({**body, "width": 736}, fixed)


@pytest.mark.fast
def test_web_form_offers_a_fixed_size_only():
    from paradit.web.forms import CUSTOM, size_presets

    limits = {"default_width": 720, "default_height": 480, "size_multiple": 16}
    limits.update(min_size=16, max_size=2048)
    assert len(size_presets(limits)) > 2  # aspect-ratio presets for free sizes
    fixed = size_presets({**limits, "fixed_width": 720, "fixed_height": 480})
    assert [value for _label, value in fixed] == ["720x480", CUSTOM]


# -- families, presets ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def meta_pipes() -> dict:
    """Every CogVideoX random preset's architecture on the meta device (no memory, no weights)."""
    names = [name for name in RANDOM_PRESET_NAMES if name.startswith("random:cogvideox")]
    return {name: build_random_preset(name, device="meta") for name in names}


def test_random_presets_have_the_shipped_architecture(meta_pipes):
    # The DiT sizes of the published models (CogVideoX-2B 1.69B, 5B 5.57B parameters).
    dit_params = {
        "random:cogvideox-2b": 1_693_783_872,
        "random:cogvideox-5b": 5_570_283_072,
        "random:cogvideox-5b-i2v": 5_570_479_680,
        "random:cogvideox1.5-5b": 5_570_676_352,
    }
    for name, pipe in meta_pipes.items():
        spec = random_preset_spec(name)
        assert type(pipe).__name__ == spec["pipeline"]
        for component in ("transformer", "vae", "text_encoder"):
            shipped = {
                k: v for k, v in spec["components"][component]["config"].items() if k[0] != "_"
            }
            config = getattr(pipe, component).config
            config = config if isinstance(config, dict) else config.to_dict()
            for key, value in shipped.items():
                got = config[key]
                assert (list(got) if isinstance(got, tuple) else got) == value, (name, key)
        assert sum(p.numel() for p in pipe.transformer.parameters()) == dit_params[name]
        assert pipe.text_encoder.config.d_model == pipe.transformer.config.text_embed_dim
        assert len(pipe.tokenizer) == pipe.text_encoder.config.vocab_size
        assert pipe.scheduler.config.snr_shift_scale == (3.0 if "2b" in name else 1.0)


def test_random_preset_builds_seeded_in_the_target_dtype():
    small = {"transformer": {"num_layers": 1}}
    parts = frozenset({"transformer"})
    first = build_random_preset(
        "random:cogvideox-2b", components=parts, dtype=torch.bfloat16, overrides=small
    )
    again = build_random_preset(
        "random:cogvideox-2b", components=parts, dtype=torch.bfloat16, overrides=small
    )
    assert first.vae is None and first.text_encoder is None
    weights = dict(first.transformer.named_parameters())
    assert all(p.dtype == torch.bfloat16 for p in weights.values())
    assert first.transformer.config.num_attention_heads == 30  # the real width, 1 layer
    for name, param in again.transformer.named_parameters():
        assert torch.equal(param, weights[name]), name
    fan_in = weights["transformer_blocks.0.attn1.to_q.weight"].float()
    assert abs(fan_in.std().item() * 1920**0.5 - 1.0) < 0.05  # N(0, 1/fan_in), not zeros


@pytest.mark.fast
def test_limits_and_frame_rules_per_model(meta_pipes):
    v10 = family_for("CogVideoXPipeline").limits(meta_pipes["random:cogvideox-5b"], tiny=False)
    assert (v10.default_width, v10.default_height, v10.default_frames) == (720, 480, 49)
    assert (v10.fps, v10.default_steps, v10.default_guidance) == (8, 50, 6.0)
    assert v10.max_frames == 49 and v10.frame_multiple == 4 and v10.temporal_patch == 1
    with pytest.raises(ValueError, match="between 1 and 49 and of the form 4k\\+1"):
        JobRequest.from_body({"prompt": "x", "num_frames": 51}, v10)
    with pytest.raises(ValueError, match="4k\\+1"):
        JobRequest.from_body({"prompt": "x", "num_frames": 48}, v10)
    v15 = family_for("CogVideoXPipeline").limits(meta_pipes["random:cogvideox1.5-5b"], tiny=False)
    assert (v15.default_width, v15.default_height, v15.default_frames) == (1360, 768, 81)
    assert v15.fps == 16 and v15.max_frames == 161 and v15.temporal_patch == 2
    i2v_family = family_for("CogVideoXImageToVideoPipeline")
    i2v = i2v_family.limits(meta_pipes["random:cogvideox-5b-i2v"], tiny=False)
    assert (i2v.fixed_width, i2v.fixed_height) == (720, 480) and i2v.needs_image
    family = family_for("CogVideoXPipeline")
    assert family.batched_cfg
    request = JobRequest(prompt="x", num_frames=9)  # 3 latent frames: 1.5 pads one in front
    assert family.padding_frames(meta_pipes["random:cogvideox1.5-5b"], request) == 1
    assert family.padding_frames(meta_pipes["random:cogvideox-5b"], request) == 0


@pytest.mark.fast
def test_joint_processor_computes_what_diffusers_computes():
    from paradit.backend.models.families.cogvideox.parallel import JointAttnProcessor

    pipe = build_preset("tiny-cogvideox", components=frozenset({"transformer", "vae"}))
    inputs, _guided = cfg_batch(pipe)  # the contract's forward alone (a CFG batch)
    with torch.no_grad():
        reference = pipe.transformer(**inputs, return_dict=False)[0]
        pipe.transformer.set_attn_processor(JointAttnProcessor())
        ours = pipe.transformer(**inputs, return_dict=False)[0]
    assert torch.equal(ours, reference)


# -- the decode's tiles ------------------------------------------------------------------------
# (The plan on the transformer, rotary and 2B's sine-cosine positions, the DiT alone within
# 1e-5 and whole jobs, and the decode's tiles and temporal chunks dealt to 4 and 3 ranks byte
# for byte: the family contract's CogVideoX jobs, `cogvideox/tiny_job.py`.)


def test_one_rank_cuts_the_tiles_of_the_real_size():
    """The real tile size, 240x360 pixels: 400x288 is 2 x 2 tiles, and latents that fit one
    tile are one tile, decoded whole. (The tiles decoded one after another and blended equal
    the VAE's own tiled decode, bit for bit: at the real size in
    test_world_size_1_equals_diffusers_with_vae_tiling, 720x480 in 3 x 3 tiles; in temporal
    chunks dealt to 4 and 3 ranks: the family contract's `_check_decode`.)"""
    pipe = build_preset("tiny-cogvideox", components=frozenset({"transformer", "vae"}))
    family = family_for("CogVideoXPipeline")
    latents = torch.randn(1, 3, 16, 36, 50, generator=torch.Generator().manual_seed(4))
    request = JobRequest(prompt="x", width=400, height=288, num_frames=9)
    pipe.vae.enable_tiling()
    with torch.no_grad():
        tiles = family.tiled_decode(pipe, request, latents[:, :, :, :30, :45])
        assert tiles.num_tiles == 1  # fits one tile: decoded whole
        tiles = family.tiled_decode(pipe, request, latents)
        assert tiles.num_tiles == 4


# -- whole jobs on `paradit serve` groups -----------------------------------------------------


def _run_at(backends, model: str, world_size: int, bodies: list[dict], *extra: str):
    """(info, [Output per body]) of a backend started for these jobs and stopped after them
    (at most one group at a time on small machines)."""
    backend = backends.start(model, world_size, "--save-latents", *extra)
    try:
        client = backend.client
        info = client.info()
        outputs = []
        for body in bodies:
            job, pngs = run_job(client, body)
            assert job["status"] == "succeeded" and len(pngs) == body["num_frames"]
            assert job["preview_step"] == body["num_inference_steps"]  # the last step's
            preview = Image.open(io.BytesIO(client.preview(job["id"])))
            scale = max(1, min(8, 512 // (max(body["width"], body["height"]) // 8)))
            assert preview.size == (body["width"] // 8 * scale, body["height"] // 8 * scale)
            outputs.append((job, _pixels(pngs), client.latents(job["id"])))
    finally:
        backends.stop(backend)
    return info, outputs


@pytest.fixture(scope="module")
def t2v_reference() -> list[Output]:
    """tiny-cogvideox at world size 1: GUIDED, UNGUIDED and CACHED."""
    return world_size_1(build_preset("tiny-cogvideox"), [GUIDED, UNGUIDED, CACHED])


def test_text_to_video_at_world_size_3(backends, t2v_reference):
    """Ulysses 3 on `paradit serve`, every job, equal to world size 1 (within rounding): it
    splits both requests' tokens unevenly (1576 and 175 over 3) and the heads too; the step
    cache skips world size 1's steps. (Ulysses 4 at 720x480, the latent height of 30 that
    xDiT refuses, is the same uneven split: not run again. CFG 2 x Ulysses 2: the family
    contract's guided and cached jobs, and its unguided job spread over 4 ranks.)"""
    reference = t2v_reference
    skipped = reference[2][0]["cache"]["skipped_steps"]
    assert 0 < len(skipped) < 4, skipped
    bodies = [GUIDED, UNGUIDED, CACHED]
    info, outputs = _run_at(backends, "tiny-cogvideox", 3, bodies)
    assert info["family"] == "cogvideox-t2v" and info["limits"]["fps"] == 8
    assert info["plan"]["modes"] == ["ulysses", "fsdp", "vae"] and info["plan"]["vae_parallel"]
    assert info["plan"]["sharded"]
    for body, ours, ref in zip(bodies, outputs, reference, strict=True):
        assert_equivalent(ref, ours, f"ulysses 3, guidance {body.get('guidance_scale', 6.0)}")
    assert outputs[1][0]["timings"]["sequence_layout"] == "plan"
    assert outputs[2][0]["timings"]["cache"]["skipped_steps"] == skipped


def test_world_size_1_equals_diffusers_with_vae_tiling(t2v_reference):
    """The reference no one here wrote: the diffusers pipeline as a user calls it, with
    `vae.enable_tiling()` (720x480 decodes in 3 x 3 tiles of the real size, which world size 1
    decoded one after another: the same float frames; 112x80 fits one)."""
    pipe = build_preset("tiny-cogvideox")
    pipe.set_progress_bar_config(disable=True)
    pipe.vae.enable_tiling()
    limits = family_for("CogVideoXPipeline").limits(pipe, tiny=True)
    torch.set_num_threads(1)
    for body, (job, frames, _latents) in zip([GUIDED, UNGUIDED], t2v_reference, strict=False):
        request = JobRequest.from_body(body, limits).to_dict()  # not CACHED: diffusers has none
        with torch.no_grad():
            direct = pipe(
                prompt=request["prompt"],
                negative_prompt=request["negative_prompt"],
                height=request["height"],
                width=request["width"],
                num_frames=request["num_frames"],
                num_inference_steps=request["num_inference_steps"],
                guidance_scale=request["guidance_scale"],
                generator=torch.Generator("cpu").manual_seed(request["seed"]),
                output_type="np",
            ).frames[0]
        result = compare(frames, to_uint8(np.asarray(direct)), FLOAT32)
        assert result.verdict == IDENTICAL, (request["width"], result.overall)
        np.testing.assert_array_equal(job["frames"], direct)


SMALL = {"prompt": "a folder model", "seed": 21, "guidance_scale": 4.0, "width": 96}
SMALL.update({"height": 64, "num_frames": 9, "num_inference_steps": 2})


def test_learned_positions_take_one_size_and_load_sharded(tmp_path, backends):
    """CogVideoX 1.0 I2V's learned positions (a saved buffer, for one size): the fixed size is
    the rule, and a folder loaded shard by shard (world size 2) reads the buffer too."""
    from paradit.backend.models.seeded import seed_weights

    tiny = build_preset("tiny-cogvideox-i2v")
    config = {k: v for k, v in tiny.transformer.config.items() if not k.startswith("_")}
    config.update(use_learned_positional_embeddings=True, sample_height=8, sample_width=12)
    config.update(sample_frames=9)  # latents 12x8 -> 96x64 pixels, 9 frames
    transformer = seed_weights(type(tiny.transformer).from_config(config), 307)
    positions = transformer.patch_embed.pos_embedding
    with torch.no_grad():
        positions.copy_(torch.randn(positions.shape, generator=torch.Generator().manual_seed(8)))
    tiny.transformer = transformer
    folder = tmp_path / "learned"
    tiny.save_pretrained(folder)
    body = {**SMALL, "image": png_b64(96, 64)}
    (reference,) = world_size_1(tiny, [body])
    backend = backends.start(str(folder), 2, "--save-latents")
    with pytest.raises(BackendError, match="only takes 96x64, got 112x64"):
        backend.client.submit({**body, "width": 112})
    info, (ours,) = _run_at(backends, str(folder), 2, [body])
    limits = info["limits"]
    assert (limits["fixed_width"], limits["fixed_height"]) == (96, 64)
    assert (limits["default_width"], limits["default_height"]) == (96, 64)
    assert info["plan"]["sharded"]
    assert_equivalent(reference, ours, "learned positions, cfg 2, loaded shard by shard")


def _tiny_v15(image_to_video: bool):
    """tiny-cogvideox reshaped as CogVideoX 1.5 (`cogvideox/tiny_job.py`'s variant)."""
    from paradit.backend.models.families.cogvideox.tiny_job import v15

    return v15(build_preset("tiny-cogvideox-i2v" if image_to_video else "tiny-cogvideox"))


I2V = {**UNGUIDED, "guidance_scale": 6.0, "image": png_b64(112, 80)}


def test_cogvideox15_pads_a_frame_and_the_image_matters():
    """CogVideoX 1.5 (9 frames = 3 latent frames: 1.5 pads one in front for its 2-frame
    patches and drops it again before decoding) and tiny-cogvideox-i2v's image, at world size
    1 in this process. (On 4, 3 and 2 ranks: the family contract's CogVideoX jobs; served
    image-to-video on CFG 2, from a folder loaded shard by shard:
    test_learned_positions_take_one_size_and_load_sharded.)"""
    tiny = build_preset("tiny-cogvideox")
    assert family_of(tiny).limits(tiny, tiny=False).default_width == 720  # served from a folder
    t2v = _tiny_v15(False)
    limits = family_of(t2v).limits(t2v, tiny=False)  # what `serve` gives a folder of it
    assert limits.fps == 16 and limits.temporal_patch == 2 and limits.max_frames == 161
    i2v = build_preset("tiny-cogvideox-i2v")
    i2v_family = family_of(i2v)
    assert i2v_family.name == "cogvideox-i2v" and i2v_family.limits(i2v, tiny=True).task == (
        IMAGE_TO_VIDEO
    )
    dark = {**I2V, "image": png_b64(112, 80, scale=0.2)}
    reference, darker = world_size_1(i2v, [I2V, dark])
    assert compare(reference[1], darker[1], FLOAT32).verdict == DIFFERENT, "the image matters"
    (padded,) = world_size_1(t2v, [SMALL])
    assert padded[2].shape[1] == 4  # latents (batch, frames, ...): 3 + 1 padding
