"""MiniMax H3's video and audio VAE files as ComfyUI holds them, read into diffusers' models.

The key layouts are those of ComfyUI's modules (`comfy/ldm/minimax/vae.py`,
`comfy/ldm/minimax/audio_vae.py`; `comfy/sd.py` loads the files into them as they are, no
prefix); `single_file.py` recognises them and reads what their shapes show.

Video VAE (`minimax_h3_video_vae_*` -> `AutoencoderKLMiniMaxH3`): renames, and three
transforms that follow from how ComfyUI's decoder computes:

- `decoder.transformer_blocks.N.attn.to_qkv` (weight and bias) is read per head: ComfyUI views
  its output as (heads, 3 x head width) and takes q, k, v as the thirds of each head's rows,
  so its rows are `[head0: q k v, head1: q k v, ...]`; diffusers' `to_q`, `to_k`, `to_v`
  take each head's thirds in head order;
- `ff.w1` is `[gate; up]` (ComfyUI's SwiGLU: `silu(gate) * up` of its two halves), diffusers'
  `SwiGLU` reads `[up; gate]`: the halves swap;
- `latents_mean`/`latents_std` (buffers in the file) become the config's; the training-only
  `decoder.mask_token` has no place in diffusers' decoder and is dropped.

Audio VAE (`minimax_h3_audio_vae_fp32` -> `AutoencoderKLMiniMaxH3Audio`): the same module
names as diffusers' (its conversion script says MiniMax's names are diffusers'), but ComfyUI
folds each weight norm into a plain `weight`: the model's weight norms are removed before the
file's weights load (what the norm would compute is what the file holds). `latents_mean`/
`latents_std` become the config's.

What no weight shows (the video VAE's strides, group count, decoder heads, temporal chunking;
the audio VAE's heads, dilations and sample rate) comes from `base`, the preset VAE's config:
the tiny preset's for the tiny test files, `random:minimax-h3`'s for the released ones.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import torch

from .single_file import audio_vae_shapes, video_vae_shapes

_STATISTICS = ("latents_mean", "latents_std")
_DROPPED = ("decoder.mask_token",)
_LEVEL = re.compile(r"^encoder\.down\.(\d+)\.")
_RENAMES = (
    (".block.", ".resnets."),
    (".nin_shortcut.", ".conv_shortcut."),
    (".downsample.", ".downsamplers.0."),
)
_DECODER_RENAMES = (
    ("decoder.x_embedder.", "decoder.proj_in."),
    (".attn.to_out.", ".attn.to_out.0."),
    (".ff.w1.", ".ff.net.0.proj."),
    (".ff.w2.", ".ff.net.2."),
)


def video_vae_name(key: str) -> str:
    """A video VAE key in ComfyUI's names -> diffusers' (no tensor transform: `to_qkv` is
    split by `video_vae_state`)."""
    level = _LEVEL.match(key)
    if level:
        rest = key[level.end() - 1 :]
        for old, new in _RENAMES:
            rest = rest.replace(old, new, 1)
        key = f"encoder.down_blocks.{level.group(1)}{rest}"
    for old, new in _DECODER_RENAMES:
        key = key.replace(old, new)
    return key


def split_heads_qkv(fused: torch.Tensor, heads: int) -> tuple[torch.Tensor, ...]:
    """A fused `[head: q k v]*heads` projection (weight rows or bias) -> q, k, v, each in
    head order."""
    if fused.shape[0] % (3 * heads):
        raise ValueError(f"a fused qkv of {fused.shape[0]} rows does not split into {heads} heads")
    grouped = fused.reshape(heads, 3, fused.shape[0] // (3 * heads), *fused.shape[1:])
    return tuple(grouped[:, i].reshape(-1, *fused.shape[1:]) for i in range(3))


def video_vae_state(state: Mapping[str, torch.Tensor], heads: int) -> dict[str, torch.Tensor]:
    """ComfyUI's video VAE tensors (the statistics and `mask_token` taken out) -> diffusers'
    state dict, the decoder's attention split over `heads` heads."""
    out: dict[str, torch.Tensor] = {}
    for key, tensor in state.items():
        if key in _DROPPED or key in _STATISTICS:
            continue
        if ".attn.to_qkv." in key:
            head, suffix = key.split(".attn.to_qkv.")
            parts = split_heads_qkv(tensor, heads)
            for name, part in zip(("to_q", "to_k", "to_v"), parts, strict=True):
                out[f"{head}.attn.{name}.{suffix}"] = part.contiguous()
            continue
        if ".ff.w1." in key:
            gate, up = tensor.chunk(2, dim=0)
            tensor = torch.cat([up, gate], dim=0)
        out[video_vae_name(key)] = tensor
    return out


def _statistics(state: Mapping[str, torch.Tensor], channels: int, what: str) -> dict[str, list]:
    missing = [k for k in _STATISTICS if k not in state]
    if missing:
        raise ValueError(f"an H3 {what} file holds its latent statistics; missing {missing}")
    stats = {k: [float(v) for v in state[k].float().reshape(-1)] for k in _STATISTICS}
    if any(len(v) != channels for v in stats.values()):
        raise ValueError(f"the {what}'s latent statistics are not {channels} wide")
    return stats


def video_vae_config(state: Mapping[str, torch.Tensor], base: Mapping[str, Any]) -> dict:
    """The `AutoencoderKLMiniMaxH3` config of a ComfyUI video VAE file: `base` (the preset's)
    with what the shapes show and the file's latent statistics; ValueError when the decoder's
    width is not `base`'s heads times head width."""
    shapes = video_vae_shapes({k: tuple(v.shape) for k, v in state.items()})
    width = shapes.pop("decoder_width")
    heads, head_dim = base["decoder_num_attention_heads"], base["decoder_attention_head_dim"]
    if heads * head_dim != width:
        raise ValueError(
            f"the video VAE's decoder is {width} wide; its preset's {heads} heads of {head_dim} "
            "do not make that (a different VAE?)"
        )
    config = {k: v for k, v in base.items() if not k.startswith("_")}
    return config | shapes | _statistics(state, shapes["latent_channels"], "video VAE")


def load_video_vae(state: Mapping[str, torch.Tensor], base: Mapping[str, Any]) -> Any:
    """`AutoencoderKLMiniMaxH3` holding a ComfyUI video VAE file's tensors (float32; int8
    layers already dequantized by the reader); every weight must fit, and nothing more."""
    from diffusers import AutoencoderKLMiniMaxH3

    config = video_vae_config(state, base)
    model = AutoencoderKLMiniMaxH3(**config)
    _load_exact(model, video_vae_state(state, config["decoder_num_attention_heads"]), "video VAE")
    return model.eval()


def audio_vae_config(state: Mapping[str, torch.Tensor], base: Mapping[str, Any]) -> dict:
    """The `AutoencoderKLMiniMaxH3Audio` config of a ComfyUI audio VAE file: `base` with what
    the shapes show and the file's latent statistics (`base`'s dilations, cut to as many
    convolutions as each resblock has)."""
    shapes = audio_vae_shapes({k: tuple(v.shape) for k, v in state.items()})
    convs = sum(1 for k in state if re.match(r"decoder\.resblocks\.0\.convs1\.\d+\.weight$", k))
    dilations = tuple(tuple(d[:convs]) for d in base["resblock_dilation_sizes"])
    config = {k: v for k, v in base.items() if not k.startswith("_")}
    config |= shapes | {
        "resblock_dilation_sizes": dilations[: len(shapes["resblock_kernel_sizes"])]
    }
    return config | _statistics(state, shapes["latent_channels"], "audio VAE")


def load_audio_vae(state: Mapping[str, torch.Tensor], base: Mapping[str, Any]) -> Any:
    """`AutoencoderKLMiniMaxH3Audio` holding a ComfyUI audio VAE file's tensors: its weight
    norms removed, the file's folded weights in their place."""
    from diffusers import AutoencoderKLMiniMaxH3Audio

    model = AutoencoderKLMiniMaxH3Audio(**audio_vae_config(state, base))
    fold_weight_norms(model)
    weights = {k: v for k, v in state.items() if k not in _STATISTICS}
    _load_exact(model, weights, "audio VAE")
    return model.eval()


def fold_weight_norms(model: torch.nn.Module) -> None:
    """Every weight norm of `model` removed (its `weight` computed once from `weight_g` and
    `weight_v`, as ComfyUI's files hold it)."""
    for module in model.modules():
        if hasattr(module, "weight_g"):
            torch.nn.utils.remove_weight_norm(module)


def _load_exact(model: torch.nn.Module, state: dict[str, torch.Tensor], what: str) -> None:
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    wrong = sorted(k for k in set(state) & set(expected) if state[k].shape != expected[k].shape)
    if missing or unexpected or wrong:
        raise ValueError(
            f"the H3 {what} file does not fit its config: missing {missing[:4]}, unexpected "
            f"{unexpected[:4]}, shapes differ for {wrong[:4]}"
        )
    model.load_state_dict({k: v.to(expected[k].dtype) for k, v in state.items()})
