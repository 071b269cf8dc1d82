"""Flux.2 Klein (FLUX.2-klein-4B/9B, distilled, and -base-4B) text-to-image: the presets,
limits and defaults per variant, what the VAE's latents and tiles are, and that the base model's
true CFG changes the image. Both jobs at world size 1 against `Flux2KleinPipeline` called
directly and in sequence parallel at 2, 3 and 4 ranks against world size 1: the family
contract's (tests/families/test_family_contract.py: the base model's is its smallest job, CFG
parallel on 2 and 4 ranks byte for byte, `flux2_klein/tiny_job.py`).

Jobs run as a rank runs them (the family encodes and prepares, the pipeline stops at the VAE's
latents, the decode runs tile by tile with the tiles dealt to the ranks), judged with
`paradit verify`'s measure (float32 thresholds, image and final latents). The distilled job
has no guidance; the base job runs true CFG (the unconditional branch as a second transformer
call; CFG parallel's halves are the contract's). The KV model (tiny-flux2-klein-kv, the same
weights on `Flux2KleinKVPipeline`): one branch, no CFG, cfg above 1 refused from a workflow;
without references its job is the distilled model's image byte for byte, with a reference
its cached attention gives another image than Klein's recomputed one (its world size 1 against
the pipeline and its Ulysses plan: the contract's `kv edit` job). No gloo group here.

Cost: about 3 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from image_jobs import encoded, preset_pipeline, run_image_job

from paradit.backend.contract import TEXT_TO_IMAGE
from paradit.backend.models.families import family_for, family_of
from paradit.backend.models.random_presets import build_random_preset, random_preset_spec
from paradit.backend.request import JobRequest
from paradit.backend.tools.equivalence import DIFFERENT, FLOAT32, compare

TINY = "tiny-flux2-klein"
TILE = 64  # sample pixels: 112x64 px are 14 x 8 latents, tiles of 8 every 6

# 112x64 px are 7 x 4 = 28 image tokens and 512 text tokens (the pipeline pads to its length):
# 540. The base job's unconditional branch is the negative prompt (the pipeline's own is
# empty).
JOBS = {
    "distilled": {"prompt": "a red fox in snow 🦊", "seed": 5, "guidance_scale": 1.0},
    "base": {"prompt": "ein Boot", "seed": 9, "guidance_scale": 4.0},
}
for _body in JOBS.values():
    _body.update(width=112, height=64, num_inference_steps=2)

# DiT parameters on the meta device: the published "4B" and "9B".
KLEIN_DITS = {
    "random:flux.2-klein-4b": (3_875_544_576, (5, 20, 24), 2560, True),
    "random:flux.2-klein-9b": (9_078_581_248, (8, 24, 32), 4096, True),
    "random:flux.2-klein-base-9b": (9_078_581_248, (8, 24, 32), 4096, False),
    "random:flux.2-klein-9b-kv": (9_078_581_248, (8, 24, 32), 4096, True),  # its own pipeline
}


def _variant(pipe, label: str):
    """The distilled preset, or the same components as an undistilled (-base) pipeline
    (tiny-flux2-klein-base's)."""
    if label == "distilled":
        return pipe
    undistilled = type(pipe)(**pipe.components, is_distilled=False)
    undistilled.set_progress_bar_config(disable=True)
    return undistilled


@pytest.fixture(scope="module")
def references() -> dict:
    """World size 1, one thread: every job's encoded text and (image, latents, tiles)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        pipe, _ = preset_pipeline(TINY, TILE)
        tensors, outputs = {}, {}
        for label, body in JOBS.items():
            variant = _variant(pipe, label)
            tensors[label] = encoded(variant, body)
            outputs[label] = run_image_job(variant, body, tensors[label])
    finally:
        torch.set_num_threads(threads)
    return {"outputs": outputs, "tensors": tensors, "pipe": pipe}


# -- presets, limits, real sizes ----------------------------------------------------------------


def test_preset_structure_and_limits(references):
    """The tiny preset's parts fit together; defaults per variant; CFG parallel for -base."""
    pipe = references["pipe"]
    assert type(pipe).__name__ == "Flux2KleinPipeline" and pipe.config.is_distilled
    assert type(pipe.text_encoder).__name__ == "Qwen3ForCausalLM"
    config = pipe.text_encoder.config
    assert pipe.transformer.config.joint_attention_dim == 3 * config.hidden_size
    assert config.num_hidden_layers > 27  # the pipeline reads hidden states 9, 18, 27
    assert len(pipe.tokenizer) == config.vocab_size
    assert not pipe.transformer.config.guidance_embeds
    family = family_of(pipe)
    assert family.name == "flux2-klein" and family_for("Flux2KleinPipeline") is family
    assert not family.supports_cfg(pipe) and not family.step_cache
    assert family.supports_cfg(_variant(pipe, "base"))  # its two branches on CFG halves
    limits = family.limits(pipe, tiny=True)
    assert limits.task == TEXT_TO_IMAGE and limits.size_multiple == 16 and limits.max_frames == 1
    request = JobRequest.from_body({"prompt": "x"}, limits)
    assert (request.width, request.height, request.num_inference_steps) == (64, 64, 4)
    assert request.guidance_scale == 1.0
    # the base model's text: the prompt and the (empty) unconditional one; distilled: one
    tensors = references["tensors"]
    assert set(tensors["base"]) == {"prompt_embeds", "negative_prompt_embeds"}
    assert set(tensors["distilled"]) == {"prompt_embeds"}
    limits = family.limits(_variant(pipe, "base"), tiny=False)
    assert (limits.default_steps, limits.default_guidance) == (50, 4.0)  # the -base model card
    assert limits.samplers == () and limits.max_guidance == 30.0  # its own scheduler alone
    for size in ("4b", "9b"):  # random:flux.2-klein-base-*: the components, undistilled
        spec, base_spec = (
            random_preset_spec(f"random:flux.2-klein-{v}{size}") for v in ("", "base-")
        )
        assert base_spec["pipeline_config"] == {"is_distilled": False}
        assert base_spec["components"] == spec["components"]
    assert tuple(tensors["base"]["prompt_embeds"].shape) == (1, 512, 3 * config.hidden_size)


def test_a_base_jobs_negative_prompt_reaches_the_pipelines_arguments(references):
    """A -base job with a negative prompt: `prepare` hands the pipeline the negative prompt's
    embeddings rank 0 encoded (not the pipeline's own empty unconditional text, which it
    would encode were they dropped), beside the prompt's."""
    base = _variant(references["pipe"], "base")
    family = family_of(base)
    body = {**JOBS["base"], "negative_prompt": "blurry, dark"}
    request = JobRequest.from_body(body, family.limits(base, tiny=True))
    tensors = encoded(base, body)
    prepared = family.prepare(base, request, tensors)
    assert prepared["prompt_embeds"] is tensors["prompt_embeds"]
    assert prepared["negative_prompt_embeds"] is tensors["negative_prompt_embeds"]
    empty = references["tensors"]["base"]["negative_prompt_embeds"]
    assert not torch.equal(prepared["negative_prompt_embeds"], empty)


@pytest.mark.fast
@pytest.mark.parametrize("name", list(KLEIN_DITS))
def test_random_presets_count_the_published_parameters(name):
    params, blocks, text_width, distilled = KLEIN_DITS[name]
    pipe = build_random_preset(name, device="meta")
    assert sum(p.numel() for p in pipe.transformer.parameters()) == params
    config = pipe.transformer.config
    assert (config.num_layers, config.num_single_layers, config.num_attention_heads) == blocks
    assert config.joint_attention_dim == 3 * pipe.text_encoder.config.hidden_size
    assert pipe.text_encoder.config.hidden_size == text_width
    assert not config.guidance_embeds and family_of(pipe).distilled(pipe) == distilled
    assert len(pipe.tokenizer) == pipe.text_encoder.config.vocab_size
    limits = family_of(pipe).limits(pipe, tiny=False)
    assert (limits.default_width, limits.default_height) == (1024, 1024)
    want = (4, 1.0) if distilled else (50, 4.0)  # the model cards
    assert (limits.default_steps, limits.default_guidance) == want


def test_the_kv_models_plan_counts_its_cached_references():
    """`paradit plan` for FLUX.2 [klein] 9B KV with one 1024x1024 reference: every block (8
    double, 24 single) keeps the reference's 64 x 64 tokens' keys and values through the
    steps (diffusers' `Flux2KVCache`), 2 x 32 x 4096 x 4096 x 2 bytes (bf16) = 2 GiB on one
    rank; under Ulysses each rank keeps the whole reference for its share of the 32 heads (16
    of 2 ranks, 11 of 3: padded to 33). The steps' peak grows by it, on top of the reference
    tokens' activations (on one rank the peak, over the decode's); a text-to-image job caches
    nothing."""
    from paradit.backend.tools.plan import estimate

    name = "random:flux.2-klein-9b-kv"
    _, (double, single, heads), _, _ = KLEIN_DITS[name]
    tokens, head_dim = 64 * 64, 128

    def job(gpus: int, images: int) -> tuple[dict, int]:
        report = estimate(name, gpus, 80, 1024, 1024, 1, images=images)
        memory = report["memory"]["reference_job"]
        assert report["plan"]["ulysses_degree"] == gpus
        return memory["parts_bytes"], memory["predicted_bytes"]["rank0"]

    alone, alone_peak = job(1, 0)
    assert "held_across_steps" not in alone
    for gpus, local_heads in ((1, heads), (2, 16), (3, 11)):
        parts, peak = job(gpus, 1)
        want = 2 * (double + single) * tokens * local_heads * head_dim * 2
        assert parts["held_across_steps"] == want
        steps = parts["dit_steps"] + parts["activations"] + want
        assert peak >= steps + parts["encoders"] + parts["vae"]
        if gpus == 1:  # the steps are the peak now (the decode's was, without the cache)
            assert peak == steps + parts["encoders"] + parts["vae"] > alone_peak


# -- world size 1 -------------------------------------------------------------------------------


def test_the_vaes_latents_in_tiles_and_the_base_models_cfg_changes_the_image(references):
    """The decode takes the VAE's own latents in 6 tiles; true CFG gives another image than
    the distilled model's. (Each against `Flux2KleinPipeline` called directly: the family
    contract's jobs.)"""
    outputs = references["outputs"]
    assert outputs["distilled"][2] == 6  # VAE tiles
    assert outputs["distilled"][1].shape == (1, 32, 8, 14)  # the VAE's latents, not tokens
    assert compare(outputs["distilled"][0], outputs["base"][0], FLOAT32).verdict == DIFFERENT


def test_the_kv_model_is_klein_distilled_without_references_and_caches_with_them(references):
    """tiny-flux2-klein-kv: the KV adapter (no CFG, the distilled defaults, cfg above 1 from a
    workflow refused); a text-to-image job equals tiny-flux2-klein's byte for byte (the KV
    processors without a cache are plain attention); an edit differs from Klein's (its
    references attend only to themselves, at timestep 0, cached after the first step)."""
    from paradit.backend.models.families.flux2.tiny_job import png

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        kv, family = preset_pipeline("tiny-flux2-klein-kv", TILE)
        assert type(kv).__name__ == "Flux2KleinKVPipeline" and family.name == "flux2-klein-kv"
        assert family_for("Flux2KleinKVPipeline") is family and not family.supports_cfg(kv)
        assert not family.reference_latents  # ComfyUI's references are not its (NOTES.md)
        limits = family.limits(kv, tiny=True)
        assert (limits.default_steps, limits.default_guidance) == (4, 1.0)
        assert limits.accepts_image and limits.max_images == 10
        assert "runs no guidance" in family.workflow_refusal(
            "tiny-flux2-klein-kv", {"guidance_scale": 2.0}
        )
        assert family.workflow_refusal("tiny-flux2-klein-kv", {"guidance_scale": 1.0}) == ""
        body = {**JOBS["distilled"], "width": 64, "height": 48}
        klein = references["pipe"]
        plain = run_image_job(kv, body)[0], run_image_job(klein, body)[0]
        assert compare(*plain, FLOAT32).identical
        edit = {**body, "image": png(80, 64, 5)}
        (cached, cached_z, _), (ours, ours_z, _) = (
            run_image_job(kv, edit),
            run_image_job(klein, edit),
        )
        measured = compare(cached, ours, FLOAT32, np.asarray(cached_z), np.asarray(ours_z))
        assert measured.verdict == DIFFERENT, measured.to_dict()
    finally:
        torch.set_num_threads(threads)
