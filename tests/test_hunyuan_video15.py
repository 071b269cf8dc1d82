"""HunyuanVideo 1.5 text-to-video: the presets, limits and defaults, the plan at real size,
world size 1 against `HunyuanVideo15Pipeline` called directly, and world size 2 against
world size 1 (CFG parallel, and Ulysses over both ranks for the unguided job).

Jobs run as a rank runs them (the family encodes both text encoders and prepares, the
pipeline runs with the engine's step callback and stops at the latents, the VAE decodes tile
by tile with the tiles dealt to the ranks), judged with `paradit verify`'s measure
(tools/equivalence.py, float32 thresholds, frames and final latents). The parallel runs are
real gloo groups (forked, one thread per rank).

Cost: about 15 s (in the suite's two-worker run on 2 cores).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import spawn_gloo

from paradit.backend.contract import TEXT_TO_VIDEO
from paradit.backend.memory.settings import JobShape
from paradit.backend.memory.sizes import sizes_of_pipeline
from paradit.backend.models.families import family_for, family_of
from paradit.backend.models.presets import build_preset
from paradit.backend.models.random_presets import build_random_preset
from paradit.backend.models.vae_tiles import enable_tiles
from paradit.backend.parallel import parallelize
from paradit.backend.parallel.plan import ParallelPlan
from paradit.backend.parallel.vae import decode_tiles
from paradit.backend.request import JobRequest
from paradit.backend.serving.outputs import to_uint8
from paradit.backend.tools.equivalence import (
    DIFFERENT,
    FLOAT32,
    IDENTICAL,
    WITHIN_ROUNDING,
    compare,
)

TINY, RANDOM = "tiny-hunyuanvideo1.5", "random:hunyuanvideo1.5-t2v"
CPU = torch.device("cpu")
TILE = 64  # sample pixels: 4 latent pixels every 3; 80 px wide are 2 tiles (of 64 and 32 px)

# The guided job: 80x32 px and 5 frames are 2 latent frames of 2 x 5 tokens (16x, patch 1);
# its prompt quotes a glyph text, so the ByT5 encoder runs too. The unguided job runs one
# branch with no glyphs (ByT5's tensors are zeros and all padding): 80x48 px and one frame
# are 3 x 5 = 15 tokens, which 2 ranks do not divide (nor its 241 valid text tokens, which
# sequence parallel keeps of the ~2000).
GUIDED = {"prompt": 'a fox holding a sign "HELLO"', "negative_prompt": "blurry", "seed": 5}
GUIDED.update(width=80, height=32, num_frames=5, num_inference_steps=2, guidance_scale=6.0)
UNGUIDED = {**GUIDED, "prompt": "ein Boot 🚤.", "seed": 9, "guidance_scale": 1.0}
UNGUIDED.update(height=48, num_frames=1)
JOBS = {"guided": GUIDED, "unguided": UNGUIDED}

# DiT parameters on the meta device: HunyuanVideo 1.5's "8.3B parameters".
HUNYUAN_VIDEO15_DIT = 8_326_608_160


def _pipeline():
    """The preset as a rank holds it, with the test's VAE tiles, and its family."""
    pipe = build_preset(TINY)
    pipe.set_progress_bar_config(disable=True)
    enable_tiles(pipe.vae, TILE, TILE)
    return pipe, family_of(pipe)


def _run(pipe, family, body: dict, *, split_decode: bool = False):
    """One job as the engine runs it: (frames as uint8 on rank 0, else None; final latents;
    the steps the callback saw; the decode's tiles)."""
    request = JobRequest.from_body(body, family.limits(pipe, tiny=True))
    steps: list[int] = []

    def step_end(_pipe, index, _t, kwargs):
        assert kwargs["latents"].shape[:2] == (1, 8)
        steps.append(index)
        return {}

    with torch.no_grad():
        tensors = family.encode(pipe, request, CPU)
        kwargs = family.prepare(pipe, request, tensors)
        try:
            latents = family.pipeline_for_job(pipe, request)(
                **kwargs,
                generator=torch.Generator().manual_seed(request.seed),
                output_type="latent",
                return_dict=False,
                callback_on_step_end=step_end,
            )[0]
        finally:
            family.finish(pipe)
        tiles = family.tiled_decode(pipe, request, latents)
        if split_decode:
            decoded = decode_tiles(tiles, CPU)
        else:
            decoded = [tiles.decode_tile(i) for i in range(tiles.num_tiles)]
    frames = None if decoded is None else to_uint8(tiles.assemble(decoded))
    return frames, latents.numpy(), steps, tiles.num_tiles


def _one_text_token(pipe) -> dict:
    """The transformer's inputs for a prompt of one valid text token (no glyphs, no image):
    fewer than the ranks of a split sequence; 2 x 3 x 5 = 30 video tokens."""
    config = pipe.transformer.config
    generator = torch.Generator().manual_seed(3)
    mask = torch.zeros(1, 1000)
    mask[:, 0] = 1
    return {
        "hidden_states": torch.randn(1, config.in_channels, 2, 3, 5, generator=generator),
        "timestep": torch.tensor([500.0]),
        "encoder_hidden_states": torch.randn(1, 1000, config.text_embed_dim, generator=generator),
        "encoder_attention_mask": mask,
        "encoder_hidden_states_2": torch.zeros(1, 256, config.text_embed_2_dim),
        "encoder_attention_mask_2": torch.zeros(1, 256),
        "image_embeds": torch.zeros(1, 729, config.image_embed_dim),
        "return_dict": False,
    }


@pytest.fixture(scope="module")
def references() -> dict:
    """World size 1, one thread: every job's (frames, latents, steps, tiles) and its DiT
    calls."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        pipe, family = _pipeline()
        calls = []
        pipe.transformer.register_forward_hook(lambda *_args: calls.append(1))
        outputs = {}
        for label, body in JOBS.items():
            calls.clear()
            outputs[label] = (*_run(pipe, family, body), len(calls))
        with torch.no_grad():
            outputs["one token"] = pipe.transformer(**_one_text_token(pipe))[0]
    finally:
        torch.set_num_threads(threads)
    return {"outputs": outputs, "pipe": pipe}


# -- presets, limits, real sizes ----------------------------------------------------------------


def test_preset_structure_and_limits(references):
    pipe = references["pipe"]
    assert type(pipe).__name__ == "HunyuanVideo15Pipeline"
    assert type(pipe.text_encoder).__name__ == "Qwen2_5_VLTextModel"
    assert type(pipe.text_encoder_2).__name__ == "T5EncoderModel"
    config = pipe.transformer.config
    assert config.text_embed_dim == pipe.text_encoder.config.hidden_size
    assert config.text_embed_2_dim == pipe.text_encoder_2.config.d_model
    assert config.in_channels == 2 * pipe.vae.config.latent_channels + 1
    assert len(pipe.tokenizer) == pipe.text_encoder.config.vocab_size
    assert pipe.vae_scale_factor_spatial == 16 and pipe.vae_scale_factor_temporal == 4
    assert pipe.scheduler.config.shift == 5.0 and pipe.guider.config.guidance_scale == 6.0
    family = family_of(pipe)
    assert family.name == "hunyuanvideo1.5-t2v" and family_for("HunyuanVideo15Pipeline") is family
    assert {"text_encoder", "text_encoder_2"} <= family.encoder_components
    assert not family.batched_cfg and family.decodes_in_job
    limits = family.limits(pipe, tiny=True)
    assert limits.task == TEXT_TO_VIDEO and (limits.size_multiple, limits.fps) == (16, 24)
    request = JobRequest.from_body({"prompt": "x"}, limits)
    assert (request.width, request.num_frames, request.num_inference_steps) == (64, 5, 4)
    assert request.guidance_scale == 6.0 and request.uses_cfg
    with pytest.raises(ValueError, match="multiple of 16, got 40"):
        JobRequest.from_body({"prompt": "x", "width": 40}, limits)
    with pytest.raises(ValueError, match="4k\\+1"):
        JobRequest.from_body({"prompt": "x", "num_frames": 8}, limits)


@pytest.mark.fast
def test_random_preset_counts_the_published_parameters():
    pipe = build_random_preset(RANDOM, device="meta")
    assert sum(p.numel() for p in pipe.transformer.parameters()) == HUNYUAN_VIDEO15_DIT
    config = pipe.transformer.config
    assert (config.num_layers, config.num_attention_heads, config.attention_head_dim) == (
        54,
        16,
        128,
    )
    assert config.text_embed_dim == pipe.text_encoder.config.hidden_size == 3584
    assert config.text_embed_2_dim == pipe.text_encoder_2.config.d_model == 1472
    assert len(pipe.tokenizer) == pipe.text_encoder.config.vocab_size
    family = family_of(pipe)
    limits = family.limits(pipe, tiny=False)
    assert (limits.default_width, limits.default_height, limits.default_frames) == (848, 480, 121)
    assert (limits.fps, limits.default_steps, limits.default_guidance) == (24, 50, 6.0)
    assert family.text_tokens(pipe) == 1000 + 256 + 729
    # the 720p models (target size 960) default to 16:9 at 720p, as their pipeline does
    hd = build_random_preset(
        RANDOM,
        components=frozenset({"transformer", "vae", "guider"}),
        device="meta",
        overrides={"transformer": {"target_size": 960}},
    )
    hd_limits = family.limits(hd, tiny=False)
    assert (hd_limits.default_width, hd_limits.default_height) == (1280, 720)

    # A block's activations at 848x480x121 on one rank: diffusers' processor builds a
    # boolean mask of one value per query and key (and its repeat), which dominates. Split
    # over 2 ranks paradit's processor needs no mask: far less than half.
    sizes = sizes_of_pipeline(pipe, family, torch.bfloat16)
    mask = (31 * 30 * 53 + family.text_tokens(pipe)) ** 2
    whole = sizes.activations(JobShape(848, 480, 121), 1)
    assert 2 * mask < whole < 4 * mask
    assert sizes.activations(JobShape(848, 480, 121), 2) < whole / 4


def test_plan_at_real_size():
    """`paradit plan`: the model card's 848x480 video of 121 frames (31 latent frames of
    30 x 53 tokens) on 4 GPUs of 80 GB: CFG x Ulysses, the DiT sharded, its weights in bf16,
    the decode split over the ranks."""
    from paradit.backend.tools.plan import estimate

    report = estimate(RANDOM, 4, 80, 848, 480, 121)
    assert report["tokens"] == 31 * 30 * 53 and report["fits"]
    assert report["memory"]["weights_bytes"]["transformer"] == HUNYUAN_VIDEO15_DIT * 2
    assert report["plan"]["modes"] == ["cfg", "ulysses", "fsdp", "vae"]
    parts = report["memory"]["reference_job"]["parts_bytes"]
    assert parts["decode"] > 0 and parts["activations"] > 0


# -- world size 1 against diffusers called directly ----------------------------------------------


def test_world_size_1_equals_diffusers_called_directly(references):
    """`HunyuanVideo15Pipeline` as a user calls it (prompt, negative prompt, the guider's
    scale; the VAE's own tiled decode) gives the same video, bit for bit; the engine's step
    callback ran once per step through the scheduler."""
    outputs, pipe = references["outputs"], references["pipe"]
    assert outputs["guided"][3] == outputs["unguided"][3] == 2  # VAE tiles
    assert (outputs["guided"][4], outputs["unguided"][4]) == (4, 2)  # DiT calls: CFG or not
    assert outputs["guided"][2] == outputs["unguided"][2] == [0, 1]
    assert pipe.guider.guidance_scale == 6.0  # the model's again after the jobs
    torch.set_num_threads(1)
    for label, body in JOBS.items():
        pipe.guider.guidance_scale = body["guidance_scale"]
        try:
            with torch.no_grad():
                direct = pipe(
                    prompt=body["prompt"],
                    negative_prompt=body["negative_prompt"],
                    height=body["height"],
                    width=body["width"],
                    num_frames=body["num_frames"],
                    num_inference_steps=body["num_inference_steps"],
                    generator=torch.Generator().manual_seed(body["seed"]),
                    output_type="np",
                ).frames[0]
        finally:
            pipe.guider.guidance_scale = pipe.guider.config.guidance_scale
        result = compare(outputs[label][0], to_uint8(np.asarray(direct)), FLOAT32)
        assert result.verdict == IDENTICAL, (label, result.overall)
    assert compare(outputs["guided"][0], outputs["unguided"][0], FLOAT32).verdict == DIFFERENT


# -- world size 2 against world size 1 -----------------------------------------------------


def _check_group(rank: int, world_size: int, cfg_degree: int, outputs: dict) -> None:
    """Every job on this group's plan (FSDP2 over all ranks, the decode's tiles dealt to
    them) against world size 1: a job that runs whole on its CFG half byte-identical, a split
    sequence within rounding."""
    plan = ParallelPlan(cfg_degree, world_size // cfg_degree, 1, True, True)
    pipe, family = _pipeline()
    parallel = parallelize([pipe.transformer], plan, CPU)
    limits = family.limits(pipe, tiny=True)
    layouts = []
    for label, body in JOBS.items():
        request = JobRequest.from_body(body, limits)
        tokens = limits.tokens(request.width, request.height, request.num_frames)
        layout = parallel.begin_job(family.uses_cfg(pipe, request), tokens)
        layouts.append(layout)
        frames, latents, _steps, _tiles = _run(pipe, family, body, split_decode=True)
        parallel.begin_job(False)
        if rank != 0:
            assert frames is None
            continue
        reference = outputs[label]
        result = compare(reference[0], frames, FLOAT32, reference[1], latents)
        split = plan.sequence_degree > 1 or layout == "spread"
        expected = {IDENTICAL, WITHIN_ROUNDING} if split else {IDENTICAL}
        assert result.verdict in expected, (label, plan.to_dict()["modes"], result.overall)
    assert layouts == ["plan", "spread"]  # guided: CFG halves; unguided: Ulysses 2

    # A prompt of one valid text token on Ulysses 2: a padding token is kept for the other
    # rank, and masked.
    assert parallel.begin_job(False, 30) == "spread"
    with torch.no_grad():
        out = pipe.transformer(**_one_text_token(pipe))[0]
    parallel.begin_job(False)
    torch.testing.assert_close(out, outputs["one token"], rtol=1e-4, atol=1e-5)


def test_parallel_jobs_equal_world_size_1(references):
    """2 ranks, CFG parallel: the guided job's branches side by side (each whole on its
    rank: byte-identical); the unguided job spread over both as Ulysses 2 (uneven video and
    text tokens: within rounding), and a prompt of fewer text tokens than ranks.
    `paradit verify` ran 3 and 4 ranks by hand."""
    spawn_gloo(2, _check_group, 2, references["outputs"])
