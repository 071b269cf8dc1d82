"""MiniMax H3's video and audio VAE files as ComfyUI holds them (`minimax_h3_video_vae_*`,
`minimax_h3_audio_vae_fp32`; the layouts of ComfyUI's `comfy/ldm/minimax/vae.py` and
`audio_vae.py`, recognised as `comfy/sd.py` recognises them): the maps to diffusers' models
against what ComfyUI's modules compute (per-head fused q/k/v, `[gate; up]` SwiGLU), and the
tiny preset's two VAEs written in those layouts decode what the preset's VAEs decode, byte
for byte.

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from h3_files import comfy_audio_vae, comfy_video_vae
from safetensors.torch import save_file

from paradit.backend.models.families.minimax_h3 import vae_files
from paradit.backend.models.families.minimax_h3.single_file import (
    detect_audio_vae,
    detect_video_vae,
)
from paradit.backend.models.families.minimax_h3.tiny import h3_audio_vae, h3_vae
from paradit.backend.models.single_file.components import read_whole
from paradit.backend.models.single_file.detect import detect
from paradit.backend.models.single_file.header import read_header
from paradit.backend.models.single_file.vocabulary import Part
from paradit.backend.models.tiny_parts import seeded


def _read(path) -> tuple:
    """The file recognised as every file is (`paradit models`), and its tensors."""
    header = read_header(str(path))
    video, audio = detect_video_vae(header), detect_audio_vae(header)
    assert (video is None) != (audio is None)
    detection = detect(header)
    assert detection == (video or audio)
    return detection, read_whole(Part(header, detection), torch.float32)


def _base(vae) -> dict:
    return {k: v for k, v in vae.config.items() if not k.startswith("_")}


# -- the maps against what ComfyUI's modules compute -----------------------------------------


@pytest.mark.fast
def test_video_decoder_attention_splits_each_heads_thirds():
    """ComfyUI's decoder attention views `to_qkv(x)` as (heads, 3 x head width) and takes each
    head's thirds as its q, k, v: the mapped `to_q`/`to_k`/`to_v` give the same."""
    heads, head_dim, width = 3, 4, 12
    torch.manual_seed(0)
    fused_w, fused_b = torch.randn(3 * width, width), torch.randn(3 * width)
    x = torch.randn(5, width)
    comfy = F.linear(x, fused_w, fused_b).view(5, heads, 3 * head_dim).chunk(3, dim=-1)
    state = vae_files.video_vae_state(
        {
            "decoder.transformer_blocks.0.attn.to_qkv.weight": fused_w,
            "decoder.transformer_blocks.0.attn.to_qkv.bias": fused_b,
        },
        heads,
    )
    for i, name in enumerate(("to_q", "to_k", "to_v")):
        prefix = f"decoder.transformer_blocks.0.attn.{name}"
        ours = F.linear(x, state[f"{prefix}.weight"], state[f"{prefix}.bias"])
        torch.testing.assert_close(ours.view(5, heads, head_dim), comfy[i], rtol=0, atol=0)


@pytest.mark.fast
def test_video_decoder_feed_forward_reads_gate_first():
    """ComfyUI's decoder feed-forward is `w2(silu(gate) * up)` of `w1(x)`'s halves, gate
    first: diffusers' SwiGLU on the mapped weights computes the same."""
    from diffusers.models.attention import FeedForward

    torch.manual_seed(1)
    ff = FeedForward(8, mult=2, activation_fn="swiglu", bias=True)
    w1, b1 = torch.randn(32, 8), torch.randn(32)
    w2, b2 = torch.randn(8, 16), torch.randn(8)
    comfy = {"x.ff.w1.weight": w1, "x.ff.w1.bias": b1, "x.ff.w2.weight": w2, "x.ff.w2.bias": b2}
    state = vae_files.video_vae_state(comfy, heads=1)
    ff.load_state_dict({k.removeprefix("x.ff."): v for k, v in state.items()})
    x = torch.randn(3, 8)
    gate, up = F.linear(x, w1, b1).chunk(2, dim=-1)
    expected = F.linear(F.silu(gate) * up, w2, b2)
    torch.testing.assert_close(ff(x), expected)


@pytest.mark.fast
def test_video_vae_encoder_names_follow_comfy_levels():
    assert vae_files.video_vae_name("encoder.down.3.block.1.nin_shortcut.weight") == (
        "encoder.down_blocks.3.resnets.1.conv_shortcut.weight"
    )
    assert vae_files.video_vae_name("encoder.down.2.downsample.conv.bias") == (
        "encoder.down_blocks.2.downsamplers.0.conv.bias"
    )
    assert vae_files.video_vae_name("decoder.x_embedder.weight") == "decoder.proj_in.weight"


# -- the tiny preset's VAEs from files ---------------------------------------------------------


def test_video_vae_file_decodes_as_the_preset(tmp_path):
    vae = seeded(702, h3_vae).eval()
    path = tmp_path / "minimax_h3_video_vae_fp32.safetensors"
    save_file(comfy_video_vae(vae), str(path))
    detection, state = _read(path)
    assert detection.variant == "minimax-h3 video vae"
    assert detection.config["block_out_channels"] == (8,) * 6
    loaded = vae_files.load_video_vae(state, _base(vae))
    assert loaded.config.latents_mean == pytest.approx(torch.linspace(-0.5, 0.5, 4).tolist())
    z = torch.randn(1, 4, 7, 2, 2, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        expected, ours = vae.decode(z).sample, loaded.decode(z).sample
    assert torch.equal(ours, expected)
    with pytest.raises(ValueError, match="heads of"):
        vae_files.load_video_vae(state, _base(vae) | {"decoder_num_attention_heads": 4})


def test_audio_vae_file_decodes_as_the_preset(tmp_path):
    vae = seeded(703, h3_audio_vae).eval()
    path = tmp_path / "minimax_h3_audio_vae_fp32.safetensors"
    save_file(comfy_audio_vae(seeded(703, h3_audio_vae)), str(path))
    detection, state = _read(path)
    assert detection.variant == "minimax-h3 audio vae"
    assert detection.config["encoder_rates"] == (2, 2)
    assert detection.config["decoder_rates"] == (2, 2)
    loaded = vae_files.load_audio_vae(state, _base(vae))
    assert loaded.config.latents_std == pytest.approx(torch.linspace(0.9, 1.1, 8).tolist())
    z = torch.randn(2, 8, 6, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        expected, ours = vae.decode(z).sample, loaded.decode(z).sample
    assert torch.equal(ours, expected)


def test_int8_convrot_video_vae_file_reads_its_int8_values(tmp_path):
    """`minimax_h3_video_vae_int8_convrot`: the decoder blocks' linears int8 with ConvRot (what
    `comfy/sd.py` reads with its layer quantization), dequantized at load: the VAE decodes what
    one holding the int8 values computes (float32 rounding of the dequantization apart)."""
    from quant_files import int8_layer

    vae = seeded(702, h3_vae).eval()
    plain = comfy_video_vae(vae)
    tensors, held = {}, dict(plain)
    for key, value in plain.items():
        linear = any(f".{n}.weight" in key for n in ("to_qkv", "to_out", "w1", "w2"))
        if key.startswith("decoder.transformer_blocks.") and linear:
            parts, held[key] = int8_layer(value, 16)
            tensors |= {key[: -len("weight")] + s: t for s, t in parts.items()}
        else:
            tensors[key] = value.contiguous()
    path = tmp_path / "minimax_h3_video_vae_int8_convrot.safetensors"
    save_file(tensors, str(path))
    detection, state = _read(path)
    assert detection.variant == "minimax-h3 video vae"
    loaded = vae_files.load_video_vae(state, _base(vae))
    reference = vae_files.load_video_vae(held, _base(vae))
    z = torch.randn(1, 4, 7, 2, 2, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        ours, expected = loaded.decode(z).sample, reference.decode(z).sample
    torch.testing.assert_close(ours, expected, rtol=1e-5, atol=1e-5)
    assert not torch.equal(expected, vae.decode(z).sample)  # the int8 values differ from fp32
