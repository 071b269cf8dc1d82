"""`random:` presets of Wan 2.1, Wan 2.2 A14B and Flux.1-dev: the shipped architectures at full
size on the meta device (parameter counts, configs), and cheap real generations on the CPU with
the same configs cut down by `overrides` (the full-size modules are only ever built on meta).

The CogVideoX `random:` presets are tested in test_cogvideox.py. Sharded, each rank draws only
its own rows of a DiT (`seeded.SeededRows`): the last two tests check that the rows drawn alone
are the weights a whole build draws.

Cost: about 10 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from paradit.backend.models.families import family_for
from paradit.backend.models.random_presets import build_random_preset, random_preset_spec
from paradit.backend.request import JobRequest
from paradit.backend.runtime.job import JobHooks, RankModel, encode, job_message, run_on_rank

torch.set_num_threads(1)

WAN_1_3B, WAN_14B = "random:wan2.1-t2v-1.3b", "random:wan2.1-t2v-14b"
WAN_A14B, FLUX_DEV = "random:wan2.2-t2v-a14b", "random:flux.1-dev"
NAMES = (WAN_1_3B, WAN_14B, WAN_A14B, FLUX_DEV)

# DiT parameters of the published models, counted on the meta device: Wan2.1-T2V-1.3B
# ("1.3B"), Wan2.1-T2V-14B ("14B"), Wan2.2-T2V-A14B (two 14B experts, "27B total, 14B
# active per step"), FLUX.1-dev ("12B").
DIT_PARAMS = {
    WAN_1_3B: {"transformer": 1_418_996_800},
    WAN_14B: {"transformer": 14_288_491_584},
    WAN_A14B: {"transformer": 14_288_491_584, "transformer_2": 14_288_491_584},
    FLUX_DEV: {"transformer": 11_901_408_320},
}
# The reduced text encoders (real width, 2 layers, byte-level vocabulary; named in the configs)
# instead of UMT5-XXL (5.7B), CLIP-L's text model (123M) and T5-XXL's encoder (4.7B).
UMT5_4096 = {"text_encoder": 22_053_120}
ENCODER_PARAMS = {
    WAN_1_3B: UMT5_4096,
    WAN_14B: UMT5_4096,
    WAN_A14B: UMT5_4096,
    FLUX_DEV: {"text_encoder": 14_435_328, "text_encoder_2": 22_052_992},  # CLIP 768, T5 4096
}
DITS = ("transformer", "transformer_2")


@pytest.fixture(scope="module")
def meta_pipes() -> dict:
    return {name: build_random_preset(name, device="meta") for name in NAMES}


def _params(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def _plain(value):
    return list(value) if isinstance(value, tuple) else value


@pytest.mark.fast
@pytest.mark.parametrize("name", NAMES)
def test_shipped_architecture_and_parameter_counts(name, meta_pipes):
    pipe, spec = meta_pipes[name], random_preset_spec(name)
    assert type(pipe).__name__ == spec["pipeline"]
    for component, entry in spec["components"].items():
        if "config" not in entry:
            continue
        config = getattr(pipe, component).config
        config = config if isinstance(config, dict) else config.to_dict()
        for key, value in entry["config"].items():
            if key[0] != "_":
                assert _plain(config[key]) == value, (component, key)
    counts = {c: _params(getattr(pipe, c)) for c in DITS if getattr(pipe, c, None) is not None}
    assert counts == DIT_PARAMS[name]
    encoders = {c: _params(getattr(pipe, c)) for c in ENCODER_PARAMS[name]}
    assert encoders == ENCODER_PARAMS[name]
    assert all(p.device.type == "meta" for p in pipe.transformer.parameters())


@pytest.mark.fast
def test_encoders_fit_the_dits_and_pipeline_settings(meta_pipes):
    for name in (WAN_1_3B, WAN_14B, WAN_A14B):
        pipe = meta_pipes[name]
        assert pipe.text_encoder.config.d_model == pipe.transformer.config.text_dim == 4096
        assert len(pipe.tokenizer) == pipe.text_encoder.config.vocab_size
        assert pipe.tokenizer.model_max_length == 512  # what Wan pads its prompts to
        scheduler = pipe.scheduler.config
        assert (scheduler.flow_shift, scheduler.prediction_type) == (3.0, "flow_prediction")
        assert scheduler.use_flow_sigmas
        assert pipe.vae.config.z_dim == 16 and len(pipe.vae.config.latents_mean) == 16
        wan = family_for("WanPipeline").limits(pipe, tiny=False)
        assert (wan.default_width, wan.default_height, wan.default_frames) == (832, 480, 81)
    assert meta_pipes[WAN_A14B].config.boundary_ratio == 0.875
    assert meta_pipes[WAN_1_3B].config.boundary_ratio is None
    assert meta_pipes[WAN_1_3B].transformer_2 is None
    flux = meta_pipes[FLUX_DEV]
    assert flux.text_encoder.config.hidden_size == flux.transformer.config.pooled_projection_dim
    assert flux.text_encoder_2.config.d_model == flux.transformer.config.joint_attention_dim
    assert (flux.tokenizer.model_max_length, flux.tokenizer_2.model_max_length) == (77, 512)
    assert flux.scheduler.config.use_dynamic_shifting
    family = family_for("FluxPipeline")
    assert not family.supports_cfg(flux)  # guidance-distilled: the scale is embedded
    limits = family.limits(flux, tiny=False)
    assert (limits.default_width, limits.default_height, limits.default_steps) == (1024, 1024, 28)


# -- cheap real generations: the shipped configs, cut down by overrides ----------------------

ONE_LAYER = {"num_layers": 1}
# Flux and the two 14B experts also lose width (2 heads of 128): a full-width Flux block pair
# is 0.5B parameters. Text width (4096) and the VAE stay as shipped.
NARROW_FLUX = {"num_layers": 1, "num_single_layers": 1, "num_attention_heads": 2}
NARROW_WAN = {"num_layers": 1, "num_attention_heads": 2, "ffn_dim": 512}


def _generate(pipe, request_body: dict) -> tuple[np.ndarray, dict]:
    """One job through the engine's `run_on_rank` on one rank (the family encodes, prepares
    and decodes): the float frames and the encoder outputs."""
    pipe.set_progress_bar_config(disable=True)
    model = RankModel.here(pipe, tiny=False)
    request = JobRequest.from_body(request_body, model.limits)
    tensors = encode(model, request)
    result = run_on_rank(model, job_message("test", request, tensors), JobHooks(tensors))
    return result.frames, tensors


def _assert_frames(frames: np.ndarray, shape: tuple) -> None:
    assert frames.shape == shape
    assert np.isfinite(frames).all() and frames.std() > 0.01


VIDEO = {"prompt": "a fox ü 狐", "seed": 3, "width": 32, "height": 32, "num_frames": 5}


def test_wan21_generates_with_the_shipped_configs():
    pipe = build_random_preset(WAN_1_3B, overrides={"transformer": ONE_LAYER})
    assert pipe.transformer.config.num_attention_heads == 12  # the real width, 1 layer
    frames, tensors = _generate(pipe, {**VIDEO, "num_inference_steps": 2})
    _assert_frames(frames, (5, 32, 32, 3))
    assert tensors["prompt_embeds"].shape == (1, 512, 4096)
    assert "negative_prompt_embeds" in tensors  # CFG


def test_wan22_switches_expert_at_the_boundary():
    overrides = {"transformer": NARROW_WAN, "transformer_2": NARROW_WAN}
    pipe = build_random_preset(WAN_A14B, overrides=overrides)
    calls = {"transformer": 0, "transformer_2": 0}
    for name in calls:
        getattr(pipe, name).register_forward_hook(
            lambda *_args, name=name: calls.__setitem__(name, calls[name] + 1)
        )
    # 2 steps with shift 3: timesteps ~999 (high noise, >= 875) then ~750 (low noise).
    frames, _ = _generate(pipe, {**VIDEO, "num_inference_steps": 2})
    _assert_frames(frames, (5, 32, 32, 3))
    assert calls == {"transformer": 2, "transformer_2": 2}  # one step each, CFG: 2 calls
    assert not torch.equal(  # the experts have their own seeds
        pipe.transformer.proj_out.weight, pipe.transformer_2.proj_out.weight
    )


def test_flux_dev_generates_with_the_shipped_configs():
    pipe = build_random_preset(FLUX_DEV, overrides={"transformer": NARROW_FLUX})
    image = {key: VIDEO[key] for key in ("prompt", "seed", "width", "height")}
    frames, tensors = _generate(pipe, {**image, "num_inference_steps": 2})
    _assert_frames(frames, (1, 32, 32, 3))
    assert tensors["prompt_embeds"].shape == (1, 512, 4096)
    assert tensors["pooled_prompt_embeds"].shape == (1, 768)  # CLIP's pooled output
    assert "negative_prompt_embeds" not in tensors  # guidance is embedded, no CFG


def test_plan_counts_both_wan22_experts_and_the_reduced_encoders():
    from paradit.backend.tools.plan import estimate

    # 320x192: the plan's dry runs at 1280x720 cost 3 CPU-seconds more, for the same counts
    report = estimate(WAN_A14B, gpus=4, gpu_memory_gib=80, width=320, height=192, frames=81)
    experts = sum(DIT_PARAMS[WAN_A14B].values())
    weights = report["memory"]["weights_bytes"]
    assert weights["transformer"] + weights["transformer_2"] == experts * 2  # bf16
    assert weights["text_encoder"] == UMT5_4096["text_encoder"] * 2
    job = report["memory"]["reference_job"]
    assert job["parts_bytes"]["dit_decode"] == experts * 2 // 4  # both experts, 4 shards
    assert report["tokens"] == 21 * 12 * 20  # 81 frames -> 21 latent frames of 12 x 20 tokens
    flux = estimate(FLUX_DEV, gpus=2, gpu_memory_gib=80, width=1024, height=1024, frames=1)
    assert flux["plan"]["cfg_degree"] == 1  # guidance-distilled: nothing for CFG parallel
    assert flux["tokens"] == 64 * 64


@pytest.mark.fast
def test_each_ranks_rows_drawn_alone_give_the_whole_weights():
    """A sharded `random:` preset draws only each rank's rows: at any world size FSDP2's row
    blocks (dim 0 split in ceil-sized chunks) drawn one by one are the weights a whole build
    draws, with seed_weights' scales."""
    from paradit.backend.models.seeded import ROW_BLOCK, SeededRows

    shapes = {
        "blocks.0.ffn.weight": (3 * ROW_BLOCK + 5, 96),
        "blocks.0.norm.weight": (130,),
        "blocks.0.proj.bias": (70,),
        "patch.weight": (ROW_BLOCK, 4, 2, 2),
    }
    source = SeededRows(shapes, 11)
    whole = {name: torch.empty(shape) for name, shape in shapes.items()}
    for name, value in whole.items():
        source.read_rows(name, 0, value)
    for name, shape in shapes.items():
        for world_size in (2, 3, 5):
            chunk = -(-shape[0] // world_size)
            parts = []
            for rank in range(world_size):
                start = min(rank * chunk, shape[0])
                part = torch.empty((min(chunk, shape[0] - start), *shape[1:]))
                source.read_rows(name, start, part)
                parts.append(part)
            assert torch.equal(torch.cat(parts), whole[name]), (name, world_size)
    assert abs(whole["blocks.0.ffn.weight"].std().item() - 96**-0.5) < 0.01  # N(0, 1/fan_in)
    assert abs(whole["blocks.0.norm.weight"].mean().item() - 1.0) < 0.01  # gains around 1
    assert whole["blocks.0.proj.bias"].abs().max() < 0.2  # biases N(0, 0.02^2)
    other = torch.empty(shapes["patch.weight"])
    SeededRows(shapes, 12).read_rows("patch.weight", 0, other)
    assert not torch.equal(other, whole["patch.weight"])
    rows = torch.empty((2, 4, 2, 2), dtype=torch.bfloat16)  # any dtype: drawn, then cast
    source.read_rows("patch.weight", ROW_BLOCK - 2, rows)
    assert torch.equal(rows, whole["patch.weight"][-2:].to(torch.bfloat16))


def _check_sharded_draw(rank: int, world_size: int, config: dict) -> None:
    from torch.distributed.device_mesh import init_device_mesh

    from paradit.backend.models.seeded import SeededRows
    from paradit.backend.models.sharded_load import empty_from_config, fill_shards
    from paradit.backend.parallel.fsdp import shard_weights

    whole = empty_from_config(config, torch.bfloat16)  # as a 1-rank build draws it
    fill_shards(whole, SeededRows.of(whole, 7), torch.device("cpu"))
    sharded = empty_from_config(config, torch.bfloat16)  # as the engine builds a sharded DiT
    shard_weights(sharded, init_device_mesh("cpu", (world_size,)))
    source = SeededRows.of(sharded, 7)
    drawn = fill_shards(sharded, source, torch.device("cpu"))
    total = sum(p.numel() * p.element_size() for p in whole.parameters())
    assert drawn < 0.6 * total, (rank, drawn, total)  # its own rows only
    for (name, param), (_, expected) in zip(
        sharded.named_parameters(), whole.named_parameters(), strict=True
    ):
        assert param.dtype == expected.dtype, name  # float32 modules kept on both paths
        assert torch.equal(param.full_tensor(), expected.data), name


def test_two_ranks_draw_their_shards_of_the_weights_one_rank_draws():
    """The engine's path for a sharded `random:` DiT (built empty, FSDP2-sharded, each rank
    drawing its rows) in a real 2-rank gloo group gives the weights of a whole build."""
    from conftest import spawn_gloo

    from paradit.backend.models.presets import build_preset

    config = {**build_preset("tiny-wan", components=frozenset({"transformer"})).transformer.config}
    config["_class_name"] = "WanTransformer3DModel"
    spawn_gloo(2, _check_sharded_draw, config)
