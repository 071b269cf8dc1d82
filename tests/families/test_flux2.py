"""Flux.2 (FLUX.2-dev) text-to-image: the presets, limits and defaults, the plan at real size,
world size 1's tiles, and previews. (World size 1 against `Flux2Pipeline` called directly and
sequence parallel at 2, 3 and 4 ranks against world size 1: the family contract,
tests/families/test_family_contract.py.)

Jobs run as a rank runs them (the family encodes and prepares, the pipeline stops at the
packed latents, the job undoes the VAE's normalisation and decodes tile by tile).

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from image_jobs import (
    encoded,
    preset_pipeline,
    run_image_job,
)

from paradit.backend.contract import TEXT_TO_IMAGE
from paradit.backend.models.families import family_for, family_of
from paradit.backend.models.presets import build_preset
from paradit.backend.models.random_presets import build_random_preset
from paradit.backend.request import JobRequest
from paradit.backend.tools.equivalence import (
    DIFFERENT,
    FLOAT32,
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


# -- world size 1 (against diffusers: tests/families/test_family_contract.py) ---------------


def test_jobs_decode_in_tiles(references):
    outputs = references["outputs"]
    assert outputs["fox"][2] == 6  # VAE tiles
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
