"""`paradit workflow run`: the Wan 2.1 T2V fixture runs on 2 ranks it starts itself from the
tiny ComfyUI files and makes the frames of the same request on the tiny-wan preset at world
size 1 (its job.json names the workflow file and its sha256, and the noise levels ComfyUI's
KSampler uses); the Wan 2.2 A14B 4-step fixture runs on a backend given with --server and
gives the job.json `sampling` (and frames) of the `wan2.2-a14b-4step` recipe, the 20-step one
on the same backend splits its 20 levels at step 10, the Z-Image Turbo fixture gives the
`sampling` and image of the `z-image-turbo` recipe; the Wan 2.1 I2V, Wan 2.2 TI2V-5B,
Qwen-Image and HunyuanVideo 1.5 custom-sampler (euler/simple at shift 7) fixtures make the
frames of their requests sent as they are (start images included), and so does the Flux.1
dev graph on a tiny Flux.1 dev (its fixture's files are headers only), and the LTX-2 T2V
audio-video graph (LTXVScheduler's levels as `sigmas`) makes the frames and `audio.wav` of
its request; a --server running another model is refused.

Cost: about 18 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from pathlib import Path

import pytest
from comfy_workflow_files import TINY_FLUX_DEV, write_comfyui
from conftest import run_job

from paradit.backend.tools.workflow import plan_of

sys.path.insert(0, str(Path(__file__).parents[1] / "comfy_workflows"))
from make_fixtures import GRAPHS  # noqa: E402

FIXTURES = Path(__file__).parents[1] / "comfy_workflows"


@pytest.fixture(scope="module")
def comfy(tmp_path_factory) -> Path:
    return write_comfyui(tmp_path_factory.mktemp("ComfyUI"))


def _shifted(t: float, shift: float) -> float:
    """A flow model's noise level at time t under a static shift (ComfyUI's time_snr_shift,
    as ModelSamplingSD3 sets it): shift t / (1 + (shift - 1) t)."""
    return shift * t / (1 + (shift - 1) * t)


def _run(paradit_warm, comfy: Path, workflow: Path, out: Path, *where: str) -> dict:
    """`paradit workflow run` of a fixture (`where`: `--server URL`, or a group of its own);
    its job.json, which names the workflow file by its sha256."""
    result = paradit_warm(
        "workflow", "run", str(workflow), "--out", str(out), "--comfyui-dir", str(comfy), *where
    )
    assert result.returncode == 0, result.stderr
    record = json.loads((out / "job.json").read_text())
    assert record["workflow"]["sha256"] == hashlib.sha256(workflow.read_bytes()).hexdigest()
    return record


def test_wan21_t2v_workflow_runs_as_its_request(comfy, tmp_path, paradit_warm, references):
    workflow = FIXTURES / "wan21_t2v.api.json"
    out = tmp_path / "out"
    record = _run(
        paradit_warm, comfy, workflow, out, "--world-size", "2", "--device", "cpu", "--threads", "1"
    )
    assert record["workflow"]["file"] == str(workflow)
    assert record["workflow"]["format"] == "api"
    plan, _ = plan_of(str(workflow), str(comfy))
    assert {k: record["request"][k] for k in plan.request} == plan.request
    # KSampler's uni_pc at 4 steps: the simple scheduler's levels for 5 steps (every 200th
    # of the 1000 shifted levels from the top, t = 1, 0.8, 0.6, 0.4, 0.2), the next-to-last
    # dropped, then 0 (ComfyUI's simple_scheduler and its KSampler's UniPC rule)
    levels = [_shifted(t, 8.0) for t in (1.0, 0.8, 0.6, 0.4)] + [0.0]
    sampling = record["sampling"]
    assert (sampling["sampler"], sampling["scheduler"], sampling["shift"]) == (
        "uni_pc", "simple", 8.0
    )  # fmt: skip
    assert sampling["sigmas"] == pytest.approx(levels, abs=1e-6)
    assert (out / "video.mp4").stat().st_size > 0
    frames = [(out / "frames" / f"{i:06d}.png").read_bytes() for i in range(5)]
    assert frames == references.frames("tiny-wan", plan.body())


@pytest.fixture(scope="module")
def a14b_backend(comfy, backends):
    plan, _ = plan_of(str(FIXTURES / "wan22_i2v_a14b_4step.api.json"), str(comfy))
    return backends.get(plan.serve["model"], 1, *plan.serve_argv()[2:])


def test_wan22_4step_workflow_samples_as_the_recipe(comfy, tmp_path, paradit_warm, a14b_backend):
    workflow = FIXTURES / "wan22_i2v_a14b_4step.ui.json"
    out = tmp_path / "out"
    record = _run(paradit_warm, comfy, workflow, out, "--server", a14b_backend.url)
    plan, _ = plan_of(str(workflow), str(comfy))
    body = plan.body()
    recipe = {k: body[k] for k in ("prompt", "negative_prompt", "width", "height",
                                   "num_frames", "seed", "image", "loras")}  # fmt: skip
    job, frames = run_job(a14b_backend, {**recipe, "recipe": "wan2.2-a14b-4step"})
    by_recipe = a14b_backend.record(job["id"])
    assert record["sampling"] == by_recipe["sampling"]
    # euler/simple at shift 5: [1, 0.9375, 0.8333, 0.625, 0]; high-noise expert for 0-2
    assert record["sampling"]["sigmas"] == pytest.approx(
        [_shifted(t, 5.0) for t in (1.0, 0.75, 0.5, 0.25)] + [0.0], abs=1e-6
    )
    assert record["sampling"]["experts"] == ["high", "high", "low", "low"]
    assert [f["name"] for f in record["loras"]] == [item["name"] for item in plan.request["loras"]]
    ours = [(out / "frames" / f"{i:06d}.png").read_bytes() for i in range(5)]
    assert ours == frames


def test_a_server_running_another_model_is_refused(comfy, tmp_path, paradit_warm, a14b_backend):
    result = paradit_warm(
        "workflow", "run", str(FIXTURES / "wan21_t2v.api.json"), "--out", str(tmp_path),
        "--comfyui-dir", str(comfy), "--server", a14b_backend.url,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert "the workflow's model is wan2.1_t2v_tiny_fp32.safetensors" in result.stderr
    assert not (tmp_path / "job.json").exists()


def test_z_image_turbo_workflow_samples_as_the_recipe(comfy, tmp_path, paradit_warm, backends):
    workflow = FIXTURES / "z_image_turbo.ui.json"
    plan, _ = plan_of(str(workflow), str(comfy))
    server = backends.get(plan.serve["model"], 1, *plan.serve_argv()[2:])
    out = tmp_path / "out"
    record = _run(paradit_warm, comfy, workflow, out, "--server", server.url)
    assert record["workflow"]["variant"] == "tiny-z-image"
    body = {k: plan.request[k] for k in ("prompt", "width", "height", "seed")}
    job, frames = run_job(server, {**body, "recipe": "z-image-turbo"})
    assert record["sampling"] == server.record(job["id"])["sampling"]
    # res_multistep/simple at shift 3, 8 steps: every 125th shifted level from the top
    assert record["sampling"]["sigmas"] == pytest.approx(
        [_shifted(1 - k / 8, 3.0) for k in range(8)] + [0.0], abs=1e-6
    )
    assert (out / "image.png").read_bytes() == frames[0]


ONE_MODEL = {  # fixture -> (variant, its KSampler's noise levels, output files)
    # uni_pc at 4 steps: the simple scheduler's levels for 5 steps, the next-to-last dropped
    "wan21_i2v": ("tiny-wan-i2v", [_shifted(t, 8.0) for t in (1.0, 0.8, 0.6, 0.4)] + [0.0],
                  [f"frames/{i:06d}.png" for i in range(5)]),
    "wan22_ti2v_5b": ("tiny-wan2.2-ti2v-5b",
                      [_shifted(t, 8.0) for t in (1.0, 0.8, 0.6, 0.4)] + [0.0],
                      [f"frames/{i:06d}.png" for i in range(5)]),
    # euler/simple at 4 steps: every 250th shifted level from the top, then 0
    "qwen_image": ("tiny-qwen-image", [_shifted(1 - k / 4, 3.1) for k in range(4)] + [0.0],
                   ["image.png"]),
    # HunyuanVideo 1.5's custom-sampler graph, its BasicScheduler on ModelSamplingSD3's shift 7
    "hunyuan15_t2v_shift": ("tiny-hunyuanvideo1.5",
                            [_shifted(1 - k / 4, 7.0) for k in range(4)] + [0.0],
                            [f"frames/{i:06d}.png" for i in range(5)]),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(ONE_MODEL))
def test_workflow_runs_as_its_request(comfy, tmp_path, paradit_warm, backends, name):
    """The fixture's UI form run on a backend of its files (--server) makes the frames of its
    request sent as it is (the start image's bytes included: Wan 2.1 I2V through
    CLIPVisionEncode and WanImageToVideo, TI2V-5B through Wan22ImageToVideoLatent), on
    ComfyUI's noise levels (its KSampler's; HunyuanVideo 1.5's BasicScheduler's)."""
    variant, levels, files = ONE_MODEL[name]
    workflow = FIXTURES / f"{name}.ui.json"
    plan, _ = plan_of(str(workflow), str(comfy))
    server = backends.get(plan.serve["model"], 1, *plan.serve_argv()[2:])
    out = tmp_path / "out"
    record = _run(paradit_warm, comfy, workflow, out, "--server", server.url)
    assert record["workflow"]["variant"] == variant
    given = {k: v for k, v in plan.request.items() if k != "image"}
    assert {k: record["request"][k] for k in given} == given
    assert record["sampling"]["sigmas"] == pytest.approx(levels, abs=1e-6)
    _, frames = run_job(server, plan.body())
    assert [(out / f).read_bytes() for f in files] == frames


def test_wan22_20step_workflow_splits_at_its_switch_step(comfy, tmp_path, paradit_warm,
                                                         a14b_backend):  # fmt: skip
    """The 20-step group on the 4-step group's backend (the same two experts): cfg 3.5 on
    both, the high-noise expert for steps 0-9, euler/simple at shift 8."""
    workflow = FIXTURES / "wan22_i2v_a14b_20step.api.json"
    out = tmp_path / "out"
    record = _run(paradit_warm, comfy, workflow, out, "--server", a14b_backend.url)
    plan, _ = plan_of(str(workflow), str(comfy))
    given = {k: v for k, v in plan.request.items() if k != "image"}
    assert {k: record["request"][k] for k in given} == given  # cfg 3.5 on both, switch 10
    assert record["sampling"]["sigmas"] == pytest.approx(
        [_shifted(1 - k / 20, 8.0) for k in range(20)] + [0.0], abs=1e-6
    )
    assert record["sampling"]["experts"] == ["high"] * 10 + ["low"] * 10


def test_flux_dev_workflow_runs_with_its_distilled_guidance(
    comfy, tmp_path, paradit_warm, backends
):
    """The Flux.1 dev fixture's graph on a tiny Flux.1 dev (its fixture names the real
    architecture as headers only, which cannot run): the loaders pointed at the tiny files,
    32x32, 2 steps (the test's edits; the rest is the fixture's). FluxGuidance's 3.5 runs as
    the embedded guidance, one branch; the frames are those of its request sent as it is."""
    graph = GRAPHS["flux_dev"]()
    graph["12"]["inputs"]["unet_name"] = TINY_FLUX_DEV
    graph["11"]["inputs"].update(clip_name1="clip_l_tiny.safetensors",
                                 clip_name2="t5xxl_tiny.safetensors")  # fmt: skip
    graph["10"]["inputs"]["vae_name"] = "flux_ae_tiny.safetensors"
    graph["27"]["inputs"].update(width=32, height=32)
    graph["3"]["inputs"]["steps"] = 2
    workflow = tmp_path / "flux_dev_tiny.json"
    workflow.write_text(json.dumps(graph))
    plan, variant = plan_of(str(workflow), str(comfy))
    assert variant == "tiny-flux"
    server = backends.get(plan.serve["model"], 1, *plan.serve_argv()[2:])
    out = tmp_path / "out"
    record = _run(paradit_warm, comfy, workflow, out, "--server", server.url)
    assert record["request"]["guidance_scale"] == 3.5
    assert record["plan"]["cfg_degree"] == 1 and record["workflow"]["variant"] == variant
    # ModelSamplingFlux at its 1024x1024: mu = max_shift = 1.15, the static shift exp(1.15)
    shift = math.exp(1.15)
    assert record["sampling"]["sigmas"] == pytest.approx([1.0, _shifted(0.5, shift), 0.0])
    _, frames = run_job(server, plan.body())
    assert [(out / "image.png").read_bytes()] == frames


def test_ltx2_workflow_runs_as_its_request_with_its_audio(comfy, tmp_path, paradit_warm, backends):
    """LTX-2's audio-video graph (ComfyUI's LTX-2 T2V template shape), its UI form, on a
    backend of its checkpoint and Gemma file: LTXVScheduler's levels run as the job's
    `sigmas` (euler on them, the source named in job.json), and the frames and the audio
    track are those of its request sent as it is."""
    workflow = FIXTURES / "ltx2_t2v.ui.json"
    plan, variant = plan_of(str(workflow), str(comfy))
    server = backends.get(plan.serve["model"], 1, *plan.serve_argv()[2:])
    out = tmp_path / "out"
    record = _run(paradit_warm, comfy, workflow, out, "--server", server.url)
    assert record["workflow"]["variant"] == variant
    assert record["request"]["sigmas"] == pytest.approx(plan.request["sigmas"], abs=1e-12)
    # LTXVScheduler at its defaults (max_shift 2.05, base_shift 0.95, stretch to terminal 0.1)
    # over the 64x64x17 video latent's 12 tokens, by LTX-Video's published schedule
    mu = 0.95 + 1.1 * (12 - 1024) / 3072
    shifted = [1 / (1 + math.exp(-mu) * (1 / t - 1)) for t in (1.0, 0.75, 0.5, 0.25)]
    levels = [1 - (1 - s) * 0.9 / (1 - shifted[-1]) for s in shifted] + [0.0]
    sampling = record["sampling"]
    assert (sampling["sampler"], sampling["scheduler"]) == ("euler", "manual")
    assert sampling["sigmas"] == pytest.approx(levels, abs=1e-6)
    job, frames = run_job(server, plan.body())
    assert [(out / "frames" / f"{i:06d}.png").read_bytes() for i in range(17)] == frames
    assert (out / "audio.wav").read_bytes() == server.audio(job["id"])
    assert (out / "video.mp4").stat().st_size > 0
