"""LTX-2.5's diffusion video VAE (`ltx-2.5-video-vae-bf16`): the convolutional VAE's encoder
and latent statistics beside a decoder that is a diffusion model of its own, run as diffusers'
`LTX2VideoDiffusionDecoderModel`.

The file (ComfyUI's `CausalDiffusionVAE`, comfy/ldm/lightricks/vae/na_diffusion_decoder.py,
told by `decoder.conv_in_x_t` in comfy/sd.py): `encoder.`, `per_channel_statistics.` and
`decoder.` (stages 1-4, `conv_in`, `det_stages`, `upsamples`; stage 5, `conv_in_x_t`,
`t_embedder.mlp`, `shared_adaln`, `diff_blocks`, `norm_out`, `conv_out`; an unused
`type_emb`). Its settings are in the metadata (`config` -> `vae.decoder`), else ComfyUI's
defaults (`LTX_24_VAE_CONFIG`, the shipped model's: `SHIPPED`).

What is built: the pipeline's `vae` stays an `AutoencoderKLLTX2Video` (the compression ratios,
the latent statistics and the image-to-video encoder read it) from the file's encoder and
statistics; its convolutional decoder is absent (`NoConvDecoder` says so if called) and the
diffusion decoder rides on it as `vae.diffusion_decoder`, so it moves, casts and is counted
with the VAE.

The decode (`decode`): ComfyUI's `CausalDiffusionVAE.decode` and diffusers' model are the same
computation (stages 1-4 to a context, pixel noise, one x0 step at t = 1 as shipped); ComfyUI
draws the noise from a generator seeded 0 on the decode's device on every decode, so paradit
calls diffusers' model with `torch.Generator(device).manual_seed(0)`: the job's seed does not
reach the decode, as in ComfyUI.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

import torch

from .detect import DIFFUSION_DECODER

SHIPPED = {
    "in_channels": 128,
    "out_channels": 3,
    "patch_size": 4,
    "head_dim": 64,
    "stage_channels": [2048, 1024, 512, 512, 256],
    "stage_depths": [4, 6, 4, 2, 8],
    "stage_kernels": [[3, 7, 7], [3, 7, 7], [3, 5, 5], [3, 5, 5], [11, 11, 11]],
    "upsamples": [[[1, 2, 2], 2], [[2, 1, 1], 2], [[2, 2, 2], 1], [[2, 2, 2], 2]],
    "stage5_kernel": [11, 11, 11],
    "t_emb_dim": 384,
    "timestep_scale_multiplier": 1000.0,
    "default_num_inference_steps": 1,
}
"""The decoder settings ComfyUI falls back to (`LTX_24_VAE_CONFIG["decoder"]`): LTX-2.5's."""
DECODE_BYTES_PER_VOXEL = 1700 * 8 * 8 * 8
"""ComfyUI's decode budget (comfy/sd.py, `memory_used_decode` of the diffusion VAE): 1700 x
512 elements of the VAE's dtype per latent voxel (F x H x W), against the conv VAE's 1200."""
_NAMES = (
    (re.compile(r"\.attn\.proj\."), ".attn.to_out.0."),
    (re.compile(r"\.attn\.q_norm\."), ".attn.norm_q."),
    (re.compile(r"\.attn\.k_norm\."), ".attn.norm_k."),
    (re.compile(r"^t_embedder\.mlp\.0\."), "t_embedder.timestep_embedder.linear_1."),
    (re.compile(r"^t_embedder\.mlp\.2\."), "t_embedder.timestep_embedder.linear_2."),
)
"""The file's decoder names (ComfyUI's `NADiffusionDecoder`) -> diffusers'
`LTX2VideoDiffusionDecoder3d`; the fused `attn.qkv` splits into `to_q`, `to_k`, `to_v`."""
_UNUSED = ("type_emb",)
"""Decoder tensors the decode never reads (ComfyUI leaves them as leftover keys too)."""
_STATISTICS = {"per_channel_statistics.mean-of-means": "latents_mean",
               "per_channel_statistics.std-of-means": "latents_std"}  # fmt: skip


def is_diffusion_vae(keys: Mapping[str, Any]) -> bool:
    """Whether a video VAE's keys (without the checkpoint's `vae.`) hold the diffusion decoder."""
    return DIFFUSION_DECODER in keys


def decoder_settings(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The decoder's settings from a file's metadata (`config` -> `vae.decoder`, each missing
    one ComfyUI's default, `SHIPPED`) and the VAE's `model_output_type`."""
    raw = metadata.get("config")
    vae = (json.loads(raw) if isinstance(raw, str) else raw or {}).get("vae") or {}
    settings = {**SHIPPED, **(vae.get("decoder") or {})}
    settings["model_output_type"] = vae.get("model_output_type", "x0")
    return settings


def diffusers_config(settings: Mapping[str, Any]) -> dict[str, Any]:
    """`LTX2VideoDiffusionDecoderModel`'s arguments for the file's settings (ComfyUI's names:
    its `stage_kernels` carries stage 5's window last, `upsamples` pairs each stride with its
    channel reduction)."""
    strides = [tuple(stride) for stride, _ in settings["upsamples"]]
    return {
        "out_channels": settings["out_channels"],
        "latent_channels": settings["in_channels"],
        "patch_size": settings["patch_size"],
        "decoder_head_dim": settings["head_dim"],
        "decoder_stage_channels": tuple(settings["stage_channels"]),
        "decoder_stage_depths": tuple(settings["stage_depths"]),
        "decoder_stage_kernels": tuple(tuple(k) for k in settings["stage_kernels"][: len(strides)]),
        "decoder_upsample_strides": tuple(strides),
        "decoder_upsample_channel_reductions": tuple(r for _, r in settings["upsamples"]),
        "decoder_stage5_kernel": tuple(settings["stage5_kernel"]),
        "decoder_t_emb_dim": settings["t_emb_dim"],
        "decoder_timestep_scale_multiplier": float(settings["timestep_scale_multiplier"]),
        "decoder_model_output_type": settings["model_output_type"],
        "decoder_num_inference_steps": int(settings["default_num_inference_steps"]),
        "spatial_compression_ratio": math.prod(s[1] for s in strides) * settings["patch_size"],
        "temporal_compression_ratio": math.prod(s[0] for s in strides),
    }


def decoder_names(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The file's tensors (its keys without the checkpoint's `vae.`) -> the diffusion decoder
    model's state in diffusers' names: `decoder.` renamed, the statistics as its buffers."""
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        if key in _STATISTICS:
            out[_STATISTICS[key]] = value
            continue
        if not key.startswith("decoder."):
            continue
        name = key[len("decoder.") :]
        if name in _UNUSED:
            continue
        if match := re.match(r"^(.*\.attn\.)qkv\.(weight|bias)$", name):
            for part, chunk in zip("qkv", value.chunk(3), strict=True):
                out[f"decoder.{match[1]}to_{part}.{match[2]}"] = chunk.contiguous()
            continue
        for pattern, replacement in _NAMES:
            name = pattern.sub(replacement, name, count=1)
        out["decoder." + name] = value
    return out


class NoConvDecoder(torch.nn.Module):
    """Where the conv VAE's decoder would be: the file has none; its decode is the diffusion
    decoder's (`decode`)."""

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        raise ValueError(
            "this LTX-2 video VAE has no convolutional decoder: it decodes with LTX-2.5's "
            "diffusion decoder (vae.diffusion_decoder)"
        )


def build(
    state: Mapping[str, torch.Tensor],
    metadata: Mapping[str, Any],
    reference: Any,
    name: str,
    dtype: torch.dtype,
) -> Any:
    """The pipeline's `vae` from a diffusion VAE file's tensors (`state`, its own names):
    `reference`'s class and config (the preset's conv VAE) with the file's encoder and
    statistics (`conv_names` maps them), no conv decoder, the diffusion decoder attached.
    ValueError naming the first keys that do not fit; `name` is the file's."""
    from accelerate import init_empty_weights
    from diffusers import LTX2VideoDiffusionDecoderModel

    from ...casting import cast_model
    from .files import vae_names

    config = {**dict(reference.config), "_class_name": type(reference).__name__}
    with init_empty_weights(include_buffers=False):
        vae = type(reference).from_config(config)
    vae.decoder = NoConvDecoder()
    conv = vae_names({k: v for k, v in state.items() if not k.startswith("decoder.")})
    _load(vae, conv, name, "its encoder does not fit LTX-2.5's diffusion video VAE")
    settings = decoder_settings(metadata)
    with init_empty_weights(include_buffers=False):
        decoder = LTX2VideoDiffusionDecoderModel(**diffusers_config(settings))
    _load(decoder, decoder_names(state), name, "its diffusion decoder does not fit its settings")
    vae.diffusion_decoder = cast_model(decoder, dtype).eval()
    return cast_model(vae, dtype).eval()


def _load(model: torch.nn.Module, state: dict[str, torch.Tensor], name: str, what: str) -> None:
    expected = model.state_dict()
    problems = sorted(set(expected) ^ set(state))
    problems += [k for k in expected if k in state and state[k].shape != expected[k].shape]
    if problems:
        raise ValueError(f"--vae {name}: {what} (mismatched keys {problems[:3]})")
    model.load_state_dict(state, assign=True, strict=True)


def decoder_of(vae: Any) -> Any | None:
    """The diffusion decoder a pipeline's `vae` carries, else None (a conv VAE)."""
    return getattr(vae, "diffusion_decoder", None)


def generator(device: torch.device) -> torch.Generator:
    """ComfyUI's decode noise: a generator seeded 0 on the decode's device, every decode."""
    return torch.Generator(device=device).manual_seed(0)


def decode(decoder: Any, z: torch.Tensor) -> torch.Tensor:
    """Denormalised latents (B, C, F, H, W) -> pixels (B, 3, 8(F-1)+1, 32H, 32W) in -1..1,
    untiled, as ComfyUI's `CausalDiffusionVAE.decode`."""
    z = z.to(device=decoder.device, dtype=decoder.dtype)
    with torch.no_grad():  # FlexAttention has no backward on a CPU
        return decoder.decode(z, generator=generator(z.device), return_dict=False)[0]


def grids(decoder: Any, latent: tuple[int, int, int]) -> list[tuple[str, tuple[int, ...]]]:
    """(stage, its token grid (T, H, W)) for latents of `latent` (F, H, W): what each stage's
    neighborhood attention sees (stage 1 with the trailing frames it pads)."""
    inner = decoder.decoder
    frames, height, width = latent
    frames += inner.trailing_pad_latent_frames
    out = []
    for index, upsample in enumerate(inner.upsamples):
        out.append((f"stage {index + 1}", (frames, height, width)))
        st, sh, sw = upsample.stride
        frames, height, width = frames * st - (1 if st == 2 else 0), height * sh, width * sw
    pad = inner.trailing_pad_latent_frames * inner.temporal_compression_ratio
    out.append(("stage 5", (frames - pad, height, width)))
    return out


def window_problem(decoder: Any, latent: tuple[int, int, int]) -> str | None:
    """Why latents of `latent` (F, H, W) cannot be decoded (a stage's grid smaller than its
    attention window: diffusers raises deep inside otherwise), else None."""
    inner = decoder.decoder
    kernels = [blocks[0].attn.kernel_size for blocks in inner.det_stages]
    kernels.append(inner.diff_blocks[0].attn.kernel_size)
    for (stage, grid), kernel in zip(grids(decoder, latent), kernels, strict=True):
        if any(g < k for g, k in zip(grid, kernel, strict=True)):
            return (
                f"LTX-2.5's diffusion video decoder needs each stage's grid at least its "
                f"attention window: {stage} would be {grid[0]}x{grid[1]}x{grid[2]} (frames x "
                f"height x width) under a window of {kernel[0]}x{kernel[1]}x{kernel[2]}; "
                "ask for more frames or a larger size"
            )
    return None


def decode_bytes(latent: tuple[int, int, int], dtype: torch.dtype) -> int:
    """ComfyUI's budget for decoding latents of `latent` (F, H, W) in `dtype`."""
    element = torch.tensor([], dtype=dtype).element_size()
    return DECODE_BYTES_PER_VOXEL * math.prod(latent) * element


def build_vae(part: Any, preset_name: str, dtype: torch.dtype, tools: Any) -> Any:
    """The pipeline's `vae` of a video VAE file (`FileSpec.build_vae`): LTX-2.5's diffusion
    VAE as `build` makes it, the conv VAE (any other file) as the preset's config with the
    file's weights in diffusers' names (`files.vae_names`), as the other families' are."""
    reference = tools.preset_parts(preset_name, {"vae"}).vae
    state = tools.read_whole(part, torch.float32)
    if is_diffusion_vae(part.header.tensors):
        return build(state, part.header.metadata, reference, part.header.name, dtype)
    from accelerate import init_empty_weights

    from ...casting import cast_model
    from .files import vae_names

    config = {**dict(reference.config), "_class_name": type(reference).__name__}
    with init_empty_weights(include_buffers=False):
        vae = type(reference).from_config(config)
    _load(vae, vae_names(state), part.header.name, f"does not fit {part.detection.variant}:")
    return cast_model(vae, dtype).eval()
