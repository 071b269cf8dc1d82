"""`paradit plan`: the parallel plan and memory per GPU for a job, without loading weights.

Estimates come from the model's configs and weight files: DiT parameters (sharded by FSDP2
across the ranks, plus the largest block gathered during its forward), the encoders on rank
0, the VAE, and the activations of one forward for the job's token count.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

GIB = 1024**3
BF16 = 2


def _component_bytes(folder: Path, component: str) -> int:
    """Parameter bytes of a component, from its safetensors headers (no weights read)."""
    total = 0
    for path in sorted((folder / component).glob("*.safetensors")):
        with path.open("rb") as f:
            size = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(size))
        for name, meta in header.items():
            if name != "__metadata__":
                begin, end = meta["data_offsets"]
                total += end - begin
    return total


def _preset_bytes(name: str) -> dict[str, Any]:
    import torch

    from ..models.presets import build_preset, is_tiny_preset

    # random: presets are real sizes: their architecture on the meta device is enough
    pipe = build_preset(name) if is_tiny_preset(name) else build_preset(name, device="meta")
    sizes = {}
    for component, module in pipe.components.items():
        if isinstance(module, torch.nn.Module):
            sizes[component] = sum(p.numel() * BF16 for p in module.parameters())
    return {
        "sizes": sizes,
        "transformer": dict(pipe.transformer.config),
        "class": type(pipe).__name__,
    }


def _folder_bytes(folder: Path) -> dict[str, Any]:
    index = json.loads((folder / "model_index.json").read_text())
    sizes = {
        c: _component_bytes(folder, c)
        for c, v in index.items()
        if isinstance(v, list) and (folder / c).is_dir()
    }
    config = json.loads((folder / "transformer" / "config.json").read_text())
    return {"sizes": sizes, "transformer": config, "class": index["_class_name"]}


def _tokens(config: dict[str, Any], width: int, height: int, frames: int) -> int:
    """Latent tokens: 8x VAE downsampling, then patches (Wan: [1, 2, 2]; CogVideoX: 2, with
    `patch_size_t` 2 in 1.5, odd latent frame counts padded) or Flux's 2x2 packing of its
    patch-size-1 latents; 4x temporal downsampling for video."""
    patch = config.get("patch_size", 1)
    patch_t, patch_hw = (patch[0], patch[1]) if isinstance(patch, (list, tuple)) else (1, 2)
    patch_t = config.get("patch_size_t") or patch_t
    latent_frames = (frames - 1) // 4 + 1 if frames > 1 else 1
    token_frames = -(-latent_frames // patch_t)
    return token_frames * (height // 8 // patch_hw) * (width // 8 // patch_hw)


def estimate(
    model: str, gpus: int, gpu_memory_gib: float, width: int, height: int, frames: int
) -> dict[str, Any]:
    """Plan and per-GPU memory estimate for one job on `gpus` GPUs of `gpu_memory_gib`."""
    from ..models.families import family_for
    from ..models.loading import ModelSource
    from ..parallel.plan import choose_plan

    if gpus < 1 or gpu_memory_gib <= 0 or width < 16 or height < 16 or frames < 1:
        raise ValueError("--gpus >= 1, --gpu-memory > 0, --width/--height >= 16, --frames >= 1")
    source = ModelSource.parse(model)
    if source.kind == "hub":
        raise ValueError("plan reads the model's configs: give a preset or a downloaded folder")
    found = (
        _preset_bytes(source.name) if source.kind == "preset" else _folder_bytes(Path(source.name))
    )
    sizes, config = found["sizes"], found["transformer"]
    dit = sizes.get("transformer", 0) + sizes.get("transformer_2", 0)  # Wan 2.2: two experts
    blocks = max(1, config.get("num_layers", 1) + config.get("num_single_layers", 0))
    supports_cfg = not config.get("guidance_embeds", False)
    tiled_decode = family_for(found["class"]).decodes_in_job
    plan = choose_plan(
        gpus, supports_cfg=supports_cfg, device_type="cuda", tiled_decode=tiled_decode
    )
    heads = config.get("num_attention_heads", 1)
    hidden = heads * config.get("attention_head_dim", 64)
    tokens = _tokens(config, width, height, frames)
    local_tokens = math.ceil(tokens / plan.sequence_degree)
    activations = 12 * local_tokens * hidden * BF16 + 2 * tokens * hidden * BF16
    dit_local = dit / gpus if gpus > 1 else dit
    encoders = sum(v for k, v in sizes.items() if "encoder" in k)
    vae = sizes.get("vae", 0)
    per_gpu = dit_local + dit / blocks + activations + vae
    rank0 = per_gpu + encoders
    budget = gpu_memory_gib * GIB * 0.92
    return {
        "model": model,
        "pipeline": found["class"],
        "gpus": gpus,
        "plan": plan.to_dict(),
        "tokens": tokens,
        "gib": {
            "dit_per_gpu": round(dit_local / GIB, 3),
            "activations_per_gpu": round(activations / GIB, 3),
            "vae": round(vae / GIB, 3),
            "encoders_rank0": round(encoders / GIB, 3),
            "rank0_total": round(rank0 / GIB, 3),
            "other_ranks_total": round(per_gpu / GIB, 3),
        },
        "fits": rank0 <= budget,
        "advice": []
        if rank0 <= budget
        else [
            "use more GPUs (the DiT shards across them)",
            "lower the resolution or frame count (activations grow with tokens)",
        ],
    }


def render(report: dict[str, Any]) -> str:
    plan, gib = report["plan"], report["gib"]
    lines = [
        f"{report['model']} ({report['pipeline']}) on {report['gpus']} GPU(s), "
        f"{report['tokens']} tokens",
        f"plan: cfg {plan['cfg_degree']} x ulysses {plan['ulysses_degree']} x ring "
        f"{plan['ring_degree']} ({', '.join(plan['modes']) or 'single'})",
        *(f"  {key.replace('_', ' ')}: {value} GiB" for key, value in gib.items()),
        "fits" if report["fits"] else "does NOT fit: " + "; ".join(report["advice"]),
    ]
    return "\n".join(lines)
