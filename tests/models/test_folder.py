"""A tiny model saved to a folder and served by path gives the same frames as its preset; a
Wan 2.2-style pair of experts runs both in parallel, and takes a LoRA with a strength each; a
truncated shard fails every rank's load, not only the ranks that read past its end.

Cost: about 8 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import pytest
import torch
from conftest import run_job
from lora_files import WAN_TARGETS, peft_lora

from paradit.backend.models.presets import build_preset
from paradit.backend.models.sharded_load import FolderWeights, fill_shards

# Explicit sizes: a folder model gets the real-model defaults (832x480, 81 frames).
BODY = {
    "prompt": "a folder model",
    "seed": 21,
    "guidance_scale": 3.0,
    "width": 64,
    "height": 48,
    "num_frames": 5,
    "num_inference_steps": 4,
}


def test_saved_folder_matches_preset(tmp_path, backends, references):
    folder = tmp_path / "tiny-wan-folder"
    build_preset("tiny-wan").save_pretrained(folder)
    client = backends.get(str(folder), 2)
    info = client.info()
    assert info["model"] == str(folder) and info["family"] == "wan-t2v"
    job, from_folder = run_job(client, BODY)
    # every rank's measured peak in job.json, with what it held before loading the model
    # (tests/memory/test_memory.py measures a 1 GB DiT's load; its 2-rank group runs no job)
    measured = client.record(job["id"])["memory"]["measured"]
    backends.stop(client)
    assert from_folder == references.frames("tiny-wan", BODY)
    assert sorted(measured) == ["0", "1"], measured
    assert all(r["above_start_bytes"] > 0 for r in measured.values()), measured
    before = {str(r["rank"]): r["rss_before_model_bytes"] for r in info["ranks"]}
    assert all(r["peak_bytes"] - r["above_start_bytes"] == before[k] for k, r in measured.items())


def test_wan22_two_experts_are_both_parallel(tmp_path, backends, references):
    """Wan 2.2 A14B switches to a second transformer for the low-noise steps."""
    import copy

    import torch
    from diffusers import WanPipeline

    tiny = build_preset("tiny-wan")
    low_noise = copy.deepcopy(tiny.transformer)
    generator = torch.Generator().manual_seed(22)
    with torch.no_grad():
        for param in low_noise.parameters():
            param.add_(0.05 * torch.randn(param.shape, generator=generator))
    folder = tmp_path / "tiny-wan22"
    WanPipeline(
        tokenizer=tiny.tokenizer,
        text_encoder=tiny.text_encoder,
        vae=tiny.vae,
        scheduler=tiny.scheduler,
        transformer=tiny.transformer,
        transformer_2=low_noise,
        boundary_ratio=0.9,  # the last steps of 4 run the low-noise expert
    ).save_pretrained(folder)
    # With a step cache each expert keeps its own state: the low-noise expert's first step
    # has no previous residual (no metric) and is computed, whatever the threshold.
    cached = {**BODY, "cache": {"method": "first-block", "threshold": 1.0}}
    # a LoRA for both experts, with a strength each (`high`: transformer, `low`: transformer_2)
    peft_lora(backends.lora_dir / "wan22.safetensors", tiny.transformer, WAN_TARGETS, seed=22)
    pair = {**BODY, "loras": [{"name": "wan22", "high": 0.8, "low": -0.6}]}
    high_only = {**BODY, "loras": [{"name": "wan22", "high": 0.8, "low": 0.0}]}
    one = backends.get(str(folder), 1)
    assert one.info()["loras"]["experts"] == ["transformer", "transformer_2"]
    full = one.info()["ranks"][0]["dit_param_bytes"]
    _, frames_one = run_job(one, BODY)
    cached_one, cached_frames_one = run_job(one, cached)
    _, pair_one = run_job(one, pair)
    _, high_one = run_job(one, high_only)
    backends.stop(one)
    single_expert = references.frames("tiny-wan", BODY)
    assert frames_one != single_expert  # the low-noise expert really ran
    steps = cached_one["timings"]["cache"]["steps"]
    first_steps = [index for index, step in enumerate(steps) if step["metric"] is None]
    assert len(first_steps) == 2 and first_steps[0] == 0, steps  # one first step per expert
    assert all(steps[index]["computed"] for index in first_steps), steps
    assert cached_one["timings"]["cache"]["num_skipped"] >= 1, steps
    assert len({tuple(frames_one), tuple(pair_one), tuple(high_one)}) == 3  # each expert's own
    two = backends.get(str(folder), 2)
    assert all(r["dit_param_bytes"] <= 0.55 * full for r in two.info()["ranks"])
    _, frames_two = run_job(two, BODY)
    assert frames_two == frames_one
    cached_two, cached_frames_two = run_job(two, cached)  # CFG parallel: the same decisions
    assert cached_frames_two == cached_frames_one
    skipped = [s["computed"] for s in cached_two["timings"]["cache"]["steps"]]
    assert skipped == [s["computed"] for s in steps]
    _, pair_two = run_job(two, pair)  # CFG parallel: each branch as one process runs it
    assert pair_two == pair_one
    _, again = run_job(two, BODY)
    assert again == frames_one  # both experts' rows restored
    backends.stop(two)


@pytest.mark.fast
def test_a_truncated_shard_is_refused_before_any_rank_reads(tmp_path):
    """Each rank reads only its own rows of each weight (`fill_shards`), so a shard cut short
    was noticed only by the ranks whose rows lie past the cut. Every rank checks every file
    against its header before reading: the rank reading rows before the cut refuses too."""
    transformer = build_preset("tiny-wan", components=frozenset({"transformer"})).transformer
    transformer.save_pretrained(tmp_path, max_shard_size="40KB")  # several shards + an index
    shards = sorted(tmp_path.glob("*.safetensors"))
    assert len(shards) >= 3 and (tmp_path / "diffusion_pytorch_model.safetensors.index.json")
    whole = FolderWeights(tmp_path)
    first = next(name for name, file in whole.files.items() if file == shards[0])
    whole.close()
    last = shards[-1]
    last.write_bytes(last.read_bytes()[:-4])  # the last 4 bytes of its last tensor are gone
    rows = torch.empty((1, *transformer.state_dict()[first].shape[1:]))
    with pytest.raises(ValueError, match=f"{last.name} is truncated: its header names"):
        FolderWeights(tmp_path).read_rows(first, 0, rows)  # a rank with rows in shard 1 only
    with pytest.raises(ValueError, match=f"{last.name} is truncated"):
        fill_shards(transformer, tmp_path, torch.device("cpu"))
