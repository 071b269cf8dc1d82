"""What the first CUDA run found, checked where CI can: bfloat16 on the CPU.

- A DiT in bfloat16 keeps the modules diffusers keeps in float32 (Wan's norms and modulation
  table), as `from_pretrained(torch_dtype=...)` does, on every loading path.
- FSDP2 shards such a DiT (mixed bfloat16/float32 parameters) over 2 ranks: before the fix it
  raised "FSDP expects uniform original parameter dtype" at the first forward, so no Wan model
  could run sharded on GPUs.
- The bfloat16 thresholds of `paradit verify` accept every legitimate distance the GPU run
  measured (docs/gpu/measured.json) and reject the mildest break measured on CPU.

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from paradit.backend.tools.equivalence import BFLOAT16, FLOAT32, tolerance_for

MEASURED = Path(__file__).resolve().parents[2] / "docs" / "gpu" / "measured.json"
MILDEST_BREAK = {"max_abs": 23, "min_frame_psnr": 39.5, "latent_rel_l2": 0.034}
"""The mildest deliberate break of a plan, measured on CPU (docs/equivalence.md)."""


def _passes(distance: dict, tolerance) -> bool:
    psnr = distance["min_frame_psnr"]
    psnr = float("inf") if psnr in ("inf", None) else float(psnr)
    return (
        distance["max_abs"] <= tolerance.max_abs
        and psnr >= tolerance.min_psnr
        and (distance["latent_rel_l2"] or 0.0) <= tolerance.latent_rel_l2
    )


def _legitimate_distances() -> list[tuple[str, dict]]:
    measured = json.loads(MEASURED.read_text())
    found = []
    for model, entry in measured["tiny"].items():
        if not isinstance(entry, dict):
            continue
        found.append((f"{model} served", entry["served_vs_direct"]))
        for kernel, distance in entry["direct_native_vs_kernel"].items():
            if "error" not in distance:
                found.append((f"{model} {kernel}", distance))
    for stage in ("real", "big"):
        found.append((f"{measured[stage]['model']} served", measured[stage]["served_vs_direct"]))
    return found


@pytest.mark.fast
def test_bfloat16_thresholds_accept_the_gpu_run_and_reject_the_mildest_break():
    legitimate = _legitimate_distances()
    assert len(legitimate) >= 10, legitimate  # every tiny model, kernel and real-size run
    rejected = [name for name, distance in legitimate if not _passes(distance, BFLOAT16)]
    assert not rejected, f"legitimate bfloat16 runs judged different: {rejected}"
    assert tolerance_for("bfloat16") == BFLOAT16
    assert not _passes(MILDEST_BREAK, BFLOAT16)
    # the latents decide: the worst legitimate frames already pass the break's frame distances
    worst = max(legitimate, key=lambda item: item[1]["latent_rel_l2"] or 0.0)[1]
    assert worst["latent_rel_l2"] < BFLOAT16.latent_rel_l2 < MILDEST_BREAK["latent_rel_l2"]
    assert not _passes(worst, FLOAT32)  # bf16 rounding would fail the float32 thresholds


def _float32_names(model: torch.nn.Module) -> set[str]:
    keep = model._keep_in_fp32_modules
    return {n for n, _ in model.named_parameters() if any(p in keep for p in n.split("."))}


@pytest.mark.fast
def test_a_bfloat16_preset_keeps_the_float32_modules_from_pretrained_keeps(tmp_path):
    from diffusers import WanTransformer3DModel

    from paradit.backend.models.loading import ModelSource, load_pipeline

    pipe = load_pipeline(ModelSource.parse("tiny-wan"), dtype=torch.bfloat16)
    ours = {n: p.dtype for n, p in pipe.transformer.named_parameters()}
    keep = _float32_names(pipe.transformer)
    assert keep and any("scale_shift_table" in n for n in keep)
    assert {ours[n] for n in keep} == {torch.float32}
    assert {d for n, d in ours.items() if n not in keep} == {torch.bfloat16}
    # the reference: diffusers' own loader, same weights, same dtype asked for
    float32 = load_pipeline(ModelSource.parse("tiny-wan"), skip=frozenset({"vae"})).transformer
    float32.save_pretrained(tmp_path)
    reference = WanTransformer3DModel.from_pretrained(tmp_path, torch_dtype=torch.bfloat16)
    assert ours == {n: p.dtype for n, p in reference.named_parameters()}


def _shard_mixed_dtypes(rank: int, world_size: int, config: dict) -> None:
    from torch.distributed.device_mesh import init_device_mesh

    from paradit.backend.models.casting import cast_model
    from paradit.backend.models.presets import build_preset
    from paradit.backend.parallel.fsdp import shard_weights

    model = cast_model(
        build_preset("tiny-wan", components=frozenset({"transformer"})).transformer,
        torch.bfloat16,
    )
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16, torch.float32}
    generator = torch.Generator().manual_seed(3)
    latents = torch.randn(1, config["in_channels"], 2, 8, 8, generator=generator)
    text = torch.randn(1, 8, config["text_dim"], generator=generator)
    inputs = (latents.to(torch.bfloat16), torch.tensor([500]), text.to(torch.bfloat16))
    with torch.no_grad():
        whole = model(*inputs).sample
    shard_weights(model, init_device_mesh("cpu", (world_size,)))
    with torch.no_grad():
        sharded = model(*inputs).sample
    assert torch.equal(whole, sharded)


def test_fsdp2_shards_a_bfloat16_dit_that_keeps_float32_modules():
    from conftest import spawn_gloo

    from paradit.backend.models.presets import build_preset

    config = dict(
        build_preset("tiny-wan", components=frozenset({"transformer"})).transformer.config
    )
    spawn_gloo(2, _shard_mixed_dtypes, config)
