"""Z-Image (Turbo) text-to-image: the presets, limits and defaults, the plan at real size,
world size 1's tiles and masked guided batch, and previews. (World size 1 against
`ZImagePipeline` called directly and sequence parallel at 2, 3 and 4 ranks against world
size 1: the family contract, tests/families/test_family_contract.py.)

Jobs run as a rank runs them (the family encodes and prepares, the pipeline stops at the
latents, the VAE decodes tile by tile), judged with `paradit verify`'s measure
(tools/equivalence.py, float32 thresholds).

Cost: about 2 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import spawn_gloo
from image_jobs import (
    encoded,
    preset_pipeline,
    run_image_job,
)

from paradit.backend.contract import TEXT_TO_IMAGE
from paradit.backend.models.families import family_for, family_of
from paradit.backend.models.presets import build_preset
from paradit.backend.models.random_presets import build_random_preset
from paradit.backend.parallel import parallelize
from paradit.backend.parallel.plan import ParallelPlan, choose_plan
from paradit.backend.parallel.step_cache import install_step_cache
from paradit.backend.request import JobRequest
from paradit.backend.tools.equivalence import (
    DIFFERENT,
    FLOAT32,
    compare,
)

TINY, RANDOM = "tiny-z-image", "random:z-image-turbo"
TILE = 64  # sample pixels: 112x64 px are 14 x 8 latents, tiles of 8 every 6

# 112x64 px are 7 x 4 = 28 image tokens (2x2 patches of the 8x latents), padded to 32, then
# the text padded to 32: a joint sequence of 64 tokens, which 3 ranks do not divide (nor the
# 4 heads). The guided job runs both branches as the pipeline's batch of two, whose texts pad
# to different lengths (a key mask); the unguided one is Turbo's single branch.
GUIDED = {"prompt": "a red fox in snow, at dawn, with a long tail 🦊", "seed": 5}
GUIDED.update(negative_prompt="blurry", width=112, height=64, num_inference_steps=2)
GUIDED.update(guidance_scale=4.0)
UNGUIDED = {"prompt": "ein Boot", "seed": 9, "width": 112, "height": 64}
UNGUIDED.update(num_inference_steps=2, guidance_scale=1.0)
JOBS = {"guided": GUIDED, "unguided": UNGUIDED}

# DiT parameters on the meta device: Z-Image's "6B" single-stream DiT.
Z_IMAGE_DIT = 6_154_908_736


@pytest.fixture(scope="module")
def references() -> dict:
    """World size 1, one thread: every job's encoded text and (image, latents, tiles) and,
    for each DiT call, its batch and whether its main layers got a key mask."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        pipe, family = preset_pipeline(TINY, TILE)
        calls = []
        pipe.transformer.layers[0].register_forward_pre_hook(
            lambda _m, args: calls.append((len(args[0]), args[1] is not None))
        )
        tensors, outputs = {}, {}
        for label, body in JOBS.items():
            tensors[label] = encoded(pipe, body)
            calls.clear()
            outputs[label] = run_image_job(pipe, body, tensors[label])
            outputs[label] += (list(calls),)
    finally:
        torch.set_num_threads(threads)
    return {"outputs": outputs, "tensors": tensors, "pipe": pipe}


# -- presets, limits, real sizes ----------------------------------------------------------------


def test_preset_structure_limits_and_plan():
    """The tiny preset's parts fit together; Turbo's defaults (1 = no guidance, the
    pipeline's 0); no CFG parallel, so an even world size splits the sequence over all ranks."""
    pipe = build_preset(TINY)
    assert type(pipe).__name__ == "ZImagePipeline"
    assert type(pipe.text_encoder).__name__ == "Qwen3Model"
    assert pipe.transformer.config.cap_feat_dim == pipe.text_encoder.config.hidden_size
    assert len(pipe.tokenizer) == pipe.text_encoder.config.vocab_size
    assert pipe.scheduler.config.shift == 3.0 and not pipe.scheduler.config.use_dynamic_shifting
    family = family_of(pipe)
    assert family.name == "z-image" and family_for("ZImagePipeline") is family
    assert family.batched_cfg and not family.supports_cfg(pipe)
    limits = family.limits(pipe, tiny=True)
    assert limits.task == TEXT_TO_IMAGE and limits.size_multiple == 16 and limits.max_frames == 1
    request = JobRequest.from_body({"prompt": "x"}, limits)
    assert (request.width, request.height, request.num_inference_steps) == (64, 64, 4)
    assert request.guidance_scale == 1.0 and not request.uses_cfg
    embeds = {"prompt_embeds": torch.zeros(3, 32)}
    assert family.prepare(pipe, request, embeds)["guidance_scale"] == 0.0
    guided = JobRequest.from_body({"prompt": "x", "guidance_scale": 4.0}, limits)
    assert family.prepare(pipe, guided, embeds)["guidance_scale"] == 3.0
    with pytest.raises(ValueError, match="multiple of 16, got 40"):
        JobRequest.from_body({"prompt": "x", "width": 40}, limits)
    plan = choose_plan(4, supports_cfg=family.supports_cfg(pipe), device_type="cuda")
    assert (plan.cfg_degree, plan.ulysses_degree) == (1, 4)
    with pytest.raises(ValueError, match="needs a model with classifier-free guidance"):
        choose_plan(2, supports_cfg=False, device_type="cpu", cfg_degree=2)
    # diffusers' step cache reads a block input named `hidden_states`, Z-Image's is `x`: no
    # cache, so the engine refuses a job that asks for one ("z-image has no step cache")
    assert install_step_cache(pipe.transformer) is None
    assert not family.step_cache and not limits.step_cache  # refused at submit


def _attention_calls_at_two_ranks(rank: int, world_size: int) -> None:
    """One rank: the tiny DiT under Ulysses over both ranks, one forward of 28 image tokens
    (padded to 32) and 5 text tokens (padded to 32); every attention call's query tokens and
    whether it got a parallel config (the processors call `dispatch_attention_fn`)."""
    from diffusers.models.transformers import transformer_z_image

    pipe, _family = preset_pipeline(TINY, TILE, encoders=False)
    parallel = parallelize([pipe.transformer], ParallelPlan(1, world_size), torch.device("cpu"))
    assert parallel.layouts, "the sequence is split"
    calls: list[tuple[int, bool]] = []
    dispatch = transformer_z_image.dispatch_attention_fn

    def spy(query, *args, parallel_config=None, **kwargs):
        calls.append((query.shape[1], parallel_config is not None))
        return dispatch(query, *args, parallel_config=parallel_config, **kwargs)

    transformer_z_image.dispatch_attention_fn = spy
    try:
        channels = pipe.transformer.config.in_channels
        generator = torch.Generator().manual_seed(0)
        latents = torch.randn(channels, 1, 8, 14, generator=generator)
        text = torch.randn(5, pipe.transformer.config.cap_feat_dim, generator=generator)
        with torch.no_grad():
            pipe.transformer([latents], torch.tensor([0.5]), [text], return_dict=False)
    finally:
        transformer_z_image.dispatch_attention_fn = dispatch
    config = pipe.transformer.config
    refiners = [(32, False)] * config.n_refiner_layers * 2  # image part, then text part
    assert calls == refiners + [(64 // world_size, True)] * config.n_layers, calls


def test_refiners_attend_whole_parts_without_the_sequence_split():
    """Under the plan the refiners (noise and context: each over its part whole, before the
    joint sequence) get no parallel config, so no rank's tokens are gathered from every rank
    (repeated once per rank: the same image within rounding at ranks times the refiners'
    cost); the main layers attend over each rank's share of the 64 joint tokens."""
    spawn_gloo(2, _attention_calls_at_two_ranks)


@pytest.mark.fast
def test_random_preset_counts_the_published_parameters():
    pipe = build_random_preset(RANDOM, device="meta")
    assert sum(p.numel() for p in pipe.transformer.parameters()) == Z_IMAGE_DIT
    config = pipe.transformer.config
    assert (config.n_layers, config.n_refiner_layers, config.n_heads, config.dim) == (
        30,
        2,
        30,
        3840,
    )
    assert config.cap_feat_dim == pipe.text_encoder.config.hidden_size == 2560
    assert len(pipe.tokenizer) == pipe.text_encoder.config.vocab_size  # the reduced encoder's
    limits = family_of(pipe).limits(pipe, tiny=False)
    assert (limits.default_width, limits.default_height) == (1024, 1024)
    assert (limits.default_steps, limits.default_guidance) == (9, 1.0)


def test_plan_at_real_size():
    """`paradit plan`: the model card's 1024x1024 image (64 x 64 tokens) on 4 GPUs of 24 GB:
    no CFG, Ulysses over all 4, the DiT sharded, its weights in bf16."""
    from paradit.backend.tools.plan import estimate

    report = estimate(RANDOM, 4, 24, 1024, 1024, 1)
    assert report["tokens"] == 64 * 64 and report["fits"]
    assert report["memory"]["weights_bytes"]["transformer"] == Z_IMAGE_DIT * 2
    assert report["plan"]["modes"] == ["ulysses", "fsdp", "vae"]
    assert (report["plan"]["cfg_degree"], report["plan"]["ulysses_degree"]) == (1, 4)
    assert report["memory"]["reference_job"]["parts_bytes"]["decode"] > 0


# -- world size 1 (against diffusers: tests/families/test_family_contract.py) ---------------


def test_jobs_decode_in_tiles_and_mask_the_guided_batch(references):
    """The image decodes in 6 tiles; the guided job's two texts pad to 64 and 32 tokens, so
    its batch is masked (the contract suite's guided job runs the same path against diffusers
    and on 2-4 ranks)."""
    outputs = references["outputs"]
    assert outputs["guided"][2] == 6  # VAE tiles
    assert outputs["guided"][3] == [(2, True)] * 2  # DiT calls: (batch, key mask)
    assert outputs["unguided"][3] == [(1, False)] * 2
    assert compare(outputs["guided"][0], outputs["unguided"][0], FLOAT32).verdict == DIFFERENT


def test_previews_fit_the_vae_and_draw_the_latents(references):
    """Live previews: the linear map fitted to Flux's VAE (16 channels and a bias to RGB),
    drawn from a step's latents (not packed) at 8 pixels per latent pixel."""
    import io

    from PIL import Image

    from paradit.backend.runtime.preview import Previewer

    pipe = references["pipe"]
    previewer = Previewer.fit(family_of(pipe), pipe)
    assert previewer is not None and tuple(previewer.weights.shape) == (17, 3)
    request = JobRequest.from_body(GUIDED, family_of(pipe).limits(pipe, tiny=True))
    latents = torch.from_numpy(references["outputs"]["guided"][1])
    assert tuple(latents.shape) == (1, 16, 8, 14)
    with Image.open(io.BytesIO(previewer.png(latents, request))) as image:
        assert image.size == (112, 64) and np.asarray(image).std() > 0
