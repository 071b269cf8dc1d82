"""The step cache in parallel: world size N takes world size 1's skip decisions and gives its
output within rounding; a rank deciding alone fails the job on every rank (no hang); bad
settings are refused with the rule (Wan at 4 ranks, served). Unguided jobs on a CFG plan spread
over every rank.

(Wan 2.2's two experts with the cache: tests/models/test_folder.py; unguided jobs against world
size 1 at 2 and 4 ranks and on replicas: tests/parallel/test_equivalence.py,
tests/serving/test_replicas.py; HunyuanVideo 1.5's registered blocks on Ulysses 2:
tests/families/test_hunyuan_video15.py; every family's cached job on 4 ranks against world size
1, Flux's on CFG 2 x Ulysses 2 with each branch's metric: tests/families/test_family_contract.py.)

Cost: about 11 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import run_job
from lora_files import WAN_TARGETS, peft_lora

from paradit.backend.cache import CacheSettings
from paradit.backend.client import BackendError, JobFailed
from paradit.backend.config import ServeConfig
from paradit.backend.models.presets import build_preset
from paradit.backend.parallel.step_cache import COND, UNCOND, Branches
from paradit.backend.tools.equivalence import DIFFERENT, FLOAT32, compare
from paradit.backend.tools.verify import decode_png

# Random weights change a lot from step to step (the metric is 0.6-1.1): a threshold near 1
# skips some steps. 175 tokens (divisible by neither 2 nor 4) and 8 steps.
CACHE = {"method": "first-block", "threshold": 0.9}
GUIDED = {
    "prompt": "a red fox in snow",
    "seed": 7,
    "guidance_scale": 5.0,
    "num_inference_steps": 8,
    "width": 112,
    "height": 80,
    "num_frames": 17,
    "cache": CACHE,
}
UNGUIDED = {**GUIDED, "guidance_scale": 1.0}
BREAK = "PARADIT_BREAK_PLAN"
LORA_JOB = {**GUIDED, "cache": None, "loras": [{"name": "step-cache.safetensors"}]}


@pytest.fixture(scope="module")
def lora(backends) -> None:
    """A LoRA on tiny-wan's DiT in the pool's --lora-dir (`LORA_JOB` names it)."""
    transformer = build_preset("tiny-wan").transformer
    peft_lora(backends.lora_dir / "step-cache.safetensors", transformer, WAN_TARGETS, seed=9)


@pytest.mark.fast
def test_cache_settings_state_the_rule():
    assert CacheSettings.parse({"method": "first-block"}) == CacheSettings("first-block", 0.05)
    assert CacheSettings.parse(None) is None and CacheSettings.parse({}) is None
    bad = {
        "method must be one of ['first-block']": {"method": "teacache"},
        "threshold must be a number > 0 and <= 1.0": {"method": "first-block", "threshold": 0},
        "takes the keys method and threshold": {"method": "first-block", "steps": 3},
        "must be an object": "first-block",
    }
    for rule, value in bad.items():
        with pytest.raises(ValueError, match=re.escape(rule)):
            CacheSettings.parse(value)
    for value in (1.5, float("nan"), True, "0.1"):
        with pytest.raises(ValueError, match="threshold must be a number"):
            CacheSettings("first-block", value)
    with pytest.raises(ValueError, match="--cache: cache method must be one of"):
        ServeConfig(model="tiny-wan", cache="magic:0.1")
    assert ServeConfig(model="tiny-wan", cache="first-block:0.2").default_cache() == {
        "method": "first-block",
        "threshold": 0.2,
    }
    # Which branch each row computes: the conditional branch decides for both.
    assert Branches(True).rows(0, 1) == [COND] and Branches(True).rows(1, 1) == [UNCOND]
    assert Branches(True, cfg_rank=1).rows(0, 1) == [UNCOND]
    assert Branches(True, batched=True).rows(0, 2) == [UNCOND, COND]
    assert Branches(True, cfg_rank=1, batched=True).rows(0, 1) == [COND]
    assert Branches(False).rows(1, 1) == [COND]


def _frames(pngs: list[bytes]) -> np.ndarray:
    return np.stack([decode_png(png) for png in pngs])


def _same_metric(a: float | None, b: float | None) -> None:
    """Two ranks' (or world sizes') metric for one step: both absent (None: no metric was
    taken at that step, e.g. the first) or equal within float rounding."""
    assert (a is None) == (b is None), (a, b)
    if a is not None:
        assert a == pytest.approx(b, rel=1e-4)


def test_world_size_4_takes_the_same_decisions(backends, references):
    """CFG x Ulysses 2x2 (guided) and Ulysses over all 4 ranks (unguided) against 1 rank."""
    reference = backends.get("tiny-wan", 1, "--save-latents")
    with pytest.raises(BackendError, match="cache method must be one of") as refused:
        reference.submit({**GUIDED, "cache": {"method": "nope"}})
    assert refused.value.status == 422
    assert reference.info()["limits"]["step_cache"]  # the loaded model's hooks fit: offered
    client = backends.get("tiny-wan", 4, "--save-latents")
    assert (client.info()["plan"]["cfg_degree"], client.info()["plan"]["ulysses_degree"]) == (2, 2)
    for body, layout in ((GUIDED, "plan"), (UNGUIDED, "spread")):
        one, pngs_one, latents_one = references.get("tiny-wan", body)
        four, pngs_four = run_job(client, body)
        cache_one, cache_four = one["timings"]["cache"], four["timings"]["cache"]
        assert four["timings"]["sequence_layout"] == layout
        assert cache_four["skipped_steps"] == cache_one["skipped_steps"], (cache_one, cache_four)
        assert 0 < cache_one["num_skipped"] < 7 and cache_one["steps"][0]["computed"]
        for a, b in zip(cache_one["steps"], cache_four["steps"], strict=True):
            _same_metric(a.get("metric"), b.get("metric"))
        latents_four = client.latents(four["id"])
        result = compare(_frames(pngs_one), _frames(pngs_four), FLOAT32, latents_one, latents_four)
        assert result.verdict != DIFFERENT, result.reasons
    record = client.record(four["id"])  # job.json carries the cache's steps at its top level
    assert record["cache"]["skipped_steps"] == cache_four["skipped_steps"]
    backends.stop(client)


def test_a_rank_deciding_alone_fails_the_job(backends, lora):
    """The last rank decides on its own metric: the check after each decision stops the job on
    every rank at the same step, and the backend serves the next job. The cache comes from
    serve's `--cache` default here; a job's `"cache": null` turns it off."""
    serve_default = ("--cache", "first-block:0.9")
    backend = backends.start("tiny-wan", 2, *serve_default, env=((BREAK, "cache-alone"),))
    try:
        client = backend.client
        no_cache_field = {k: v for k, v in GUIDED.items() if k != "cache"}
        with pytest.raises(JobFailed, match="took different skip decisions at step") as failed:
            client.wait(client.submit(no_cache_field), timeout_s=120)
        assert failed.value.job["request"]["cache"] == CACHE  # serve's default, filled in
        assert "DELIBERATELY COMPUTES WRONG RESULTS" in backend.log_path.read_text()
        job, _ = run_job(client, {**GUIDED, "cache": None})
        assert job["status"] == "succeeded" and "cache" not in job["timings"]
        # The failure came from inside the DiT's forward on every rank (FSDP2 left blocks
        # unsharded): a LoRA job then gives a fresh backend's frames, and the backend lives on.
        with pytest.raises(JobFailed, match="took different skip decisions at step"):
            client.wait(client.submit(GUIDED), timeout_s=120)
        _, after = run_job(client, LORA_JOB)
        _, fresh = run_job(backends.get("tiny-wan", 2), LORA_JOB)
        assert after == fresh
        assert client.health()["status"] == "ok"
    finally:
        backends.stop(backend)
