"""MiniMax H3's tiny preset written as the single files ComfyUI users hold: the pruned-AdaLN
DiT (`minimax_h3_fl2va_pruned_*`: original key names, fused QKV `[q; k; v]`, the curve table,
optionally the blocks' linears int8 with ConvRot), the video and audio VAEs in ComfyUI's module
names (`comfy/ldm/minimax/vae.py`, `audio_vae.py`), Qwen3-VL in ComfyUI's layout. Written from
the formats' definitions, apart from the loaders (`families/minimax_h3/`)."""

from __future__ import annotations

import torch
from quant_files import int8_layer, nvfp4_layer
from safetensors.torch import save_file

from paradit.backend.models.families.minimax_h3 import vae_files
from paradit.backend.models.families.minimax_h3.single_file import TABLE
from paradit.backend.models.presets import build_preset

STATISTICS = ("latents_mean", "latents_std")
GRID = 33
CONVROT = 16
TOP_LEVEL = (
    ("transformer_blocks.", "blocks."),
    ("token_refiner.refiner_blocks.", "token_refiner.blocks."),
    ("time_embedder.linear_1.", "time_embedder.proj_in."),
    ("time_embedder.linear_2.", "time_embedder.proj_out."),
    ("proj_in.", "video_patch_proj."),
    ("audio_proj_in.", "audio_patch_proj."),
    ("context_embedder.", "condition_proj."),
    ("norm_out.norm.", "final_layer.norm."),
    ("norm_out.linear.", "final_layer.adaln_proj.linear."),
    ("proj_out.", "final_layer.video_out."),
    ("audio_proj_out.", "final_layer.audio_out."),
)
INNER = (
    (".attn.norm_q.", ".attn.q_norm."),
    (".attn.norm_k.", ".attn.k_norm."),
    (".attn.to_out.0.", ".attn.out_proj."),
    (".ff.net.0.proj.", ".mlp.fc1."),
    (".ff.net.2.", ".mlp.fc2."),
)


def original_names(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """diffusers' H3 state dict in the original (ComfyUI) names and fusions: q, k, v stacked
    into `qkv_proj` and the SwiGLU halves back to `[gate; value]` (what diffusers' converter
    undoes)."""
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        if key.endswith((".attn.to_k.weight", ".attn.to_v.weight")):
            continue
        if key.endswith(".attn.to_q.weight"):
            stem = key[: -len("to_q.weight")]
            value = torch.cat([state[stem + f"to_{x}.weight"] for x in "qkv"])
            key = stem + "qkv_proj.weight"
        if key.endswith(".ff.net.0.proj.weight"):
            value_half, gate = value.chunk(2)
            value = torch.cat([gate, value_half])
        for new, old in TOP_LEVEL:
            if key.startswith(new):
                key = old + key[len(new) :]
                break
        for new, old in INNER:
            key = key.replace(new, old)
        out[key] = value
    return out


def curve_basis(model) -> tuple[torch.Tensor, torch.Tensor]:
    """The pruned files' construction at full rank: the sampled `silu(e(t))` on the grid
    (G) and the right singular vectors V of G (so `G V` is the table and `W V` each AdaLN
    projection; at full rank `W V V^T g == W g` for every g on the grid)."""
    t = torch.linspace(0, 1, GRID)
    with torch.no_grad():
        g = torch.nn.functional.silu(model.time_embedder(model.time_proj(t)))
    _, _, vt = torch.linalg.svd(g.double(), full_matrices=True)
    return g, vt.T.float()


def write_pruned(path, model, int8: bool = True) -> None:
    """The tiny DiT as a pruned int8_convrot file: the table and reduced AdaLN as the
    published files make them, the blocks' four linears int8 with ConvRot (`int8`; else
    float32), the rest float."""
    g, v = curve_basis(model)
    state = {k: t.detach().clone() for k, t in model.state_dict().items()}
    state = {k: t for k, t in state.items() if not k.startswith("time_embedder.")}
    for key in [
        k for k in state if k.endswith(("adaln_proj.linear.weight", "norm_out.linear.weight"))
    ]:
        state[key] = state[key] @ v
    original = original_names(state)
    original[TABLE] = g @ v
    original["rope.inv_freq"] = model.rope.inv_freq.clone()
    tensors: dict[str, torch.Tensor] = {}
    for key, value in original.items():
        quantized = key.startswith("blocks.") and key.endswith(
            ("qkv_proj.weight", "out_proj.weight", "fc1.weight", "fc2.weight")
        )
        if quantized and int8:
            parts, _ = int8_layer(value, CONVROT)
            tensors.update({key[: -len("weight")] + s: t for s, t in parts.items()})
        else:
            tensors[key] = value.contiguous()
    save_file(tensors, str(path))


_DIFFUSERS_TO_COMFY = (
    ("decoder.proj_in.", "decoder.x_embedder."),
    (".attn.to_out.0.", ".attn.to_out."),
    (".ff.net.0.proj.", ".ff.w1."),
    (".ff.net.2.", ".ff.w2."),
    (".resnets.", ".block."),
    (".conv_shortcut.", ".nin_shortcut."),
    (".downsamplers.0.", ".downsample."),
    ("encoder.down_blocks.", "encoder.down."),
)


def comfy_video_vae(vae, own_statistics: bool = False) -> dict[str, torch.Tensor]:
    """The tiny video VAE in ComfyUI's names: q/k/v fused per head, `ff.w1` as `[gate; up]`,
    the statistics (seeded ones, or the VAE's own) and the decoder's `mask_token` as
    buffers."""
    heads = vae.config.decoder_num_attention_heads
    state = vae.state_dict()
    out: dict[str, torch.Tensor] = {}
    for key, tensor in state.items():
        if ".attn.to_k." in key or ".attn.to_v." in key:
            continue
        if ".attn.to_q." in key:
            parts = [state[key.replace("to_q", n)] for n in ("to_q", "to_k", "to_v")]
            per_head = [p.reshape(heads, -1, *p.shape[1:]) for p in parts]
            tensor = torch.stack(per_head, dim=1).reshape(-1, *parts[0].shape[1:])
            key = key.replace(".attn.to_q.", ".attn.to_qkv.")
        if ".ff.net.0.proj." in key:
            up, gate = tensor.chunk(2, dim=0)
            tensor = torch.cat([gate, up], dim=0)
        for old, new in _DIFFUSERS_TO_COMFY:
            key = key.replace(old, new)
        out[key] = tensor.clone()
    channels = vae.config.latent_channels
    out["latents_mean"] = torch.linspace(-0.5, 0.5, channels)
    out["latents_std"] = torch.linspace(0.8, 1.2, channels)
    if own_statistics:
        out |= {k: torch.tensor(vae.config[k], dtype=torch.float32) for k in STATISTICS}
    out["decoder.mask_token"] = torch.zeros(1, 1, vae.decoder.proj_in.out_features)
    return out


def comfy_audio_vae(vae, own_statistics: bool = False) -> dict[str, torch.Tensor]:
    """The tiny audio VAE in ComfyUI's names: diffusers' with each weight norm folded (`vae`
    is folded: give a copy); seeded statistics, or the VAE's own."""
    folded = vae
    vae_files.fold_weight_norms(folded)
    out = {k: v.clone() for k, v in folded.state_dict().items()}
    channels = vae.config.latent_channels
    out["latents_mean"] = torch.linspace(-0.3, 0.3, channels)
    out["latents_std"] = torch.linspace(0.9, 1.1, channels)
    if own_statistics:
        out |= {k: torch.tensor(vae.config[k], dtype=torch.float32) for k in STATISTICS}
    return out


def int8_video_vae(plain: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """`minimax_h3_video_vae_int8_convrot`'s layout of a ComfyUI video VAE state: the decoder
    blocks' linears int8 with ConvRot, the rest as given."""
    tensors: dict[str, torch.Tensor] = {}
    for key, value in plain.items():
        linear = any(f".{n}.weight" in key for n in ("to_qkv", "to_out", "w1", "w2"))
        if key.startswith("decoder.transformer_blocks.") and linear:
            parts, _ = int8_layer(value, CONVROT)
            tensors |= {key[: -len("weight")] + s: t for s, t in parts.items()}
        else:
            tensors[key] = value.contiguous()
    return tensors


def comfy_qwen3_vl(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Qwen3-VL as ComfyUI's files hold it: the language model under `model.`, the vision
    tower under `visual.`, no `lm_head` (tied or unread)."""
    return {
        k.replace("model.language_model.", "model.").replace("model.visual.", "visual."): v
        for k, v in state.items()
        if k != "lm_head.weight"
    }


DIT = "minimax_h3_fl2va_pruned_int8_convrot"
ENCODER = "qwen3vl_32b_minimax_h3_nvfp4_awq"
VIDEO_VAE = "minimax_h3_video_vae_int8_convrot"
AUDIO_VAE = "minimax_h3_audio_vae_fp32"


def nvfp4_awq_encoder(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Qwen3-VL in ComfyUI's names with the language model's linear weights as nvfp4_awq
    layers (`quant_files.nvfp4_layer`: packed e2m1 codes, fp8 block scales, the per-tensor
    scale, the per-column `pre_quant_scale`), as `qwen3vl_32b_minimax_h3_nvfp4_awq` holds
    them; the rest as stored."""
    tensors: dict[str, torch.Tensor] = {}
    for key, value in comfy_qwen3_vl(state).items():
        linear = key.startswith("model.layers.") and key.endswith("_proj.weight")
        if linear and value.ndim == 2 and value.shape[1] % 16 == 0:
            parts, _ = nvfp4_layer(value.float(), awq=True, seed=len(tensors))
            tensors |= {key[: -len("weight")] + suffix: t for suffix, t in parts.items()}
        else:
            tensors[key] = value.contiguous()
    return tensors


def write_files(root, tiny, int8: bool, nvfp4_encoder: bool = False) -> tuple[str, tuple[str, ...]]:
    """The four files under the templates' folders and names; (--model, the other flags).
    `int8`: the DiT's and the video VAE's linears int8_convrot; `nvfp4_encoder`: the encoder's
    language model nvfp4_awq, as the templates' files hold them."""
    paths = {
        "diffusion_models": root / "diffusion_models" / f"{DIT}.safetensors",
        "text_encoders": root / "text_encoders" / f"{ENCODER}.safetensors",
        "video": root / "vae" / f"{VIDEO_VAE}.safetensors",
        "audio": root / "vae" / f"{AUDIO_VAE}.safetensors",
    }
    for path in paths.values():
        path.parent.mkdir(parents=True, exist_ok=True)
    write_pruned(paths["diffusion_models"], tiny.transformer, int8=int8)
    state = tiny.text_encoder.state_dict()
    encoder = nvfp4_awq_encoder(state) if nvfp4_encoder else comfy_qwen3_vl(state)
    save_file(encoder, str(paths["text_encoders"]))
    video = comfy_video_vae(tiny.vae, own_statistics=True)
    save_file(int8_video_vae(video) if int8 else video, str(paths["video"]))
    fresh = build_preset("tiny-minimax-h3", components=frozenset({"audio_vae"})).audio_vae
    audio = comfy_audio_vae(fresh, own_statistics=True)  # folds `fresh`'s weight norms
    save_file(audio, str(paths["audio"]))
    flags = ("--text-encoder", str(paths["text_encoders"]))
    flags += ("--vae", str(paths["video"]), "--vae", str(paths["audio"]))
    return str(paths["diffusion_models"]), flags
