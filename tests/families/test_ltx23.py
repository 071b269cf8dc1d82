"""LTX-2.3 as a variant of the ltx2 family (the same pipeline classes, its own settings): the
tiny preset's 2.3 settings and its audio track at 48 kHz (the vocoder with bandwidth
extension) against `LTX2Pipeline` called directly, the `random:ltx2.3-22b` preset's
published shapes (the DiT and the per-stream text connectors: 22B), and `paradit plan` for
it at 1280x720, 121 frames on 1 x 24, 2 x 24, 1 x 80 and 4 x 80 GB, the split sequence
keeping 2.3's per-head rotary tables whole. A LoRA job on 2.3's own modules (the gates beside
the query projections) equals diffusers' `load_lora_weights` + `fuse_lora`. Its parallel
jobs (CFG x Ulysses at 2-4 ranks, image to video, the step cache) are the family contract's
(`ltx2/tiny_job.py`'s "2.3" jobs). LTX-2.5's presets (`tiny-ltx2.5`, `random:ltx2.5-22b`)
have 2.5's published settings and a Gemma 4 text model; its job is the contract's "2.5".

Cost: about 19 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from image_jobs import run_here
from lora_files import diffusers_fused, dit_patcher, lora_items, peft_lora

from paradit.backend.models.families import enable_tiles, family_of
from paradit.backend.models.families.ltx2.adapter import use_cross_timestep
from paradit.backend.models.families.ltx2.tiny_job import V23, called_with_audio
from paradit.backend.models.presets import build_preset
from paradit.backend.models.random_presets import build_random_preset
from paradit.backend.serving.outputs import to_uint8
from paradit.backend.tools.equivalence import DIFFERENT, FLOAT32, IDENTICAL, compare

TINY, RANDOM = "tiny-ltx2.3", "random:ltx2.3-22b"
# DiT and text connectors on the meta device: LTX-2.3's "22B" (the connectors are 8 layers
# per stream at the streams' widths, with one Gemma projection per stream).
DIT, CONNECTORS = 18_988_838_144, 3_172_227_584
SETUPS = ((1, 24), (2, 24), (1, 80), (4, 80))
"""(GPUs, GB each) the issue asks `paradit plan` for."""


def _flags(pipe) -> dict:
    transformer, connectors = pipe.transformer.config, pipe.connectors.config
    return {
        "gated": (transformer.gated_attn, transformer.audio_gated_attn),
        "prompt_adaln": (transformer.cross_attn_mod, transformer.audio_cross_attn_mod),
        "caption_projection": transformer.use_prompt_embeddings,
        "rope": (transformer.rope_type, connectors.rope_type),
        "per_stream_text": connectors.per_modality_projections,
        "vocoder": type(pipe.vocoder).__name__,
    }


LTX23 = {
    "gated": (True, True),
    "prompt_adaln": (True, True),
    "caption_projection": False,
    "rope": ("split", "split"),
    "per_stream_text": True,
    "vocoder": "LTX2VocoderWithBWE",
}


def test_tiny_preset_is_ltx_2_3_and_its_audio_equals_diffusers():
    """`tiny-ltx2.3`: 2.3's settings on tiny sizes, the text-to-video family (its adapter
    modulates the cross-modal attention by the other stream's timestep, as 2.3 does); a job at
    world size 1 gives `LTX2Pipeline`'s video and audio, bit for bit: 33 mel frames (9 video
    frames) of stereo at 48 kHz, 480 samples each."""
    pipe = _tiny()
    assert _flags(pipe) == LTX23
    assert family_of(pipe).name == "ltx2-t2v" and use_cross_timestep(pipe)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        frames, result = run_here(pipe, dict(V23))
        video, audio = called_with_audio(pipe, V23, {})
    finally:
        torch.set_num_threads(threads)
    assert compare(frames, to_uint8(np.asarray(video[0])), FLOAT32).verdict == IDENTICAL
    track = result.audio
    assert track.sample_rate == 48000 and track.waveform.shape == (2, 33 * 480)
    assert np.array_equal(track.waveform, audio[0].numpy())


def _tiny():
    pipe = build_preset(TINY)
    pipe.set_progress_bar_config(disable=True)
    enable_tiles(pipe.vae, 128, 128)
    return pipe


def test_lora_on_the_gates_equals_diffusers_fuse_lora(tmp_path):
    """A PEFT LoRA on each block's video self-attention query and gate projections
    (`attn1.to_q`, `attn1.to_gate_logits`: 2.3's module) at strength 0.8: the job's DiT
    weights are diffusers' fused ones byte for byte, its video `LTX2Pipeline`'s with them,
    not the plain job's; the weights come back after."""
    pipe = _tiny()
    targets = ("attn1.to_q", "attn1.to_gate_logits")
    peft_lora(tmp_path / "gates.safetensors", pipe.transformer, targets, seed=3)
    patcher = dit_patcher(pipe, tmp_path)
    base = {k: v.clone() for k, v in pipe.transformer.state_dict().items()}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        plain, _ = run_here(pipe, dict(V23))
        with patcher.applied(patcher.resolve(lora_items([("gates", 0.8)]))):
            ours = {k: v.clone() for k, v in pipe.transformer.state_dict().items()}
            frames, _ = run_here(pipe, dict(V23))
        fused = diffusers_fused(pipe, tmp_path, [("gates", 0.8)])
        video, _ = called_with_audio(fused, V23, {})
    finally:
        torch.set_num_threads(threads)
    assert all(torch.equal(v, pipe.transformer.state_dict()[k]) for k, v in base.items())
    changed = sorted(k for k in base if not torch.equal(base[k], ours[k]))
    assert {k.split(".", 2)[2] for k in changed} == {
        "attn1.to_q.weight",
        "attn1.to_gate_logits.weight",
    }
    reference = fused.transformer.state_dict()
    assert all(torch.equal(reference[k], ours[k]) for k in base)
    assert compare(frames, to_uint8(np.asarray(video[0])), FLOAT32).verdict == IDENTICAL
    assert compare(plain, frames, FLOAT32).verdict == DIFFERENT


def _ltx25(pipe) -> dict:
    config = pipe.transformer.config
    return {
        "ff_bias": (config.ff_bias, config.audio_ff_bias),
        "keyframes": config.use_keyframes_abs_pos_embedding,
        "prompt_adaln": config.use_prompt_adaln_single
        and hasattr(pipe.transformer, "prompt_adaln"),
        "video_ff_bias": pipe.transformer.transformer_blocks[0].ff.net[0].proj.bias is not None,
        "text_encoder": type(pipe.text_encoder).__name__,
    }


LTX25 = {
    "ff_bias": (False, True),
    "keyframes": True,
    "prompt_adaln": True,
    "video_ff_bias": False,
    "text_encoder": "Gemma4UnifiedTextModel",
}


def test_tiny_ltx2_5_preset_has_2_5s_settings():
    """`tiny-ltx2.5`: 2.3's settings and components with 2.5's published DiT settings (no video
    feed-forward biases, the keyframe embedding, the prompt AdaLN kept) and a Gemma 4 (unified)
    text model; the text-to-video family, the cross-modal attention by the other stream's
    timestep. Its jobs: the family contract's "2.5"."""
    pipe = build_preset("tiny-ltx2.5", components=frozenset({"transformer", "text_encoder"}))
    assert _ltx25(pipe) == LTX25
    assert family_of(pipe).name == "ltx2-t2v" and use_cross_timestep(pipe)


def test_random_ltx2_5_preset_is_2_3s_shapes_with_2_5s_settings():
    """`random:ltx2.5-22b`: 2.3's DiT without the video feed-forward biases, with the keyframe
    embedding (1 x 4096); 2.3's connectors, VAE and vocoder; a reduced Gemma 4 text model of
    the real width and layers (a full-attention layer every 6th). `paradit plan` at 1280x720,
    121 frames fits on 1 x 24 and 4 x 80 GB."""
    from paradit.backend.tools.plan import estimate

    pipe = build_random_preset("random:ltx2.5-22b", device="meta")
    assert _flags(pipe) == LTX23 and _ltx25(pipe) == LTX25
    biases = 48 * (4 * 4096 + 4096)  # the video feed-forward's two biases a block
    assert sum(p.numel() for p in pipe.transformer.parameters()) == DIT - biases + 4096
    assert sum(p.numel() for p in pipe.connectors.parameters()) == CONNECTORS
    text = pipe.text_encoder.config
    assert (text.hidden_size, text.num_hidden_layers, text.attention_k_eq_v) == (3840, 48, True)
    full = [i for i, kind in enumerate(text.layer_types) if kind == "full_attention"]
    assert full == list(range(5, 48, 6))
    for gpus, memory in ((1, 24), (4, 80)):
        assert estimate("random:ltx2.5-22b", gpus, memory, 1280, 720, 121)["fits"]


@pytest.mark.fast
def test_random_preset_has_the_published_shapes():
    pipe = build_random_preset(RANDOM, device="meta")
    assert _flags(pipe) == LTX23
    assert sum(p.numel() for p in pipe.transformer.parameters()) == DIT
    assert sum(p.numel() for p in pipe.connectors.parameters()) == CONNECTORS
    config = pipe.transformer.config
    assert (config.num_layers, config.num_attention_heads, config.audio_num_attention_heads) == (
        48,
        32,
        32,
    )
    connectors = pipe.connectors.config
    assert (connectors.video_connector_num_layers, connectors.video_hidden_dim) == (8, 4096)
    assert (connectors.audio_connector_num_layers, connectors.audio_hidden_dim) == (8, 2048)
    assert pipe.vocoder.config.output_sampling_rate == 48000
    assert pipe.vae.config.upsample_type == [
        "spatiotemporal",
        "spatiotemporal",
        "temporal",
        "spatial",
    ]
    family = family_of(pipe)
    limits = family.limits(pipe, tiny=False)
    assert limits.tokens(1280, 720, 121) == 16 * 22 * 40
    assert use_cross_timestep(pipe)


@pytest.mark.fast
def test_dry_run_runs_the_22b_forward():
    """The plan's dry run of LTX-2.3's DiT runs (a failed one falls back to a rule of thumb):
    the text at the streams' widths, the per-head rotary tables, on a rank's share (Ulysses
    2) and with the audio's attention over the whole video."""
    from paradit.backend.memory.settings import JobShape
    from paradit.backend.memory.sizes import sizes_of_pipeline
    from paradit.backend.models.families.ltx2.memory import forward, gathered

    pipe = build_random_preset(RANDOM, device="meta")
    sizes = sizes_of_pipeline(pipe, family_of(pipe), torch.bfloat16)
    shape = JobShape(1280, 720, 121)
    for degree in (1, 2):
        video, audio = forward(sizes, shape, degree)
        assert video.shape == (1, 16 * 22 * 40 // degree, 128) and audio.shape[-1] == 128
    assert gathered(sizes, shape, 2).video_tokens == 16 * 22 * 40


@pytest.mark.parametrize(("gpus", "memory"), SETUPS)
def test_plan_of_the_22b_at_1280x720x121(gpus, memory):
    """`paradit plan --model random:ltx2.3-22b --width 1280 --height 720 --frames 121`: it fits
    on each setup; on 4 x 80 GB as CFG 2 x Ulysses 2, each rank keeping the whole per-head
    rotary tables beyond its share (half the interleaved tables' elements per token)."""
    from paradit.backend.tools.plan import estimate

    report = estimate(RANDOM, gpus, memory, 1280, 720, 121)
    assert report["tokens"] == 16 * 22 * 40 and report["fits"], report
    weights = report["memory"]["weights_bytes"]
    assert weights["transformer"] == DIT * 2 and weights["connectors"] == CONNECTORS * 2
    job = report["memory"]["reference_job"]
    assert job["predicted_bytes"]["rank0"] <= 0.9 * memory * 1024**3
    if gpus < 4:
        assert "gathered_video" not in job["parts_bytes"]
        return
    assert report["plan"]["modes"] == ["cfg", "ulysses", "fsdp", "vae"]
    # CFG 2 x Ulysses 2: a rank's share is 11 of the 22 rows; split tables are (heads,
    # tokens, width / 2 / heads): the video's 4096 and the audio-video 2048 halved, float32
    whole, share = 16 * 22 * 40, 16 * 11 * 40
    tables = 2 * (whole - share) * (4096 + 2048) // 2 * 4
    (reason,) = (r for r in job["reasons"] if "gathered_video" in r)
    assert f"({tables / 1024**3:.2f} GiB more" in reason, reason
    assert job["parts_bytes"]["gathered_video"] > tables
