"""The attention kernel switch (`--attention`, backend/kernels.py, backend/parallel/attention.py).

- the rule that picks a kernel and the refusals (pure logic);
- a fake kernel registered in the registry: every attention call of a tiny pipeline's job goes
  through it (none calls torch's SDPA behind its back), for Wan (whose processors dispatch)
  and CogVideoX (whose processors are swapped), and the output equals SDPA's within rounding;
- through real backends: `--attention math` at world sizes 1 and 2 (Ulysses, then CFG) gives
  world size 1's default output within rounding, every rank's attention calls went through
  the math kernel, and /v1/info and job.json say which kernel ran;
- `paradit verify --against-kernel sdpa`: a kernel's distance at world size 1.

Cost: about 19 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from paradit.backend.config import ServeConfig
from paradit.backend.kernels import ATTENTION_CHOICES, KERNELS, choose_kernel

pytestmark = pytest.mark.timeout(400)


def _choose(asked: str, **kwargs):
    kwargs.setdefault("device_type", "cpu")
    kwargs.setdefault("installed", lambda _module: False)
    return choose_kernel(asked, **kwargs)


@pytest.mark.fast
def test_auto_picks_per_device_and_never_a_lossy_kernel():
    assert _choose("auto").kernel == "sdpa"
    everything = {"installed": lambda _module: True}
    assert _choose("auto", device_type="cuda", capability=(9, 0), **everything).kernel == "flash4"
    assert _choose("auto", device_type="cuda", capability=(8, 9), **everything).kernel == "sdpa"
    assert _choose("auto", device_type="cuda", capability=(9, 0)).kernel == "sdpa"  # no flash4
    assert _choose("auto", device_type="cuda", capability=(9, 0), ring=True).kernel == "cudnn"
    for capability in ((8, 0), (8, 9), (9, 0), (10, 0), (12, 0)):
        choice = _choose("auto", device_type="cuda", capability=capability, **everything)
        assert not KERNELS[choice.kernel].lossy
    assert KERNELS["sage"].lossy and [k for k in KERNELS.values() if k.lossy] == [KERNELS["sage"]]


@pytest.mark.fast
@pytest.mark.parametrize("kernel", ["cudnn", "flash", "efficient", "sage", "flash4"])
def test_gpu_kernels_are_refused_on_cpu_with_their_reason(kernel):
    with pytest.raises(ValueError, match=f"--attention {kernel} needs a CUDA device"):
        _choose(kernel, installed=lambda _module: True)
    with pytest.raises(ValueError, match=f"--attention {kernel} needs a CUDA device"):
        ServeConfig(model="tiny-wan", device="cpu", attention=kernel)
    ServeConfig(model="tiny-wan", device="auto", attention=kernel)  # decided on the rank


@pytest.mark.fast
def test_kernels_are_refused_where_they_cannot_run():
    cuda = {"device_type": "cuda", "capability": (9, 0)}
    with pytest.raises(ValueError, match=r"pip install 'paradit\[sage\]'"):
        _choose("sage", **cuda)
    with pytest.raises(ValueError, match=r"pip install 'paradit\[flash4\]'"):
        _choose("flash4", **cuda)
    with pytest.raises(ValueError, match="compute capability >= 9.0; this one is 8.6"):
        _choose("flash4", device_type="cuda", capability=(8, 6), installed=lambda _m: True)
    for kernel in ("sdpa", "math", "efficient", "sage", "flash4"):  # no log-sum-exp
        with pytest.raises(ValueError, match="no log-sum-exp, which ring attention needs"):
            _choose(kernel, ring=True, installed=lambda _m: True, **cuda)
    for kernel in ("cudnn", "flash"):
        assert _choose(kernel, ring=True, **cuda).kernel == kernel
    assert _choose("sage", installed=lambda _m: True, **cuda).kernel == "sage"  # Ulysses, CFG
    with pytest.raises(ValueError, match="--attention must be one of auto, sdpa"):
        ServeConfig(model="tiny-wan", attention="xformers")


@pytest.mark.fast
def test_attention_is_a_flag_of_every_backend_and_a_frontend_setting():
    from paradit.backend.config import frontend_settings

    config = ServeConfig.from_argv(["--model", "tiny-wan", "--attention", "math"])
    assert config.attention == "math"
    assert ServeConfig.from_argv(config.to_argv()) == config
    (setting,) = [s for s in frontend_settings() if s.name == "attention"]
    assert setting.kind == "combo" and setting.choices == ATTENTION_CHOICES
    assert setting.default == "auto"


def _plain_attention(calls: list):
    """Attention as its formula, softmax(Q K^T * scale) V (Vaswani et al. 2017, eq. 1), with
    no SDPA inside; records each call."""

    def attend(q_BSHD, k_BSHD, v_BSHD, attn_mask, scale):
        calls.append(tuple(q_BSHD.shape))
        scale = q_BSHD.shape[-1] ** -0.5 if scale is None else scale
        scores_BHST = torch.einsum("bshd,bthd->bhst", q_BSHD, k_BSHD) * scale
        if attn_mask is not None:
            if attn_mask.dtype == torch.bool:
                scores_BHST = scores_BHST.masked_fill(~attn_mask, float("-inf"))
            else:
                scores_BHST = scores_BHST + attn_mask
        return torch.einsum("bhst,bthd->bshd", scores_BHST.softmax(-1), v_BSHD)

    return attend


def _attention_layers(transformer) -> int:
    return sum(1 for m in transformer.modules() if getattr(m, "processor", None) is not None)


def _run(pipe, key, steps: int = 2):
    from paradit.backend.parallel import attention

    generator = torch.Generator("cpu").manual_seed(3)
    with torch.no_grad():  # the text encoder's attention is not the DiT's: outside the spy
        positive, negative = pipe.encode_prompt("a fox", "blurry")
    with torch.no_grad(), attention.active(key), attention.Spy(key) as spy:
        latents = pipe(
            prompt_embeds=positive,
            negative_prompt_embeds=negative,
            height=32,
            width=32,
            num_frames=5,
            num_inference_steps=steps,
            guidance_scale=5.0,
            generator=generator,
            output_type="latent",
            return_dict=False,
        )[0]
    return latents, spy


@pytest.fixture(scope="module")
def fake_kernel():
    from paradit.backend.parallel import attention

    calls: list = []
    return attention.register_kernel("test-fake", _plain_attention(calls)), calls


@pytest.mark.parametrize("preset", ["tiny-wan", "tiny-cogvideox"])
def test_a_fake_kernel_takes_every_attention_call_of_a_job(preset, fake_kernel):
    from paradit.backend.models.presets import build_preset
    from paradit.backend.parallel import attention

    key, calls = fake_kernel
    pipe = build_preset(preset)
    pipe.set_progress_bar_config(disable=True)
    sdpa = attention.backend_key("sdpa")
    reference, spy = _run(pipe, sdpa)  # today's processors, SDPA
    if preset == "tiny-cogvideox":  # its processors call SDPA themselves: the switch misses
        assert spy.calls == 0 and spy.bypassed > 0
        calls.clear()
        _run(pipe, key, steps=1)
        assert not calls, "CogVideoX's own processors do not dispatch"
    attention.reach(pipe.transformer, "test-fake")
    calls.clear()
    latents, spy = _run(pipe, key)
    transformer_calls = 2 * 2  # 2 steps x (conditional, unconditional); CogVideoX: 2 x 1 batch
    if preset == "tiny-cogvideox":
        transformer_calls = 2
    assert spy.bypassed == 0, "an attention call went to torch's SDPA, not the kernel"
    assert spy.calls == len(calls) == _attention_layers(pipe.transformer) * transformer_calls
    torch.testing.assert_close(latents, reference, rtol=1e-4, atol=1e-5)


def test_a_processor_the_switch_cannot_reach_is_refused():
    from paradit.backend.models.presets import build_preset
    from paradit.backend.parallel import attention

    pipe = build_preset("tiny-hunyuanvideo1.5", components=frozenset({"transformer", "vae"}))
    attention.reach(pipe.transformer, "sdpa")  # SDPA: diffusers' processors as they are
    with pytest.raises(ValueError, match="cannot reach .*AttnProcessor2_0.*use --attention sdpa"):
        attention.reach(pipe.transformer, "math")


@pytest.fixture(scope="module")
def spy_dirs(tmp_path_factory) -> dict[int, Path]:
    """Where each world size's backends write their ranks' attention counts (`Spy`)."""
    return {size: tmp_path_factory.mktemp(f"spy{size}") for size in (1, 2)}


@pytest.mark.parametrize("world_size", [1, 2])
def test_math_kernel_at_world_sizes_1_and_2_equals_world_size_1(backends, spy_dirs, world_size):
    from conftest import REFERENCE_FLAGS

    spy_dir = spy_dirs[world_size]
    reference = backends.get("tiny-wan", 1, *REFERENCE_FLAGS)
    math = backends.start(
        "tiny-wan",
        world_size,
        "--attention",
        "math",
        *REFERENCE_FLAGS,
        env=(("PARADIT_ATTENTION_SPY", str(spy_dir)),),
    ).client
    info = math.info()
    assert info["attention"] == {
        "asked": "math",
        "kernel": "math",
        "lossy": False,
        "reason": "asked for",
    }
    assert reference.info()["attention"]["kernel"] == "sdpa"
    for guidance in (1.0, 5.0):  # world size 2: Ulysses over both ranks, then CFG parallel
        body = {"prompt": "a red fox", "seed": 5, "num_inference_steps": 2}
        body["guidance_scale"] = guidance
        ours = math.wait(math.submit(body), timeout_s=200)
        theirs = reference.wait(reference.submit(body), timeout_s=200)
        assert math.record(ours["id"])["attention"]["kernel"] == "math"
        spies = [json.loads((spy_dir / f"rank{r}.json").read_text()) for r in range(world_size)]
        for spy in spies:
            assert spy["backend"] == "paradit_math" and spy["calls"] > 0 and spy["bypassed"] == 0
        np.testing.assert_allclose(
            math.latents(ours["id"]), reference.latents(theirs["id"]), rtol=1e-3, atol=1e-4
        )


def test_verify_measures_a_kernel_against_sdpa_at_world_size_1(paradit_warm):
    """`paradit verify --attention math --against-kernel sdpa`: both runs at world size 1,
    one per kernel, judged by the measured kernel's thresholds (exact: rounding)."""
    args = ("verify", "--model", "tiny-wan", "--device", "cpu", "--steps", "2", "--frames", "5")
    run = paradit_warm(*args, "--attention", "math", "--against-kernel", "sdpa")
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(run.stdout)
    assert (report["kernel"], report["against_kernel"]) == ("math", "sdpa")
    assert report["verdict"] in ("identical", "equal within rounding"), report
    assert [r["attention"]["kernel"] for r in report["runs"]] == ["sdpa", "math"]
    assert [r["world_size"] for r in report["runs"]] == [1, 1]
    assert set(report["sha256"]) == {"kernel_sdpa", "kernel_math"}
    for refused, needle in (
        (("--attention", "sdpa", "--against-kernel", "sdpa"), "needs --attention naming"),
        (("--world-size", "2", "--attention", "math", "--against-kernel", "sdpa"), "world size 1"),
    ):
        run = paradit_warm(*args, *refused)
        assert run.returncode != 0 and needle in run.stderr, run.stderr[-500:]


@pytest.mark.fast
def test_a_lossy_kernel_is_judged_by_its_own_thresholds():
    from paradit.backend.tools.verify import kernel_tolerance, tolerance_for

    exact = tolerance_for("bfloat16")
    assert kernel_tolerance("math", "bfloat16") == exact
    sage = kernel_tolerance("sage", "bfloat16")
    assert sage.min_psnr < exact.min_psnr and sage.latent_rel_l2 > exact.latent_rel_l2


def test_gpu_check_speed_stage_runs_dry(backends, spy_dirs, tmp_path, monkeypatch):
    """`GPU_CHECK_DRY=1 python docs/gpu_check.py OUT speed`, its served backends taken from
    the pool (the stage's own code otherwise): every setting is run or skipped with its
    reason, and OUT/speed.json has the shape docs/speed.md describes."""
    from conftest import REFERENCE_FLAGS

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "docs"))
    import gpu_check
    import speed_check

    class PoolServed(gpu_check.Served):
        def __init__(self, model, out, *, device, attention, **config):
            compile_flags = ("--compile", config.pop("compile")) if "compile" in config else ()
            assert device == "cpu" and not config, config
            # --compile blocks: the backend tests/parallel/test_compile.py compiled
            flags = (*REFERENCE_FLAGS, "--attention", attention, *compile_flags)
            # auto: the pool's world-size-1 reference; math: the one test_math_kernel used
            env = (("PARADIT_ATTENTION_SPY", str(spy_dirs[1])),) if attention != "auto" else ()
            self.client = backends.start(model, 1, *flags, env=env).client
            self.info = self.client.info()

        def stop(self):  # the pool keeps it
            pass

    monkeypatch.setattr(speed_check, "Served", PoolServed)
    monkeypatch.setenv("GPU_CHECK_DRY", "1")
    monkeypatch.setenv("GPU_CHECK_WORK", str(tmp_path / "work"))
    assert gpu_check.main([str(tmp_path), "speed"]) == 0
    result = json.loads((tmp_path / "speed.json").read_text())
    assert (result["stage"], result["device"], result["dry_run"]) == ("speed", "cpu", True)
    case = result["cases"]["tiny-wan-64x64x5"]
    assert case["bare_diffusers"]["median_step_s"] > 0
    plain = [row for row in case["rows"] if "attention" in row and not row["fp8"]]
    rows = {row["attention"]: row for row in plain if row["compile"] == "off"}
    assert set(rows) == set(ATTENTION_CHOICES)
    compiled = {row["attention"]: row for row in plain if row["compile"] == "blocks"}
    assert set(compiled) == set(ATTENTION_CHOICES)
    assert compiled["auto"]["compile_in_force"] == {"mode": "blocks", "recompiles": 0}
    assert compiled["auto"]["distance_vs_sdpa"]["verdict"] in ("identical", "equal within rounding")
    assert "--attention auto only" in compiled["math"]["skipped"]
    for kernel in ("cudnn", "flash", "efficient", "sage", "flash4"):
        assert "needs a CUDA device" in rows[kernel]["skipped"]
    assert rows["auto"]["kernel"] == "sdpa" and rows["sdpa"]["same_as"] == "auto"
    math = rows["math"]
    assert math["median_step_s"] > 0 and math["ratio_to_bare"] > 0
    assert math["attention_in_force"]["kernel"] == "math"
    for key in ("distance_vs_bare", "distance_vs_sdpa"):
        assert math[key]["verdict"] in ("identical", "equal within rounding"), math[key]
    assert case["best"]["kernel"] in ("sdpa", "math")
    assert result["target"]["met"] is None  # no Wan 14B case in a dry run
