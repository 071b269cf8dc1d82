"""MiniMax H3's LoRAs in ComfyUI's layout (the templates' turbo LoRA's), per job, on the
pruned-AdaLN DiT they are trained on.

How ComfyUI applies one (read 2026: comfy/lora.py `model_lora_keys_unet`, its `MiniMaxH3`
branch, and `calculate_weight`; comfy/ldm/minimax/model.py's modules): a key names a module of
its H3 model bare (`blocks.N.attn.qkv_proj`), under `diffusion_model.` or kohya-flattened
(`lora_unet_blocks_N_attn_qkv_proj`); the change `strength * alpha/rank * up @ down` (alpha
= rank without an `.alpha` key) is added to that module's weight as stored: the fused
`qkv_proj` rows `[q; k; v]`, `mlp.fc1`'s `[gate; value]`, and on a pruned model the AdaLN
projections of width 8 (the curve basis: a LoRA trained on that layout has `lora_A` of 8
columns there, which no unpruned DiT's 2688-wide projection takes).

The tiny file here is in that layout (rank 4; `qkv_proj` with `alpha` 2, a power-of-two
scale so that diffusers' folding of it into `lora_A` is exact; the others alpha-less) on the
blocks' attention, MLP and AdaLN projections, the refiner's fused QKV and the output norm's
AdaLN projection. Proven: the job's weights equal the DiT with ComfyUI's change merged by hand
in ComfyUI's names (converted to diffusers' by the file converter, `pruned.convert_pruned`'s)
byte for byte, and come back after; the job's frames and latents equal the hand-merged DiT's
job byte for byte; 2 ranks (Ulysses 2, the DiT sharded by FSDP2) equal world size 1 within
float32 rounding; a job after it without the LoRA equals the plain job byte for byte; on the
unpruned DiT the LoRA is refused naming the AdaLN layer's shapes; ComfyUI's bare and
kohya-flattened key forms give the same layers.

Cost: about 2 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import spawn_gloo
from image_jobs import CPU, encoded, preset_pipeline, run_here
from lora_files import dit_patcher, lora_items, with_dit
from safetensors.torch import load_file, save_file

from paradit.backend.lora import LoraError
from paradit.backend.models.families.minimax_h3 import pruned
from paradit.backend.models.families.minimax_h3.tiny_job import BODY
from paradit.backend.parallel import parallelize
from paradit.backend.parallel.plan import ParallelPlan
from paradit.backend.tools.equivalence import (
    DIFFERENT,
    FLOAT32,
    IDENTICAL,
    WITHIN_ROUNDING,
    compare,
)

TILE = 64
GRID = 33
WIDTH = 8
"""The published pruned files' curve width (`pruned.prune`'s default)."""
RANK = 4
NAME = "minimax_h3_fl2v_turbo_tiny_comfyui"
STRENGTH = 0.75
MAX_LATENT_ERROR = 1e-5
"""Relative L2 error of 2 ranks' final latents against world size 1's (the ranks test's)."""


def comfy_h3_lora(path: Path, dit: torch.nn.Module, *, seed: int) -> dict[str, torch.Tensor]:
    """A LoRA in ComfyUI's H3 layout for the pruned `dit` (its shapes read in ComfyUI's names:
    fused `qkv_proj` of 3 x heads x head_dim rows, `fc1` of 2 x ffn rows, AdaLN projections of
    the curve's width), written to `path`; returns its tensors."""
    generator = torch.Generator().manual_seed(seed)
    config = dit.config
    hidden = config.num_attention_heads * config.attention_head_dim
    width = dit.config.time_embed_dim
    state = dict(dit.named_parameters())
    tensors: dict[str, torch.Tensor] = {}

    def pair(module: str, out_f: int, in_f: int, alpha: float | None = None) -> None:
        key = f"diffusion_model.{module}"
        tensors[f"{key}.lora_A.weight"] = torch.randn(RANK, in_f, generator=generator) * 0.2
        tensors[f"{key}.lora_B.weight"] = torch.randn(out_f, RANK, generator=generator) * 0.2
        if alpha is not None:
            tensors[f"{key}.alpha"] = torch.tensor(alpha)

    model = config.hidden_size
    for index in range(config.num_layers):
        block = f"blocks.{index}"
        ffn = state[f"transformer_blocks.{index}.ff.net.2.weight"].shape[1]
        adaln = state[f"transformer_blocks.{index}.adaln_proj.linear.weight"].shape[0]
        pair(f"{block}.attn.qkv_proj", 3 * hidden, model, alpha=RANK / 2)
        pair(f"{block}.attn.out_proj", model, hidden)
        pair(f"{block}.mlp.fc1", 2 * ffn, model)
        pair(f"{block}.mlp.fc2", model, ffn)
        pair(f"{block}.adaln_proj.linear", adaln, width)
    pair("token_refiner.blocks.0.attn.qkv_proj", 3 * hidden, model)
    pair("final_layer.adaln_proj.linear", state["norm_out.linear.weight"].shape[0], width)
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path))
    return tensors


def merged_by_hand(
    dit: torch.nn.Module, tensors: dict[str, torch.Tensor], strength: float
) -> torch.nn.Module:
    """A copy of the pruned `dit` with the LoRA merged as ComfyUI merges it: per module of
    its names, `strength * alpha/rank * up @ down` (float32) added to the fused weight; the
    changes carried to diffusers' names by the converter the pruned files load with."""
    from diffusers.loaders.single_file_utils import (
        convert_minimax_h3_transformer_checkpoint_to_diffusers,
    )

    changes = {}
    for key, down in tensors.items():
        if not key.endswith(".lora_A.weight"):
            continue
        module = key.removeprefix("diffusion_model.").removesuffix(".lora_A.weight")
        up = tensors[key.replace(".lora_A.", ".lora_B.")]
        alpha = tensors.get(key.replace(".lora_A.weight", ".alpha"))
        scale = (float(alpha) if alpha is not None else RANK) / RANK
        changes[f"{module}.weight"] = torch.mm(up.float(), down.float()) * (strength * scale)
    config = dict(dit.config)
    converted = convert_minimax_h3_transformer_checkpoint_to_diffusers(
        dict(changes), config, qkv_layout="stacked"
    )
    merged = copy.deepcopy(dit)
    with torch.no_grad():
        params = dict(merged.named_parameters())
        for name, change in converted.items():
            params[name].add_(change.to(params[name].dtype))
    assert len(converted) == len(changes) + 2 * sum(".qkv_proj." in k for k in changes)
    return merged


def _state(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def _pruned_pipe(encoders: bool = True) -> Any:
    """tiny-minimax-h3 with its DiT pruned as the published files are (8 curve columns)."""
    pipe, _family = preset_pipeline("tiny-minimax-h3", TILE, encoders=encoders)
    with_dit(pipe, pruned.prune(pipe.transformer, grid=GRID, width=WIDTH))
    return pipe


@pytest.fixture(scope="module")
def world_size_1(tmp_path_factory) -> dict[str, Any]:
    """At world size 1 (one thread): the plain job, the LoRA job, the job on the hand-merged
    DiT and the plain job after, with the weights seen during and after the LoRA job."""
    folder = tmp_path_factory.mktemp("loras")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        pipe = _pruned_pipe()
        plain_dit = copy.deepcopy(pipe.transformer)
        tensors = comfy_h3_lora(folder / f"{NAME}.safetensors", plain_dit, seed=11)
        merged = merged_by_hand(plain_dit, tensors, STRENGTH)
        parallel = parallelize([pipe.transformer], ParallelPlan(1, 1, 1, False, False), CPU)
        encoded_text = encoded(pipe, BODY)
        patcher = dit_patcher(pipe, folder)
        base = _state(pipe.transformer)
        plain, plain_result = run_here(pipe, BODY, encoded_text, parallel=parallel)
        with patcher.applied(patcher.resolve(lora_items([(NAME, STRENGTH)]))):
            during = _state(pipe.transformer)
            lora, lora_result = run_here(pipe, BODY, encoded_text, parallel=parallel)
        after = _state(pipe.transformer)
        again, again_result = run_here(pipe, BODY, encoded_text, parallel=parallel)
        by_hand = copy.copy(pipe)
        with_dit(by_hand, merged)
        hand_parallel = parallelize([merged], ParallelPlan(1, 1, 1, False, False), CPU)
        hand, hand_result = run_here(by_hand, BODY, encoded_text, parallel=hand_parallel)
    finally:
        torch.set_num_threads(threads)
    return {
        "folder": folder,
        "tensors": encoded_text,
        "base": base,
        "during": during,
        "after": after,
        "merged": _state(merged),
        "frames": {"plain": plain, "lora": lora, "again": again, "hand": hand},
        "latents": {
            "plain": plain_result.latents.numpy(),
            "lora": lora_result.latents.numpy(),
            "again": again_result.latents.numpy(),
            "hand": hand_result.latents.numpy(),
        },
        "audio": lora_result.audio.waveform,
    }


def test_the_jobs_weights_are_comfyuis_merge_and_come_back(world_size_1):
    """Every weight the LoRA reaches (q, k and v split from the fused rows, the SwiGLU
    halves swapped, the AdaLN projections in the curve basis) equals ComfyUI's merge, byte
    for byte; the others are untouched; after the job every weight is as before."""
    base, during = world_size_1["base"], world_size_1["during"]
    merged, after = world_size_1["merged"], world_size_1["after"]
    changed = sorted(k for k in base if not torch.equal(base[k], during[k]))
    assert len(changed) == 2 * 7 + 3 + 1, changed  # 2 blocks, the refiner's q/k/v, norm_out
    assert {k for k in base if not torch.equal(base[k], merged[k])} == set(changed)
    unequal = [k for k in base if not torch.equal(during[k], merged[k])]
    assert not unequal, unequal
    assert all(torch.equal(base[k], after[k]) for k in base), "not restored"


def test_the_lora_job_equals_the_hand_merged_dits_job_and_the_next_job_the_plain(
    world_size_1,
):
    frames, latents = world_size_1["frames"], world_size_1["latents"]
    hand = compare(frames["hand"], frames["lora"], FLOAT32, latents["hand"], latents["lora"])
    assert hand.verdict == IDENTICAL, hand
    assert np.array_equal(latents["hand"], latents["lora"])
    plain = compare(frames["plain"], frames["lora"], FLOAT32, latents["plain"], latents["lora"])
    assert plain.verdict == DIFFERENT, "the LoRA changed nothing"
    assert np.array_equal(frames["plain"], frames["again"])
    assert np.array_equal(latents["plain"], latents["again"])


def _two(rank: int, world_size: int, reference: dict[str, Any]) -> None:
    """One rank of two: the pruned DiT sharded, Ulysses 2, the LoRA on this rank's rows."""
    pipe = _pruned_pipe(encoders=False)
    parallel = parallelize([pipe.transformer], ParallelPlan(1, world_size, 1, True, True), CPU)
    patcher = dit_patcher(pipe, reference["folder"])
    with patcher.applied(patcher.resolve(lora_items([(NAME, STRENGTH)]))):
        frames, result = run_here(pipe, BODY, reference["tensors"], parallel=parallel)
    if rank != 0:
        assert frames is None
        return
    latents = result.latents.numpy()
    ours = reference["latents"]["lora"]
    measured = compare(reference["frames"]["lora"], frames, FLOAT32, ours, latents)
    assert measured.verdict in {IDENTICAL, WITHIN_ROUNDING}, measured
    error = float(np.linalg.norm(latents - ours) / np.linalg.norm(ours))
    assert error <= MAX_LATENT_ERROR, (error, measured)
    drift = float(np.abs(result.audio.waveform - reference["audio"]).max())
    assert drift <= 1e-3 * float(np.abs(reference["audio"]).max()), drift


def test_two_ranks_equal_world_size_1(world_size_1):
    spawn_gloo(2, _two, world_size_1)


def test_the_pruned_layouts_lora_is_refused_on_the_unpruned_dit(world_size_1, tmp_path):
    """The released DiT's AdaLN projections take the timestep MLP's width, not the curve's:
    the LoRA's AdaLN layers fit no weight of it (ComfyUI would skip them with a warning and
    apply the rest; paradit refuses the LoRA, naming the layer and both shapes)."""
    pipe, _family = preset_pipeline("tiny-minimax-h3", TILE, encoders=False)
    folder = world_size_1["folder"]
    patcher = dit_patcher(pipe, folder)
    misfit = r"linear changes a \d+x8 weight, the model's is \d+x32"
    with pytest.raises(LoraError, match=misfit) as refused:
        patcher.resolve(lora_items([(NAME, STRENGTH)]))
    assert "pruned-AdaLN DiT" in str(refused.value), refused.value
    # the same LoRA without its AdaLN layers (the released layout's other layers) applies
    kept = {
        k: v for k, v in load_file(str(folder / f"{NAME}.safetensors")).items() if "adaln" not in k
    }
    save_file(kept, str(tmp_path / "released.safetensors"))
    assert dit_patcher(pipe, tmp_path).resolve(lora_items([("released", 1.0)]))


def _renamed(tensors: dict[str, torch.Tensor], form: str) -> dict[str, torch.Tensor]:
    """The LoRA's keys in another of the forms ComfyUI's key map takes for H3: `bare` (its
    module names alone) or `kohya` (`lora_unet_` + the name with `_`, `lora_down`/`lora_up`)."""
    out = {}
    for key, value in tensors.items():
        module, _, suffix = key.removeprefix("diffusion_model.").partition(".lora_")
        if not suffix:
            module, suffix = key.removeprefix("diffusion_model.").rsplit(".", 1)
            suffix = f".{suffix}"
        else:
            suffix = f".lora_{suffix}"
        if form == "kohya":
            module = "lora_unet_" + module.replace(".", "_")
            suffix = suffix.replace("lora_A", "lora_down").replace("lora_B", "lora_up")
        out[module + suffix] = value
    return out


@pytest.mark.fast
@pytest.mark.parametrize("form", ["bare", "kohya"])
def test_comfyuis_other_key_forms_give_the_same_layers(tmp_path, form):
    """ComfyUI maps an H3 LoRA's modules bare, under `diffusion_model.` and kohya-flattened
    (comfy/lora.py): the three forms of one LoRA give the same layers, tensor for tensor."""
    from diffusers import MiniMaxH3ModularPipeline

    from paradit.backend.lora.parse import parse_lora
    from paradit.backend.models.families.minimax_h3.tiny import h3_transformer
    from paradit.backend.models.tiny_parts import seeded

    dit = pruned.prune(seeded(704, h3_transformer), grid=GRID, width=WIDTH)
    tensors = comfy_h3_lora(tmp_path / "lora.safetensors", dit, seed=11)
    ours = parse_lora("a", dict(tensors), {}, MiniMaxH3ModularPipeline)
    theirs = parse_lora("b", _renamed(tensors, form), {}, MiniMaxH3ModularPipeline)
    assert sorted(ours) == sorted(theirs) and len(ours) == 18
    for module, layer in ours.items():
        other = theirs[module]
        assert torch.equal(layer.a, other.a) and torch.equal(layer.b, other.b), module
        assert layer.scale == other.scale == 1.0, module
