"""Tiny LoRA files for the tiny presets, in the formats users hold (tests/test_lora*.py).

- `peft_lora`: diffusers/PEFT keys (`transformer.<module>.lora_A.weight` / `lora_B.weight`),
  what `save_lora_weights` writes; any DiT (Wan, Flux).
- `comfy_wan_lora`: ComfyUI/Kohya Wan keys (`diffusion_model.blocks.N.self_attn.q.lora_down`/
  `lora_up`, `alpha`, `diff_b`), as the Wan distillation LoRAs are; with `full_diff`, one layer
  as a full `diff` and an all-zero norm `diff` besides.
- `kohya_flux_lora`: Kohya/sd-scripts Flux keys (`lora_unet_double_blocks_N_img_attn_qkv`,
  fused q/k/v that diffusers' converter splits, with `alpha`; `..._img_attn_proj`).

Seeded: the same arguments give the same bytes.
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import save_file

WAN_TARGETS = ("attn1.to_q", "attn1.to_v", "attn2.to_k", "ffn.net.0.proj")
FLUX_TARGETS = ("attn.to_q", "attn.to_out.0", "ff.net.2")
COMFY_WAN = {"attn1.to_q": "self_attn.q", "attn1.to_v": "self_attn.v", "attn2.to_k": "cross_attn.k"}


def _pair(generator: torch.Generator, out_f: int, in_f: int, rank: int, size: float):
    down = torch.randn(rank, in_f, generator=generator) * size
    up = torch.randn(out_f, rank, generator=generator) * size
    return down, up


def peft_lora(
    path: Path,
    transformer: torch.nn.Module,
    targets: tuple[str, ...],
    *,
    seed: int,
    rank: int = 4,
    size: float = 0.2,
) -> Path:
    """A diffusers/PEFT-format LoRA on `targets` of every block of `transformer`'s first
    ModuleList."""
    generator = torch.Generator().manual_seed(seed)
    tensors = {}
    weights = dict(transformer.named_parameters())
    blocks = next(n for n, m in transformer.named_children() if isinstance(m, torch.nn.ModuleList))
    count = len(getattr(transformer, blocks))
    for index in range(count):
        for target in targets:
            module = f"{blocks}.{index}.{target}"
            out_f, in_f = weights[f"{module}.weight"].shape
            down, up = _pair(generator, out_f, in_f, rank, size)
            tensors[f"transformer.{module}.lora_A.weight"] = down.contiguous()
            tensors[f"transformer.{module}.lora_B.weight"] = up.contiguous()
    save_file(tensors, str(path))
    return path


def comfy_wan_lora(
    path: Path,
    transformer: torch.nn.Module,
    *,
    seed: int,
    rank: int = 4,
    alpha: float = 2.0,
    size: float = 0.2,
    full_diff: bool = False,
) -> Path:
    """A ComfyUI/Kohya-format Wan LoRA (lora_down/lora_up/alpha/diff_b) on every block."""
    generator = torch.Generator().manual_seed(seed)
    weights = dict(transformer.named_parameters())
    tensors = {}
    for index in range(len(transformer.blocks)):
        for ours, theirs in COMFY_WAN.items():
            key = f"diffusion_model.blocks.{index}.{theirs}"
            out_f, in_f = weights[f"blocks.{index}.{ours}.weight"].shape
            down, up = _pair(generator, out_f, in_f, rank, size)
            tensors[f"{key}.lora_down.weight"] = down
            tensors[f"{key}.lora_up.weight"] = up
            tensors[f"{key}.alpha"] = torch.tensor(alpha)
            tensors[f"{key}.diff_b"] = torch.randn(out_f, generator=generator) * size
        if full_diff:
            out_f, in_f = weights[f"blocks.{index}.ffn.net.2.weight"].shape
            diff = torch.randn(out_f, in_f, generator=generator) * size * 0.1
            tensors[f"diffusion_model.blocks.{index}.ffn.2.diff"] = diff
            norm = weights[f"blocks.{index}.norm2.weight"].shape
            tensors[f"diffusion_model.blocks.{index}.norm3.diff"] = torch.zeros(norm)
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path))
    return path


def kohya_flux_lora(path: Path, transformer: torch.nn.Module, *, seed: int, rank: int = 4) -> Path:
    """A Kohya-format Flux LoRA on the double blocks' fused image q/k/v and output projection."""
    generator = torch.Generator().manual_seed(seed)
    hidden = transformer.transformer_blocks[0].attn.to_q.weight.shape[0]
    tensors = {}
    for index in range(len(transformer.transformer_blocks)):
        key = f"lora_unet_double_blocks_{index}_img_attn"
        down, up = _pair(generator, 3 * hidden, hidden, rank, 0.2)
        tensors |= {f"{key}_qkv.lora_down.weight": down, f"{key}_qkv.lora_up.weight": up}
        tensors[f"{key}_qkv.alpha"] = torch.tensor(rank / 2)
        down, up = _pair(generator, hidden, hidden, rank, 0.2)
        tensors |= {f"{key}_proj.lora_down.weight": down, f"{key}_proj.lora_up.weight": up}
    save_file(tensors, str(path))
    return path
