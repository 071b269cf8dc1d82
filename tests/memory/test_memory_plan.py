"""The memory plan: decisions on the real architectures, prediction against measurement (see
test_memory.py), the plan in /v1/info and job.json, refusals naming what fits, the offload
paths on CPU, Wan 2.2 A14B's stored bytes by --weights and its experts one at a time, and
the audio rows of LTX-2 counted at the job's frame rate.

Cost: about 14 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from conftest import POOL_LORA_CACHE_GIB, REFERENCE_FLAGS

from paradit.backend.memory.planner import GIB, Budget, MemoryPlanner, TooLarge, Topology
from paradit.backend.memory.settings import JobShape, MemorySettings
from paradit.backend.models.random_presets import random_preset_spec

UMT5_XXL = {  # google/umt5-xxl's encoder, as Wan's diffusers repos ship it (5.7B parameters)
    "_class_name": "UMT5EncoderModel",
    "model_type": "umt5",
    "vocab_size": 256384,
    "d_model": 4096,
    "d_kv": 64,
    "d_ff": 10240,
    "num_layers": 24,
    "num_heads": 64,
    "relative_attention_num_buckets": 32,
    "relative_attention_max_distance": 128,
    "feed_forward_proj": "gated-gelu",
    "layer_norm_epsilon": 1e-6,
}


def config_folder(preset: str, folder: Path) -> Path:
    """A diffusers folder with only the configs of the real model (no weights): the random
    preset's transformer, VAE and scheduler, and the published UMT5-XXL text encoder."""
    spec = random_preset_spec(preset)
    index: dict = {"_class_name": spec["pipeline"], "_diffusers_version": "0.42.1"}
    for name, entry in spec["components"].items():
        if "config" not in entry:
            index[name] = [None, None]  # the byte-level tokenizer: nothing to plan
            continue
        config = dict(UMT5_XXL if name == "text_encoder" else entry["config"])
        class_name = config.pop("_class_name")
        library = "transformers" if name == "text_encoder" else "diffusers"
        index[name] = [library, class_name]
        (folder / name).mkdir(parents=True)
        if library == "transformers":
            config["architectures"] = [class_name]
        else:
            config["_class_name"] = class_name
        file = "scheduler_config.json" if class_name.endswith("Scheduler") else "config.json"
        (folder / name / file).write_text(json.dumps(config))
    (folder / "model_index.json").write_text(json.dumps(index))
    return folder


@pytest.fixture(scope="module")
def wan_sizes(tmp_path_factory):
    import torch

    from paradit.backend.memory.sizes import meta_pipeline, sizes_of_pipeline
    from paradit.backend.models.families import family_for

    sizes = {}
    for preset in ("random:wan2.1-t2v-14b", "random:wan2.1-t2v-1.3b"):
        folder = config_folder(preset, tmp_path_factory.mktemp(preset.split(":")[1]))
        pipe = meta_pipeline(str(folder))
        family = family_for(type(pipe).__name__)
        sizes[preset] = sizes_of_pipeline(pipe, family, torch.bfloat16)
    return sizes


def _plan(sizes, gpus: int, gib: float, shape: JobShape, ulysses: int = 1) -> MemoryPlanner:
    topology = Topology("cuda", gpus, ulysses, cfg_parallel=gpus > ulysses)
    budget = Budget(int(gib * GIB), f"--gpu-memory {gib}")
    return MemoryPlanner(sizes, MemorySettings(gib), budget, topology, shape)


def test_wan_14b_720p_on_one_24gb_gpu_offloads_encodes_on_cpu_and_tiles(wan_sizes):
    sizes = wan_sizes["random:wan2.1-t2v-14b"]
    assert 5.6e9 < sizes.encoder_bytes / 2 < 5.8e9  # the published encoder, not the reduced one
    planner = _plan(sizes, 1, 24, JobShape(1280, 720, 81))
    job = planner.plan_job(JobShape(1280, 720, 81))
    assert planner.layout.dit == "offload-group" and planner.layout.offload == "group"
    assert planner.layout.text_encoder == "cpu"
    assert job.decode == "tiled" and job.vae_tiling and job.fits
    assert any("level 0" in reason and "needs" in reason for reason in planner.start_reasons)


def test_wan_14b_720p_on_8_gpus_of_80gb_is_sharded_and_resident(wan_sizes):
    sizes = wan_sizes["random:wan2.1-t2v-14b"]
    planner = _plan(sizes, 8, 80, JobShape(1280, 720, 81), ulysses=4)
    job = planner.plan_job(JobShape(1280, 720, 81))
    assert planner.layout.level == 0
    assert (planner.layout.dit, planner.layout.text_encoder) == ("sharded", "device")
    # the whole decode fits, but 8 ranks decode it faster in exact bands: split, says why
    assert not job.tiling_needed and job.decode == "bands" and not job.vae_tiling
    assert any("decode split exactly over 8 ranks" in r for r in job.reasons), job.reasons
    assert job.decode_record() == {"split": 8, "exact": True, "tiles": 1, "mode": "bands"}
    assert job.prediction.parts["dit_steps"] < sizes.dit_bytes / 4


@pytest.mark.parametrize(
    ("gpus", "size", "decode", "share"),
    [
        (2, (384, 384, 33), "bands", 0.5),  # 48 latent rows: 24 a rank
        (3, (320, 256, 33), "bands", 0.344),  # 32 latent rows: 11, 11, 10 (uneven bands)
        (1, (384, 384, 33), "whole", 1.0),  # one rank: nothing to split over
        (2, (384, 384, 5), "whole", 0.5),  # 737,280 pixels in all: too short to split
        (8, (96, 96, 129), "whole", 1.0),  # 12 latent rows: bands thinner than MIN_BAND_ROWS
    ],
)
def test_auto_splits_the_decode_exactly_when_that_is_faster(wan_sizes, gpus, size, decode, share):
    """The decode fits whole everywhere here; `auto` splits a large one (`SPLIT_MIN_PIXELS`)
    over the replica in exact row bands when the busiest rank's band is at most 3/4 of the
    latent rows (`SPLIT_FASTER`); it never blends tiles to go faster."""
    sizes = wan_sizes["random:wan2.1-t2v-1.3b"]
    shape = JobShape(*size)
    planner = _plan(sizes, gpus, 80, shape, ulysses=gpus)
    job = planner.plan_job(shape)
    assert not job.tiling_needed and job.decode == decode, job.reasons
    assert planner.band_share(shape) == pytest.approx(share, abs=0.005)
    assert job.decode_record()["exact"] and job.decode_record()["split"] == (
        gpus if decode == "bands" else 1
    )


def test_blended_decodes_are_recorded_as_not_exact(wan_sizes):
    """--vae-tiling on splits blended tiles over the ranks: job.json's decode says so."""
    sizes = wan_sizes["random:wan2.1-t2v-1.3b"]
    shape = JobShape(384, 384, 33)
    topology = Topology("cuda", 2, 2, cfg_parallel=False)
    settings = MemorySettings(80, vae_tiling="on")
    planner = MemoryPlanner(sizes, settings, Budget(80 * GIB, "x"), topology, shape)
    job = planner.plan_job(shape)
    assert job.decode == "split" and job.vae_tiling
    assert job.decode_record() == {"split": 2, "exact": False, "tiles": 4, "mode": "split"}


def test_wan_1_3b_480p_on_one_24gb_gpu_is_resident(wan_sizes):
    sizes = wan_sizes["random:wan2.1-t2v-1.3b"]
    planner = _plan(sizes, 1, 24, JobShape(832, 480, 81))
    assert planner.layout.dit == "resident" and planner.layout.offload == "none"
    assert planner.plan_job(JobShape(832, 480, 81)).fits


def test_forced_tiling_still_lets_the_plan_offload(wan_sizes):
    sizes = wan_sizes["random:wan2.1-t2v-14b"]
    shape = JobShape(1280, 720, 81)
    for mode, decode in (("off", "whole"), ("on", "tiled")):
        settings = MemorySettings(24, vae_tiling=mode)
        budget = Budget(24 * GIB, "--gpu-memory 24")
        planner = MemoryPlanner(sizes, settings, budget, Topology("cuda"), shape)
        assert planner.layout.dit == "offload-group", mode
        assert planner.plan_job(shape).decode == decode


def test_a_job_that_does_not_fit_names_the_largest_size_that_does(wan_sizes):
    sizes = wan_sizes["random:wan2.1-t2v-1.3b"]
    planner = _plan(sizes, 1, 16, JobShape(832, 480, 81))
    planned = set(sizes._cache)
    with pytest.raises(
        TooLarge, match=r"largest size that fits at 81 frames is (\d+)x(\d+)x81"
    ) as e:
        planner.check(JobShape(2048, 2048, 81))
    # the layout tiles every decode: of the sizes the search tried, no whole decode was run
    whole = {key[1:3] for key in set(sizes._cache) - planned if key[0] == "vae" and not key[4]}
    assert whole == {(2048, 2048)}  # the refused job's own plan (it says if tiling is needed)
    width, height = (int(n) for n in str(e.value).rsplit(" is ", 1)[1].split("x")[:2])
    assert width == height and width % 16 == 0 and width < 2048
    assert planner.plan_job(JobShape(width, height, 81)).fits
    # the largest: one size_multiple more (the same aspect ratio) does not fit
    assert not planner.plan_job(JobShape(width + 16, height + 16, 81)).fits


def test_loras_are_counted_where_host_memory_is_the_budget(wan_sizes):
    """With `--lora-dir` a rank keeps the parsed-LoRA cache (bounded by --lora-cache-gib),
    the rows a job's LoRAs change (at most its DiT share) and a scratch of the largest layer.
    On a CPU device that is the budget's memory: the plan counts it, and a job that fits
    without LoRAs may not with them. On GPUs it is host memory beside the budget: reported."""
    sizes = wan_sizes["random:wan2.1-t2v-1.3b"]
    shape = JobShape(832, 480, 81)
    share = sizes.dit_bytes // 2 + sizes.largest_leaf_bytes

    def planner(device: str, gib: float, loras: float | None) -> MemoryPlanner:
        settings = MemorySettings(gib, lora_cache_gib=loras)
        budget = Budget(int(gib * GIB), f"--gpu-memory {gib}")
        topology = Topology(device, 2, 1, cfg_parallel=True)
        return MemoryPlanner(sizes, settings, budget, topology, shape)

    plain = planner("cpu", 64, None).plan_job(shape).prediction
    with_loras = planner("cpu", 64, 2.0).plan_job(shape).prediction
    assert with_loras.parts["loras"] == 2 * GIB + share and "loras" not in plain.parts
    assert with_loras.leader - plain.leader == with_loras.others - plain.others == 2 * GIB + share
    least = planner("cpu", 1, None).plan_job(shape).prediction.peak  # every fallback taken
    tight = (least + 1 * GIB) / GIB / 0.9  # fits without LoRAs, not with a 2 GiB cache
    assert planner("cpu", tight, None).plan_job(shape).fits
    assert not planner("cpu", tight, 2.0).plan_job(shape).fits
    on_gpus = planner("cuda", 64, 2.0)
    assert (
        on_gpus.plan_job(shape).prediction.peak
        == planner("cuda", 64, None).plan_job(shape).prediction.peak
    )
    assert on_gpus.to_dict()["lora_host_bytes"] == 2 * GIB + share


def test_the_latent_upscaler_is_counted_between_the_stages():
    """`serve --upscaler`: its weights are counted whole on every rank (with the VAE's), and
    its activations (`upsample`, a dry run on stage 1's latents up to the final latent size)
    on the leader and the other ranks beside the DiT: at least the final latent at its mid
    channels (the upsampled tensor the last blocks read), growing with the final area and
    taking stage 1's latents as the final size / its factor."""
    import torch
    from diffusers.pipelines.ltx2.latent_upsampler import LTX2LatentUpsamplerModel

    from paradit.backend.memory.sizes import sizes_of_pipeline
    from paradit.backend.models.families import family_of
    from paradit.backend.models.presets import build_preset

    pipe = build_preset("tiny-ltx2")
    sizes = sizes_of_pipeline(pipe, family_of(pipe), torch.float32)
    shape = JobShape(256, 128, 17)  # the final size: 8 x 4 latents (32x) of 3 frames

    def predicted(job: JobShape):
        topology = Topology("cpu", 2, 1, cfg_parallel=True)
        budget = Budget(64 * GIB, "--gpu-memory 64")
        planner = MemoryPlanner(sizes, MemorySettings(64), budget, topology, job)
        return planner.plan_job(job).prediction

    plain = predicted(shape)
    channels = pipe.vae.config.latent_channels  # the final latent as input: 16x
    with torch.device("meta"):
        module = LTX2LatentUpsamplerModel(in_channels=channels, mid_channels=64, dims=3)
    sizes.add_upsampler(module, 2)
    counted = predicted(shape)
    weights = sum(p.numel() * 4 for p in module.parameters())
    assert "upsample" not in plain.parts
    assert counted.parts["vae"] - plain.parts["vae"] == weights
    upsample = counted.parts["upsample"]
    final_latent = 64 * 3 * 4 * 8 * 4  # mid channels x frames x height x width, float32
    assert final_latent <= upsample <= 6 * final_latent, upsample
    assert counted.leader >= counted.parts["dit_decode"] + upsample + counted.parts["vae"]
    assert counted.others >= counted.parts["dit_decode"] + upsample + counted.parts["vae"]
    assert sizes.upsample(JobShape(512, 128, 17)) == 2 * upsample


# -- Wan 2.2 A14B: stored bytes by --weights, and experts one at a time -------------------------


@pytest.fixture(scope="module")
def a14b(tmp_path_factory) -> dict:
    """Wan 2.2 T2V-A14B's configs (two 14.3B experts, the published UMT5-XXL), planned with
    the DiTs stored as fp8 (`--weights fp8`) and in bfloat16 (`--weights bf16`)."""
    import torch

    from paradit.backend.memory.sizes import meta_pipeline, sizes_of_pipeline
    from paradit.backend.models.families import family_for

    folder = config_folder("random:wan2.2-t2v-a14b", tmp_path_factory.mktemp("a14b"))
    pipe = meta_pipeline(str(folder))
    family = family_for(type(pipe).__name__)
    fp8 = sizes_of_pipeline(pipe, family, torch.bfloat16, "fp8")
    bf16 = sizes_of_pipeline(pipe, family, torch.bfloat16, "compute")
    bf16._cache = fp8._cache  # the dry runs' peaks do not depend on how weights are stored
    return {"fp8": fp8, "bf16": bf16}


def _a14b_plan(a14b, weights: str, gpus: int, gib: float, shape: JobShape) -> MemoryPlanner:
    """As `paradit plan` plans it: CFG parallel over 2 ranks, Ulysses over the rest."""
    topology = Topology("cuda", gpus, max(1, gpus // 2), cfg_parallel=gpus > 1)
    budget = Budget(int(gib * GIB), f"--gpu-memory {gib}")
    settings = MemorySettings(gib, weights=weights)
    return MemoryPlanner(a14b[weights], settings, budget, topology, shape)


def test_fp8_weights_count_one_byte_a_linear_weight_and_an_upcast_buffer(a14b):
    """fp8: every linear weight one byte a parameter and a float32 scale per row; norms,
    biases, embeddings and the patch convolution in bfloat16. Wan A14B's largest linear is
    its time projection, 5120 -> 6 x 5120 (diffusers' WanTimeTextImageEmbedding): upcast to
    bfloat16, 2 x 5120 x 30720 bytes."""
    fp8, bf16 = a14b["fp8"], a14b["bf16"]
    assert fp8.experts == bf16.experts == 2
    assert 28.0e9 < bf16.expert_bytes < 29.0e9  # 14.3B parameters in bfloat16
    assert 0.50 < fp8.expert_bytes / bf16.expert_bytes < 0.51
    assert fp8.upcast_bytes == 2 * 5120 * 6 * 5120 and bf16.upcast_bytes == 0
    assert fp8.encoder_bytes == bf16.encoder_bytes  # only the DiTs change
    planner = _a14b_plan(a14b, "fp8", 1, 80, JobShape(1280, 720, 81))
    assert planner.plan_job(JobShape(1280, 720, 81)).prediction.parts["upcast"] > 0
    assert "DiT weights stored fp8" in planner.start_reasons[0]


@pytest.mark.parametrize(
    ("weights", "gpus", "gib", "size", "level", "dit"),
    [
        # one 24 GB card: one fp8 expert (13.3 GiB) fits beside 480p's activations, both do not
        ("fp8", 1, 24, (832, 480, 81), 4, "offload-experts"),
        # ... in bfloat16 one expert alone (26.6 GiB) is over the budget: blocks stream
        ("bf16", 1, 24, (832, 480, 81), 5, "offload-group"),
        # two 24 GB cards (CFG parallel), 720p: both fp8 experts' shards with 720p's 8 GiB of
        # activations are over 21.6 GiB, one expert's shards fit
        ("fp8", 2, 24, (1280, 720, 81), 4, "offload-experts"),
        ("bf16", 2, 24, (1280, 720, 81), 5, "offload-group"),
        # not needed: both experts fit (sharded over 4, the text encoder sharded over them
        # too, the decode whole; or on one 80 GB card)
        ("fp8", 4, 24, (1280, 720, 81), 0, "sharded"),
        ("fp8", 1, 80, (1280, 720, 81), 0, "resident"),
        # the rest of docs/memory.md's rows: 720p on one 24 GB card does not fit one fp8
        # expert (22.1 GiB > 21.6 with 720p's 8 GiB of activations); bf16 needs no swap on
        # 4 x 24 or 1 x 80 (its text encoder on the CPU)
        ("fp8", 1, 24, (1280, 720, 81), 5, "offload-group"),
        ("bf16", 1, 24, (1280, 720, 81), 5, "offload-group"),
        ("bf16", 4, 24, (1280, 720, 81), 2, "sharded"),
        ("bf16", 1, 80, (1280, 720, 81), 2, "resident"),
    ],
)
def test_experts_one_at_a_time_where_it_fits_and_not_otherwise(
    a14b, weights, gpus, gib, size, level, dit
):
    shape = JobShape(*size)
    planner = _a14b_plan(a14b, weights, gpus, gib, shape)
    assert (planner.layout.level, planner.layout.dit) == (level, dit), planner.start_reasons
    assert planner.plan_job(shape).fits
    reasons = " | ".join(planner.start_reasons)
    if level == 4:  # the cheaper levels were tried and said what they need
        assert "level 2 (DiT" in reasons and "level 4 (experts one at a time" in reasons
        assert planner.layout.swaps_experts and planner.layout.offload == "experts"
        host = planner.to_dict()["experts_host_bytes"]  # pinned copies beside the budget
        assert host == (a14b[weights].expert_bytes // 2 if gpus == 2 else a14b[weights].dit_bytes)
    if level == 5:  # tried, and over the budget
        assert re.search(r"level 4 \(experts one at a time.*needs [\d.]+ GiB > 21.60", reasons)
    if level < 4:
        assert "level 4" not in reasons


@pytest.mark.fast
def test_paradit_plan_counts_the_weights_setting():
    """`paradit plan --weights fp8` (tools/plan.estimate) plans the DiT as fp8-stored; a
    forced `--offload experts` on a one-DiT model is refused with the rule."""
    from paradit.backend.tools.plan import estimate

    plans = {
        weights: estimate("tiny-wan", 1, 1, 64, 64, 5, device="cpu", weights=weights)["memory"]
        for weights in ("fp8", "int8", "bf16")
    }
    assert (plans["fp8"]["weights_stored"], plans["bf16"]["weights_stored"]) == ("fp8", "compute")
    assert plans["int8"]["weights_stored"] == "int8"
    fp8, int8, full = (plans[w]["weights_bytes"]["transformer"] for w in ("fp8", "int8", "bf16"))
    assert fp8 == int8 < full / 2  # float32 on a CPU device: a linear weight 1 byte of 4
    assert plans["fp8"]["weights_bytes"]["vae"] == plans["bf16"]["weights_bytes"]["vae"]
    with pytest.raises(ValueError, match="--offload experts is for a model with two experts"):
        estimate("tiny-wan", 1, 1, 64, 64, 5, device="cpu", offload="experts")


@pytest.mark.fast
def test_encoder_placement_sharded_is_counted_forced_and_refused(wan_sizes):
    """`--encoder-placement sharded`: each rank holds its share of UMT5-XXL and gathers
    `ENCODER_UNITS_GATHERED` of its largest block in the encode; auto keeps it whole on rank
    0 where that fits; sharding is refused without several ranks that shard the DiT in one
    replica (the rule named)."""
    from paradit.backend.memory.planner import ENCODER_UNITS_GATHERED, Layout

    sizes = wan_sizes["random:wan2.1-t2v-14b"]
    shape, budget = JobShape(832, 480, 81), Budget(80 * GIB, "--gpu-memory 80")
    forced = MemorySettings(80, encoder_placement="sharded")
    sharded = MemoryPlanner(sizes, forced, budget, Topology("cuda", 4, 4), shape)
    assert sharded.layout.text_encoder == "sharded"
    parts = sharded.plan_job(shape).prediction.parts
    assert parts["encoders"] == -(-sizes.encoder_bytes // 4)
    assert sizes.encoder_layer_bytes > 0  # one UMT5 block: 0.42 GiB in bf16
    assert parts["encoder_gathered"] == ENCODER_UNITS_GATHERED * sizes.encoder_layer_bytes
    prediction = sharded.plan_job(shape).prediction
    assert prediction.others >= parts["encoders"]  # every rank holds its share
    auto = MemoryPlanner(sizes, MemorySettings(80), budget, Topology("cuda", 4, 4), shape)
    assert auto.layout.text_encoder == "device"  # it fits whole on rank 0: no gathers
    assert auto.plan_job(shape).prediction.others < prediction.others
    for topology in (
        Topology("cuda", 1, 1),
        Topology("cuda", 4, 4, num_replicas=2),
        Topology("cuda", 4, 4, shard_weights=False),
    ):
        with pytest.raises(ValueError, match="several ranks that shard the DiT, in one replica"):
            MemoryPlanner(sizes, forced, budget, topology, shape)
    with pytest.raises(ValueError, match="--encoder-placement must be one of"):
        MemorySettings(encoder_placement="gpu")
    with pytest.raises(ValueError, match="a layout's text encoder is one of"):
        Layout(0, "sharded", "gpu", False)


@pytest.mark.fast
def test_stored_weights_follow_the_setting_and_the_file():
    from paradit.backend.memory.sizes import stored_weights

    assert stored_weights("auto") == stored_weights("bf16") == stored_weights("file") == "compute"
    assert stored_weights("fp8") == "fp8"
    assert stored_weights("auto", ("fp8_scaled", "fp8_scaled")) == "fp8"
    assert stored_weights("file", ("Q8_0",)) == "fp8"
    assert stored_weights("auto", ("bf16",)) == "compute"
    assert stored_weights("bf16", ("fp8_e4m3fn",)) == "compute"
    assert stored_weights("int8") == stored_weights("auto", ("int8_convrot",)) == "int8"
    assert stored_weights("file", ("int8", "fp8_scaled")) == "fp8"  # one byte alike
    assert stored_weights("bf16", ("int8_convrot",)) == "compute"
    assert stored_weights("auto", ("nvfp4_awq",)) == "compute"  # dequantized at load
    assert stored_weights("auto", ("mixed:nvfp4+fp8_scaled",)) == "compute"  # mostly nvfp4
    assert stored_weights("auto", ("mixed:fp8_scaled+nvfp4",)) == "fp8"


@pytest.mark.fast
@pytest.mark.parametrize("model", ["tiny-wan", "tiny-flux", "tiny-flux2", "tiny-cogvideox"])
def test_one_block_dry_run_peaks_as_the_whole_forward(model):
    """Where the activations' dry run keeps one block of each block list (ONE_BLOCK_EXACT),
    its peak is the whole forward's, byte for byte (the tiny presets have 2 blocks a list),
    and the DiT gets its blocks back."""
    import torch

    from paradit.backend.memory.dryrun import peak_bytes
    from paradit.backend.memory.sizes import (
        ONE_BLOCK_EXACT,
        _dit_forward,
        meta_pipeline,
        sizes_of_pipeline,
    )
    from paradit.backend.models.families import family_for

    pipe = meta_pipeline(model)
    sizes = sizes_of_pipeline(pipe, family_for(type(pipe).__name__), torch.float32)
    assert type(sizes.dit).__name__ in ONE_BLOCK_EXACT
    lengths = {
        n: len(c) for n, c in sizes.dit.named_children() if isinstance(c, torch.nn.ModuleList)
    }
    assert max(lengths.values()) > 1, lengths
    shape = JobShape(64, 48, 5 if sizes.temporal > 1 else 1, batch=2)
    for degree in (1, 2):
        whole = peak_bytes(lambda degree=degree: _dit_forward(sizes, shape, degree))
        assert sizes.activations(shape, degree) == whole, degree
    assert lengths == {
        n: len(c) for n, c in sizes.dit.named_children() if isinstance(c, torch.nn.ModuleList)
    }


@pytest.mark.fast
def test_dry_runs_that_reuse_op_outputs_count_the_same_bytes():
    """A dry run remakes the outputs of an op seen before from its inputs' metadata
    (`dryrun._OUTPUTS`) instead of running its meta function again: the peak is the one every
    meta function gives, on the tiny Wan VAE's tiled decode (the same ops tile after tile, the
    causal cache, the blend of the overlaps), on an op whose output shares its input's storage
    (`reshape`: clone + `_unsafe_view`), one with two outputs, and two inputs of one shape
    whose strides differ (what `.contiguous()` copies follows from them)."""
    import torch

    from paradit.backend.memory import dryrun
    from paradit.backend.memory.sizes import meta_pipeline, sizes_of_pipeline
    from paradit.backend.models.families import family_for

    pipe = meta_pipeline("tiny-wan")
    vae = sizes_of_pipeline(pipe, family_for(type(pipe).__name__), torch.float32).vae
    vae.enable_tiling(32, 32, 24, 24)  # 2 x 2 tiles of 4 x 4 latents

    def decode():
        z = torch.empty((1, vae.config.z_dim, 1, 5, 5), device="meta")
        return vae.decode(z, return_dict=False)[0]

    def ops():
        rows, columns = torch.empty(4, 6, device="meta"), torch.empty(6, 4, device="meta").t()
        kept = [*torch.var_mean(rows, dim=1)]
        for x in (columns, rows, columns, rows):  # (4, 6) by rows, then by columns
            kept.append((x * 2).contiguous())  # a copy of the columns' product only
        kept.append(torch.empty(64, 96, device="meta").t().reshape(-1))  # the peak: a copy
        return kept

    dryrun._OUTPUTS.clear()
    for run in (decode, ops):
        exact = dryrun.peak_bytes(run, reuse=False)
        assert dryrun.peak_bytes(run) == dryrun.peak_bytes(run) == exact, run.__name__
    remade = {key[0] for key, known in dryrun._OUTPUTS.items() if known is not None}
    aten = torch.ops.aten
    assert {aten.convolution.default, aten.var_mean.correction, aten.mul.Tensor} <= remade
    assert aten._unsafe_view.default not in remade


@pytest.mark.fast
def test_memory_settings_say_the_rule():
    with pytest.raises(ValueError, match="--offload must be one of auto, none"):
        MemorySettings(offload="disk")
    with pytest.raises(ValueError, match="--vae-tiling must be one of"):
        MemorySettings(vae_tiling="sometimes")
    with pytest.raises(ValueError, match="--lora-cache-gib must be between 0 and 1024"):
        MemorySettings(lora_cache_gib=-1)
    with pytest.raises(ValueError, match="--gpu-memory must be > 0"):
        MemorySettings(gpu_memory_gib=0)
    with pytest.raises(ValueError, match="--plan-for must be WxHxF"):
        MemorySettings(plan_for="720p")
    assert JobShape.parse("1280x720x81") == JobShape(1280, 720, 81)
    with pytest.raises(ValueError, match="fps must be a number >= 0"):
        JobShape(64, 64, 9, fps=-24)
    with pytest.raises(ValueError, match="audio_latent_frames >= 0"):
        JobShape(64, 64, 9, audio_latent_frames=-1)
    asked = JobShape(128, 128, 121, fps=12, audio_latent_frames=300)
    assert asked.scaled(0.5, 32) == JobShape(64, 64, 121, fps=12, audio_latent_frames=300)
    assert asked.described == "128x128x121 at 12 fps with 300 audio latent frames"


@pytest.mark.fast
def test_audio_rows_follow_the_jobs_frame_rate_and_audio_length():
    """LTX-2's audio rows in the plan are the job's: its `audio_latent_frames`, else the
    pipeline's count for the video's seconds at the job's `fps` (LTX2Pipeline's
    round(frames / fps x audio_latents_per_second)), not the model's 24 fps whatever the job
    asks. 121 frames at 12 fps (10 s) count twice the rows of 24 fps and more activations, at
    48 fps half and fewer; the dry run's audio stream has those rows; `paradit plan --fps`
    checks the value as a request's field (MiniMax H3 takes its 24 fps only), and a served
    job's shape carries its request's fps and audio length (`service.job_shape`)."""
    import torch

    from paradit.backend.memory.sizes import meta_pipeline, sizes_of_pipeline
    from paradit.backend.models.families import family_of
    from paradit.backend.models.families.ltx2.memory import forward, grid
    from paradit.backend.models.families.minimax_h3.memory import audio_rows
    from paradit.backend.request import JobRequest
    from paradit.backend.serving.service import job_shape
    from paradit.backend.tools.plan import estimate

    pipe = meta_pipeline("tiny-ltx2")
    sizes = sizes_of_pipeline(pipe, family_of(pipe), torch.float32)
    limits = family_of(pipe).limits(pipe, tiny=True)
    rate = limits.audio_latents_per_second  # the pipeline's (audio_latent_rate): 25
    for fps, asked in ((0.0, 0), (12.0, 0), (24.0, 0), (48.0, 0), (12.0, 300)):
        shape = JobShape(64, 64, 121, fps=fps, audio_latent_frames=asked)
        rows = grid(sizes, shape).audio
        assert rows == (asked or round(121 / (fps or limits.fps) * rate)), (fps, asked, rows)
        assert forward(sizes, shape, 1)[1].shape[1] == rows  # the DiT's audio stream
    assert grid(sizes, JobShape(64, 64, 121, fps=12)).audio == 252 == 2 * 126

    def activations(**job) -> int:
        report = estimate("tiny-ltx2", 1, 1, 64, 64, 121, device="cpu", **job)
        return report["memory"]["reference_job"]["parts_bytes"]["activations"]

    own = activations()
    assert activations(fps=12.0) > own == activations(fps=24.0) > activations(fps=48.0)
    assert activations(audio_latent_frames=400) > own
    with pytest.raises(ValueError, match="fps must be between 1 and 60"):
        activations(fps=100.0)
    with pytest.raises(ValueError, match="this model runs at 24 fps only"):
        estimate("tiny-minimax-h3", 1, 1, 32, 32, 124, device="cpu", fps=12.0)
    assert audio_rows(124) == audio_rows(124, 24.0) == 2 * round(124 / 24 * 40)
    body = {"prompt": "a fox", "num_frames": 121, "fps": 12, "audio_latent_frames": 300}
    served = job_shape(JobRequest.from_body(body, limits), limits)
    assert (served.fps, served.audio_latent_frames) == (12.0, 300)
    del body["audio_latent_frames"]
    assert grid(sizes, job_shape(JobRequest.from_body(body, limits), limits)).audio == 252


# -- on a running backend ---------------------------------------------------------------

BUDGETED = ("--gpu-memory", "0.05", "--offload", "group")
"""One backend for the plan's tests and the group offload's (a start is 2-3 CPU-seconds)."""


def test_info_and_job_json_show_the_plan_and_paradit_plan_agrees(backends):
    client = backends.get("tiny-wan", 1, *BUDGETED)
    memory = client.info()["memory"]
    assert memory["settings"]["gpu_memory_gib"] == 0.05 and memory["reasons"]
    job = client.wait(client.submit({"prompt": "plan", "num_inference_steps": 1}), timeout_s=120)
    record = client.record(job["id"])["memory"]
    assert record["decode"] == "whole" and record["fits"]
    assert record["measured"]["0"]["peak_bytes"] > 0
    args = "--model tiny-wan --gpus 1 --gpu-memory 0.05 --offload group --device cpu --width 64"
    args += " --height 64"
    args += f" --lora-cache-gib {POOL_LORA_CACHE_GIB}"  # the pool's backends have a --lora-dir
    report = backends.paradit(
        "plan", *args.split(), "--frames", "5", "--json", env=dict(os.environ)
    )
    assert report.returncode == 0, report.stderr
    planned = json.loads(report.stdout)["memory"]
    for key in ("level", "dit", "text_encoder"):
        assert planned[key] == memory[key]
    assert planned["reference_job"]["predicted_bytes"] == record["predicted_bytes"]


def test_a_job_over_the_budget_gets_422_naming_the_largest_size_that_fits(backends):
    from paradit.backend.client import BackendError

    client = backends.get("tiny-wan", 1, *BUDGETED)
    with pytest.raises(BackendError, match="largest size that fits at 81 frames is") as refused:
        client.submit({"prompt": "too big", "width": 1024, "height": 1024, "num_frames": 81})
    assert refused.value.status == 422


@pytest.mark.parametrize("offload", ["group", "model"])
def test_offloaded_dit_makes_the_same_frames(backends, offload):
    """Forced offload on CPU runs diffusers' group-offload hooks (or the move in and out of
    model offload) with host memory on both sides: the frames must not change."""
    body = {"prompt": "offload", "num_inference_steps": 2, "seed": 3}
    plain = backends.get("tiny-wan", 1, *REFERENCE_FLAGS)
    flags = BUDGETED if offload == "group" else ("--offload", offload)
    moved = backends.get("tiny-wan", 1, *flags)
    assert moved.info()["memory"]["dit"] == f"offload-{offload}"
    frames = []
    for client in (plain, moved):
        job = client.wait(client.submit(body), timeout_s=120)
        frames.append([client.frame(job["id"], i) for i in range(job["num_frames"])])
    assert frames[0] == frames[1]


def test_paired_cfg_branches_count_batch_2_activations(wan_sizes):
    """A sharded Ulysses plan runs a guided job's branches as one batch of 2
    (`parallel/branches.py`): the plan counts the activations of batch 2 (the dry run's
    peak at batch 2, not at 1) and says why; a CFG-parallel plan stays at batch 1."""
    sizes = wan_sizes["random:wan2.1-t2v-1.3b"]
    shape = JobShape(832, 480, 81)
    # the decode whole on rank 0: the other rank's peak is then its steps' (a split decode's
    # band, counted as the whole decode, would be the larger)
    settings = MemorySettings(80, vae_tiling="off")
    budget = Budget(80 * GIB, "--gpu-memory 80")

    def job(topology: Topology):
        return MemoryPlanner(sizes, settings, budget, topology, shape).plan_job(shape)

    paired = job(Topology("cuda", 2, 2, paired_cfg=True))
    two_calls = job(Topology("cuda", 2, 2))
    one = sizes.activations(JobShape(832, 480, 81, batch=1), 2)
    two = sizes.activations(JobShape(832, 480, 81, batch=2), 2)
    assert two > one
    assert paired.prediction.parts["activations"] == two
    assert two_calls.prediction.parts["activations"] == one
    # the steps' peak of a rank without the encoders (the leader's here is its decode's)
    assert paired.prediction.others - two_calls.prediction.others == two - one
    assert any("one batch of 2" in reason for reason in paired.reasons)
    assert not any("one batch of 2" in reason for reason in two_calls.reasons)
    assert Topology("cuda", 2, 2, paired_cfg=True).batch(uses_cfg=False) == 1
    assert Topology("cuda", 2, 1, cfg_parallel=True).batch() == 1
