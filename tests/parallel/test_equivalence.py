"""Parallel output equals world size 1, measured; the measure catches broken plans; world
size 1 equals diffusers called directly; and the weights are sharded.

The measure and its thresholds are `paradit verify`'s own (`paradit.backend.tools.equivalence`).
Byte identity is asserted only where it holds by construction on every CPU (see
BYTE_IDENTICAL); elsewhere the verdict must not be `different`.

Cost: about 28 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from conftest import run_job

from paradit.backend.tools.equivalence import (
    DIFFERENT,
    FLOAT32,
    IDENTICAL,
    WITHIN_ROUNDING,
    Tolerance,
    compare,
    parse_tolerance,
    tolerance_for,
)
from paradit.backend.tools.verify import decode_png

# 112x80 px with 17 frames: 5 latent frames x 5 x 7 patches = 175 tokens, divisible by
# neither 2 nor 3; tiny-wan has 4 heads, which 3 ranks do not divide either.
ODD = {"width": 112, "height": 80}
# Each model's requests: guided with a negative prompt (tiny-wan's in German with an emoji),
# and unguided, both at the odd size. Evenly split sequences (the models' default sizes) are
# the family contract's (tests/families/test_family_contract.py: CFG and Ulysses at 2, 3 and
# 4 ranks equal world size 1, in-process); what only this file checks is the served path
# (encoders on rank 0, the spread layout of unguided jobs), uneven splits and such prompts.
REQUESTS = {
    "tiny-wan": [
        {
            "prompt": "ein Boot 🚤 auf dem See",
            "negative_prompt": "blurry",
            "seed": 11,
            "guidance_scale": 4.0,
            "num_frames": 17,
            **ODD,
        },
        {
            "prompt": "ein Boot auf dem See",
            "seed": 11,
            "guidance_scale": 1.0,
            "num_frames": 17,
            **ODD,
        },
    ],
    "tiny-flux": [
        {"prompt": "a cat", "negative_prompt": "dog", "seed": 5, "guidance_scale": 3.0, **ODD},
        {"prompt": "a cat", "seed": 5, "guidance_scale": 1.0, **ODD},
    ],
}

LATENTS = ("--save-latents",)
# mode: (world size, plan flags)
MODES = {
    "reference": (1, ()),
    "cfg": (2, ()),  # chosen automatically: CFG parallel (each request above may use it)
    "ulysses-2": (2, ("--cfg-degree", "1")),
    "ulysses-3": (3, ()),
    "cfg-x-ulysses": (4, ()),
}
DEGREES = {  # mode: (cfg_degree, ulysses_degree)
    "cfg": (2, 1),
    "ulysses-2": (1, 2),
    "ulysses-3": (1, 3),
    "cfg-x-ulysses": (2, 2),
}
# CFG parallel is bit-identical by construction on any CPU for guided jobs: each half of the
# group runs one branch exactly as one process runs it (same inputs, same shapes, batch 1,
# the same kernels; FSDP gathers the same weights into freshly allocated, aligned buffers).
# A job without guidance spreads its sequence over the whole replica (Ulysses over every
# rank), and sequence parallel runs the linear layers on sequence shards: matrix products
# with other row counts, which some CPUs' kernels round differently (AMD EPYC: tiny-flux at
# 3 ranks).
BYTE_IDENTICAL = {"cfg"}
"""Modes whose guided jobs are byte-identical to world size 1."""
# tiny-wan at world size 4 runs each guided branch, and every unguided job whole, on
# Ulysses 2: that covers tiny-wan's Ulysses 2. tiny-flux runs Ulysses 2 on its own instead.
# tiny-flux's Ulysses 3 is `paradit verify`'s (test_verify_cli_passes_sequence_parallel_rounding:
# its guided request at world size 3, within rounding); unguided jobs on 3 ranks are tiny-wan's.
SKIPPED = {("tiny-wan", "ulysses-2"), ("tiny-flux", "cfg-x-ulysses"), ("tiny-flux", "ulysses-3")}
CASES = [(model, mode) for model in REQUESTS for mode in DEGREES if (model, mode) not in SKIPPED]


SHARED = {"reference"}
"""Modes whose backends other test files use too (world size 1 with `--save-latents`, the
references' backend): kept for them. The others are stopped right after their jobs."""


class Runs:
    """Every request of a (model, mode) run once per module: the backend's info, each job
    and its frames (uint8) and final latents."""

    def __init__(self, backends):
        self.backends = backends
        self._done: dict[tuple[str, str], tuple[dict, list]] = {}

    def get(self, model: str, mode: str) -> tuple[dict, list[tuple[dict, np.ndarray, Any]]]:
        if (model, mode) not in self._done:
            world_size, flags = MODES[mode]
            backend = self.backends.start(model, world_size, *LATENTS, *flags)
            try:
                info = backend.client.info()
                outputs = [job_outputs(backend.client, body) for body in REQUESTS[model]]
            finally:
                if mode not in SHARED:
                    self.backends.stop(backend)
            self._done[model, mode] = info, outputs
        return self._done[model, mode]


def job_outputs(client, body: dict) -> tuple[dict, np.ndarray, np.ndarray]:
    """Run one job: (job, frames as uint8 (F, H, W, 3), final latents)."""
    job, pngs = run_job(client, body)
    assert job["status"] == "succeeded"
    return job, np.stack([decode_png(p) for p in pngs]), client.latents(job["id"])


@pytest.fixture(scope="module")
def runs(backends) -> Runs:
    return Runs(backends)


def _summary(result) -> str:
    o = result.overall
    return (
        f"{result.verdict}: max_abs {o.get('max_abs')}, mean_abs {o.get('mean_abs')}, "
        f"psnr {o.get('min_frame_psnr')}, latent_rel_l2 {result.latent_rel_l2} {result.reasons}"
    )


# -- the measure itself (no backend) ----------------------------------------------------------


@pytest.mark.fast
def test_odd_size_really_is_odd():
    latent_frames = (17 - 1) // 4 + 1
    tokens = latent_frames * (ODD["height"] // 16) * (ODD["width"] // 16)
    assert tokens % 2 and tokens % 3


@pytest.mark.fast
def test_measure_tells_identical_rounding_and_different():
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (2, 16, 16, 3), dtype=np.uint8)
    latents = rng.standard_normal((1, 4, 8, 8)).astype(np.float32)
    same = compare(frames, frames.copy(), FLOAT32, latents, latents.copy())
    assert same.verdict == IDENTICAL and same.overall["psnr"] == math.inf
    assert same.latent_rel_l2 == 0

    nudged = frames.copy()
    nudged[1, 3, 4, 0] ^= 1  # one value one step off
    rounding = compare(frames, nudged, FLOAT32, latents, latents * (1 + 1e-7))
    assert rounding.verdict == WITHIN_ROUNDING, rounding.reasons
    assert rounding.overall["max_abs"] == 1 and rounding.overall["differing_values"] == 1
    assert rounding.frames[0]["max_abs"] == 0 and rounding.frames[1]["max_abs"] == 1

    shifted = np.roll(frames, 1, axis=2)  # half the picture's content moved: broken
    broken = compare(frames, shifted, FLOAT32, latents, np.roll(latents, 1, axis=-1))
    assert broken.verdict == DIFFERENT and len(broken.reasons) == 3
    # the latents alone decide when the frames happen to agree
    assert compare(frames, frames, FLOAT32, latents, latents * 1.1).verdict == DIFFERENT
    assert compare(frames, frames[:1], FLOAT32).verdict == DIFFERENT


@pytest.mark.fast
def test_tolerance_validates_and_parses():
    assert parse_tolerance("latent_rel_l2=1e-3,min_psnr=40,max_abs=16") == {
        "latent_rel_l2": 1e-3,
        "min_psnr": 40.0,
        "max_abs": 16.0,
    }
    assert FLOAT32.updated(parse_tolerance("max_abs=0")).max_abs == 0
    assert tolerance_for("bfloat16").max_abs > tolerance_for("float32").max_abs
    for bad, needle in [
        ("max_abs", "KEY=VALUE"),
        ("psnr=3", "KEY=VALUE"),
        ("max_abs=x", "must be a number"),
        ("max_abs=300", "between 0 and 255"),
        ("latent_rel_l2=-1", ">= 0"),
        ("min_psnr=nan", ">= 0"),
        ("max_abs=1,max_abs=2", "twice"),
    ]:
        with pytest.raises(ValueError, match=needle):
            parse_tolerance(bad)
    with pytest.raises(ValueError, match="max_abs"):
        Tolerance(max_abs=True, min_psnr=40, latent_rel_l2=0.1)


# -- parallel plans against world size 1 ------------------------------------------------------


@pytest.mark.parametrize(("model", "mode"), CASES)
def test_parallel_plan_equals_world_size_1(runs, model, mode):
    _, reference = runs.get(model, "reference")
    info, outputs = runs.get(model, mode)
    plan = info["plan"]
    assert plan["world_size"] == MODES[mode][0]
    assert (plan["cfg_degree"], plan["ulysses_degree"]) == DEGREES[mode]
    for index, ((_, frames_1, latents_1), (job, frames, latents)) in enumerate(
        zip(reference, outputs, strict=True)
    ):
        expected = REQUESTS[model][index]["num_frames"] if model == "tiny-wan" else 1
        assert len(frames) == job["num_frames"] == expected
        result = compare(frames_1, frames, FLOAT32, latents_1, latents)
        where = f"{model} request {index} on {mode} ({plan['modes']}): {_summary(result)}"
        guided = REQUESTS[model][index]["guidance_scale"] > 1
        spread = plan["cfg_degree"] == 2 and not guided  # Ulysses over the whole replica
        assert job["timings"]["sequence_layout"] == ("spread" if spread else "plan"), where
        # a sharded plan without a CFG split: both branches as one batch every step (their
        # text is padded alike); elsewhere the branches are never paired
        paired = plan["cfg_degree"] == 1 and guided
        branches = job["timings"].get("cfg_branches")
        steps = len(job["timings"]["step_s"])
        assert branches == ({"batched_steps": steps, "separate_steps": 0} if paired else None)
        if mode in BYTE_IDENTICAL and guided:  # the frames, and the final latents byte for byte
            assert result.verdict == IDENTICAL, where
            assert (latents.dtype, latents.tobytes()) == (latents_1.dtype, latents_1.tobytes())
        else:
            assert result.verdict != DIFFERENT, where


@pytest.mark.parametrize("model", ["tiny-wan", "tiny-flux"])
def test_world_size_2_holds_about_half_the_dit(runs, model):
    one = runs.get(model, "reference")[0]["ranks"]
    two = runs.get(model, "cfg")[0]["ranks"]
    assert len(one) == 1 and len(two) == 2
    full = one[0]["dit_param_bytes"]
    assert full > 0
    for rank in two:
        assert rank["dit_param_bytes"] <= 0.55 * full, (rank, full)
    assert sum(r["dit_param_bytes"] for r in two) >= full  # shards cover the whole model


# -- the measure fails deliberately broken plans ----------------------------------------------

BREAK = "PARADIT_BREAK_PLAN"
# kind: (model, mode, request index); each runs one job on a plan where the kind bites
BROKEN = {
    "drop-shard": ("tiny-wan", "ulysses-2", 1),
    "dup-shard": ("tiny-flux", "ulysses-3", 0),
    "text-other-rank": ("tiny-wan", "ulysses-2", 1),
}  # cfg-swap: test_verify_cli_exits_1_on_a_broken_plan


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_broken_plan_is_different(backends, runs, kind):
    model, mode, index = BROKEN[kind]
    _, frames_1, latents_1 = runs.get(model, "reference")[1][index]
    world_size, flags = MODES[mode]
    backend = backends.start(model, world_size, *LATENTS, *flags, env=((BREAK, kind),))
    try:
        _, frames, latents = job_outputs(backend.client, REQUESTS[model][index])
        assert "DELIBERATELY COMPUTES WRONG RESULTS" in backend.log_path.read_text()
    finally:
        backends.stop(backend)
    result = compare(frames_1, frames, FLOAT32, latents_1, latents)
    assert result.verdict == DIFFERENT, f"{kind}: {_summary(result)}"


# -- `paradit verify`, the real command ---------------------------------------------------------

FAILING_CASE = [  # once differed by 1/255 in 4 of 26,880 values on an AMD EPYC machine
    "--model", "tiny-flux", "--world-size", "3", "--prompt", "a cat", "--negative", "dog",
    "--seed", "5", "--guidance", "3", "--width", "112", "--height", "80",
]  # fmt: skip


def paradit_verify(*args: str) -> tuple[int, dict, str]:
    """`paradit verify --device cpu <args>` in a fresh interpreter."""
    command = ["verify", "--device", "cpu", *args]
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", "PARADIT_LOG": "WARNING"}
    result = subprocess.run(
        [sys.executable, "-m", "paradit", *command],
        capture_output=True,
        text=True,
        timeout=600,
        env=full_env,
    )
    report = json.loads(result.stdout) if result.stdout.strip() else {}
    return result.returncode, report, result.stderr


def verify_warm(paradit_warm, *args: str, env: dict[str, str] | None = None):
    """`paradit verify --device cpu <args>` in this worker, its groups forked from the
    zygote (conftest `paradit_warm`): (exit code, report, stderr)."""
    result = paradit_warm(
        "verify", "--device", "cpu", *args, env={"PARADIT_LOG": "WARNING", **(env or {})}
    )
    return (
        result.returncode,
        json.loads(result.stdout) if result.stdout.strip() else {},
        result.stderr,
    )


def test_verify_cli_passes_sequence_parallel_rounding(tmp_path, paradit_warm):
    code, report, stderr = verify_warm(paradit_warm, *FAILING_CASE, "--out", str(tmp_path))
    assert code == 0, stderr
    assert report["verdict"] in (IDENTICAL, WITHIN_ROUNDING), report
    assert report["thresholds"] == FLOAT32.to_dict() and report["dtype"] == "float32"
    overall = report["overall"]
    assert overall["max_abs"] <= FLOAT32.max_abs and overall["num_values"] == 112 * 80 * 3
    assert report["latent_rel_l2"] <= FLOAT32.latent_rel_l2
    assert [f["index"] for f in report["frames"]] == [0]
    assert {"max_abs", "mean_abs", "psnr"} <= report["frames"][0].keys()
    one, three = report["runs"]
    assert one["plan"]["world_size"] == 1 and three["plan"]["ulysses_degree"] == 3
    assert one["mean_step_s"] > 0 and three["mean_step_s"] > 0
    for size in (1, 3):
        kept = tmp_path / f"world-size-{size}"
        assert json.loads((kept / "job.json").read_text())["world_size"] == size
        assert np.load(kept / "latents.npy").dtype == np.float32


def test_verify_cli_exits_1_on_a_broken_plan(paradit_warm):
    args = ["--model", "tiny-flux", "--world-size", "2", "--prompt", "a cat", "--guidance", "4"]
    code, report, stderr = verify_warm(paradit_warm, *args, env={BREAK: "cfg-swap"})
    assert code == 1, stderr
    assert report["verdict"] == DIFFERENT and report["reasons"], report
    assert report["runs"][1]["plan"]["cfg_degree"] == 2
    assert report["latent_rel_l2"] > FLOAT32.latent_rel_l2


def test_verify_cli_rejects_bad_tolerance():
    # a fresh interpreter: what it prints is the one line and nothing else
    args = ["--model", "tiny-flux", "--world-size", "2", "--tolerance", "x"]
    code, _, stderr = paradit_verify(*args)
    assert code == 2 and stderr.count("\n") == 1 and "KEY=VALUE" in stderr, stderr


# -- world size 1 against diffusers called directly --------------------------------------------


@pytest.mark.parametrize("model", ["tiny-wan", "tiny-flux"])
def test_world_size_1_equals_diffusers_called_directly(runs, model):
    """A reference no one here wrote: the diffusers pipeline as a user would call it, with
    the preset's weights, on one thread like a rank. Asserted byte-identical (it is: the
    same kernels on the same shapes)."""
    import torch

    from paradit.backend.models.loading import ModelSource, align_cpu_weights, load_pipeline
    from paradit.backend.serving.outputs import to_uint8

    pipe = load_pipeline(ModelSource.parse(model))
    align_cpu_weights(pipe)  # as every CPU rank does (a no-op for presets)
    pipe.set_progress_bar_config(disable=True)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for index, (job, frames_1, _) in enumerate(runs.get(model, "reference")[1]):
            request = job["request"]
            common = {
                "prompt": request["prompt"],
                "negative_prompt": request["negative_prompt"],
                "height": request["height"],
                "width": request["width"],
                "num_inference_steps": request["num_inference_steps"],
                "guidance_scale": request["guidance_scale"],
                "generator": torch.Generator("cpu").manual_seed(request["seed"]),
                "output_type": "np",
            }
            if model == "tiny-flux":  # not guidance-distilled: guidance is true CFG
                direct = pipe(**common, true_cfg_scale=request["guidance_scale"]).images
            else:
                direct = pipe(**common, num_frames=request["num_frames"]).frames[0]
            result = compare(frames_1, to_uint8(np.asarray(direct)), FLOAT32)
            assert result.verdict == IDENTICAL, f"{model} request {index}: {_summary(result)}"
    finally:
        torch.set_num_threads(threads)
