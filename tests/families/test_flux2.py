"""Flux.2 (FLUX.2-dev) text-to-image: the presets, limits and defaults, the plan at real size,
world size 1 against `Flux2Pipeline` called directly, previews, and sequence parallel at 2,
3 and 4 ranks against world size 1.

Jobs run as a rank runs them (the family encodes and prepares, the pipeline stops at the
packed latents, the job undoes the VAE's normalisation and decodes tile by tile with the tiles
dealt to the ranks), judged with `paradit verify`'s measure (tools/equivalence.py, float32
thresholds, image and final latents). The parallel runs share a real gloo group of 4 (forked,
one thread per rank): the world, then groups of its first 3 and first 2 ranks.

Cost: about 7 s (in the suite's two-worker run on 2 cores).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
from conftest import spawn_gloo
from image_jobs import (
    CPU,
    called_directly,
    check_ulysses_layouts,
    encoded,
    preset_pipeline,
    run_image_job,
)

from paradit.backend.contract import TEXT_TO_IMAGE
from paradit.backend.models.families import family_for, family_of
from paradit.backend.models.presets import build_preset
from paradit.backend.models.random_presets import build_random_preset
from paradit.backend.parallel import parallelize
from paradit.backend.parallel.plan import ParallelPlan
from paradit.backend.request import JobRequest
from paradit.backend.tools.equivalence import (
    DIFFERENT,
    FLOAT32,
    IDENTICAL,
    compare,
)

TINY, RANDOM = "tiny-flux2", "random:flux.2-dev"
TILE = 64  # sample pixels: 112x64 px are 14 x 8 latents, tiles of 8 every 6

# 112x64 px are 7 x 4 = 28 image tokens (2x2 patches of the 8x latents) and 512 text tokens
# (the pipeline pads to its length): 540, which 3 ranks divide, 28 does not, nor the 4 heads.
JOBS = {
    "fox": {"prompt": "a red fox in snow 🦊", "seed": 5, "guidance_scale": 4.0},
    "boat": {"prompt": "ein Boot", "seed": 9, "guidance_scale": 2.5},
}
for _body in JOBS.values():
    _body.update(width=112, height=64, num_inference_steps=2)

# DiT parameters on the meta device: FLUX.2-dev's "32B".
FLUX2_DEV_DIT = 32_223_281_152


@pytest.fixture(scope="module")
def references() -> dict:
    """World size 1, one thread: every job's encoded text and (image, latents, tiles)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        pipe, family = preset_pipeline(TINY, TILE)
        tensors, outputs = {}, {}
        for label, body in JOBS.items():
            tensors[label] = encoded(pipe, body)
            outputs[label] = run_image_job(pipe, body, tensors[label])
    finally:
        torch.set_num_threads(threads)
    return {"outputs": outputs, "tensors": tensors, "pipe": pipe}


# -- presets, limits, real sizes ----------------------------------------------------------------


def test_preset_structure_and_limits():
    """The tiny preset's parts fit together; guidance is embedded, so no CFG parallel."""
    pipe = build_preset(TINY)
    assert type(pipe).__name__ == "Flux2Pipeline"
    text_config = pipe.text_encoder.config.text_config
    assert pipe.transformer.config.joint_attention_dim == 3 * text_config.hidden_size
    assert text_config.num_hidden_layers > 30  # the pipeline reads hidden states 10, 20, 30
    assert len(pipe.tokenizer) == text_config.vocab_size
    assert pipe.transformer.config.guidance_embeds
    assert float(pipe.vae.bn.running_var.min()) >= 0.5  # statistics that do something
    family = family_of(pipe)
    assert family.name == "flux2" and family_for("Flux2Pipeline") is family
    assert not family.supports_cfg(pipe)
    # the pipeline calls the DiT outside diffusers' cache context: the engine refuses a job
    # with a `cache` ("flux2 has no step cache")
    assert not family.step_cache
    limits = family.limits(pipe, tiny=True)
    assert limits.task == TEXT_TO_IMAGE and limits.size_multiple == 16 and limits.max_frames == 1
    request = JobRequest.from_body({"prompt": "x"}, limits)
    assert (request.width, request.height, request.num_inference_steps) == (64, 64, 4)
    assert request.guidance_scale == 4.0
    with pytest.raises(ValueError, match="this model has no step cache"):  # at submit
        JobRequest.from_body({"prompt": "x", "cache": {"method": "first-block"}}, limits)


@pytest.mark.fast
def test_random_preset_counts_the_published_parameters():
    pipe = build_random_preset(RANDOM, device="meta")
    assert sum(p.numel() for p in pipe.transformer.parameters()) == FLUX2_DEV_DIT
    config = pipe.transformer.config
    assert (config.num_layers, config.num_single_layers, config.num_attention_heads) == (8, 48, 48)
    text_config = pipe.text_encoder.config.text_config
    assert config.joint_attention_dim == 3 * text_config.hidden_size == 15360
    assert len(pipe.tokenizer) == text_config.vocab_size  # the reduced encoder's vocabulary
    limits = family_of(pipe).limits(pipe, tiny=False)
    assert (limits.default_width, limits.default_height) == (1024, 1024)
    assert (limits.default_steps, limits.default_guidance) == (50, 4.0)


def test_plan_at_real_size():
    """`paradit plan`: the model card's 1024x1024 image (64 x 64 tokens) on 4 GPUs of 80 GB:
    no CFG, Ulysses over all 4, the DiT sharded, its weights in bf16."""
    from paradit.backend.tools.plan import estimate

    report = estimate(RANDOM, 4, 80, 1024, 1024, 1)
    assert report["tokens"] == 64 * 64 and report["fits"]
    assert report["memory"]["weights_bytes"]["transformer"] == FLUX2_DEV_DIT * 2
    assert report["plan"]["modes"] == ["ulysses", "fsdp", "vae"]
    assert report["memory"]["reference_job"]["parts_bytes"]["decode"] > 0


# -- world size 1 against diffusers called directly ----------------------------------------------


def test_world_size_1_equals_diffusers_called_directly(references):
    """`Flux2Pipeline` as a user calls it (prompt, embedded guidance; the VAE's own tiled
    decode) gives the same image, bit for bit."""
    outputs, pipe = references["outputs"], references["pipe"]
    assert outputs["fox"][2] == 6  # VAE tiles
    torch.set_num_threads(1)
    for label, body in JOBS.items():
        direct = called_directly(pipe, body, guidance_scale=body["guidance_scale"])
        result = compare(outputs[label][0], direct, FLOAT32)
        assert result.verdict == IDENTICAL, (label, result.overall)
    assert compare(outputs["fox"][0], outputs["boat"][0], FLOAT32).verdict == DIFFERENT


def test_previews_fit_the_vae_and_draw_the_latents(references):
    """Live previews: the linear map fitted to the Flux.2 VAE (32 channels and a bias to RGB),
    drawn from a step's packed latents unpacked as the decode unpacks them."""
    import io

    from PIL import Image

    from paradit.backend.runtime.preview import Previewer

    pipe = references["pipe"]
    previewer = Previewer.fit(family_of(pipe), pipe)
    assert previewer is not None and tuple(previewer.weights.shape) == (33, 3)
    request = JobRequest.from_body(JOBS["fox"], family_of(pipe).limits(pipe, tiny=True))
    latents = torch.from_numpy(references["outputs"]["fox"][1])
    assert tuple(latents.shape) == (1, 28, 128)
    with Image.open(io.BytesIO(previewer.png(latents, request))) as image:
        assert image.size == (112, 64) and np.asarray(image).std() > 0


# -- 2, 3 and 4 ranks against world size 1 ---------------------------------------------------------


def _refuses_a_plan_for_other_ranks(size: int, group) -> None:
    """A plan for another number of ranks than the group's is refused."""
    if size == 3:
        with pytest.raises(ValueError, match="the plan needs 2 ranks, the group has 3"):
            parallelize([torch.nn.Linear(1, 1)], ParallelPlan(1, 2), CPU, group=group)


def test_sequence_parallel_on_2_3_and_4_ranks_equals_world_size_1(references):
    """diffusers' plan for Flux.2 with Ulysses over 4 ranks (the world), 3 (uneven image
    tokens and heads) and 2 (groups of the first ranks), in one group of 4 processes."""
    check = functools.partial(
        check_ulysses_layouts,
        preset=TINY,
        tile=TILE,
        jobs=JOBS,
        on_group=_refuses_a_plan_for_other_ranks,
    )
    spawn_gloo(4, check, {key: references[key] for key in ("outputs", "tensors")})
