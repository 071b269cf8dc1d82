"""Qwen-Image 2.1 text-to-image: the tiny preset's structure and limits, the sequence plan's
shape (the Ulysses processor on every block, the per-token inputs split, input-shaped
outputs for CFG parallel), the `random:` preset's parameters and the plan at real size
(with the cached prompt prefix per CFG branch).
(World size 1 against `QwenImage21Pipeline` called directly, guided and unguided, its prefix
cache included, and CFG / Ulysses at 2, 3 and 4 ranks against world size 1: the family
contract, tests/families/test_family_contract.py.)

The turbo recipe (`qwen-image2.1-turbo`) is the turbo templates' schedule and runs; the base
recipe (`qwen-image2.1`) is diffusers' defaults. The image edit: its limits and default size,
a LoRA edit job against diffusers' pipeline with the LoRA fused (the edit's world size 1 and
2-4 ranks: the family contract's `edit` job), the stand-in `encode_prompt` refusing embeddings
it has no slots for.

Cost: about 3 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import logging

import pytest
import torch

from paradit.backend.models.families import family_of
from paradit.backend.models.families.qwen_image21.parallel import (
    UlyssesQwenImage21Processor,
    qwen_image21_cp_plan,
    shaped_like_input,
)
from paradit.backend.models.presets import build_preset
from paradit.backend.models.random_presets import build_random_preset
from paradit.backend.request import NO_STEP_CACHE, JobRequest

TINY, RANDOM = "tiny-qwen-image2.1", "random:qwen-image2.1"
QWEN_IMAGE21_DIT = 7_115_124_736
"""DiT parameters on the meta device: Qwen-Image 2.1's "7B"."""


def test_preset_structure_and_limits():
    """The 2.1 DiT with its prefix cache on (`causal_condition`), a Qwen3-VL encoder read
    through a processor, the 16x RGBA VAE; the template's limits (unguided by default); a
    `cache` refused at submit with the rule."""
    pipe = build_preset(TINY)
    assert pipe.transformer.config.causal_condition
    assert type(pipe.text_encoder).__name__ == "Qwen3VLForConditionalGeneration"
    assert type(pipe.vae).__name__ == "AutoencoderKLQwenImage21"
    assert pipe.vae.config.out_channels == 4 and pipe.vae_scale_factor == 16
    limits = family_of(pipe).limits(pipe, tiny=True)
    assert (limits.size_multiple, limits.default_guidance, limits.step_cache) == (32, 1.0, False)
    assert (limits.accepts_image, limits.needs_image, limits.max_images) == (True, False, 10)
    body = {"prompt": "a fox", "cache": {"method": "first-block", "threshold": 0.5}}
    with pytest.raises(ValueError, match=NO_STEP_CACHE[:30]):
        JobRequest.from_body(body, limits)


@pytest.mark.fast
def test_plan_splits_every_blocks_tokens_and_swaps_the_processors():
    """Every block gets the Ulysses processor and its per-token inputs split (rotary rows,
    modulation rows); the sequence is split at the first block, gathered at the last."""
    from paradit.backend.models.families.qwen_image21.tiny import qwen_image21_transformer

    transformer = qwen_image21_transformer()
    plan = qwen_image21_cp_plan(transformer)
    assert set(plan) == {"transformer_blocks.*", "transformer_blocks.0", "transformer_blocks.1"}
    assert set(plan["transformer_blocks.*"]) == {"rotary_emb", "target_token_mask"}
    assert set(plan["transformer_blocks.0"]) == {"hidden_states"}
    assert plan["transformer_blocks.1"].gather_dim == 1
    processors = [block.attn.processor for block in transformer.transformer_blocks]
    assert all(isinstance(p, UlyssesQwenImage21Processor) for p in processors)


@pytest.mark.fast
def test_outputs_are_shaped_like_the_input():
    """The prefix-filling step's output (the whole joint sequence) is cut to the input's
    last tokens, a shorter one (an edit's cached steps) padded in front: the CFG exchange
    then fills what the pipeline kept of the first call's output."""

    class Echo(torch.nn.Module):
        def forward(self, hidden_states, length, return_dict=False):
            return (torch.arange(length, dtype=torch.float32).view(1, length, 1),)

    model = Echo()
    shaped_like_input(model)
    shaped_like_input(model)  # once
    hidden = torch.zeros(1, 3, 1)
    assert model(hidden_states=hidden, length=5)[0].flatten().tolist() == [2.0, 3.0, 4.0]
    assert model(hidden_states=hidden, length=2)[0].flatten().tolist() == [0.0, 0.0, 1.0]


@pytest.mark.fast
def test_random_preset_counts_the_published_parameters():
    """32 blocks of width 4096 (32 heads of 128), the text read at Qwen3-VL-8B's width 4096,
    the 64-channel VAE; the template's limits: 1024x1024, 25 steps, unguided."""
    pipe = build_random_preset(RANDOM, device="meta")
    assert sum(p.numel() for p in pipe.transformer.parameters()) == QWEN_IMAGE21_DIT
    config = pipe.transformer.config
    assert (config.num_attention_heads, config.num_layers) == (32, 32)
    assert config.context_in_dim == pipe.text_encoder.config.text_config.hidden_size == 4096
    assert pipe.vae.config.z_dim == config.in_channels == 64
    limits = family_of(pipe).limits(pipe, tiny=False)
    assert (limits.default_steps, limits.default_guidance, limits.default_width) == (25, 1.0, 1024)


def test_plan_at_real_size(caplog):
    """`paradit plan`: 1024x1024 on 4 GPUs of 24 GB: CFG 2 x Ulysses 2, the DiT sharded,
    its weights in bf16; the activations from the family's dry run (its blocks called on
    the meta device), not the rule of thumb the plan falls back to when a dry run fails."""
    from paradit.backend.tools.plan import estimate

    with caplog.at_level(logging.DEBUG, logger="paradit.backend.memory"):
        report = estimate(RANDOM, 4, 24, 1024, 1024, 1)
    assert not [r for r in caplog.records if "dry run" in r.getMessage()], caplog.text
    assert report["fits"]
    assert report["memory"]["weights_bytes"]["transformer"] == QWEN_IMAGE21_DIT * 2
    assert report["plan"]["modes"] == ["cfg", "ulysses", "fsdp", "vae"]


def test_plan_counts_each_branchs_cached_prefix():
    """`paradit plan` counts the prompt prefix's keys and values the pipeline keeps from the
    first step to the last (`use_kv_cache`): 2 x 32 blocks x prefix tokens x local heads x
    128 x 2 bytes (bf16) per CFG branch a rank runs. The prefix: the plan's 512 text tokens,
    and an edit's 1024x1024 reference at one token per 16 px (64 x 64). Without CFG
    parallel a rank runs both branches (2 caches); under CFG parallel one; under Ulysses
    each rank keeps the whole prefix for its share of the 32 heads (11 of 3: padded to 33).
    The steps' peak holds it beside the activations."""
    from paradit.backend.tools.plan import estimate

    blocks, head_dim, text = 32, 128, 512
    for gpus, branches, local_heads in ((1, 2, 32), (2, 1, 32), (3, 2, 11), (4, 1, 16)):
        for images, references in ((0, 0), (1, 64 * 64)):
            report = estimate(RANDOM, gpus, 80, 1024, 1024, 1, images=images)
            memory = report["memory"]["reference_job"]
            parts = memory["parts_bytes"]
            tokens = text + references
            want = 2 * blocks * branches * tokens * local_heads * head_dim * 2
            assert parts["held_across_steps"] == want, (gpus, images)
            steps = parts["dit_steps"] + parts["activations"] + want
            assert memory["predicted_bytes"]["rank0"] >= steps + parts["vae"]


TURBO_TEMPLATES = {  # template -> the subgraph node of its ManualSigmas
    "image_qwen_image_2_1_turbo_t2i.json": 484,
    "image_qwen_image_2_1_turbo_image_edit.json": 502,
}


def _manual_sigmas(template: str, node_id: int) -> list[float]:
    """ManualSigmas' levels as the template file saves them (read off its JSON here)."""
    import json
    from pathlib import Path

    import comfyui_workflow_templates_json

    path = Path(comfyui_workflow_templates_json.__file__).parent / "templates" / template
    data = json.loads(path.read_text())
    nodes = [n for sub in data["definitions"]["subgraphs"] for n in sub["nodes"]]
    (text,) = next(n for n in nodes if n["id"] == node_id)["widgets_values"]
    return [float(s) for s in text.split(",")]


def test_turbo_recipe_is_the_templates_schedule_and_runs():
    """`--recipe qwen-image2.1-turbo`: both turbo templates' ManualSigmas levels (8 steps),
    euler, cfg 1; a request with it samples those levels with paradit's sampler, which
    replaces the pipeline's own scheduler (another image at the same steps and seed)."""
    from image_jobs import run_here

    from paradit.backend.runtime.job import job_limits
    from paradit.backend.sampling.recipes import find_recipe
    from paradit.backend.sampling.rules import resolve

    recipe = find_recipe("qwen-image2.1-turbo")
    for template, node_id in TURBO_TEMPLATES.items():
        assert list(recipe.fields["sigmas"]) == _manual_sigmas(template, node_id), template
    assert (recipe.fields["sampler"], recipe.fields["guidance_scale"]) == ("euler", 1.0)
    assert recipe.fields["num_inference_steps"] == len(recipe.fields["sigmas"]) - 1
    tiny = build_preset(TINY)
    tiny.set_progress_bar_config(disable=True)
    limits = job_limits(family_of(tiny), tiny, tiny=True)
    body = {"prompt": "a fox", "seed": 1, "width": 128, "height": 96}
    request = JobRequest.from_body({**body, "recipe": "qwen-image2.1-turbo"}, limits)
    choice = resolve(request, limits)
    assert (choice.sampler, choice.scheduler) == ("euler", "manual")
    assert list(choice.sigmas) == list(recipe.fields["sigmas"])
    turbo, _ = run_here(tiny, {**body, "recipe": "qwen-image2.1-turbo"})
    own, _ = run_here(tiny, {**body, "num_inference_steps": 8})
    assert turbo.shape == own.shape == (1, 96, 128, 3)
    assert (turbo != own).any()


@pytest.mark.fast
def test_base_recipe_is_diffusers_defaults():
    """`--recipe qwen-image2.1`: `QwenImage21Pipeline`'s own defaults (40 steps, true CFG scale
    1), on the pipeline's own scheduler."""
    import inspect

    from diffusers import QwenImage21Pipeline

    from paradit.backend.sampling.recipes import find_recipe

    defaults = inspect.signature(QwenImage21Pipeline.__call__).parameters
    fields = find_recipe("qwen-image2.1").fields
    assert fields["num_inference_steps"] == defaults["num_inference_steps"].default == 40
    assert fields["guidance_scale"] == defaults["true_cfg_scale"].default == 1.0
    assert (fields["sampler"], fields["scheduler"]) == ("default", "default")


def test_edit_default_size_and_slots_refused_without_embeddings():
    """An edit without a size takes the first image's aspect at the tiny budget (64x64 px, in
    steps of 32); the stand-in `encode_prompt` refuses embeddings it has no slots for (never
    the pipeline's own refusal, which names an argument a paradit user cannot give)."""
    from paradit.backend.models.families.qwen_image21.adapter import EditSlots
    from paradit.backend.models.families.qwen_image21.tiny_job import EDIT
    from paradit.backend.runtime.job import job_limits

    pipe = build_preset(TINY)
    limits = job_limits(family_of(pipe), pipe, tiny=True)
    body = {k: v for k, v in EDIT.items() if k not in ("width", "height", "images")}
    request = JobRequest.from_body(body, limits)  # a 64x48 image
    assert (request.width, request.height) == (64, 64)
    embeds, slots = torch.zeros(1, 3, 32), torch.tensor([[False, True, False]])
    stand_in = EditSlots(lambda **kwargs: kwargs["image_pad_mask"], [(embeds, slots)])
    assert stand_in(prompt_embeds=embeds) is slots
    with pytest.raises(ValueError, match="image slots"):
        stand_in(prompt_embeds=embeds.clone())


def test_lora_edit_job_equals_diffusers_fused(tmp_path):
    """A LoRA on the DiT's query projections in an edit job (two input images, guided): the
    frames equal diffusers' pipeline editing with the LoRA fused, byte for byte, and differ
    from the plain edit; the pipeline's own `encode_prompt` is back after each job."""
    import numpy as np
    from image_jobs import preset_pipeline, run_here
    from lora_files import diffusers_fused, dit_patcher, lora_items, peft_lora

    from paradit.backend.models.families.qwen_image21.tiny_job import EDIT, direct_edit
    from paradit.backend.serving.outputs import to_uint8

    pipe, _ = preset_pipeline(TINY, 128)
    peft_lora(tmp_path / "edit.safetensors", pipe.transformer, ("attn.to_q",), seed=3)
    patcher = dit_patcher(pipe, tmp_path)
    plain, _ = run_here(pipe, dict(EDIT))
    with patcher.applied(patcher.resolve(lora_items([("edit", 0.8)]))):
        ours, _ = run_here(pipe, dict(EDIT))
    assert "encode_prompt" not in pipe.__dict__
    fused = diffusers_fused(pipe, tmp_path, [("edit", 0.8)])
    assert np.array_equal(ours, to_uint8(np.asarray(direct_edit(fused, dict(EDIT)))))
    assert not np.array_equal(ours, plain)
