"""HunyuanVideo 1.5 text- and image-to-video: the presets, limits and defaults, the plans at
real size (image-to-video's: what the image adds), world size 1 against
`HunyuanVideo15Pipeline` and `HunyuanVideo15ImageToVideoPipeline` called directly, the step
cache at world size 1. On 4, 3 and 2 ranks (CFG halves, the unguided job's 15 video tokens
spread as 4 + 4 + 4 + 3 and 8 + 7, 20 as 7 + 7 + 6 on Ulysses 3, the image's tokens and
condition latents split, the step cache's decisions and a rank deciding alone, and the DiT
alone on a prompt of one valid text token, fewer than the ranks): the family contract's
HunyuanVideo 1.5 jobs (`hunyuan_video15/tiny_job.py`).

Jobs run as a rank runs them (the family encodes both text encoders and prepares, the
pipeline runs with the engine's step callback and stops at the latents, the VAE decodes tile
by tile), judged with `paradit verify`'s measure (tools/equivalence.py, float32 thresholds,
frames and final latents).

Cost: about 7 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import base64
import dataclasses
import io

import numpy as np
import pytest
import torch
from image_jobs import run_here
from PIL import Image

from paradit.backend.contract import IMAGE_TO_VIDEO, TEXT_TO_VIDEO
from paradit.backend.memory.settings import JobShape
from paradit.backend.memory.sizes import sizes_of_pipeline
from paradit.backend.models.families import enable_tiles, family_for, family_of
from paradit.backend.models.presets import build_preset
from paradit.backend.models.random_presets import build_random_preset
from paradit.backend.parallel import parallelize
from paradit.backend.parallel.plan import ParallelPlan
from paradit.backend.request import JobRequest
from paradit.backend.runtime.job import JobHooks
from paradit.backend.serving.outputs import to_uint8
from paradit.backend.tools.equivalence import (
    DIFFERENT,
    FLOAT32,
    IDENTICAL,
    compare,
)

TINY, RANDOM = "tiny-hunyuanvideo1.5", "random:hunyuanvideo1.5-t2v"
TINY_I2V, RANDOM_I2V = "tiny-hunyuanvideo1.5-i2v", "random:hunyuanvideo1.5-i2v"
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


def _start_image(width: int, height: int) -> Image.Image:
    rng = np.random.default_rng(11)
    return Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))


def _png_b64(image: Image.Image) -> str:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


# Image-to-video at 80x48, the size bucket of the image's aspect ratio at the tiny
# transformer's target size (64), so the pipeline called directly takes the same size: 5
# frames are 2 latent frames of 3 x 5 tokens, the image's latents in the first. Its 16 SigLIP
# tokens join the text. The cached job runs unguided over 6 steps; random weights change a
# lot from step to step (the metric is 0.85-1.16 here): at 0.855 world size 1 skips step 1
# (0.849), where each rank's own half of the tokens alone would decide differently (0.836 and
# 0.863), so a rank deciding alone fails the job.
IMAGE = _start_image(80, 48)
I2V_GUIDED = {**GUIDED, "prompt": "a fox turns its head", "height": 48, "seed": 4}
I2V_GUIDED["image"] = _png_b64(IMAGE)
I2V_UNGUIDED = {**I2V_GUIDED, "prompt": "the fox runs away.", "guidance_scale": 1.0}
I2V_CACHED = {**I2V_UNGUIDED, "num_inference_steps": 6}
I2V_CACHED["cache"] = {"method": "first-block", "threshold": 0.855}
I2V_JOBS = {"i2v guided": I2V_GUIDED, "i2v unguided": I2V_UNGUIDED, "i2v cached": I2V_CACHED}

# DiT parameters on the meta device: HunyuanVideo 1.5's "8.3B parameters".
HUNYUAN_VIDEO15_DIT = 8_326_608_160


def _pipeline(preset: str = TINY):
    """The preset as a rank holds it, with the test's VAE tiles, and its family."""
    pipe = build_preset(preset)
    pipe.set_progress_bar_config(disable=True)
    enable_tiles(pipe.vae, TILE, TILE)
    return pipe, family_of(pipe)


def _run(pipe, body: dict, *, parallel=None, group=None, layouts=None):
    """One job through the engine's `run_on_rank`: (frames as uint8 on rank 0, else None;
    final latents; the steps the callback saw, or the step cache's record for a job with
    `cache`, its decisions agreed over the ranks; the decode's tiles). `parallel`: what
    `parallelize` applied (its step cache switch); `layouts` gets the job's sequence layout."""
    steps: list = []

    def on_step(step: int, _total: int) -> bool:
        steps.append(step - 1)
        return False  # never cancel

    def on_latents(_step: int, latents) -> None:
        assert latents.shape[:2] == (1, 8)

    hooks = JobHooks(on_step=on_step, on_latents=on_latents)
    frames, result = run_here(pipe, body, parallel=parallel, group=group, hooks=hooks)
    if layouts is not None:
        layouts.append(result.sequence_layout)
    record = steps if result.cache is None else result.cache["steps"]
    return frames, result.latents.numpy(), record, result.num_tiles


@pytest.fixture(scope="module")
def references() -> dict:
    """World size 1, one thread: every job's (frames, latents, steps, tiles) and its DiT
    calls."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        pipe, family = _pipeline()
        i2v, i2v_family = _pipeline(TINY_I2V)
        i2v_parallel = parallelize([i2v.transformer], ParallelPlan(1, 1, 1, False, False), CPU)
        calls = []
        pipe.transformer.register_forward_hook(lambda *_args: calls.append(1))
        i2v.transformer.register_forward_hook(lambda *_args: calls.append(1))
        outputs = {}
        for label, body in JOBS.items():
            calls.clear()
            outputs[label] = (*_run(pipe, body), len(calls))
        for label, body in I2V_JOBS.items():
            calls.clear()
            run = _run(i2v, body, parallel=i2v_parallel)
            outputs[label] = (*run, len(calls))
    finally:
        torch.set_num_threads(threads)
    return {"outputs": outputs, "pipe": pipe, "i2v": i2v}


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
    assert not family.batched_cfg
    limits = family.limits(pipe, tiny=True)
    assert limits.task == TEXT_TO_VIDEO and (limits.size_multiple, limits.fps) == (16, 24)
    request = JobRequest.from_body({"prompt": "x"}, limits)
    assert (request.width, request.num_frames, request.num_inference_steps) == (64, 5, 4)
    assert request.guidance_scale == 6.0 and request.uses_cfg
    with pytest.raises(ValueError, match="multiple of 16, got 40"):
        JobRequest.from_body({"prompt": "x", "width": 40}, limits)
    with pytest.raises(ValueError, match="4k\\+1"):
        JobRequest.from_body({"prompt": "x", "num_frames": 8}, limits)


def test_image_to_video_preset_and_its_requests(references):
    """The image-to-video preset: SigLIP tokens of the transformer's image width, a VAE that
    encodes; the family needs an image (the text-to-video one refuses it)."""
    pipe = references["i2v"]
    assert type(pipe).__name__ == "HunyuanVideo15ImageToVideoPipeline"
    assert type(pipe.image_encoder).__name__ == "SiglipVisionModel"
    config = pipe.transformer.config
    assert (config.task_type, config.target_size) == ("i2v", 64)
    assert config.image_embed_dim == pipe.image_encoder.config.hidden_size
    family = family_of(pipe)
    assert family.name == "hunyuanvideo1.5-i2v"
    assert family_for("HunyuanVideo15ImageToVideoPipeline") is family
    assert {"text_encoder", "text_encoder_2", "image_encoder"} <= family.encoder_components
    limits = family.limits(pipe, tiny=True)
    assert limits.task == IMAGE_TO_VIDEO and limits.needs_image
    request = JobRequest.from_body({"prompt": "x", "image": I2V_GUIDED["image"]}, limits)
    assert (request.width, request.height, request.num_frames) == (64, 64, 5)
    with pytest.raises(ValueError, match="image is required for image-to-video"):
        JobRequest.from_body({"prompt": "x"}, limits)
    with pytest.raises(ValueError, match="base64"):
        JobRequest.from_body({"prompt": "x", "image": "not an image"}, limits)
    # The job's size, not the bucket of the image's aspect ratio (80x48 here), while it runs.
    kwargs = family.prepare(pipe, request, {"image_embeds": torch.zeros(1, 16, 16)})
    try:
        assert kwargs["image"].size == (64, 64) and "height" not in kwargs
        assert pipe.video_processor.calculate_default_height_width(48, 80, 64) == (64, 64)
        assert pipe.encode_image(IMAGE, 1, CPU, torch.float32).shape == (1, 16, 16)
    finally:
        family.finish(pipe)
    assert pipe.video_processor.calculate_default_height_width(48, 80, 64) == (48, 80)
    t2v_limits = family_of(references["pipe"]).limits(references["pipe"], tiny=True)
    with pytest.raises(ValueError, match="image is only accepted by image-to-video models"):
        JobRequest.from_body({"prompt": "x", "image": I2V_GUIDED["image"]}, t2v_limits)


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

    # image-to-video (480p_i2v): the same DiT with task "i2v", and SigLIP's 729 tokens of 1152
    i2v = build_random_preset(RANDOM_I2V, device="meta")
    assert type(i2v).__name__ == "HunyuanVideo15ImageToVideoPipeline"
    assert sum(p.numel() for p in i2v.transformer.parameters()) == HUNYUAN_VIDEO15_DIT
    assert i2v.transformer.config.task_type == "i2v"
    vision = i2v.image_encoder.config
    assert vision.hidden_size == i2v.transformer.config.image_embed_dim == 1152
    assert (vision.image_size // vision.patch_size) ** 2 == i2v.vision_num_semantic_tokens == 729
    assert (i2v.feature_extractor.size["height"], i2v.feature_extractor.size["width"]) == (384, 384)
    i2v_family = family_of(i2v)
    assert i2v_family.name == "hunyuanvideo1.5-i2v"
    i2v_limits = i2v_family.limits(i2v, tiny=False)
    assert (i2v_limits.default_width, i2v_limits.default_height) == (848, 480)
    assert i2v_limits.needs_image and i2v_family.text_tokens(i2v) == 1000 + 256 + 729
    assert (i2v.scheduler.config.shift, i2v.guider.config.guidance_scale) == (5.0, 6.0)

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


@pytest.mark.fast
def test_image_to_video_plan_at_real_size(monkeypatch):
    """`paradit plan` of image-to-video at 848x480x121 on 4 GPUs of 80 GB (CFG x Ulysses 2):
    what the start image adds, derived from the configs. Its VAE latents fill the first
    latent frame of the condition channels (2 x 32 + 1 in): no token more. SigLIP (on the
    encoding rank) gives 729 tokens, (384 / 14)^2, which join the text every block attends
    to: the dry run counts 1000 + 256 + 729 text tokens, each at least its states, query,
    key and value (4 rows of the 16 x 128 = 2048-wide stream in bf16)."""
    from paradit.backend.memory import sizes as sizes_module
    from paradit.backend.tools.plan import estimate

    measured = []  # the plan's sizes, to measure the same DiT with fewer text tokens

    def keep(*args, **kwargs):
        measured.append(sizes_of_pipeline(*args, **kwargs))
        return measured[-1]

    monkeypatch.setattr(sizes_module, "sizes_of_pipeline", keep)
    report = estimate(RANDOM_I2V, 4, 80, 848, 480, 121)
    assert report["tokens"] == 31 * 30 * 53 and report["fits"]
    assert report["plan"]["modes"] == ["cfg", "ulysses", "fsdp", "vae"]
    (sizes,) = measured
    assert sizes.dit.config.in_channels == 2 * sizes.vae.config.latent_channels + 1
    weights, job = report["memory"]["weights_bytes"], report["memory"]["reference_job"]
    parts = job["parts_bytes"]
    # SigLIP as configured (1152 wide, 2 layers with an MLP of 512, patches of 14 at 384 px,
    # its attention-pooling head), in bf16 on rank 0 only
    width, mlp, patches = 1152, 512, (384 // 14) ** 2
    linear = width * width + width
    mlp_weights = 2 * width * mlp + mlp + width
    layer = 4 * linear + 2 * 2 * width + mlp_weights
    embeddings = 3 * 14 * 14 * width + width + patches * width
    head = width + 3 * linear + linear + 2 * width + mlp_weights
    siglip = embeddings + 2 * layer + 2 * width + head
    assert weights["image_encoder"] == 2 * siglip
    assert parts["encoders"] == sum(
        weights[name] for name in ("text_encoder", "text_encoder_2", "image_encoder")
    )
    # the image tokens in the text: the plan's activations are the dry run's with them
    assert patches == 729 and sizes.text_tokens == 1000 + 256 + patches
    shape = JobShape(848, 480, 121)
    assert sizes.activations(shape, 2) == parts["activations"]
    without = dataclasses.replace(sizes, text_tokens=1000 + 256, _cache={})
    added = parts["activations"] - without.activations(shape, 2)
    assert 4 * patches * 2048 * 2 <= added < 5 * patches * 2048 * 2, added


# -- world size 1 against diffusers called directly ----------------------------------------------


def _called_directly(pipe, body: dict, **arguments) -> np.ndarray:
    """The pipeline as a user calls it, its guider at the job's guidance scale for the call
    (the model's again after): the job's prompts, frames, steps and seed, and `arguments`
    (a size, or the image); uint8 frames."""
    pipe.guider.guidance_scale = body["guidance_scale"]
    try:
        with torch.no_grad():
            frames = pipe(
                prompt=body["prompt"],
                negative_prompt=body["negative_prompt"],
                num_frames=body["num_frames"],
                num_inference_steps=body["num_inference_steps"],
                generator=torch.Generator().manual_seed(body["seed"]),
                output_type="np",
                **arguments,
            ).frames[0]
    finally:
        pipe.guider.guidance_scale = pipe.guider.config.guidance_scale
    return to_uint8(np.asarray(frames))


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
        direct = _called_directly(pipe, body, height=body["height"], width=body["width"])
        result = compare(outputs[label][0], direct, FLOAT32)
        assert result.verdict == IDENTICAL, (label, result.overall)
    assert compare(outputs["guided"][0], outputs["unguided"][0], FLOAT32).verdict == DIFFERENT


def test_image_to_video_equals_diffusers_called_directly(references):
    """`HunyuanVideo15ImageToVideoPipeline` as a user calls it (the image, which sizes the
    video; no size) gives the job's video bit for bit, guided and not; and the cached job
    skipped steps."""
    outputs, pipe = references["outputs"], references["i2v"]
    assert (outputs["i2v guided"][4], outputs["i2v unguided"][4]) == (4, 2)  # DiT calls
    torch.set_num_threads(1)
    for label in ("i2v guided", "i2v unguided"):
        body = I2V_JOBS[label]
        direct = _called_directly(pipe, body, image=IMAGE)
        result = compare(outputs[label][0], direct, FLOAT32)
        assert result.verdict == IDENTICAL, (label, result.overall)
    assert "encode_image" not in vars(pipe)  # the job's stand-ins are gone after it
    assert "calculate_default_height_width" not in vars(pipe.video_processor)
    record = outputs["i2v cached"][2]
    skipped = [index for index, step in enumerate(record) if not step["computed"]]
    assert len(record) == 6 and skipped == [1], record
