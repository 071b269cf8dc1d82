"""Krea 2 text-to-image: the tiny preset's structure and limits, the text fusion kept whole
under the sequence plan, the `random:` preset's parameters and the plan at real size, the
`krea2-turbo` recipe equal to the Turbo templates' sampling and run. (World
size 1 against `Krea2Pipeline` called directly, guided and unguided, and CFG / Ulysses at 2,
3 and 4 ranks against world size 1, masks included: the family contract,
tests/families/test_family_contract.py.)

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import logging

import pytest
from image_jobs import encoded, run_here
from template_jobs import KREA2, krea2_request

from paradit.backend.models.families import family_of
from paradit.backend.models.families.krea2.parallel import LocalKrea2Processor, krea2_cp_plan
from paradit.backend.models.presets import build_preset
from paradit.backend.models.random_presets import build_random_preset
from paradit.backend.request import JobRequest
from paradit.backend.sampling.recipes import find_recipe

TINY, RANDOM = "tiny-krea2", "random:krea2"
KREA2_DIT = 12_820_073_036
"""DiT parameters on the meta device: Krea 2's "12.9B"."""


@pytest.fixture(scope="module")
def tiny():
    pipe = build_preset(TINY)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def test_preset_structure_and_limits(tiny):
    """Grouped-query attention as the real model's (4 query heads to each key/value head),
    the Qwen3-VL text model's hidden states at 3 layers, the Qwen-Image VAE; the base model's
    limits (guided by default); a `cache` refused at submit with the rule."""
    config = tiny.transformer.config
    assert config.num_attention_heads // config.num_key_value_heads == 48 // 12
    assert type(tiny.text_encoder).__name__ == "Qwen3VLTextModel"
    assert tiny.text_encoder_select_layers == (2, 4, 6) and config.num_text_layers == 3
    assert type(tiny.vae).__name__ == "AutoencoderKLQwenImage"
    family = family_of(tiny)
    limits = family.limits(tiny, tiny=True)
    assert (limits.size_multiple, limits.default_guidance, limits.step_cache) == (16, 5.5, True)
    body = {"prompt": "a fox", "cache": {"method": "first-block", "threshold": 0.5}}
    assert JobRequest.from_body(body, limits).cache is not None


def test_guidance_is_the_pipelines_less_one(tiny):
    """paradit's guidance 4 is the pipeline's 3 (`cond + 3 (cond - uncond)`); 1 runs one
    branch at the pipeline's 0, with no negative prompt encoded."""
    family = family_of(tiny)
    limits = family.limits(tiny, tiny=True)
    for scale, expected, negative in ((4.0, 3.0, True), (1.0, 0.0, False)):
        body = {"prompt": "a fox", "guidance_scale": scale}
        request = JobRequest.from_body(body, limits)
        tensors = encoded(tiny, body)  # as the engine encodes it
        assert ("negative_prompt_embeds_mask" in tensors) == negative
        kwargs = family.prepare(tiny, request, tensors)
        assert kwargs["guidance_scale"] == expected
        assert kwargs["prompt_embeds"].shape[2] == 3  # tapped layers
        assert kwargs["prompt_embeds_mask"].dtype.is_floating_point is False


@pytest.mark.fast
def test_text_fusion_attends_whole_on_every_rank():
    """The plan splits the joint sequence at the first block and gathers it at the last (the
    model cuts the text tokens off after); the text fusion's attentions keep no parallel
    config when the sequence layouts set every processor's, the blocks' take it."""
    from paradit.backend.models.families.krea2.tiny import krea2_transformer

    transformer = krea2_transformer()
    plan = krea2_cp_plan(transformer)
    assert set(plan) == {"transformer_blocks.0", "rotary_emb", "transformer_blocks.1"}
    assert plan["transformer_blocks.1"].gather_dim == 1
    config = object()
    for module in transformer.modules():
        if hasattr(getattr(module, "processor", None), "_parallel_config"):
            module.processor._parallel_config = config
    fusion = transformer.text_fusion
    local = [b.attn.processor for b in (*fusion.layerwise_blocks, *fusion.refiner_blocks)]
    assert local and all(isinstance(p, LocalKrea2Processor) for p in local)
    assert all(p._parallel_config is None for p in local)
    blocks = [b.attn.processor for b in transformer.transformer_blocks]
    assert all(p._parallel_config is config for p in blocks)


@pytest.mark.fast
def test_random_preset_counts_the_published_parameters():
    """Width 6144 (48 heads of 128, 12 key/value heads), 28 blocks, 12 tapped layers of a
    2560-wide text model; Turbo's limits: 8 steps, unguided."""
    pipe = build_random_preset(RANDOM, device="meta")
    assert sum(p.numel() for p in pipe.transformer.parameters()) == KREA2_DIT
    config = pipe.transformer.config
    assert (config.num_attention_heads, config.num_key_value_heads, config.num_layers) == (
        48,
        12,
        28,
    )
    assert config.text_hidden_dim == pipe.text_encoder.config.hidden_size == 2560
    assert len(pipe.text_encoder_select_layers) == config.num_text_layers == 12
    limits = family_of(pipe).limits(pipe, tiny=False)
    assert (limits.default_steps, limits.default_guidance, limits.default_width) == (8, 1.0, 1024)


def test_plan_at_real_size(caplog):
    """`paradit plan`: 1024x1024 (64 x 64 tokens) on 4 GPUs of 24 GB: CFG 2 x Ulysses 2, the
    DiT sharded, its weights in bf16; the activations from the family's dry run (not the rule
    of thumb the plan falls back to when a dry run fails)."""
    from paradit.backend.tools.plan import estimate

    with caplog.at_level(logging.DEBUG, logger="paradit.backend.memory"):
        report = estimate(RANDOM, 4, 24, 1024, 1024, 1)
    assert not [r for r in caplog.records if "dry run" in r.getMessage()], caplog.text
    assert report["tokens"] == 64 * 64 and report["fits"]
    assert report["memory"]["weights_bytes"]["transformer"] == KREA2_DIT * 2
    assert report["plan"]["modes"] == ["cfg", "ulysses", "fsdp", "vae"]
    assert report["memory"]["reference_job"]["parts_bytes"]["activations"] > 0


@pytest.mark.fast
@pytest.mark.parametrize("template", KREA2)
def test_turbo_recipe_is_the_templates_sampling(template):
    """`krea2-turbo`'s fields are the job each Turbo template imports to (written by hand
    from its graph, tests/template_jobs.py): 8 steps, cfg 1, euler/simple, Krea 2's own
    e^1.15 to float precision."""
    fields = dict(find_recipe("krea2-turbo").fields)
    job = krea2_request(template)
    assert fields == {key: job[key] for key in fields}


def test_turbo_recipe_runs_in_place_of_the_pipelines_schedule(tiny):
    """`--recipe krea2-turbo` (ComfyUI's template: euler/simple at the static shift e^1.15):
    paradit's sampler replaces the pipeline's scheduler on this family, so the image differs
    from the pipeline's own schedule at the same steps and seed."""
    recipe = find_recipe("krea2-turbo")
    body = {"prompt": "a fox", "seed": 1, "width": 64, "height": 48, "num_inference_steps": 2}
    own, _ = run_here(tiny, body)
    fields = {k: v for k, v in dict(recipe.fields).items() if k != "num_inference_steps"}
    assert fields["sampler"] == "euler" and fields["guidance_scale"] == 1.0
    recipe_frames, _ = run_here(tiny, {**body, **fields})
    assert recipe_frames.shape == own.shape == (1, 48, 64, 3)
    assert (recipe_frames != own).any()
