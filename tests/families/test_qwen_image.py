"""Qwen-Image text-to-image: the presets, limits and defaults, the plan at real size, world
size 1's tiles and DiT calls, previews, and the served model on 2 ranks against world size 1.
(World size 1 against `QwenImagePipeline` called directly and CFG and Ulysses at 2, 3 and 4
ranks against world size 1: the family contract, tests/families/test_family_contract.py.)

Jobs run as a rank runs them (the family encodes and prepares, the pipeline stops at the
latents, the VAE decodes tile by tile), judged with `paradit verify`'s measure
(tools/equivalence.py, float32 thresholds, image and final latents).

Cost: about 5 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import run_job
from image_jobs import preset_pipeline, run_image_job

from paradit.backend.contract import TEXT_TO_IMAGE
from paradit.backend.models.families import family_for, family_of
from paradit.backend.models.presets import build_preset
from paradit.backend.models.random_presets import build_random_preset
from paradit.backend.models.seeded import qwen_chat_tokenizer
from paradit.backend.request import JobRequest
from paradit.backend.tools.equivalence import (
    DIFFERENT,
    FLOAT32,
    IDENTICAL,
    compare,
)
from paradit.backend.tools.verify import decode_png

TINY, RANDOM = "tiny-qwen-image", "random:qwen-image"
TILE = 64  # sample pixels: 112x64 px are 14 x 8 latents, 2 x 3 tiles of 8 every 6

# 112x64 px are 7 x 4 = 28 image tokens (2x2 patches of the 8x latents), which 3 ranks do not
# divide (nor the 4 heads); the guided prompt is 27 text tokens after the template, which no
# rank count here divides. The guided job runs true CFG (two branches); the other one branch.
GUIDED = {"prompt": "a red fox in snow 🦊", "negative_prompt": "blurry", "seed": 5}
GUIDED.update(width=112, height=64, num_inference_steps=2, guidance_scale=4.0)
UNGUIDED = {"prompt": "ein Boot", "seed": 9, "width": 112, "height": 64}
UNGUIDED.update(num_inference_steps=2, guidance_scale=1.0)
# ComfyUI's plain CFG (`cfg_mode` plain: sampling/guidance.py) beneath CFG parallel too
PLAIN = {**GUIDED, "cfg_mode": "plain"}
# ComfyUI's CFGNorm (`cfg_mode` norm) too: every rank norms the same two whole predictions
NORM = {**GUIDED, "cfg_mode": "norm", "cfg_norm": 0.9}
JOBS = {"guided": GUIDED, "unguided": UNGUIDED, "plain": PLAIN, "norm": NORM}

# DiT parameters on the meta device: Qwen-Image's "20B MMDiT".
QWEN_IMAGE_DIT = 20_430_401_088


@pytest.fixture(scope="module")
def references() -> dict:
    """World size 1, one thread: every job's (image, latents, tiles) and the DiT calls."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        pipe, family = preset_pipeline(TINY, TILE)
        calls = []
        pipe.transformer.register_forward_hook(lambda *_args: calls.append(1))
        outputs = {}
        for label, body in JOBS.items():
            calls.clear()
            outputs[label] = run_image_job(pipe, body)
            outputs[label] += (len(calls),)
    finally:
        torch.set_num_threads(threads)
    return {"outputs": outputs, "pipe": pipe}


# -- presets, limits, real sizes ----------------------------------------------------------------


@pytest.mark.fast
def test_tokenizer_cuts_the_template_where_the_pipeline_drops_it():
    """The pipeline drops the template's first 34 tokens: with this tokenizer they are its
    whole system part and `<|im_start|>user\\n`, as with Qwen2.5-VL's own tokenizer."""
    pipe = build_preset(TINY, components=frozenset({"tokenizer"}))
    text, drop = pipe.prompt_template_encode, pipe.prompt_template_encode_start_idx
    tokenizer = qwen_chat_tokenizer()
    ids = tokenizer(text.format("狐 x")).input_ids
    head = tokenizer.decode(ids[:drop])
    assert drop == 34
    assert head == text.split("{}")[0] and head.endswith("<|im_start|>user\n")
    assert tokenizer.decode(ids[drop:]) == "狐 x<|im_end|>\n<|im_start|>assistant\n"
    assert tokenizer.unk_token_id not in ids and tokenizer.eos_token_id not in ids


def test_preset_structure_and_limits():
    pipe = build_preset(TINY)
    assert type(pipe).__name__ == "QwenImagePipeline"
    assert type(pipe.vae).__name__ == "AutoencoderKLQwenImage"
    assert (
        pipe.transformer.config.joint_attention_dim
        == pipe.text_encoder.config.text_config.hidden_size
    )
    assert len(pipe.tokenizer) == pipe.text_encoder.config.text_config.vocab_size
    assert pipe.scheduler.config.time_shift_type == "exponential"
    family = family_of(pipe)
    assert family.name == "qwen-image" and family_for("QwenImagePipeline") is family
    assert not family.batched_cfg
    limits = family.limits(pipe, tiny=True)
    assert limits.task == TEXT_TO_IMAGE and limits.size_multiple == 16 and limits.max_frames == 1
    request = JobRequest.from_body({"prompt": "x"}, limits)
    assert (request.width, request.height, request.num_inference_steps) == (64, 64, 4)
    assert request.guidance_scale == 4.0 and request.uses_cfg
    with pytest.raises(ValueError, match="multiple of 16, got 40"):
        JobRequest.from_body({"prompt": "x", "width": 40}, limits)


@pytest.mark.fast
def test_random_preset_counts_the_published_parameters():
    pipe = build_random_preset(RANDOM, device="meta")
    assert sum(p.numel() for p in pipe.transformer.parameters()) == QWEN_IMAGE_DIT
    config = pipe.transformer.config
    assert (config.num_layers, config.num_attention_heads, config.attention_head_dim) == (
        60,
        24,
        128,
    )
    text_config = pipe.text_encoder.config.text_config
    assert config.joint_attention_dim == text_config.hidden_size == 3584
    assert len(pipe.tokenizer) == text_config.vocab_size  # the reduced encoder's vocabulary
    limits = family_of(pipe).limits(pipe, tiny=False)
    assert (limits.default_width, limits.default_height) == (1328, 1328)
    assert (limits.default_steps, limits.default_guidance) == (50, 4.0)


def test_plan_at_real_size():
    """`paradit plan`: the model card's 1328x1328 image (83 x 83 tokens) on 4 GPUs of 80 GB:
    CFG x Ulysses, the DiT sharded, its weights in bf16."""
    from paradit.backend.tools.plan import estimate

    report = estimate(RANDOM, 4, 80, 1328, 1328, 1)
    assert report["tokens"] == 83 * 83 and report["fits"]
    assert report["memory"]["weights_bytes"]["transformer"] == QWEN_IMAGE_DIT * 2
    assert report["plan"]["modes"] == ["cfg", "ulysses", "fsdp", "vae"]
    assert report["memory"]["reference_job"]["parts_bytes"]["decode"] > 0


# -- world size 1 (against diffusers: tests/families/test_family_contract.py) ---------------


def test_jobs_decode_in_tiles_and_call_the_dit_per_branch(references):
    outputs = references["outputs"]
    assert outputs["guided"][2] == 6  # VAE tiles
    assert (outputs["guided"][3], outputs["unguided"][3]) == (4, 2)  # DiT calls: CFG or not
    assert compare(outputs["guided"][0], outputs["unguided"][0], FLOAT32).verdict == DIFFERENT


def test_previews_fit_the_vae_and_draw_the_latents(references):
    """Live previews: the linear map fitted to the Qwen-Image VAE (16 channels and a bias to
    RGB), drawn from a step's packed latents at 8 pixels per latent pixel."""
    import io

    from PIL import Image

    from paradit.backend.runtime.preview import Previewer

    pipe = references["pipe"]
    previewer = Previewer.fit(family_of(pipe), pipe)
    assert previewer is not None and tuple(previewer.weights.shape) == (17, 3)
    request = JobRequest.from_body(GUIDED, family_of(pipe).limits(pipe, tiny=True))
    latents = torch.from_numpy(references["outputs"]["guided"][1])
    with Image.open(io.BytesIO(previewer.png(latents, request))) as image:
        assert image.size == (112, 64) and np.asarray(image).std() > 0


# -- the served model against world size 1 -----------------------------------------------------


def test_served_model_equals_world_size_1(backends, references):
    """The engine's path (`paradit serve` on 2 ranks: rank 0 encodes and broadcasts, CFG
    parallel, the decode's tiles dealt to both): each job byte-identical to the references
    (the plain-CFG and CFGNorm jobs' wrappers around CFG parallel's included)."""
    backend = backends.start(TINY, 2, "--save-latents", "--vae-tiling", "on", "--vae-tile", "64x64")
    try:
        info = backend.client.info()
        assert info["family"] == "qwen-image" and info["task"] == TEXT_TO_IMAGE
        assert info["limits"]["default_guidance"] == 4.0
        for label, body in JOBS.items():
            job, pngs = run_job(backend.client, body)
            assert job["status"] == "succeeded" and len(pngs) == 1
            reference = references["outputs"][label]
            latents = backend.client.latents(job["id"])
            result = compare(
                reference[0], decode_png(pngs[0])[None], FLOAT32, reference[1], latents
            )
            assert result.verdict == IDENTICAL, (label, result.overall)
    finally:
        backends.stop(backend)
