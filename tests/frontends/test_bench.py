"""`paradit bench` runs and reports what it promises; its numbers are not checked here.

The end-to-end test runs the real benchmark (real `paradit serve` groups on CPU/gloo, forked
from the worker's zygote: conftest `warm_local_backends`) with the small SMOKE workload; the
image row's test runs its interleaving on two pool backends (64x64, 2 steps); the others check
the run plan, the CLI routing and the report's arithmetic on made-up results.

Cost: about 13 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from paradit.backend.tools.bench import run as bench_run
from paradit.backend.tools.bench.load import LoadWindow
from paradit.backend.tools.bench.model import DirectResult
from paradit.backend.tools.bench.report import judge_load, render_markdown, summarize
from paradit.backend.tools.bench.run import run_bench
from paradit.backend.tools.bench.throughput import THROUGHPUT, THROUGHPUT_SMOKE, ThroughputRun
from paradit.backend.tools.bench.throughput import render as render_throughput
from paradit.backend.tools.bench.throughput import summarize as summarize_throughput
from paradit.backend.tools.bench.workload import FULL, QUICK, SMOKE, RunResult, RunSpec, plan_runs
from paradit.backend.tools.cli import main

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _check_schema(data: dict) -> None:
    assert isinstance(data["scaling"], list) and data["scaling"]
    for row in data["scaling"]:
        assert isinstance(row["mode"], str)
        assert isinstance(row["world_size"], int) and row["world_size"] >= 1
        assert isinstance(row["step_s"], float) and row["step_s"] > 0
        assert isinstance(row["speedup"], float) and row["speedup"] > 0
    assert isinstance(data["overhead_ratio"], float) and data["overhead_ratio"] > 0
    assert isinstance(data["warm_first_step_ms"], float) and data["warm_first_step_ms"] > 0
    assert isinstance(data["cold_start_s"], float) and data["cold_start_s"] > 0
    params = data["param_bytes_per_rank"]
    assert isinstance(params, dict) and params
    assert all(k.isdigit() and isinstance(v, int) and v > 0 for k, v in params.items())


def _check_phases(phases: dict[str, dict]) -> None:
    """Every row's profiled step (rank 0) splits into phases that add up to it, and the
    collectives each plan makes in a step are there: SMOKE's DiT has 2 blocks + the root
    (3 FSDP units), one transformer call per CFG branch."""
    assert set(phases) == {"1 rank", "sequence x2", "cfg x2"}
    for label, row in phases.items():
        seconds = row["seconds"]
        assert set(seconds) == {"attention", "linear", "gathers", "all_to_alls", "hooks", "other"}
        assert all(value >= 0 for value in seconds.values()), (label, seconds)
        assert sum(seconds.values()) == pytest.approx(row["step_s"], rel=0.01, abs=1e-3)
        assert seconds["attention"] > 0 and seconds["linear"] > 0, (label, seconds)
        assert row["cpu_s"] > 0
    one, seq, cfg = phases["1 rank"], phases["sequence x2"], phases["cfg x2"]
    assert one["calls"]["all_gather"] == one["calls"]["all_to_all"] == 0
    assert one["calls"]["fsdp_pre_forward"] == 0
    assert one["seconds"]["gathers"] == one["seconds"]["all_to_alls"] == 0
    # sequence x2, per step: the two branches as one computing call of batch 2
    # (parallel/branches.py): 3 FSDP units' gathers (each once a step, the root kept gathered
    # from the recording call) + 2 Ulysses attentions x 4 size exchanges + the output gather's
    # size and data = 13 all-gathers; 2 x 4 all-to-alls (q, k, v, out); the recording call
    # runs the root's FSDP hook (4 pre-forwards: the root twice, 2 blocks once)
    assert seq["calls"]["fsdp_pre_forward"] == 4
    assert seq["calls"]["all_gather"] == 13 and seq["calls"]["all_to_all"] == 8
    assert seq["seconds"]["gathers"] > 0 and seq["seconds"]["all_to_alls"] > 0
    assert seq["seconds"]["hooks"] > 0
    # cfg x2: one computing call per rank and step (3 FSDP gathers, the root's kept from the
    # recording call; the output gather over one rank's mesh, the swap of the branches)
    assert cfg["calls"]["all_to_all"] == 0
    assert cfg["calls"]["all_gather"] == 5 and cfg["calls"]["fsdp_pre_forward"] == 4


def test_bench_runs_end_to_end_and_writes_table_plot_json(tmp_path: Path, warm_local_backends):
    json_path, out = tmp_path / "result.json", tmp_path / "out"
    assert run_bench(quick=True, json_path=str(json_path), out_dir=str(out), workload=SMOKE) == 0
    data = json.loads(json_path.read_text())
    _check_schema(data)
    assert data == json.loads((out / "bench.json").read_text())
    assert data["errors"] == []
    modes = {(row["mode"], row["world_size"]) for row in data["scaling"]}
    assert {("sequence", 1), ("sequence", 2), ("cfg", 1), ("cfg", 2)} <= modes
    # world size 2 shards the DiT: each rank holds about half of world size 1's bytes
    params = data["param_bytes_per_rank"]
    assert set(params) == {"1", "2"}
    assert params["2"] <= 0.55 * params["1"]
    plans = {run["label"]: set(run["modes"]) for run in data["memory"]}
    assert plans == {  # Wan decodes in the job: with 2 ranks its VAE tiles are split ("vae")
        "1 rank": set(),
        "sequence x2": {"ulysses", "fsdp", "vae"},
        "cfg x2": {"cfg", "fsdp", "vae"},
    }
    for run in data["memory"]:
        assert len(run["ranks"]) == run["world_size"]
        assert all(rank["peak_rss_bytes"] > rank["dit_param_bytes"] for rank in run["ranks"])
    _check_phases({row["label"]: row["phases"] for row in data["scaling"]})
    table = (out / "bench.md").read_text()
    for heading in ("### Scaling", "### Overhead", "### Latency", "### Memory", "### Targets"):
        assert heading in table
    assert "### Phases of one step" in table and "| sequence x2 |" in table
    assert (out / "bench.png").read_bytes()[:8] == PNG_MAGIC
    assert list((out / "logs").glob("*.log"))


@pytest.mark.fast
def test_cli_bench_calls_run_bench(monkeypatch, tmp_path: Path):
    seen = {}

    def fake(**kwargs):
        seen.update(kwargs)
        return 7

    monkeypatch.setattr(bench_run, "run_bench", fake)
    args = ["bench", "--quick", "--json", str(tmp_path / "b.json"), "--out", str(tmp_path)]
    assert main(args) == 7
    assert seen == {
        "quick": True,
        "json_path": str(tmp_path / "b.json"),
        "out_dir": str(tmp_path),
        "rows": ("scaling",),
        "repeats": None,
    }
    assert main(["bench", "--rows", "scaling, throughput", "--repeats", "5"]) == 7
    assert seen["rows"] == ("scaling", "throughput") and seen["repeats"] == 5
    assert main(["bench", "--rows", "image", "--quick"]) == 7 and seen["rows"] == ("image",)
    assert main(["bench", "--rows", "throughput", "--repeats", "0"]) == 2  # a one-line error


@pytest.mark.fast
def test_bench_refuses_unknown_rows(tmp_path: Path):
    with pytest.raises(ValueError, match="scaling, throughput"):
        run_bench(out_dir=str(tmp_path), rows=("latency",))


@pytest.mark.timeout(600)
def test_bench_throughput_row_end_to_end(tmp_path: Path, warm_local_backends):
    """The row runs real 1-rank and 2-replica backends; its numbers are not checked."""
    out = tmp_path / "out"
    code = run_bench(
        out_dir=str(out), rows=("throughput",), throughput=THROUGHPUT_SMOKE, workload=SMOKE
    )
    assert code == 0
    data = json.loads((out / "bench.json").read_text())
    assert data["errors"] == [] and "scaling" not in data
    section = data["throughput"]
    rows = {row["label"]: row for row in section["rows"]}
    assert set(rows) == {"1 rank", "2 replicas"}
    for row in rows.values():
        assert row["jobs_s"]["median"] > 0 and row["start_s"]["median"] > 0
        assert row["total_s"]["median"] == pytest.approx(
            row["start_s"]["median"] + row["jobs_s"]["median"], abs=0.01
        )
    runs = {run["label"]: run for run in section["runs"]}
    assert runs["1 rank"]["jobs_per_replica"] == {"0": 4}
    two = runs["2 replicas"]
    assert sum(two["jobs_per_replica"].values()) == 4 and set(two["jobs_per_replica"]) == {"0", "1"}
    assert len(two["cpu_s"]) == 2 and all(c > 0 for c in two["cpu_s"])
    assert section["speedup"]["jobs"]["of_medians"] > 0
    assert {"throughput_jobs", "throughput_with_startup"} <= set(data["targets"])
    table = (out / "bench.md").read_text()
    assert "### Throughput" in table and "| 2 replicas |" in table and "### Targets" in table


def _batch_run(label: str, dp: int, repeat: int, start: float, jobs: float) -> ThroughputRun:
    return ThroughputRun(label, dp, dp, repeat, start_s=start, jobs_s=jobs, cpu_s=[1.0] * dp)


@pytest.mark.fast
def test_throughput_summary_medians_spread_and_targets():
    runs = [
        _batch_run("1 rank", 1, 0, 10.0, 80.0),
        _batch_run("2 replicas", 2, 0, 12.0, 40.0),
        _batch_run("2 replicas", 2, 1, 12.0, 50.0),
        _batch_run("1 rank", 1, 1, 10.0, 90.0),
        _batch_run("1 rank", 1, 2, 10.0, 100.0),
        _batch_run("2 replicas", 2, 2, 14.0, 45.0),
    ]
    section = summarize_throughput(THROUGHPUT, runs)
    rows = {row["label"]: row for row in section["rows"]}
    assert rows["1 rank"]["jobs_s"] == {"median": 90.0, "min": 80.0, "max": 100.0}
    assert rows["2 replicas"]["total_s"] == {"median": 59.0, "min": 52.0, "max": 62.0}
    assert rows["2 replicas"]["jobs_per_min"] == pytest.approx(60 * 8 / 45.0, abs=0.01)
    assert rows["2 replicas"]["cores_used"]["max"] == pytest.approx(2.0 / 40.0, abs=1e-3)
    jobs = section["speedup"]["jobs"]
    assert jobs["of_medians"] == 2.0  # 90 / 45
    assert jobs["per_repeat"] == [2.0, 1.8, 2.222]  # paired by repeat
    assert (jobs["min"], jobs["max"]) == (1.8, 2.222)
    assert section["speedup"]["with_startup"]["of_medians"] == pytest.approx(100 / 59, abs=1e-3)
    assert section["targets"]["throughput_jobs"]["met"] is True
    assert section["targets"]["throughput_with_startup"]["met"] is True
    table = "\n".join(render_throughput(section))
    assert "| 2 replicas | 12.0 (12.0-14.0) | 45.0 (40.0-50.0) | 59.0 (52.0-62.0) |" in table
    assert "**2.00x**" in table
    failed = ThroughputRun("2 replicas", 2, 2, 0, error="start failed")
    broken = summarize_throughput(THROUGHPUT, [runs[0], failed])
    assert broken["speedup"]["jobs"]["of_medians"] is None
    assert broken["targets"]["throughput_jobs"]["met"] is None
    assert broken["errors"] == ["throughput 2 replicas #0: start failed"]


@pytest.mark.fast
def test_lora_switch_summary_and_table():
    from paradit.backend.tools.bench.lora_switch import LORA, SwitchRun
    from paradit.backend.tools.bench.lora_switch import render as render_lora
    from paradit.backend.tools.bench.lora_switch import summarize as summarize_lora

    run = SwitchRun(1, start_s=30.0, first_use_s=0.5, dit_bytes=2**30)
    run.apply_s, run.remove_s = [2.0, 1.0, 3.0], [0.5, 0.5, 1.0]
    run.apply_cpu_s = [0.5, 0.4, 0.6]
    run.job_lora_s, run.job_plain_s = [9.0, 8.0, 10.0], [6.0]
    failed = SwitchRun(2, error="start failed")
    section = summarize_lora(LORA, [run, failed], 30 * 2**20)
    (row,) = section["rows"]
    assert row["switch_s"] == {"median": 2.5, "min": 1.5, "max": 4.0}
    assert row["apply_s"]["median"] == 2.0 and row["reload_over_switch"] == 12.0
    assert section["errors"] == ["lora ws2: start failed"]
    table = "\n".join(render_lora(section))
    assert "| 1 | 1.00 | 30.0 | 0.50 | 2.000 (1.000-3.000) | 0.500 (0.400-0.600) |" in table
    assert "| 0.500 (0.400-0.600) | 0.500 (0.500-1.000) | 2.500 (1.500-4.000) |" in table
    assert "| 12x | 9.00 (8.00-10.00) | 6.00 (6.00-6.00) |" in table


@pytest.mark.fast
def test_plan_runs_follow_the_devices():
    labels = [run.label for run in plan_runs(QUICK, 1)]
    assert labels == ["1 rank"]
    runs = plan_runs(QUICK, 2)
    assert [(r.mode, r.world_size, r.sharded) for r in runs] == [
        ("baseline", 1, True),
        ("sequence", 2, True),
        ("cfg", 2, True),
        ("sequence", 2, False),
    ]
    assert runs[1].serve_args() == ("--cfg-degree", "1", "--ulysses-degree", "2")
    assert runs[3].serve_args()[-1] == "--no-shard"
    four = {(r.mode, r.world_size, r.cfg_degree, r.ulysses_degree) for r in plan_runs(QUICK, 4)}
    assert ("cfg+sequence", 4, 2, 2) in four and ("sequence", 4, 1, 4) in four
    assert max(r.world_size for r in plan_runs(QUICK, 16)) == 4
    assert max(r.world_size for r in plan_runs(FULL, 16)) == 8
    assert QUICK.tokens >= 1280 and QUICK.model.hidden >= 512 and QUICK.model.num_layers >= 4


def _result(spec: RunSpec, steps: list[float], total: float, bytes_: int) -> RunResult:
    result = RunResult(
        spec,
        cold_start_s=5.0,
        latency_ms=[40.0, 60.0, 50.0],
        latency_parts_ms={
            "http_submit_ms": 1.0,
            "queue_ms": 0.5,
            "encode_ms": 40.0,
            "broadcast_ms": 2.0,
        },
    )
    result.jobs = [{"step_s": steps, "total_s": total, "write_s": 0.5}]
    result.ranks = [
        {
            "rank": r,
            "pid": 1,
            "dit_param_bytes": bytes_,
            "peak_rss_bytes": 10 * bytes_,
            "gpu_bytes": None,
        }
        for r in range(spec.world_size)
    ]
    return result


def _smoke_summary() -> dict:
    results = [
        _result(RunSpec("baseline", 1), [9.0, 2.0, 2.0, 2.2], 10.5, 1000),
        _result(RunSpec("sequence", 2, 1, 2), [9.0, 1.25, 1.25], 6.5, 500),
        _result(RunSpec("cfg", 2, 2, 1), [9.0, 1.0, 1.0], 5.5, 500),
        _result(RunSpec("sequence", 2, 1, 2, sharded=False), [9.0, 1.0, 1.1], 5.5, 1000),
    ]
    direct = [DirectResult(total_s=9.8, step_s=[9.0, 2.0, 2.0])]
    return summarize(
        workload=SMOKE,
        results=results,
        direct=direct,
        setup_s=0.005,
        device="cpu",
        num_devices=2,
        quick=True,
        load_avg={},
        wall_s=1.0,
    )


def test_summary_arithmetic_and_targets():
    summary = _smoke_summary()
    rows = {(r["mode"], r["world_size"], r["sharded"]): r for r in summary["scaling"]}
    assert rows[("sequence", 1, False)]["step_s"] == 2.0  # first step skipped, median
    assert rows[("sequence", 2, True)]["speedup"] == 1.6
    assert rows[("cfg", 2, True)]["speedup"] == 2.0
    assert rows[("cfg", 2, True)]["efficiency"] == 1.0
    assert rows[("sequence", 2, False)]["speedup"] == pytest.approx(1.905, abs=1e-3)
    assert summary["overhead_ratio"] == pytest.approx(10.0 / 9.8, abs=1e-4)
    assert summary["warm_first_step_ms"] == 55.0  # median 50 ms + 5 ms setup
    assert summary["param_bytes_per_rank"] == {"1": 1000, "2": 500}
    targets = summary["targets"]
    assert targets["cfg_speedup_x2"]["met"] is True
    assert targets["sequence_speedup_x2"]["met"] is False
    assert targets["sequence_speedup_x2"]["met_no_shard"] is True
    assert targets["overhead_ratio"]["met"] is True
    assert targets["warm_first_step_ms"]["met"] is True
    table = render_markdown(summary)
    assert "| sequence | 2 | sharded | 1.25 s (1.25-1.25) | 1.6x (1.6-1.6) | 80% |" in table
    json.dumps(summary)  # JSON-able as a whole


def _phases(step: float, attention: float, gathers: float, all_to_all: int) -> dict:
    seconds = {"attention": attention, "linear": 0.3, "gathers": gathers, "all_to_alls": 0.1}
    seconds |= {"hooks": 0.01, "other": round(step - attention - gathers - 0.41, 4)}
    calls = {"all_gather": 46, "all_to_all": all_to_all, "fsdp_pre_forward": 10}
    return {"step": 4, "step_s": step, "seconds": seconds, "calls": calls, "cpu_s": step}


def test_scaling_rows_pair_the_repeats_and_carry_the_phases():
    """Interleaved repeats: the step is the median of the jobs' medians, the speed-up is
    paired job by job; the profiled phases are the median per phase over the jobs."""
    base = _result(RunSpec("baseline", 1), [9.0, 2.0, 2.0], 10.0, 1000)
    base.jobs += [{"step_s": [9.0, 3.0, 3.0]}, {"step_s": [9.0, 2.5, 2.5]}]
    seq = _result(RunSpec("sequence", 2, 1, 2), [9.0, 1.0, 1.0], 6.0, 500)
    seq.jobs += [{"step_s": [9.0, 2.0, 2.0]}, {"step_s": [9.0, 1.25, 1.25]}]
    for job, (step, attention, gathers) in zip(
        seq.jobs, [(1.0, 0.2, 0.1), (2.0, 0.4, 0.5), (1.25, 0.3, 0.2)], strict=True
    ):
        job["phases"] = _phases(step, attention, gathers, 32)
    summary = summarize(
        workload=SMOKE,
        results=[base, seq],
        direct=[],
        setup_s=0.0,
        device="cpu",
        num_devices=2,
        quick=True,
        load_avg={},
        wall_s=1.0,
    )
    rows = {(r["mode"], r["world_size"]): r for r in summary["scaling"]}
    row = rows[("sequence", 2)]
    assert row["step_s"] == 1.25 and rows[("sequence", 1)]["step_s"] == 2.5
    assert row["step_spread"] == {"median": 1.25, "min": 1.0, "max": 2.0}
    assert row["speedup_spread"] == {"median": 2.0, "min": 1.5, "max": 2.0}  # 2/1, 3/2, 2.5/1.25
    phases = row["phases"]
    assert phases["step_s"] == 1.25
    assert phases["seconds"]["attention"] == 0.3 and phases["seconds"]["gathers"] == 0.2
    assert phases["calls"]["all_to_all"] == 32
    assert rows[("sequence", 1)]["phases"] is None
    table = render_markdown(summary)
    assert "### Phases of one step" in table
    assert "| sequence x2 | 1.250 | 0.300 | 0.300 | 0.200 | 0.100 | 0.010 | 0.340 | 46 / 32 |" in (
        table
    )


def test_a_row_measured_above_the_core_count_gets_no_verdict():
    """The load around each row is recorded; above the core count the row is noisy: its
    figures are shown, its targets are not judged (a quiet row keeps its verdicts)."""
    quiet = LoadWindow(cores=2, start=[0.4, 0.5, 0.6], end=[1.9, 0.9, 0.7])
    busy = LoadWindow(cores=2, start=[0.4, 0.5, 0.6], end=[2.6, 1.2, 0.8])
    assert (quiet.peak, quiet.noisy, busy.peak, busy.noisy) == (1.9, False, 2.6, True)
    assert not LoadWindow(cores=2).noisy  # no reading: nothing to judge by

    summary = _smoke_summary()
    judge_load(summary, {"scaling": quiet.to_json()})
    assert summary["targets"]["cfg_speedup_x2"]["met"] is True
    assert "noisy" not in render_markdown(summary).lower()

    summary = _smoke_summary()
    judge_load(summary, {"scaling": busy.to_json()})
    for target in summary["targets"].values():
        assert target["met"] is None and target["met_no_shard"] is None and target["noisy"]
    table = render_markdown(summary)
    # the figures are still shown
    assert "| sequence | 2 | sharded | 1.25 s (1.25-1.25) | 1.6x (1.6-1.6) | 80% |" in table
    assert table.count("noisy: not judged") == len(summary["targets"])
    assert "- scaling: load average 0.4 -> 2.6 (2 cores) — NOISY" in table
    assert summary["load"]["scaling"]["noisy"] is True
    json.dumps(summary)


@pytest.mark.fast
def test_fast_path_rows_render_medians_and_spread():
    from paradit.backend.tools.bench.fastpaths import SMOKE as FAST_SMOKE
    from paradit.backend.tools.bench.fastpaths import render

    spread = {"median": 0.1, "min": 0.08, "max": 0.2}
    section = {
        "workload": FAST_SMOKE.__dict__,
        "unguided": {
            "runs": {"1 rank": {"step_s": spread}, "2 ranks, spread": {"step_s": spread}},
            "speedup_vs_1_rank": {"2 ranks, spread": {"median": 2.5, "min": 2.0, "max": 3.0}},
        },
        "cache": [
            {
                "world_size": 2,
                "cache": {"method": "first-block", "threshold": 0.9},
                "num_steps": 8,
                "num_skipped": 3,
                "skipped_steps": [1, 2, 4],
                "uncached_step_s": spread,
                "computed_step_s": spread,
                "computed_vs_uncached_step": {"median": 1.01, "min": 0.9, "max": 1.1},
                "denoise_speedup": {"median": 1.5, "min": 1.4, "max": 1.6},
                "frames": {"psnr": 31.25, "max_abs": 40},
                "latent_rel_l2": 0.05,
            }
        ],
    }
    table = "\n".join(render(section))
    assert "| 2 ranks, spread | 100 ms (80-200) | 2.5x (2-3) |" in table
    assert "| 1 rank | 100 ms (80-200) | 1x |" in table
    assert "| steps skipped | 3 of 8 (steps [1, 2, 4]) |" in table
    assert "on 2 ranks (CFG, sharded) | value |" in table
    assert "PSNR 31.2 dB" in table and "trained weights" in table


def _image_job(steps: list[float]) -> dict:
    return {"timings": {"step_s": steps, "sequence_layout": None}}


@pytest.mark.fast
def test_image_row_summary_and_table():
    """The image row's arithmetic on made-up jobs: first step left out, paired speed-ups."""
    from paradit.backend.tools.bench.image import IMAGE, QUICK, ImageWorkload, plans, summarize
    from paradit.backend.tools.bench.image import render as render_image

    assert IMAGE.tokens == 16_384 and (IMAGE.width, IMAGE.height) == (2048, 2048)
    assert QUICK.tokens == 4096 and IMAGE.model == "tiny-qwen-image"
    assert [name for name, _ws, _flags in plans(1)] == ["1 rank"]
    assert {name: flags for name, _ws, flags in plans(8)} == {
        "1 rank": (),
        "CFG 2": ("--cfg-degree", "2", "--ulysses-degree", "1"),
        "Ulysses 2": ("--cfg-degree", "1", "--ulysses-degree", "2"),
    }
    with pytest.raises(ValueError, match="multiple of 16 in 16..2048"):
        ImageWorkload(width=4096)
    with pytest.raises(ValueError, match="true CFG"):
        ImageWorkload(guidance_scale=1.0)
    jobs = {
        "1 rank": [_image_job([9.0, 8.0, 8.0]), _image_job([9.0, 10.0, 10.0])],
        "CFG 2": [_image_job([9.0, 4.0, 4.0]), _image_job([1.0, 4.0, 6.0])],
        "Ulysses 2": [_image_job([9.0, 5.0]), _image_job([9.0, 8.0])],
    }
    world_sizes = {"1 rank": 1, "CFG 2": 2, "Ulysses 2": 2}
    modes = {"1 rank": [], "CFG 2": ["cfg", "fsdp", "vae"], "Ulysses 2": ["ulysses", "fsdp"]}
    section = summarize(IMAGE, jobs, world_sizes, modes)
    runs = {run["label"]: run for run in section["runs"]}
    assert runs["1 rank"]["step_s"] == {"median": 9.0, "min": 8.0, "max": 10.0}
    assert "speedup_vs_1_rank" not in runs["1 rank"]
    assert runs["CFG 2"]["step_s"] == {"median": 4.5, "min": 4.0, "max": 5.0}
    assert runs["CFG 2"]["speedup_vs_1_rank"] == {"median": 2.0, "min": 2.0, "max": 2.0}
    assert runs["CFG 2"]["fraction_of_linear"] == {"median": 1.0, "min": 1.0, "max": 1.0}
    ulysses = runs["Ulysses 2"]["speedup_vs_1_rank"]  # 8/5 and 10/8, paired by repeat
    assert ulysses == {"median": pytest.approx(1.425), "min": 1.25, "max": 1.6}
    assert runs["Ulysses 2"]["fraction_of_linear"]["min"] == 0.625
    assert section["workload"]["tokens"] == 16_384
    table = "\n".join(render_image(section))
    assert "2048x2048, 16,384 image tokens, 4 steps, true CFG 4, 3 interleaved repeats" in table
    assert "| 1 rank | 1 | - | 9 s (8-10) | 1x | - |" in table
    assert "| CFG 2 | 2 | cfg, fsdp, vae | 4.5 s (4-5) | 2x (2-2) | 100% (100-100) |" in table
    assert (
        "| Ulysses 2 | 2 | ulysses, fsdp | 6.5 s (5-8) | 1.43x (1.25-1.6) | 71.2% (62.5-80) |"
        in table
    )
    assert "~46% of linear" in table
    json.dumps(section)


@pytest.mark.timeout(300)
def test_image_row_on_real_backends(backends):
    """The row's interleaving and summary on real jobs (pool backends, 64x64, 2 steps)."""
    from paradit.backend.tools.bench.image import PLANS, SMOKE, interleaved, summarize

    chosen = [PLANS[0], PLANS[2]]  # 1 rank and Ulysses 2
    clients = {name: backends.get(SMOKE.model, ws, *flags) for name, ws, flags in chosen}
    jobs = interleaved(clients, SMOKE.body(), SMOKE.num_repeats)
    assert {name: len(done) for name, done in jobs.items()} == {"1 rank": 1, "Ulysses 2": 1}
    for done in jobs.values():
        assert done[0]["status"] == "succeeded" and len(done[0]["timings"]["step_s"]) == 2
    modes = {name: client.info()["plan"]["modes"] for name, client in clients.items()}
    assert modes["Ulysses 2"][0] == "ulysses" and "cfg" not in modes["Ulysses 2"]
    section = summarize(SMOKE, jobs, {"1 rank": 1, "Ulysses 2": 2}, modes)
    (two,) = [run for run in section["runs"] if run["world_size"] == 2]
    speedup = two["speedup_vs_1_rank"]["median"]
    assert speedup > 0 and two["fraction_of_linear"]["median"] == speedup / 2


class _Event:
    """The fields of a profiler event `split_phases` reads (a FunctionEvent's)."""

    def __init__(self, name: str, total_us: float, parent: _Event | None = None):
        self.name, self.cpu_parent, self.children = name, parent, []
        self.thread = 1
        self.cpu_time_total = total_us
        if parent is not None:
            parent.children.append(self)

    @property
    def self_cpu_time_total(self) -> float:
        return self.cpu_time_total - sum(child.cpu_time_total for child in self.children)


@pytest.mark.fast
def test_phases_count_each_event_once_in_its_nearest_named_phase():
    from paradit.backend.runtime.phases import count_calls, split_phases

    block = _Event("WanTransformerBlock", 900_000)  # not named: its own time is "other"
    pre = _Event("FSDP::pre_forward (blocks.0)", 300_000, block)
    gather = _Event("FSDP::all_gather (blocks.0)", 250_000, pre)  # inside a hook: a gather
    base = _Event("c10d::_allgather_base_", 200_000, gather)
    copy_out = _Event("aten::copy_", 30_000, gather)
    ulysses = _Event("TemplatedUlyssesAnythingAttention", 400_000, block)
    a2a = _Event("c10d::alltoall_base_", 50_000, ulysses)
    sdpa = _Event("aten::_scaled_dot_product_flash_attention_for_cpu", 300_000, ulysses)
    sizes = _Event("c10d::allgather_", 20_000, ulysses)  # the size exchange: a gather
    linear = _Event("aten::linear", 100_000, block)
    addmm = _Event("aten::addmm", 90_000, linear)
    transfer = _Event("aten::addmm", 200_000)  # on another thread: not the step's
    transfer.thread = 7
    events = [block, pre, gather, base, copy_out, ulysses, a2a, sdpa, sizes, linear, addmm]
    events.append(transfer)
    seconds = split_phases(events, step_s=1.0)
    assert seconds == {
        "attention": 0.3,
        "linear": 0.1,
        "gathers": 0.27,  # the FSDP gather with its copy-out, and the size exchange
        "all_to_alls": 0.08,  # Ulysses without its kernel and its size exchange
        "hooks": 0.05,  # the pre-forward without the gather it waits for
        "other": 0.2,  # the block's own time and the 0.1 s outside the block
    }
    assert sum(seconds.values()) == pytest.approx(1.0)
    assert count_calls(events) == {
        "all_gather": 2,
        "all_to_all": 1,
        "all_reduce": 0,
        "broadcast": 0,
        "fsdp_pre_forward": 1,
    }
