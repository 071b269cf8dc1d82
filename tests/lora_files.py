"""Tiny LoRA files for the tiny presets, in the formats users hold (tests/lora/).

- `peft_lora`: diffusers/PEFT keys (`transformer.<module>.lora_A.weight` / `lora_B.weight`),
  what `save_lora_weights` writes; any DiT (Wan, Flux).
- `comfy_wan_lora`: ComfyUI/Kohya Wan keys (`diffusion_model.blocks.N.self_attn.q.lora_down`/
  `lora_up`, `alpha`, `diff_b`), as the Wan distillation LoRAs are; with `full_diff`, one layer
  as a full `diff` and an all-zero norm `diff` besides.
- `kohya_flux_lora`: Kohya/sd-scripts Flux keys (`lora_unet_double_blocks_N_img_attn_qkv`,
  fused q/k/v that diffusers' converter splits, with `alpha`; `..._img_attn_proj`).
- `z_image_loras`, `flux2_loras`: one Z-Image / Flux.2 LoRA in each layout their diffusers
  mixins read (`ZImageLoraLoaderMixin`, `Flux2LoraLoaderMixin`): PEFT, Kohya (`lora_unet_…`,
  `lora_down`/`lora_up`/`alpha`) and ai-toolkit's (`diffusion_model.…` `lora_A`/`lora_B`; for
  Flux.2 in BFL's names, fused q/k/v and the single blocks' `linear1`/`linear2`).
- `qwen_image_loras`: Qwen-Image (and Qwen-Image-Edit, the same DiT) LoRAs in the two layouts
  `QwenImageLoraLoaderMixin` converts: Kohya (`lora_unet_transformer_blocks_N_attn_to_q`, with
  `alpha`) and ComfyUI/ai-toolkit's (`diffusion_model.transformer_blocks.N.…` `lora_A`/`lora_B`).

Seeded: the same arguments give the same bytes. For the image models' LoRA tests besides:
`lora_items` (a job's `loras`), `dit_patcher` (paradit's patcher of a pipeline's DiT) and
`diffusers_fused` (the reference: diffusers' `load_lora_weights` + `fuse_lora`; the DiT's own
`load_lora_adapter` + `fuse_lora` for a pipeline without a LoRA loader).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

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


def _write(path: Path, generator: torch.Generator, layers: dict[str, tuple], kohya: bool) -> Path:
    """`layers`: file key of a layer -> (out_features, in_features[, alpha]); Kohya's keys
    take `lora_down`/`lora_up` (and `alpha`), the others `lora_A`/`lora_B`."""
    down, up = ("lora_down", "lora_up") if kohya else ("lora_A", "lora_B")
    tensors = {}
    for key, (out_f, in_f, *alpha) in layers.items():
        a, b = _pair(generator, out_f, in_f, 4, 0.2)
        tensors |= {f"{key}.{down}.weight": a, f"{key}.{up}.weight": b}
        if alpha:
            tensors[f"{key}.alpha"] = torch.tensor(float(alpha[0]))
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path))
    return path


def _shape(weights: dict[str, torch.Tensor], module: str) -> tuple[int, int]:
    return tuple(weights[f"{module}.weight"].shape)


def z_image_loras(folder: Path, transformer: torch.nn.Module, *, seed: int) -> dict[str, Path]:
    """Z-Image LoRAs `z_peft`, `z_kohya` (main and refiner layers, alpha 2 at rank 4) and
    `z_aitk` in `folder`, by layout."""
    generator = torch.Generator().manual_seed(seed)
    weights = dict(transformer.named_parameters())
    layers = range(len(transformer.layers))
    peft = {
        f"transformer.layers.{i}.{m}": _shape(weights, f"layers.{i}.{m}")
        for i in layers
        for m in ("attention.to_q", "attention.to_out.0", "feed_forward.w1")
    }
    kohya = {
        f"lora_unet_layers_{i}_{theirs}": (*_shape(weights, f"layers.{i}.{ours}"), 2)
        for i in layers
        for ours, theirs in (
            ("attention.to_k", "attention_to_k"),
            ("attention.to_out.0", "attention_out"),
            ("feed_forward.w2", "feed_forward_w2"),
        )
    }
    kohya |= {
        f"lora_unet_noise_refiner_{i}_attention_to_v": (
            *_shape(weights, f"noise_refiner.{i}.attention.to_v"),
            2,
        )
        for i in range(len(transformer.noise_refiner))
    }
    aitk = {
        f"diffusion_model.layers.{i}.{m}": _shape(weights, f"layers.{i}.{m}")
        for i in layers
        for m in ("attention.to_q", "attention.to_v", "feed_forward.w3")
    }
    return {
        "z_peft": _write(folder / "z_peft.safetensors", generator, peft, False),
        "z_kohya": _write(folder / "z_kohya.safetensors", generator, kohya, True),
        "z_aitk": _write(folder / "z_aitk.safetensors", generator, aitk, False),
    }


def flux2_loras(folder: Path, transformer: torch.nn.Module, *, seed: int) -> dict[str, Path]:
    """Flux.2 LoRAs `f2_peft`, `f2_kohya` (fused image q/k/v, text projection and single
    blocks' `linear2`, with alphas) and `f2_aitk` (BFL names: fused text q/k/v, image MLP out,
    single blocks' fused `linear1`) in `folder`, by layout."""
    generator = torch.Generator().manual_seed(seed)
    weights = dict(transformer.named_parameters())
    double = range(len(transformer.transformer_blocks))
    single = range(len(transformer.single_transformer_blocks))
    hidden = transformer.transformer_blocks[0].attn.to_q.weight.shape[0]
    peft = {
        f"transformer.transformer_blocks.{i}.{m}": _shape(weights, f"transformer_blocks.{i}.{m}")
        for i in double
        for m in ("attn.to_q", "attn.add_k_proj", "ff.linear_in")
    }
    peft |= {
        f"transformer.single_transformer_blocks.{i}.attn.to_qkv_mlp_proj": _shape(
            weights, f"single_transformer_blocks.{i}.attn.to_qkv_mlp_proj"
        )
        for i in single
    }
    kohya = {}
    for i in double:
        kohya[f"lora_unet_double_blocks_{i}_img_attn_qkv"] = (3 * hidden, hidden, 2)
        kohya[f"lora_unet_double_blocks_{i}_txt_attn_proj"] = (hidden, hidden, 2)
    for i in single:
        module = f"single_transformer_blocks.{i}.attn.to_out"
        kohya[f"lora_unet_single_blocks_{i}_linear2"] = (*_shape(weights, module), 8)
    aitk = {}
    for i in double:
        aitk[f"diffusion_model.double_blocks.{i}.txt_attn.qkv"] = (3 * hidden, hidden)
        module = f"transformer_blocks.{i}.ff.linear_out"
        aitk[f"diffusion_model.double_blocks.{i}.img_mlp.2"] = _shape(weights, module)
    for i in single:
        module = f"single_transformer_blocks.{i}.attn.to_qkv_mlp_proj"
        aitk[f"diffusion_model.single_blocks.{i}.linear1"] = _shape(weights, module)
    return {
        "f2_peft": _write(folder / "f2_peft.safetensors", generator, peft, False),
        "f2_kohya": _write(folder / "f2_kohya.safetensors", generator, kohya, True),
        "f2_aitk": _write(folder / "f2_aitk.safetensors", generator, aitk, False),
    }


def qwen_image_loras(folder: Path, transformer: torch.nn.Module, *, seed: int) -> dict[str, Path]:
    """Qwen-Image LoRAs `q_kohya` (image q, text k and image MLP out; alpha 2 at rank 4) and
    `q_comfy` (output projections and text MLP in) in `folder`, by layout."""
    generator = torch.Generator().manual_seed(seed)
    weights = dict(transformer.named_parameters())
    blocks = range(len(transformer.transformer_blocks))
    kohya = {
        f"lora_unet_transformer_blocks_{i}_{theirs}": (
            *_shape(weights, f"transformer_blocks.{i}.{ours}"),
            2,
        )
        for i in blocks
        for ours, theirs in (
            ("attn.to_q", "attn_to_q"),
            ("attn.add_k_proj", "attn_add_k_proj"),
            ("img_mlp.net.2", "img_mlp_net_2"),
        )
    }
    comfy = {
        f"diffusion_model.transformer_blocks.{i}.{m}": _shape(
            weights, f"transformer_blocks.{i}.{m}"
        )
        for i in blocks
        for m in ("attn.to_out.0", "attn.to_add_out", "txt_mlp.net.0.proj")
    }
    return {
        "q_kohya": _write(folder / "q_kohya.safetensors", generator, kohya, True),
        "q_comfy": _write(folder / "q_comfy.safetensors", generator, comfy, False),
    }


# -- using them on an image model's DiT --------------------------------------------------------


def lora_items(stack: list[tuple[str, float]]) -> list[dict]:
    """A job's `loras` from (name, strength) pairs."""
    return [{"name": name, "strength": strength} for name, strength in stack]


def dit_patcher(pipe: Any, folder: Path) -> Any:
    """paradit's LoRA patcher of `pipe`'s DiT with the LoRAs of `folder`."""
    from paradit.backend.lora import LoraLibrary, LoraPatcher

    return LoraPatcher(LoraLibrary((str(folder),)), type(pipe), {"transformer": pipe.transformer})


def with_dit(pipe: Any, transformer: Any) -> None:
    """Put `transformer` in `pipe` as its DiT: a regular pipeline registers it as a module, a
    modular one (`diffusers.ModularPipeline`) as a component."""
    register = getattr(pipe, "register_modules", None) or pipe.register_components
    register(transformer=transformer)


def diffusers_fused(pipe: Any, folder: Path, stack: list[tuple[str, float]]) -> Any:
    """A copy of `pipe` with its own copy of the DiT (the other components shared), the LoRAs
    of `stack` ((name, strength) pairs, files in `folder`) loaded by diffusers into the DiT
    and fused at their strengths."""
    pipe = copy.copy(pipe)
    with_dit(pipe, copy.deepcopy(pipe.transformer))
    names = [f"a{i}" for i in range(len(stack))]
    if not hasattr(pipe, "load_lora_weights"):  # no LoRA mixin: the DiT's own (PEFT keys)
        _fuse_into_the_dit(pipe.transformer, folder, stack, names)
        return pipe
    for adapter, (lora, _) in zip(names, stack, strict=True):
        pipe.load_lora_weights(str(folder / f"{lora}.safetensors"), adapter_name=adapter)
    pipe.set_adapters(names, [strength for _, strength in stack])
    pipe.fuse_lora(components=["transformer"], adapter_names=names)
    pipe.unload_lora_weights()
    return pipe


def _fuse_into_the_dit(
    transformer: Any, folder: Path, stack: list[tuple[str, float]], names: list[str]
) -> None:
    """diffusers' model-level LoRA path, for pipelines without a LoRA loader mixin
    (HunyuanVideo 1.5's): `load_lora_adapter` + `set_adapters` + `fuse_lora` on the DiT."""
    from safetensors.torch import load_file

    for adapter, (lora, _) in zip(names, stack, strict=True):
        state = load_file(str(folder / f"{lora}.safetensors"))
        transformer.load_lora_adapter(state, prefix="transformer", adapter_name=adapter)
    transformer.set_adapters(names, [strength for _, strength in stack])
    transformer.fuse_lora(adapter_names=names)
    transformer.unload_lora()
