"""Regional compile (`--compile`, backend/compile_modes.py, backend/runtime/compiled.py).

- the rule that picks a mode and its refusals (pure logic);
- the work counter puts no hook inside a compiled block (dynamo would guard on its count);
- one backend of tiny-wan at world size 1 with `--compile blocks` (inductor on the CPU),
  shared by the asserts: warmed at start (/v1/info says so, with its compilations), a job
  equals world size 1's eager output within rounding and compiles nothing, and neither a
  LoRA switch nor a cached job compiles anything (dynamo's compile counter, in job.json);
- world size 2 with `--compile blocks` and Ulysses over both ranks (weights sharded): a guided
  and an unguided job equal eager world size 1 within rounding, compiling nothing.

The world-size-2 backend is warmed for twice world size 1's tokens (`WIDE`, `--plan-for`):
each rank then holds world size 1's sequence, and since the attention (with its all-to-alls)
runs eagerly between the compiled pieces, every piece has the shapes world size 1 compiled.
dynamo still traces the blocks on both ranks, and inductor finds each piece in its on-disk
cache (`TORCHINDUCTOR_CACHE_DIR`) instead of generating and building it again: one cold
compile in this file instead of three (world size 1's, then one per rank).

Cost: about 19 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from paradit.backend.compile_modes import choose_compile
from paradit.backend.config import ServeConfig

pytestmark = pytest.mark.timeout(900)

COMPILE = ("--compile", "blocks")
BODY = {"prompt": "a red fox", "seed": 5, "num_inference_steps": 2}
CACHE = {"method": "first-block", "threshold": 0.9}
WIDE = {"width": 128}
"""Twice BODY's tokens (tiny-wan's default 64x64x5: 2 latent frames of 4 x 4 patches)."""


@pytest.mark.fast
def test_auto_compiles_on_cuda_with_triton_and_says_why_not_elsewhere():
    assert choose_compile("auto", device_type="cuda", triton=True).mode == "blocks"
    for kwargs, why in (
        ({"device_type": "cpu", "triton": True}, "on cpu"),
        ({"device_type": "cuda"}, "Triton is not installed"),
        ({"device_type": "cuda", "triton": True, "offload": "group"}, "layer by layer"),
        ({"device_type": "cuda", "triton": True, "offload": "sequential"}, "layer by layer"),
    ):
        choice = choose_compile("auto", **kwargs)
        assert choice.mode == "off" and why in choice.reason, (kwargs, choice)
    assert choose_compile("auto", device_type="cuda", triton=True, offload="model").mode == "blocks"
    assert choose_compile("blocks", device_type="cpu").to_dict() == {
        "asked": "blocks",
        "mode": "blocks",
        "reason": "asked for",
    }
    assert choose_compile("off", device_type="cuda", triton=True).mode == "off"


@pytest.mark.fast
def test_blocks_is_refused_where_it_cannot_run():
    for offload in ("group", "sequential"):
        refused = f"--compile blocks cannot run with --offload {offload}"
        with pytest.raises(ValueError, match=refused):
            choose_compile("blocks", device_type="cuda", triton=True, offload=offload)
        with pytest.raises(ValueError, match=refused):
            ServeConfig(model="tiny-wan", compile="blocks", offload=offload)
        ServeConfig(model="tiny-wan", compile="auto", offload=offload)  # auto: off, with why
    with pytest.raises(ValueError, match="needs Triton"):
        choose_compile("blocks", device_type="cuda")
    with pytest.raises(ValueError, match="--compile must be one of off, blocks, auto"):
        ServeConfig(model="tiny-wan", compile="full")
    assert ServeConfig.from_argv(["--model", "tiny-wan", "--compile", "blocks"]).compile == "blocks"


@pytest.mark.fast
def test_the_work_counter_hooks_nothing_inside_a_compiled_block():
    from paradit.backend.runtime.progress import Progress

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.to_out = torch.nn.ModuleList([torch.nn.Linear(2, 2)])

    class Dit(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.ModuleList([Block(), Block()])

    dit = Dit()
    assert Progress().watch(dit) == 4  # the blocks and the layers in them
    dit = Dit()
    assert Progress().watch(dit, opaque=list(dit.blocks)) == 2  # the blocks alone
    assert all(not block.to_out[0]._forward_pre_hooks for block in dit.blocks)
    assert all(len(block._forward_pre_hooks) == 1 for block in dit.blocks)


@pytest.fixture(scope="module")
def lora(backends) -> str:
    """A PEFT LoRA for tiny-wan in the pool's --lora-dir; its name."""
    from lora_files import WAN_TARGETS, peft_lora

    from paradit.backend.models.presets import build_preset

    transformer = build_preset("tiny-wan", components=frozenset({"transformer"})).transformer
    peft_lora(backends.lora_dir / "compile-peft.safetensors", transformer, WAN_TARGETS, seed=7)
    return "compile-peft"


def _close(ours: np.ndarray, theirs: np.ndarray) -> None:
    np.testing.assert_allclose(ours, theirs, rtol=1e-3, atol=1e-4)


def _compiled_job(client, body: dict) -> tuple[dict, np.ndarray]:
    job = client.wait(client.submit(body), timeout_s=400)
    assert job["status"] == "succeeded", job
    return client.record(job["id"]), client.latents(job["id"])


def test_compiled_blocks_at_world_size_1_equal_eager_and_switch_loras_without_recompiling(
    backends, references, lora
):
    from conftest import REFERENCE_FLAGS

    client = backends.get("tiny-wan", 1, *REFERENCE_FLAGS, *COMPILE)
    info = client.info()["compile"]
    assert (info["asked"], info["mode"], info["blocks"]) == ("blocks", "blocks", 2), info
    assert info["warm_up_compilations"] > 0 and info["warm_up_s"] > 0, info
    eager = backends.get("tiny-wan", 1, *REFERENCE_FLAGS).info()["compile"]
    assert (eager["mode"], eager["blocks"], eager["warm_up_compilations"]) == ("off", 0, 0)
    for body in (
        BODY,  # the size the server warmed: nothing compiles
        {**BODY, "loras": [{"name": lora, "strength": 0.8}]},  # a LoRA switch
        {**BODY, "num_inference_steps": 4, "cache": CACHE},  # a cached job
        BODY,  # back without the LoRA
    ):
        record, latents = _compiled_job(client, body)
        assert record["compile"] == {"mode": "blocks", "recompiles": 0}, (body, record)
        assert record["timings"]["compile"] == record["compile"]
        reference, _frames, reference_latents = references.get("tiny-wan", body)
        assert reference["timings"]["compile"] == {"mode": "off", "recompiles": 0}
        _close(latents, reference_latents)
        if "cache" in body:
            skipped = reference["timings"]["cache"]["skipped_steps"]
            assert record["cache"]["skipped_steps"] == skipped
            assert record["cache"]["num_skipped"] > 0
    lora_latents = references.get("tiny-wan", {**BODY, "loras": [{"name": lora, "strength": 0.8}]})
    assert not np.allclose(lora_latents[2], references.get("tiny-wan", BODY)[2], atol=1e-3)


def test_compiled_blocks_at_world_size_2_equal_eager_world_size_1(backends, references):
    """Ulysses over both ranks and the weights sharded (a plan without CFG parallel: one
    layout, one warm-up job; a CFG half runs world size 1's shapes, tested above), at twice
    world size 1's tokens: each rank's compiled pieces are the ones world size 1 built."""
    from conftest import REFERENCE_FLAGS

    ulysses = ("--cfg-degree", "1", "--ulysses-degree", "2")
    wide = ("--plan-for", f"{WIDE['width']}x64x5")  # warmed for WIDE's jobs
    client = backends.get("tiny-wan", 2, *REFERENCE_FLAGS, *COMPILE, *ulysses, *wide)
    info = client.info()
    assert info["compile"]["mode"] == "blocks"
    assert (info["plan"]["ulysses_degree"], info["plan"]["shard_weights"]) == (2, True), info
    for guidance in (5.0, 1.0):
        body = {**BODY, **WIDE, "guidance_scale": guidance}
        record, latents = _compiled_job(client, body)
        assert record["compile"] == {"mode": "blocks", "recompiles": 0}, record
        _close(latents, references.get("tiny-wan", body)[2])
