"""MiniMax H3 text-to-audio-video: the limits, the 17n+5 frame rule, the `random:` preset's
parameters (the 32B encoder at its real shapes) and the plan at real size, where that
encoder goes; the video decode as its temporal clips (what the ranks
share) against the VAE's own. (World size 1 against diffusers' blocks called
directly, Ulysses at 2, 3 and 4 ranks against world size 1, audio included, and the LoRA job:
the family contract, tests/families/test_family_contract.py.)

Cost: about 13 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import logging

import pytest
import torch

from paradit.backend.models.families import family_of
from paradit.backend.models.families.minimax_h3.memory import audio_rows, latent_frames
from paradit.backend.models.random_presets import build_random_preset
from paradit.backend.request import JobRequest

RANDOM = "random:minimax-h3"
H3_DIT = 33_122_992_896
"""DiT parameters on the meta device: H3's "33B" (with the AdaLN tables as diffusers builds
them)."""
QWEN3_VL_32B = 33_357_390_064
"""The text encoder's: Qwen3-VL 32B at its real shapes (its language model with the 152k
vocabulary and the unused head, and its vision tower), "33B"."""


@pytest.fixture(scope="module")
def meta_pipe():
    return build_random_preset(RANDOM, device="meta")


@pytest.mark.fast
def test_random_preset_counts_the_published_parameters(meta_pipe):
    """56 heads of 128 (Ulysses over 2, 4, 7 and 8 divides them), 50 blocks of width 5376,
    the 24-channel video latents in (1, 2, 2) patches, the Qwen3-VL encoder deeper than the
    hidden state H3 reads (50) at the DiT's text width."""
    dit = meta_pipe.transformer
    assert sum(p.numel() for p in dit.parameters()) == H3_DIT
    config = dit.config
    assert (config.num_attention_heads, config.attention_head_dim) == (56, 128)
    assert (config.num_layers, config.hidden_size, config.in_channels) == (50, 5376, 24)
    text = meta_pipe.text_encoder.config.text_config
    assert text.hidden_size == config.text_dim == 5120
    assert text.num_hidden_layers == 64 > meta_pipe.text_encoder_layer == 50
    assert (text.num_attention_heads, text.num_key_value_heads, text.head_dim) == (64, 8, 128)
    assert (text.intermediate_size, text.vocab_size) == (25600, 151936)
    assert sum(p.numel() for p in meta_pipe.text_encoder.parameters()) == QWEN3_VL_32B
    assert meta_pipe.canvas_multiple == 32 and meta_pipe.audio_sampling_rate == 32000


@pytest.mark.fast
def test_limits_are_h3s(meta_pipe):
    """Guidance-distilled (no CFG), 24 fps, sizes multiples of 32 (the VAE's 16 times the
    2x2 patch), 1344x768x124 and 30 steps by default, 15 s at most."""
    family = family_of(meta_pipe)
    assert not family.supports_cfg(meta_pipe)
    limits = family.limits(meta_pipe, tiny=False)
    assert (limits.size_multiple, limits.fps, limits.max_frames) == (32, 24, 360)
    assert (limits.default_width, limits.default_height) == (1344, 768)
    assert (limits.default_frames, limits.default_steps) == (124, 30)
    # the tokens count H3's latent frames (17 frames make 5): 10 s at its default size fits
    assert limits.tokens(1344, 768, 243) == 72 * 42 * 24
    JobRequest.from_body({"prompt": "a fox", "num_frames": 351}, limits)
    with pytest.raises(ValueError, match="multiple of 32, got 720"):
        JobRequest.from_body({"prompt": "a fox", "width": 1280, "height": 720}, limits)


@pytest.mark.fast
@pytest.mark.parametrize("steps", [1, 2, 30])
def test_a_jobs_steps_are_its_dit_calls(meta_pipe, steps):
    """diffusers' H3 scheduler counts its sigma grid's points, the terminal 0 included (one
    DiT call fewer): the job asks it for one more, so the loop calls back `steps` times and
    the final latents (`--save-latents`) come at the job's last step."""
    from paradit.backend.models.families.minimax_h3.adapter import grid_points

    scheduler = meta_pipe.scheduler
    scheduler.set_timesteps(grid_points(steps))
    assert len(scheduler.timesteps) == steps
    assert scheduler.sigmas[0] == 1 and scheduler.sigmas[-1] == 0
    request = JobRequest.from_body(
        {"prompt": "a fox", "num_inference_steps": steps},
        family_of(meta_pipe).limits(meta_pipe, tiny=False),
    )
    tensors = {"prompt_embeds": torch.zeros(1, 3, 8), "text_token_tags": torch.zeros(1, 3)}
    kwargs = family_of(meta_pipe).prepare(meta_pipe, request, tensors)
    assert kwargs["num_inference_steps"] == steps + 1


@pytest.mark.fast
@pytest.mark.parametrize("frames", [240, 107])
def test_frames_off_the_17n_plus_5_rule_are_refused(meta_pipe, frames):
    """240 (10 s) is not 17n+5; 107 is, under 5 s: refused before any step, naming the rule
    (over 15 s the limits' `max_frames` refuses at submit). 243 (the nearest to 10 s) passes,
    as 5n+2 = 72 latent frames."""
    family = family_of(meta_pipe)
    limits = family.limits(meta_pipe, tiny=False)
    body = {"prompt": "a fox", "num_frames": frames}
    with pytest.raises(ValueError, match="17n\\+5"):
        request = JobRequest.from_body(body, limits)
        family.prepare(meta_pipe, request, {})
    request = JobRequest.from_body({**body, "num_frames": 243}, limits)
    kwargs = family.prepare(meta_pipe, request, {"prompt_embeds": 0, "text_token_tags": 0})
    assert kwargs["num_frames"] == 243
    assert latent_frames(243) == 72 and audio_rows(243) == 810


def test_plan_at_real_size_uses_the_dry_run(caplog):
    """`paradit plan` for 720p 10 s (1280x736x243: H3 takes multiples of 32) on 4 GPUs of
    24 GB: Ulysses 4 (no CFG to split), the DiT sharded, its weights in bf16; the activations
    from the family's dry run (not the rule of thumb the plan falls back to when a dry run
    fails), and the video decode's dry run on the chunks H3's VAE decodes."""
    from paradit.backend.tools.plan import estimate

    with caplog.at_level(logging.DEBUG, logger="paradit.backend.memory"):
        report = estimate(RANDOM, 4, 24, 1280, 736, 243)
    assert not [r for r in caplog.records if "dry run" in r.getMessage()], caplog.text
    assert report["fits"] and report["tokens"] == 72 * 40 * 23
    assert report["plan"]["modes"][:2] == ["ulysses", "fsdp"]
    assert report["plan"]["ulysses_degree"] == 4
    assert report["memory"]["weights_bytes"]["transformer"] == H3_DIT * 2
    parts = report["memory"]["reference_job"]["parts_bytes"]
    assert parts["activations"] > 2**30 and parts["decode"] > 2**30


@pytest.mark.parametrize(
    ("gpus", "memory", "where"),
    [(8, 80, "sharded"), (1, 80, "cpu"), (2, 80, "cpu"), (4, 24, "cpu"), (8, 141, "device")],
)
def test_plan_counts_and_places_the_32b_encoder(gpus, memory, where):
    """The plan counts Qwen3-VL 32B at its real size (62.1 GiB in bf16) and places it for
    720p 10 s: sharded over the 8 ranks of 8 GPUs of 80 GB (on rank 0's GPU whole the rank
    would need 81.8 GiB of its 72; sharded, 7.8 GiB a rank); on the CPU on one GPU, on 2 x 80
    (sharded over 2 it would need 77.2 GiB) and 4 x 24 GB, its bytes named as rank 0's host
    memory; on 8 GPUs of 141 GB (H200) whole on rank 0's GPU, its bytes rank 0's part
    `encoders`."""
    from paradit.backend.memory.planner import render
    from paradit.backend.tools.plan import estimate

    report = estimate(RANDOM, gpus, memory, 1280, 736, 243)
    plan = report["memory"]
    encoder = plan["weights_bytes"]["text_encoder"]
    assert encoder == QWEN3_VL_32B * 2
    assert report["fits"] and plan["text_encoder"] == where
    parts = plan["reference_job"]["parts_bytes"]
    if where == "device":
        assert parts["encoders"] == encoder and "encoder_host_bytes" not in plan
        assert report["memory"]["reference_job"]["predicted_bytes"]["rank0"] > encoder
        return
    if where == "sharded":
        assert parts["encoders"] == -(-encoder // gpus) and "encoder_host_bytes" not in plan
        assert "text encoder sharded over the ranks" in render(plan)
        assert any("text encoder on device, whole decode) needs" in r for r in plan["reasons"])
        return
    assert plan["encoder_host_bytes"] == encoder and parts["encoders"] == 0
    assert "text encoder on cpu (62.13 GiB of host memory on rank 0)" in render(plan)
    on_device = [r for r in plan["reasons"] if "text encoder on device, tiled" in r]
    assert on_device and "> " in on_device[0], plan["reasons"]  # tried first, did not fit


@pytest.mark.parametrize("count", [12, 9])
def test_clip_decode_is_the_vaes_own_byte_for_byte(count):
    """The video decode as its temporal clips (`decode.py`: the pieces dealt over the ranks)
    joined on the leader equals `vae.decode` with the spatial tiling on, bit for bit: 12
    latent frames (2 clips, none padded) and 9 (2 clips, the last latent frame repeated 3
    times to fill the second, their frames trimmed), 64x64 pixels in 32-pixel tiles (4 a
    clip)."""
    from paradit.backend.models.families.minimax_h3 import decode
    from paradit.backend.models.families.minimax_h3.tiny import h3_vae
    from paradit.backend.models.tiny_parts import seeded

    vae = seeded(702, h3_vae).eval()
    vae.enable_tiling(
        tile_sample_min_height=32,
        tile_sample_min_width=32,
        tile_sample_min_overlap_height=16,
        tile_sample_min_overlap_width=16,
    )
    z = torch.randn(1, 4, count, 4, 4, generator=torch.Generator().manual_seed(1))
    plan = decode.plan_clips(vae, z)
    assert (plan.num_clips, plan.pad_tokens) == {12: (2, 0), 9: (2, 3)}[count]
    with torch.no_grad():
        whole = vae.decode(z, return_dict=False)[0]
        joined = decode.join(vae, plan, [decode.clip(vae, plan, i) for i in range(plan.num_clips)])
    assert joined.shape == whole.shape and torch.equal(joined, whole)


@pytest.mark.fast
def test_last_image_is_h3s_alone(meta_pipe):
    """`last_image` (the frame the video ends on) is taken by a model whose limits say
    `last_frame` (H3), alone or after `image`; any other model refuses it, saying which."""
    import base64
    import dataclasses
    import io

    from PIL import Image

    from paradit.backend.models.families.minimax_h3.adapter import anchors

    buffer = io.BytesIO()
    Image.new("RGB", (8, 8)).save(buffer, "PNG")
    png = base64.b64encode(buffer.getvalue()).decode()
    limits = family_of(meta_pipe).limits(meta_pipe, tiny=False)
    assert limits.last_frame and limits.accepts_image
    alone = JobRequest.from_body({"prompt": "a fox", "last_image": png}, limits)
    both = JobRequest.from_body({"prompt": "a fox", "image": png, "last_image": png}, limits)
    text = JobRequest.from_body({"prompt": "a fox"}, limits)
    assert (anchors(alone), anchors(both), anchors(text)) == (("last",), ("first", "last"), ())
    other = dataclasses.replace(limits, last_frame=False)  # e.g. Wan 2.2 TI2V-5B
    with pytest.raises(ValueError, match="last_image .* only accepted by models that take"):
        JobRequest.from_body({"prompt": "a fox", "last_image": png}, other)
