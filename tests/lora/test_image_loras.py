"""LoRAs per job on Z-Image and Flux.2: the layouts users hold, world size 1 against the
diffusers pipeline with the same LoRAs fused, and sharded sequence parallel against world
size 1.

The LoRAs (`lora_files.py`) are in each layout the models' diffusers mixins read: PEFT,
Kohya (`lora_unet_…` with alphas) and ai-toolkit's (`diffusion_model.…`; for Flux.2 BFL's names
with fused q/k/v). What is proven, per model:
- the weights under a job's LoRA equal diffusers' `load_lora_weights` + `fuse_lora` at the
  same strength, byte for byte, in every layout, and the base weights come back after (also
  for Flux.2 Klein, whose pipeline takes Flux.2's LoRAs);
- world size 1's image with two stacked LoRAs equals the diffusers pipeline called directly
  with them fused, byte for byte, and differs from the base image;
- at 2 ranks (Ulysses over both, FSDP2-sharded rows) the LoRA job is within rounding of world
  size 1's, and the plain job after it is byte-identical to the plain job before it (uneven
  rows at 3 ranks: test_lora.py, the same patcher).

Cost: about 3 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import spawn_gloo
from image_jobs import CPU, called_directly, encoded, preset_pipeline, run_image_job
from lora_files import diffusers_fused, dit_patcher, flux2_loras, lora_items, z_image_loras

from paradit.backend.models.presets import build_preset
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
WRITERS = {"tiny-z-image": z_image_loras, "tiny-flux2": flux2_loras}
BODIES = {
    "tiny-z-image": {"prompt": "a red fox in snow", "seed": 5, "guidance_scale": 1.0},
    "tiny-flux2": {"prompt": "ein Boot", "seed": 9, "guidance_scale": 4.0},
}
for _body in BODIES.values():
    _body.update(width=64, height=48, num_inference_steps=2)
STACKED = {  # two LoRAs at once, in two layouts
    "tiny-z-image": [("z_kohya", 0.8), ("z_aitk", -0.5)],
    "tiny-flux2": [("f2_aitk", 0.8), ("f2_kohya", -0.5)],
}
# layers each layout's LoRA changes on the tiny DiTs (2 main + 2 refiner layers; 2 double and
# 2 single blocks)
CHANGED = {"z_peft": 6, "z_kohya": 8, "z_aitk": 6, "f2_peft": 8, "f2_kohya": 10, "f2_aitk": 10}


@pytest.fixture(scope="module")
def loras(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("image_loras")
    for preset, write in WRITERS.items():
        transformer = build_preset(preset, components=frozenset({"transformer"})).transformer
        write(folder, transformer, seed=len(preset))
    return folder


def _state(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def _changed(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> list[str]:
    return [k for k in a if not torch.equal(a[k], b[k])]


@pytest.mark.parametrize("preset", [*WRITERS, "tiny-flux2-klein"])  # Klein: Flux.2's LoRAs
def test_weights_equal_diffusers_fuse_lora_in_every_layout(loras, preset):
    pipe, _ = preset_pipeline(preset, TILE, encoders=False)
    patcher = dit_patcher(pipe, loras)
    base = _state(pipe.transformer)
    prefix = "z_" if preset == "tiny-z-image" else "f2_"
    for layout in ("peft", "kohya", "aitk"):
        name = prefix + layout
        with patcher.applied(patcher.resolve(lora_items([(name, 0.7)]))):
            ours = _state(pipe.transformer)
        assert not _changed(base, _state(pipe.transformer)), f"{name}: not restored"
        assert len(_changed(base, ours)) == CHANGED[name]
        reference = _state(diffusers_fused(pipe, loras, [(name, 0.7)]).transformer)
        assert not _changed(reference, ours), f"{name} differs from diffusers' fused weights"
    other = "z_peft" if prefix == "f2_" else "f2_peft"
    with pytest.raises(ValueError, match=f"LoRA '{other}': .* not layers of this model"):
        patcher.resolve(lora_items([(other, 1.0)]))


def _direct(pipe, preset: str, body: dict) -> np.ndarray:
    """The diffusers pipeline as a user calls it (Z-Image's own guidance scale is ours less
    one); uint8."""
    guidance = body["guidance_scale"] - 1.0 if preset == "tiny-z-image" else body["guidance_scale"]
    return called_directly(pipe, body, guidance_scale=guidance)


@pytest.fixture(scope="module")
def references(loras) -> dict:
    """World size 1, one thread, per model: the encoded text, (image, latents) of the plain
    job, of the LoRA job, and the diffusers pipeline's image with the LoRAs fused."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    out = {}
    try:
        for preset, body in BODIES.items():
            pipe, family = preset_pipeline(preset, TILE)
            tensors = encoded(pipe, body)  # rank 0's, shared by every job below
            base = run_image_job(pipe, body, tensors)[:2]
            patcher = dit_patcher(pipe, loras)
            with patcher.applied(patcher.resolve(lora_items(STACKED[preset]))):
                lora = run_image_job(pipe, body, tensors)[:2]
            direct = _direct(diffusers_fused(pipe, loras, STACKED[preset]), preset, body)
            out[preset] = {"tensors": tensors, "base": base, "lora": lora, "direct": direct}
    finally:
        torch.set_num_threads(threads)
    return out


@pytest.mark.parametrize("preset", list(WRITERS))
def test_world_size_1_equals_the_diffusers_pipeline_with_the_loras(references, preset):
    ref = references[preset]
    result = compare(ref["lora"][0], ref["direct"], FLOAT32)
    assert result.verdict == IDENTICAL, result.overall
    assert compare(ref["base"][0], ref["lora"][0], FLOAT32).verdict == DIFFERENT


def _check_group(rank: int, world_size: int, references: dict, folder: Path) -> None:
    """Per model: Ulysses over all ranks, the DiT sharded; plain, LoRA, plain jobs."""
    plan = ParallelPlan(1, world_size, 1, True, True)
    for preset, body in BODIES.items():
        pipe, family = preset_pipeline(preset, TILE, encoders=False)
        parallel = parallelize([pipe.transformer], plan, CPU, batched_cfg=family.batched_cfg)
        assert parallel.layouts, "the sequence is split"
        patcher = dit_patcher(pipe, folder)
        tensors = references[preset]["tensors"]
        before = run_image_job(pipe, body, tensors, parallel=parallel)
        with patcher.applied(patcher.resolve(lora_items(STACKED[preset]))) as applied:
            lora = run_image_job(pipe, body, tensors, parallel=parallel)
        assert applied.saved_bytes > 0
        after = run_image_job(pipe, body, tensors, parallel=parallel)
        assert np.array_equal(before[1], after[1]), f"{preset}: the LoRA stayed on this rank"
        if rank != 0:
            continue
        assert np.array_equal(before[0], after[0])
        reference = references[preset]["lora"]
        result = compare(reference[0], lora[0], FLOAT32, reference[1], lora[1])
        assert result.verdict in {IDENTICAL, WITHIN_ROUNDING}, (preset, result.overall)


def test_sharded_sequence_parallel_loras_equal_world_size_1(references, loras):
    """2 ranks, each holding half the rows of every weight a LoRA changes."""
    references = {
        preset: {"tensors": ref["tensors"], "lora": ref["lora"]}
        for preset, ref in references.items()
    }
    spawn_gloo(2, _check_group, references, loras)
