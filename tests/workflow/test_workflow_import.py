"""`paradit workflow import`: each fixture of tests/comfy_workflows/ (ComfyUI's API and UI
formats) maps to its request and serve settings, every field checked; the two formats of a
graph give the same; each refusal (unknown node, a sampler or scheduler paradit lacks, a
missing file, two models, LTX-2 at another frame rate or without its audio track, ...) exits 2
with one line naming the node; the UI format's
bypassed nodes, reroutes, primitives, notes and (nested) subgraphs are read as ComfyUI's
frontend reads them; a switch reads only its branch, primitives and math expressions give
widget values; a graph without ModelSampling or FluxGuidance gets ComfyUI's defaults for the
architecture (the families' comfyui.json).

Cost: about 3 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import copy
import json
import math
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "comfy_workflows"))

from comfy_workflow_files import START_IMAGE, WIDE_IMAGE, write_comfyui  # noqa: E402
from make_fixtures import GRAPHS, to_ui  # noqa: E402

from paradit.backend.tools.cli import main  # noqa: E402
from paradit.backend.tools.workflow import plan_of  # noqa: E402
from paradit.backend.workflow.nodes import docs_table  # noqa: E402

pytestmark = pytest.mark.fast

FIXTURES = Path(__file__).parents[1] / "comfy_workflows"
WAN_NEGATIVE = "static, blurry, low quality, worst quality, deformed"
FLUX_SHIFT = 3.158192909689768
"""exp(1.15): ComfyUI's ModelSamplingFlux at 1024x1024 (4096 tokens) sets mu = max_shift =
1.15 and spaces the levels as exp(mu) / (exp(mu) + 1/t - 1), which is the static shift
s t / (1 + (s - 1) t) with s = exp(mu) (ComfyUI's flux_time_shift and time_snr_shift)."""


def ltxv_levels(steps: int, high: float, base: float, terminal: float, tokens: int) -> list:
    """LTXVScheduler's levels (stretch on) by LTX-Video's published schedule, as ComfyUI's
    node documents its inputs: t = 1, 1 - 1/steps, ..., 1/steps; mu linear in the video
    latent's tokens from base_shift at 1024 to max_shift at 4096; sigma = e^mu / (e^mu + 1/t
    - 1); 1 - sigma scaled so that the last level is `terminal`; then 0."""
    mu = base + (high - base) * (tokens - 1024) / 3072
    sigmas = [1 / (1 + math.exp(-mu) * (1 / t - 1)) for t in (1 - k / steps for k in range(steps))]
    return [1 - (1 - s) * (1 - terminal) / (1 - sigmas[-1]) for s in sigmas] + [0.0]


LTX2_SIGMAS = ltxv_levels(4, 2.05, 0.95, 0.1, 3 * 2 * 2)
"""The LTX-2 fixture's LTXVScheduler: 4 steps over its 64x64x17 video latent's 12 tokens (3
latent frames of 2x2: ComfyUI counts the video part of the joined audio-video latent)."""


def _wan(prompt: str, seed: int, **more) -> dict:
    return {"prompt": prompt, "negative_prompt": WAN_NEGATIVE, "width": 32, "height": 32,
            "num_frames": 5, "seed": seed, **more}  # fmt: skip


UMT5 = ["text_encoders/umt5_tiny.safetensors"]
WAN21_VAE = ["vae/wan_2.1_vae_tiny.safetensors"]
A14B = "diffusion_models/wan2.2_i2v_{}_noise_14B_tiny_fp32.safetensors"
EXPECTED = {  # name -> (variant, request, serve settings relative to models/ or input/)
    "wan21_t2v": (
        "tiny-wan",
        _wan("a red fox running through snow", 3, num_inference_steps=4, guidance_scale=6.0,
             sampler="uni_pc", scheduler="simple", shift=8.0),
        {"model": "diffusion_models/wan2.1_t2v_tiny_fp32.safetensors", "text_encoders": UMT5,
         "vaes": WAN21_VAE, "image_encoders": [], "lora_dirs": []},
    ),
    "wan21_i2v": (
        "tiny-wan-i2v",
        _wan("the fox turns its head", 4, num_inference_steps=4, guidance_scale=6.0,
             sampler="uni_pc", scheduler="simple", shift=8.0, image=START_IMAGE),
        {"model": "diffusion_models/wan2.1_i2v_480p_tiny_fp32.safetensors",
         "text_encoders": UMT5, "vaes": WAN21_VAE,
         "image_encoders": ["clip_vision/clip_vision_tiny.safetensors"], "lora_dirs": []},
    ),
    "wan22_i2v_a14b_4step": (
        "tiny-wan2.2-i2v-a14b pair",
        _wan("the fox jumps over a log", 5, num_inference_steps=4, guidance_scale=1.0,
             guidance_scale_low=1.0, sampler="euler", scheduler="simple", shift=5.0,
             switch_step=2, image=START_IMAGE,
             loras=[{"name": "lightx2v_i2v_4steps_high_noise_tiny.safetensors", "high": 1.0,
                     "low": 0.0},
                    {"name": "lightx2v_i2v_4steps_low_noise_tiny.safetensors", "high": 0.0,
                     "low": 1.0}]),
        {"model": f"{A14B.format('high')},{A14B.format('low')}", "text_encoders": UMT5,
         "vaes": WAN21_VAE, "image_encoders": [], "lora_dirs": ["loras"]},
    ),
    "wan22_i2v_a14b_20step": (
        "tiny-wan2.2-i2v-a14b pair",
        _wan("the fox jumps over a log", 5, num_inference_steps=20, guidance_scale=3.5,
             guidance_scale_low=3.5, sampler="euler", scheduler="simple", shift=8.0,
             switch_step=10, image=START_IMAGE),
        {"model": f"{A14B.format('high')},{A14B.format('low')}", "text_encoders": UMT5,
         "vaes": WAN21_VAE, "image_encoders": [], "lora_dirs": []},
    ),
    "wan22_ti2v_5b": (
        "tiny-wan2.2-ti2v-5b",
        _wan("a paper boat on a pond", 6, num_inference_steps=4, guidance_scale=5.0,
             sampler="uni_pc", scheduler="simple", shift=8.0, image=START_IMAGE),
        {"model": "diffusion_models/wan2.2_ti2v_5B_tiny_fp32.safetensors",
         "text_encoders": UMT5, "vaes": ["vae/wan2.2_vae_tiny.safetensors"],
         "image_encoders": [], "lora_dirs": []},
    ),
    "flux_dev": (
        "flux.1-dev",
        {"prompt": "a cup of coffee on a wooden table", "negative_prompt": "", "width": 1024,
         "height": 1024, "num_frames": 1, "num_inference_steps": 20, "guidance_scale": 3.5,
         "seed": 7, "sampler": "euler", "scheduler": "simple", "shift": FLUX_SHIFT,
         "flow_levels": 10000},  # ModelSamplingFlux's table
        {"model": "diffusion_models/flux1-dev.safetensors",
         "text_encoders": ["text_encoders/clip_l.safetensors",
                           "text_encoders/t5xxl_fp16.safetensors"],
         "vaes": ["vae/ae.safetensors"], "image_encoders": [], "lora_dirs": []},
    ),
    "qwen_image": (
        "tiny-qwen-image",
        {"prompt": 'a shop sign that reads "paradit"', "negative_prompt": "", "width": 32,
         "height": 32, "num_frames": 1, "num_inference_steps": 4, "guidance_scale": 2.5,
         "seed": 8, "sampler": "euler", "scheduler": "simple", "shift": 3.1,
         "cfg_mode": "plain"},  # KSampler's plain CFG, not the pipeline's rescale
        {"model": "diffusion_models/qwen_image_tiny_bf16.safetensors",
         "text_encoders": ["text_encoders/qwen_2.5_vl_tiny.safetensors"],
         "vaes": ["vae/qwen_image_vae_tiny.safetensors"], "image_encoders": [],
         "lora_dirs": []},
    ),
    "z_image_turbo": (
        "tiny-z-image",
        {"prompt": "a lighthouse at dusk", "negative_prompt": "", "width": 32, "height": 32,
         "num_frames": 1, "num_inference_steps": 8, "guidance_scale": 1.0, "seed": 9,
         "sampler": "res_multistep", "scheduler": "simple", "shift": 3.0},
        {"model": "diffusion_models/z_image_turbo_tiny_bf16.safetensors",
         "text_encoders": ["text_encoders/qwen_3_tiny.safetensors"],
         "vaes": ["vae/ae_tiny.safetensors"], "image_encoders": [], "lora_dirs": []},
    ),
    "ltx2_t2v": (
        "all-in-one tiny-ltx2 (DiT, connectors, vae, audio_vae, vocoder)",
        {"prompt": "a drummer on a rooftop at sunset",
         "negative_prompt": "blurry, low quality, still frame", "width": 64, "height": 64,
         "num_frames": 17, "num_inference_steps": 4, "guidance_scale": 4.0, "seed": 10,
         "sampler": "euler", "sigmas": pytest.approx(LTX2_SIGMAS, abs=1e-12)},
        {"model": "checkpoints/ltx-2-19b-dev_tiny.safetensors",
         "text_encoders": ["text_encoders/gemma_3_tiny.safetensors"], "vaes": [],
         "image_encoders": [], "lora_dirs": []},
    ),
    "hunyuan15_t2v_shift": (
        "tiny-hunyuanvideo1.5",
        {"prompt": "a paper airplane gliding between towers", "negative_prompt": "",
         "width": 32, "height": 32, "num_frames": 5, "num_inference_steps": 4,
         "guidance_scale": 6.0, "seed": 11, "sampler": "euler", "scheduler": "simple",
         "shift": 7.0},
        {"model": "diffusion_models/hunyuanvideo1.5_480p_t2v_fp32.safetensors",
         "text_encoders": ["text_encoders/qwen_2.5_vl_hunyuan15_tiny.safetensors",
                           "text_encoders/byt5_small_glyphxl_tiny.safetensors"],
         "vaes": ["vae/hunyuanvideo15_vae_tiny.safetensors"], "image_encoders": [],
         "lora_dirs": []},
    ),
}  # fmt: skip


EXPECTED["hunyuan15_t2v"] = (  # the template's shape: BasicScheduler on the loader's model
    EXPECTED["hunyuan15_t2v_shift"][0],
    # shift 7: ComfyUI's HunyuanVideo 1.5 default (supported_models.py HunyuanVideo15
    # sampling_settings, families/hunyuan_video15/comfyui.json), the levels of the bare
    # model BasicScheduler takes; the rest as hunyuan15_t2v_shift
    EXPECTED["hunyuan15_t2v_shift"][1],
    EXPECTED["hunyuan15_t2v_shift"][2],
)
REFUSED_FIXTURES = {  # name -> (API node id, node type, the refusal after the node)
    "hunyuan15_t2v_easycache": (
        "105", "EasyCache",
        "active (not bypassed): EasyCache skips steps by its own measure of change",
    ),
}  # fmt: skip
"""Template-shaped graphs paradit cannot run as ComfyUI runs them: HunyuanVideo 1.5's
template with its EasyCache node switched on (the template ships it bypassed)."""


@pytest.fixture(scope="module")
def comfy(tmp_path_factory) -> Path:
    """A ComfyUI folder with every file the fixtures name."""
    return write_comfyui(tmp_path_factory.mktemp("ComfyUI"))


def _absolute(comfy: Path, request: dict, serve: dict) -> tuple[dict, dict]:
    """The expected request and serve settings with their files under `comfy`."""
    models = comfy / "models"
    request = dict(request)
    if "image" in request:
        request["image"] = str(comfy / "input" / request["image"])
    serve = {
        "model": ",".join(str(models / p) for p in serve["model"].split(",")),
        **{k: [str(models / p) for p in serve[k]] for k in serve if k != "model"},
    }
    return request, serve


def test_the_docs_list_the_nodes_as_declared():
    page = (Path(__file__).parents[2] / "docs" / "workflows.md").read_text()
    assert docs_table() in page


def test_every_graph_has_its_fixture_and_expectation():
    assert not set(EXPECTED) & set(REFUSED_FIXTURES)
    assert set(EXPECTED) | set(REFUSED_FIXTURES) == set(GRAPHS)
    for name, graph in GRAPHS.items():  # the committed files are what make_fixtures writes
        assert json.loads((FIXTURES / f"{name}.api.json").read_text()) == graph()
        assert json.loads((FIXTURES / f"{name}.ui.json").read_text()) == to_ui(graph())


@pytest.mark.parametrize("form", ["api", "ui"])
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_maps_to_its_request(comfy, name, form):
    plan, variant = plan_of(str(FIXTURES / f"{name}.{form}.json"), str(comfy))
    expected_variant, request, serve = EXPECTED[name]
    request, serve = _absolute(comfy, request, serve)
    assert plan.request == request
    assert plan.serve == serve
    assert variant == expected_variant
    assert plan.workflow["format"] == form
    graph = json.loads((FIXTURES / f"{name}.{form}.json").read_text())
    nodes = len(graph) if form == "api" else len(graph["nodes"]) - 1  # the UI's note
    assert len(plan.lines) == nodes  # one line per node


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_ui_and_api_forms_give_the_same_job(comfy, name):
    api, _ = plan_of(str(FIXTURES / f"{name}.api.json"), str(comfy))
    ui, _ = plan_of(str(FIXTURES / f"{name}.ui.json"), str(comfy))
    assert (ui.request, ui.serve) == (api.request, api.serve)
    assert [(t, text) for _, t, text in ui.lines] == [(t, text) for _, t, text in api.lines]


@pytest.mark.parametrize("name", sorted(REFUSED_FIXTURES))
def test_refused_fixture_is_refused_alike_in_both_forms(comfy, capsys, name):
    """The UI form names the same node (by its UI id: to_ui numbers the nodes in the API
    form's order) with the same one line."""
    api_id, node_type, reason = REFUSED_FIXTURES[name]
    ui_id = str(list(GRAPHS[name]()).index(api_id) + 1)
    errors = {}
    for form, node_id in (("api", api_id), ("ui", ui_id)):
        path = str(FIXTURES / f"{name}.{form}.json")
        assert main(["workflow", "import", path, "--comfyui-dir", str(comfy)]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1, err
        head = f"error: node {node_id} ({node_type}): "
        assert err.startswith(head + reason), err
        errors[form] = err.removeprefix(head)
    assert errors["api"] == errors["ui"]


def test_an_all_in_one_checkpoint_brings_its_clip_and_vae(comfy, tmp_path):
    """CheckpointLoaderSimple's three outputs: the file is --model alone (its CLIP and VAE
    are its own); a CLIP from another checkpoint is a second model, refused."""
    from comfy_files import write_all_in_one

    from paradit.backend.models.presets import build_preset

    ckpt = comfy / "models" / "checkpoints" / "flux1-tiny-all-in-one.safetensors"
    ckpt.parent.mkdir(exist_ok=True)
    write_all_in_one(ckpt, build_preset("tiny-flux"))
    graph = {
        "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": ckpt.name}},
        "30": {"class_type": "ModelSamplingFlux", "inputs": {
            "model": ["4", 0], "max_shift": 1.15, "base_shift": 0.5, "width": 32,
            "height": 32}},
        "6": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["4", 1], "text": "a kite"}},
        "7": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["4", 1], "text": "rain"}},
        "5": {"class_type": "EmptyLatentImage", "inputs": {
            "width": 32, "height": 32, "batch_size": 1}},
        "3": {"class_type": "KSampler", "inputs": {
            "model": ["30", 0], "positive": ["6", 0], "negative": ["7", 0],
            "latent_image": ["5", 0], "seed": 1, "steps": 3, "cfg": 3.5,
            "sampler_name": "dpmpp_2m", "scheduler": "sgm_uniform", "denoise": 1.0}},
        "8": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["4", 2]}},
        "9": {"class_type": "SaveImage", "inputs": {"images": ["8", 0],
                                                    "filename_prefix": "kite"}},
    }  # fmt: skip
    path = tmp_path / "checkpoint.json"
    path.write_text(json.dumps(graph))
    plan, variant = plan_of(str(path), str(comfy))
    # ModelSamplingFlux at 32x32 (4 tokens): mu = 0.5 + (1.15 - 0.5) (4 - 256) / 3840
    mu = 0.5 + 0.65 * (4 - 256) / 3840
    assert plan.request == {
        "prompt": "a kite", "negative_prompt": "rain", "width": 32, "height": 32,
        "num_frames": 1, "num_inference_steps": 3, "guidance_scale": 3.5, "seed": 1,
        "sampler": "dpmpp_2m", "scheduler": "sgm_uniform", "shift": pytest.approx(math.exp(mu)),
        "flow_levels": 10000,  # ModelSamplingFlux's table
    }  # fmt: skip
    assert plan.serve == {"model": str(ckpt), "text_encoders": [], "vaes": [],
                          "image_encoders": [], "lora_dirs": []}  # fmt: skip
    assert variant.startswith("all-in-one tiny-flux")
    other = comfy / "models" / "checkpoints" / "other.safetensors"
    shutil.copy(ckpt, other)
    graph["40"] = {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": other.name}}
    graph["7"]["inputs"]["clip"] = ["40", 1]
    graph["6"]["inputs"]["clip"] = ["40", 1]
    path.write_text(json.dumps(graph))
    with pytest.raises(ValueError, match=r"^node 40 \(CheckpointLoaderSimple\): a second model"):
        plan_of(str(path), str(comfy))


def test_import_prints_a_line_per_node_and_json(comfy, capsys):
    path = str(FIXTURES / "wan22_i2v_a14b_4step.api.json")
    assert main(["workflow", "import", path, "--comfyui-dir", str(comfy)]) == 0
    out = capsys.readouterr().out
    assert "node 57 KSamplerAdvanced     seed 5, 4 steps (runs 0 to 2), cfg 1, euler/simple" in out
    assert "node 60 LoraLoaderModelOnly  lightx2v_i2v_4steps_high_noise_tiny.safetensors" in out
    assert "model:    tiny-wan2.2-i2v-a14b pair" in out
    assert (
        "samplers: euler, uni_pc, uni_pc_bh2, dpmpp_2m, lcm, res_multistep, euler_ancestral, "
        "gradient_estimation\n" in out
    )
    serve = next(line for line in out.splitlines() if line.startswith("serve:"))
    assert "--lora-dir " + str(comfy / "models" / "loras") in serve
    assert main(["workflow", "import", path, "--comfyui-dir", str(comfy), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["request"]["switch_step"] == 2 and report["variant"].endswith("pair")
    assert (
        report["workflow"]["sha256"]
        == __import__("hashlib").sha256(Path(path).read_bytes()).hexdigest()
    )
    low = "seed 0, 4 steps (runs 2 to 4), cfg 1, euler/simple"
    assert {"id": "58", "type": "KSamplerAdvanced", "mapped": low} in report["nodes"]


def test_the_comfyui_folder_is_found_above_the_workflow(comfy, tmp_path, capsys):
    inside = comfy / "user" / "default" / "workflows" / "fox.json"
    inside.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(FIXTURES / "wan21_t2v.ui.json", inside)
    assert main(["workflow", "import", str(inside)]) == 0
    assert f"models:   {comfy / 'models'}" in capsys.readouterr().out
    models = ["workflow", "import", str(inside), "--comfyui-dir", str(comfy / "models")]
    assert main(models) == 0  # or its models folder
    assert f"models:   {comfy / 'models'}" in capsys.readouterr().out
    outside = tmp_path / "fox.json"
    shutil.copy(FIXTURES / "wan21_t2v.ui.json", outside)
    assert main(["workflow", "import", str(outside)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "give --comfyui-dir DIR" in err


# -- refusals ---------------------------------------------------------------------------------


def _edit(name: str, *changes) -> dict:
    graph = GRAPHS[name]()
    for change in changes:
        change(graph)
    return graph


def _set(node: str, **inputs):
    def change(graph: dict) -> None:
        graph[node]["inputs"].update(inputs)

    return change


def _add(node: str, item: dict):
    def change(graph: dict) -> None:
        graph[node] = item

    return change


def _second_pass(graph: dict) -> None:
    """A KSampler on the first one's output (a hires-fix style second pass)."""
    graph["4"] = copy.deepcopy(graph["3"])
    graph["4"]["inputs"]["latent_image"] = ["3", 0]
    graph["8"]["inputs"]["samples"] = ["4", 0]


def _custom_sampler(graph: dict, guider: str = "CFGGuider") -> None:
    """KSampler node 3 as SamplerCustomAdvanced with RandomNoise, a guider, KSamplerSelect
    and BasicScheduler, as ComfyUI's custom-sampler templates build it."""
    k = graph.pop("3")["inputs"]
    if guider == "CFGGuider":
        graph["20"] = {"class_type": "CFGGuider", "inputs": {
            "model": k["model"], "positive": k["positive"], "negative": k["negative"],
            "cfg": k["cfg"]}}  # fmt: skip
    else:
        graph["20"] = {"class_type": "BasicGuider", "inputs": {
            "model": k["model"], "conditioning": k["positive"]}}  # fmt: skip
    graph["21"] = {"class_type": "RandomNoise", "inputs": {"noise_seed": k["seed"]}}
    graph["22"] = {"class_type": "KSamplerSelect", "inputs": {"sampler_name": k["sampler_name"]}}
    graph["23"] = {"class_type": "BasicScheduler", "inputs": {
        "model": k["model"], "scheduler": k["scheduler"], "steps": k["steps"],
        "denoise": k["denoise"]}}  # fmt: skip
    graph["3"] = {"class_type": "SamplerCustomAdvanced", "inputs": {
        "noise": ["21", 0], "guider": ["20", 0], "sampler": ["22", 0], "sigmas": ["23", 0],
        "latent_image": k["latent_image"]}}  # fmt: skip


def _custom(change):
    def edit(graph: dict) -> None:
        _custom_sampler(graph)
        change(graph)

    return edit


def _scheduler_on_another_shift(graph: dict) -> None:
    graph["24"] = {"class_type": "ModelSamplingSD3", "inputs": {"model": ["37", 0], "shift": 5.0}}
    graph["23"]["inputs"]["model"] = ["24", 0]


REFUSALS = {  # case -> (graph, node id, node type, words of the reason)
    "a second ModelSampling node on one model": (
        _edit("qwen_image", _set("3", model=["67", 0]), _add("67", {
            "class_type": "ModelSamplingAuraFlow", "inputs": {"model": ["66", 0], "shift": 3.1}})),
        "67", "ModelSamplingAuraFlow", "a second ModelSampling node on one model (after node 66)",
    ),
    "custom sampler's sampler paradit lacks": (
        _edit("wan21_t2v", _custom(_set("22", sampler_name="dpmpp_sde"))),
        "22", "KSamplerSelect", "sampler dpmpp_sde: paradit runs the samplers",
    ),

    "CFGNorm before the sampler's CFG": (  # its post-CFG form maps: test_workflow_cfg_norm
        _edit("qwen_image",
              _add("98", {"class_type": "CFGNorm", "inputs": {"model": ["66", 0],
                                                              "strength": 1.0,
                                                              "pre_cfg": True}}),
              _set("3", model=["98", 0])),
        "98", "CFGNorm", "pre_cfg true rescales the combined prediction before",
    ),
    "unknown node": (
        _edit("wan21_t2v", _add("99", {"class_type": "WanVideoSampler", "inputs": {}})),
        "99", "WanVideoSampler", "not a node paradit maps",
    ),
    "unsupported sampler": (
        _edit("wan21_t2v", _set("3", sampler_name="dpmpp_sde")),
        "3", "KSampler", "sampler dpmpp_sde: paradit runs the samplers euler, uni_pc",
    ),
    "unsupported scheduler": (
        _edit("wan21_t2v", _set("3", scheduler="karras")),
        "3", "KSampler", "scheduler karras",
    ),
    "missing model file": (
        _edit("wan21_t2v", _set("37", unet_name="wan2.1_t2v_14B_bf16.safetensors")),
        "37", "UNETLoader", "wan2.1_t2v_14B_bf16.safetensors: no such file in",
    ),
    "missing LoRA file": (
        _edit("wan22_i2v_a14b_4step", _set("61", lora_name="gone.safetensors")),
        "61", "LoraLoaderModelOnly", "gone.safetensors: no such file in",
    ),
    "missing image": (
        _edit("wan21_i2v", _set("52", image="cat.png")),
        "52", "LoadImage", "cat.png: no such file in",
    ),
    "crop none on a non-square image": (
        _edit("wan21_i2v", _set("52", image=WIDE_IMAGE)),
        "51", "CLIPVisionEncode", "crop none stretches the 24x32 image to a square",
    ),
    "two models": (
        _edit("wan22_i2v_a14b_4step",
              _set("56", unet_name="wan2.1_t2v_tiny_fp32.safetensors")),
        "56", "UNETLoader", "two different models in one graph",
    ),
    "two outputs": (
        _edit("wan21_t2v", _add("90", {"class_type": "PreviewImage",
                                       "inputs": {"images": ["8", 0]}})),
        "90", "PreviewImage", "a second output node",
    ),
    "partial denoise": (
        _edit("wan21_t2v", _set("3", denoise=0.6)), "3", "KSampler", "denoise 0.6",
    ),
    "a batch": (
        _edit("wan21_t2v", _set("40", batch_size=2)),
        "40", "EmptyHunyuanLatentVideo", "batch_size 2",
    ),
    "fp8 cast on loading": (
        _edit("wan21_t2v", _set("37", weight_dtype="fp8_e4m3fn")),
        "37", "UNETLoader", "weight_dtype fp8_e4m3fn",
    ),
    "cfg with FluxGuidance": (
        _edit("flux_dev", _set("3", cfg=3.0)), "3", "KSampler", "cfg 3 with FluxGuidance",
    ),
    "Flux dev without FluxGuidance, cfg 3": (
        _edit("flux_dev", _set("3", positive=["6", 0], cfg=3.0)),
        "3", "KSampler", "cfg 3 on flux.1-dev, which embeds its guidance (3.5 where no "
        "FluxGuidance sets it)",
    ),
    "one expert with ModelSampling, the other without": (
        _edit("wan22_i2v_a14b_4step", _set("58", model=["56", 0])),
        "54", "ModelSamplingSD3", "shift none where the high-noise expert's is 5",
    ),
    "experts switch at two steps": (
        _edit("wan22_i2v_a14b_4step", _set("58", start_at_step=3)),
        "58", "KSamplerAdvanced", "starts at step 3 where the first stops at 2",
    ),
    "experts on two shifts": (
        _edit("wan22_i2v_a14b_4step", _set("55", shift=8.0)),
        "55", "ModelSamplingSD3", "shift 8 where the high-noise expert's is 5",
    ),
    "a second pass": (
        _edit("wan21_t2v", _second_pass), "4", "KSampler", "latent_image comes from node 3",
    ),
    "one model for both samplers": (
        _edit("wan22_i2v_a14b_4step", _set("58", model=["54", 0])),
        "58", "KSamplerAdvanced", "both samplers run one model",
    ),
    # LTX-2's audio-video graph: what paradit cannot honour, named by its node
    "LTX-2 at a frame rate it does not take": (
        _edit("ltx2_t2v", _set("22", frame_rate=75.0)),
        "22", "LTXVConditioning", "frame_rate 75: paradit runs LTX-2 at 1 to 60 frames a second",
    ),
    "LTX-2's prompt at another frame rate than its audio": (
        _edit("ltx2_t2v", _set("22", frame_rate=25.0)),
        "44", "LTXVEmptyLatentAudio", "frame_rate 24 where the prompt's LTXVConditioning says 25",
    ),
    "LTX-2's audio at another frame rate": (
        _edit("ltx2_t2v", _set("44", frame_rate=25)),
        "50", "CreateVideo", "fps 24: the audio track lasts the frames at 25 fps",
    ),
    "LTX-2 without its frame rate": (
        _edit("ltx2_t2v", _set("14", positive=["6", 0], negative=["7", 0])),
        "15", "SamplerCustomAdvanced", "a prompt without LTXVConditioning's frame rate",
    ),
    "LTX-2 without its audio": (
        _edit("ltx2_t2v", lambda g: [g["13"]["inputs"].update(latent=["43", 0]),
                                     g["15"]["inputs"].update(latent_image=["43", 0]),
                                     g["8"]["inputs"].update(samples=["15", 0]),
                                     g["50"]["inputs"].pop("audio"),
                                     [g.pop(k) for k in ("16", "17", "44", "45")]]),
        "15", "SamplerCustomAdvanced", "without an audio latent: paradit runs LTX-2 with its",
    ),
    "LTX-2's audio not in the video": (
        _edit("ltx2_t2v", lambda g: [g["50"]["inputs"].pop("audio"), g.pop("17")]),
        "50", "CreateVideo", "connect their LTXVAudioVAEDecode to the audio input",
    ),
    "LTX-2's video at another fps": (
        _edit("ltx2_t2v", _set("50", fps=25.0)), "50", "CreateVideo", "fps 25: the audio track",
    ),
    "LTX-2 joined latent decoded whole": (
        _edit("ltx2_t2v", _set("8", samples=["15", 0])),
        "8", "VAEDecode", "samples hold the audio latent too",
    ),
    "LTX-2 at a size ComfyUI's latent cannot hold": (
        _edit("ltx2_t2v", _set("43", width=16)),
        "43", "EmptyLTXVLatentVideo", "16x64, 17 frames: ComfyUI's latent of 32-pixel tokens",
    ),
    "LTX-2 with a shift beside LTXVScheduler's levels": (
        _edit("ltx2_t2v", _set("14", model=["60", 0]), _add("60", {
            "class_type": "ModelSamplingSD3", "inputs": {"model": ["1", 0], "shift": 3.0}})),
        "60", "ModelSamplingSD3", "a ModelSampling node on the guider's model beside node 13's",
    ),
    "LTX-2's text connectors from another checkpoint": (
        _edit("ltx2_t2v", _set("2", ckpt_name="other_ltx.safetensors")),
        "2", "LTXAVTextEncoderLoader", "other_ltx.safetensors: no such file",
    ),
}  # fmt: skip


BARE_MODEL = _set("3", model=["37", 0])  # the KSampler on the loader's model (id 37)
DEFAULTED = {  # case -> (fixture, its graph edited, the fields ComfyUI's defaults give)
    # KSampler on the bare Wan 2.1 model: ComfyUI's WAN21_T2V sampling_settings shift 8
    "no ModelSampling": ("wan21_t2v", _edit("wan21_t2v", BARE_MODEL), {"shift": 8.0}),
    # BasicScheduler on the bare model, the guider on ModelSamplingSD3 8: the levels are the
    # scheduler's model's, Wan's default 8
    "scheduler on the model's own shift": (
        "wan21_t2v", _edit("wan21_t2v", _custom(_set("23", model=["37", 0]))), {"shift": 8.0},
    ),
    # BasicScheduler on a ModelSamplingSD3 of shift 5, the guider on the one of 8: the
    # scheduler's 5 gives the levels
    "scheduler and guider on two shifts": (
        "wan21_t2v", _edit("wan21_t2v", _custom(_scheduler_on_another_shift)), {"shift": 5.0},
    ),
    # Flux.1 dev without FluxGuidance or ModelSamplingFlux: ComfyUI's Flux guidance 3.5
    # (model_base.Flux) and ModelSamplingFlux's default mu 1.15, static shift exp(1.15), on
    # its table of 10000 levels
    "Flux dev without FluxGuidance or ModelSamplingFlux": (
        "flux_dev", _edit("flux_dev", _set("3", positive=["6", 0], model=["12", 0])),
        {"guidance_scale": 3.5, "shift": pytest.approx(FLUX_SHIFT, rel=1e-12),
         "flow_levels": 10000},
    ),
    # Qwen-Image without ModelSamplingAuraFlow: ComfyUI's QwenImage mu 1.15 (ModelType.FLUX)
    "Qwen-Image without ModelSampling": (
        "qwen_image", _edit("qwen_image", BARE_MODEL),
        {"shift": pytest.approx(FLUX_SHIFT, rel=1e-12), "flow_levels": 10000},
    ),
    # Z-Image without ModelSamplingAuraFlow: ComfyUI's ZImage shift 3
    "Z-Image without ModelSampling": (
        "z_image_turbo", _edit("z_image_turbo", BARE_MODEL), {"shift": 3.0},
    ),
}  # fmt: skip
"""Graphs without a ModelSampling or FluxGuidance node, and the request each gets: its
fixture's, with the fields ComfyUI's defaults for the architecture give (the families'
comfyui.json)."""


@pytest.mark.parametrize("case", sorted(DEFAULTED))
def test_a_graph_without_sampling_nodes_gets_comfyuis_defaults(comfy, tmp_path, capsys, case):
    name, graph, fields = DEFAULTED[case]
    path = tmp_path / "workflow.json"
    path.write_text(json.dumps(graph))
    plan, _ = plan_of(str(path), str(comfy))
    expected, _ = _absolute(comfy, EXPECTED[name][1], EXPECTED[name][2])
    assert plan.request == {**expected, **fields}
    if case != "scheduler and guider on two shifts":  # that one's shift is a node's
        assert "ComfyUI's default for the model" in plan.workflow["comfyui_defaults"]


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_refusal_exits_2_with_one_line_naming_the_node(comfy, tmp_path, capsys, case):
    graph, node_id, node_type, reason = REFUSALS[case]
    path = tmp_path / "workflow.json"
    path.write_text(json.dumps(graph))
    assert main(["workflow", "import", str(path), "--comfyui-dir", str(comfy)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1, captured.err
    assert captured.err.startswith(f"error: node {node_id} ({node_type}): "), captured.err
    assert reason in captured.err


def test_resolution_selector_gives_the_latent_its_size(comfy, tmp_path, capsys):
    """ResolutionSelector's two outputs feeding the latent's width and height (as Z-Image's
    template wires them): its formula's 16:9 at 1 MP, 1368x768 (tests/workflow/
    test_comfy_sizes.py), and an unread one (its outputs used by nothing) passed over."""
    graph = _edit(
        "z_image_turbo",
        _add("97", {"class_type": "ResolutionSelector",
                    "inputs": {"aspect_ratio": "16:9 (Widescreen)", "megapixels": 1.0,
                               "multiple": 8}}),
        _add("96", {"class_type": "ResolutionSelector",
                    "inputs": {"aspect_ratio": "5:4", "megapixels": 1.0}}),
        _set("13", width=["97", 0], height=["97", 1]),
    )  # fmt: skip
    path = tmp_path / "workflow.json"
    path.write_text(json.dumps(graph))
    plan, _ = plan_of(str(path), str(comfy))
    assert (plan.request["width"], plan.request["height"]) == (1368, 768)
    assert any(line[1] == "ResolutionSelector" and "1368x768" in line[2] for line in plan.lines)
    graph["13"]["inputs"]["width"] = ["96", 0]
    path.write_text(json.dumps(graph))
    with pytest.raises(ValueError, match=r"node 96 \(ResolutionSelector\): aspect_ratio '5:4'"):
        plan_of(str(path), str(comfy))


def test_ltxv_scheduler_levels_follow_its_inputs(comfy, tmp_path):
    """LTXVScheduler's widgets and latent: another step count, shifts and terminal; without
    stretch the levels end at the shifted 1/steps; without a latent ComfyUI counts 4096
    tokens; the tokens are the video latent's (a 96x64x41 one: 6 frames of 2x3)."""
    from paradit.backend.models.families.ltx2 import FPS
    from paradit.backend.workflow.handlers import LTX2_FRAME_RATE

    assert LTX2_FRAME_RATE == FPS  # the frame rate the LTX nodes must name
    path = tmp_path / "ltx2.json"

    def sigmas(*changes) -> list[float]:
        path.write_text(json.dumps(_edit("ltx2_t2v", *changes)))
        plan, _ = plan_of(str(path), str(comfy))
        assert plan.request["num_inference_steps"] == len(plan.request["sigmas"]) - 1
        return plan.request["sigmas"]

    def unstretched(steps: int, high: float, base: float, tokens: int) -> list[float]:
        mu = base + (high - base) * (tokens - 1024) / 3072
        return [1 / (1 + math.exp(-mu) * (k / (steps - k))) for k in range(steps)] + [0.0]

    given = sigmas(_set("13", steps=6, max_shift=1.5, base_shift=0.5, terminal=0.3))
    assert given == pytest.approx(ltxv_levels(6, 1.5, 0.5, 0.3, 12), abs=1e-12)
    assert given[-2] == pytest.approx(0.3)
    given = sigmas(_set("13", stretch=False))
    assert given == pytest.approx(unstretched(4, 2.05, 0.95, 12), abs=1e-12)
    given = sigmas(lambda g: g["13"]["inputs"].pop("latent"))
    assert given == pytest.approx(ltxv_levels(4, 2.05, 0.95, 0.1, 4096), abs=1e-12)
    given = sigmas(_set("43", width=96, length=41), _set("44", frames_number=41))
    assert given == pytest.approx(ltxv_levels(4, 2.05, 0.95, 0.1, 6 * 2 * 3), abs=1e-12)


def test_ltx2_at_25_fps_and_a_length_comfyui_rounds(comfy, tmp_path):
    """LTX-2's template at 25 fps (LTXVConditioning, LTXVEmptyLatentAudio and CreateVideo) is
    the request's fps 25 (24, the family's own, is left out); EmptyLTXVLatentVideo's length
    18 is ComfyUI's latent of ((18 - 1) // 8) * 8 + 1 = 17 frames, with the audio of 18
    frames at 25 fps as long (18 audio latent frames in ComfyUI, round(17 / 25 x 25) = 17 in
    the pipeline: the job's audio_latent_frames 18) or of 17 (both 17: no field)."""
    from paradit.backend.models.families.ltx2.adapter import FPS_RANGE
    from paradit.backend.workflow.handlers import LTX2_FRAME_RATES

    assert LTX2_FRAME_RATES == FPS_RANGE  # the rates the LTX nodes may name
    path = tmp_path / "ltx2.json"
    at_25 = (_set("22", frame_rate=25.0), _set("44", frame_rate=25.0), _set("50", fps=25.0))
    path.write_text(json.dumps(_edit("ltx2_t2v", *at_25, _set("43", length=18))))
    plan, _variant = plan_of(str(path), str(comfy))
    assert (plan.request["fps"], plan.request["num_frames"]) == (25.0, 17)
    assert "audio_latent_frames" not in plan.request  # 17 frames at 25 fps: 17 in both
    said = [line[-1] for line in plan.lines]
    assert any("64x64, 18 frames: ComfyUI's latent rounds it down to" in line for line in said)
    path.write_text(json.dumps(_edit("ltx2_t2v", *at_25, _set("43", length=18),
                                     _set("44", frames_number=18))))  # fmt: skip
    plan, _variant = plan_of(str(path), str(comfy))
    assert (plan.request["num_frames"], plan.request["audio_latent_frames"]) == (17, 18)
    path.write_text(json.dumps(_edit("ltx2_t2v")))
    assert "fps" not in plan_of(str(path), str(comfy))[0].request


LTX2_AUDIO_LENGTHS = {  # case -> (its graph edited, audio_latent_frames, the line's words)
    # LTXVEmptyLatentAudio 44 at 9 frames beside the video's 17: ceil(9 / 24 x 25) = 10
    "shorter than the video": (
        (_set("44", frames_number=9),), 10, "ceil(9 / 24 x 25), ComfyUI's count; LTX2Pipeline's "
        "for the video's 17 frames, 18: -> audio_latent_frames 10",
    ),
    # 121 frames, both: ceil(121 / 24 x 25) = 127, the pipeline's round(...) = 126
    "121 frames, rounded up": (
        (_set("43", length=121), _set("44", frames_number=121)), 127, "126: -> audio_latent_",
    ),
    "17 frames, both 18": ((), None, "the video and 18 audio latent frames sampled together"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(LTX2_AUDIO_LENGTHS))
def test_ltx2_audio_length_is_the_one_comfyui_makes(comfy, tmp_path, case):
    """LTXVEmptyLatentAudio's audio latent as ComfyUI counts it: the job's
    audio_latent_frames where the pipeline would count otherwise for the video's frames, no
    field where both agree; the import's line for LTXVConcatAVLatent says which."""
    edits, frames, words = LTX2_AUDIO_LENGTHS[case]
    path = tmp_path / "ltx2.json"
    path.write_text(json.dumps(_edit("ltx2_t2v", *edits)))
    plan, _variant = plan_of(str(path), str(comfy))
    assert plan.request.get("audio_latent_frames") == frames
    assert any(words in line[-1] for line in plan.lines), plan.lines


def test_ltx2_audio_latents_agree_with_comfyui_only_at_24k_plus_17_frames():
    """ComfyUI's LTXVEmptyLatentAudio makes ceil(frames / fps * latents a second) audio
    latent frames, diffusers' LTX2Pipeline round(...); LTX-2's audio VAE makes 25 a second
    (16 kHz, mel hop 160, 4x temporal compression: the tiny pipeline's too). At 24 fps the
    duration's count is frames + frames/24: over 8k+1 frames the two agree at 24k+17 only."""
    from paradit.backend.models.presets import build_preset
    from paradit.backend.workflow.handlers import LTX2_AUDIO_LATENTS_PER_SECOND, ltx2_audio_latents

    pipe = build_preset("tiny-ltx2")
    rate = (
        pipe.audio_sampling_rate / pipe.audio_hop_length / pipe.audio_vae_temporal_compression_ratio
    )
    assert rate == LTX2_AUDIO_LATENTS_PER_SECOND == 16000 / 160 / 4
    agree = [f for f in range(1, 200, 8) if len(set(ltx2_audio_latents(f))) == 1]
    assert agree == list(range(17, 200, 24))
    assert ltx2_audio_latents(121) == (127, 126) and ltx2_audio_latents(17) == (18, 18)


@pytest.mark.parametrize("loader", ["2", "3"])
def test_ltx2_parts_of_another_checkpoint_are_refused(comfy, tmp_path, loader):
    """LTXAVTextEncoderLoader's text connectors and LTXVAudioVAELoader's audio VAE come from
    the model's checkpoint in paradit: another checkpoint's is a second model, refused."""
    checkpoints = comfy / "models" / "checkpoints"
    other = checkpoints / "ltx-2-other_tiny.safetensors"
    if not other.exists():
        shutil.copy(checkpoints / "ltx-2-19b-dev_tiny.safetensors", other)
    path = tmp_path / "ltx2.json"
    path.write_text(json.dumps(_edit("ltx2_t2v", _set(loader, ckpt_name=other.name))))
    kind = {"2": "LTXAVTextEncoderLoader", "3": "LTXVAudioVAELoader"}[loader]
    reason = {"2": "a second model in one graph", "3": "is not the model's checkpoint"}[loader]
    with pytest.raises(ValueError, match=rf"^node {loader} \({kind}\): .*{reason}"):
        plan_of(str(path), str(comfy))


def test_crop_center_maps_for_any_image(comfy):
    graph = GRAPHS["wan21_i2v"]()
    graph["52"]["inputs"]["image"] = WIDE_IMAGE
    graph["51"]["inputs"]["crop"] = "center"
    path = comfy / "crop_center.json"
    path.write_text(json.dumps(graph))
    plan, _ = plan_of(str(path), str(comfy))
    assert plan.request["image"] == str(comfy / "input" / WIDE_IMAGE)


def test_run_refuses_file_flags_the_loaders_give(comfy, tmp_path, capsys):
    """`workflow run` takes its model files from the loaders: --model or --vae are refused,
    before any backend starts."""
    workflow = str(FIXTURES / "wan21_t2v.api.json")
    argv = ["workflow", "run", workflow, "--out", str(tmp_path), "--comfyui-dir", str(comfy)]
    assert main([*argv, "--model", "tiny-wan", "--vae", "x.safetensors"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "error: --model, --vae: the workflow's loader nodes name its files; leave them out\n"
    )


def test_a_sampler_the_model_does_not_run_is_refused_by_import_and_run(
    comfy, tmp_path, capsys, monkeypatch
):
    """A model whose family lists no samplers (CogVideoX, Flux.2, Qwen-Image-Edit run their
    own scheduler only; HunyuanVideo 1.5's list stood in for theirs, emptied here: no
    fixture of those maps): import and run (before any backend starts: a fast test starts
    none) exit 2 with one line naming the sampler node. With its list, import maps it."""
    import paradit.backend.tools.workflow as tools_workflow

    workflow = str(FIXTURES / "hunyuan15_t2v_shift.api.json")
    assert main(["workflow", "import", workflow, "--comfyui-dir", str(comfy)]) == 0
    out = capsys.readouterr().out
    assert (
        "samplers: euler, uni_pc, uni_pc_bh2, dpmpp_2m, lcm, res_multistep, euler_ancestral, "
        "gradient_estimation\n" in out
    )
    monkeypatch.setattr(tools_workflow, "model_samplers", lambda plan: ())
    refusal = (
        "error: node 99 (SamplerCustomAdvanced): sampler euler: tiny-hunyuanvideo1.5 runs its "
        "own scheduler only (GET /v1/info limits.samplers), so the workflow cannot run as "
        "ComfyUI runs it\n"
    )
    assert main(["workflow", "import", workflow, "--comfyui-dir", str(comfy)]) == 2
    assert capsys.readouterr() == ("", refusal)
    argv = ["workflow", "run", workflow, "--out", str(tmp_path), "--comfyui-dir", str(comfy)]
    assert main(argv) == 2
    assert capsys.readouterr() == ("", refusal)
    assert not (tmp_path / "job.json").exists()


@pytest.mark.parametrize("name", ["wan21_t2v", "z_image_turbo"])
def test_a_custom_sampler_graph_maps_as_its_ksampler(comfy, tmp_path, name):
    """SamplerCustomAdvanced with RandomNoise, CFGGuider (or, for a cfg-1 graph with a zeroed
    negative, BasicGuider), KSamplerSelect and BasicScheduler: the KSampler fixture's job."""
    graph = GRAPHS[name]()
    _custom_sampler(graph, "CFGGuider" if name == "wan21_t2v" else "BasicGuider")
    path = tmp_path / "custom.json"
    path.write_text(json.dumps(graph))
    plan, _ = plan_of(str(path), str(comfy))
    ksampler, _ = plan_of(str(FIXTURES / f"{name}.api.json"), str(comfy))
    assert (plan.request, plan.serve) == (ksampler.request, ksampler.serve)
    assert plan.sampler.type == "SamplerCustomAdvanced"


def test_ui_refusals_name_the_node(comfy, tmp_path, capsys):
    ui = to_ui(GRAPHS["wan21_t2v"]())
    for kind, reason in (
        ("WanVideoModelLoader", "not a node paradit maps"),
        ("0d3e2c1a-5b6f-4a7e-9c8d-1f2e3a4b5c6d", "a subgraph whose definition is not in"),
    ):
        edited = copy.deepcopy(ui)
        edited["nodes"][0]["type"] = kind
        path = tmp_path / "workflow.json"
        path.write_text(json.dumps(edited))
        assert main(["workflow", "import", str(path), "--comfyui-dir", str(comfy)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"error: node 1 ({kind}): "), err
        assert reason in err


# -- the UI format's own nodes and modes ------------------------------------------------------


def _ui_node(ui: dict, kind: str, index: int = 0) -> dict:
    return [n for n in ui["nodes"] if n["type"] == kind][index]


def test_ui_bypass_reroute_primitive_and_mute_read_as_comfyui_runs_them(comfy, tmp_path):
    ui = to_ui(GRAPHS["wan22_i2v_a14b_4step"]())
    # the high-noise LoRA bypassed: its model passes through, the LoRA is not applied
    _ui_node(ui, "LoraLoaderModelOnly", 0)["mode"] = 4
    # a reroute between the CLIP loader and the positive prompt
    positive = _ui_node(ui, "CLIPTextEncode", 0)
    clip_link = next(i for i in positive["inputs"] if i["name"] == "clip")
    link = next(item for item in ui["links"] if item[0] == clip_link["link"])
    reroute_id, new_link = 100, 100
    reroute = {"id": reroute_id, "type": "Reroute", "mode": 0,
               "inputs": [{"name": "", "type": "*", "link": link[0]}],
               "outputs": [{"name": "", "type": "CLIP", "links": [new_link]}]}  # fmt: skip
    ui["nodes"].append(reroute)
    link[3], link[4] = reroute_id, 0
    ui["links"].append([new_link, reroute_id, 0, positive["id"], 0, "CLIP"])
    clip_link["link"] = new_link
    # a primitive feeding the first sampler's seed (its value is the widget's own)
    sampler = _ui_node(ui, "KSamplerAdvanced", 0)
    ui["nodes"].append({"id": 101, "type": "PrimitiveNode", "mode": 0, "inputs": [],
                        "outputs": [{"name": "INT", "type": "INT", "links": [101]}],
                        "widgets_values": [5, "fixed"]})  # fmt: skip
    sampler["inputs"].append({"name": "noise_seed", "type": "INT", "link": 101,
                              "widget": {"name": "noise_seed"}})  # fmt: skip
    ui["links"].append([101, 101, 0, sampler["id"], len(sampler["inputs"]) - 1, "INT"])
    # a muted node is left out, as the frontend leaves it out of the prompt
    ui["nodes"].append({"id": 102, "type": "SaveImage", "mode": 2, "inputs": [],
                        "outputs": [], "widgets_values": ["muted"]})  # fmt: skip
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(ui))
    plan, _ = plan_of(str(path), str(comfy))
    _, request, _ = EXPECTED["wan22_i2v_a14b_4step"]
    expected, _ = _absolute(comfy, request, EXPECTED["wan22_i2v_a14b_4step"][2])
    expected["loras"] = [{"name": "lightx2v_i2v_4steps_low_noise_tiny.safetensors",
                          "high": 0.0, "low": 1.0}]  # fmt: skip
    assert plan.request == expected
    # the bypassed LoRA is no part of the job: one line, the low-noise expert's LoRA
    assert [t for _, t, _ in plan.lines].count("LoraLoaderModelOnly") == 1


def test_newer_create_video_widgets_are_read_and_a_deeper_bit_depth_refused(comfy, tmp_path):
    """Newer ComfyUI saves CreateVideo's fps, bit_depth and color_space; 8 bits is what
    paradit writes, and `auto` with sRGB (ComfyUI's default, comfy_extras/nodes_video.py:
    auto is 8 bits for sRGB, 10 for HDR); 10, or auto with HDR, is refused naming the node."""
    ui = to_ui(GRAPHS["wan21_t2v"]())
    create = _ui_node(ui, "CreateVideo")
    path = tmp_path / "newer.json"
    for depth in (8, "8", "auto"):
        create["widgets_values"] = [16, depth, "sRGB"]
        path.write_text(json.dumps(ui))
        plan, _ = plan_of(str(path), str(comfy))
        assert plan.request["num_frames"] == 5
    refused = {(10, "sRGB"): "bit_depth 10", ("auto", "HDR"): "color_space HDR: ComfyUI writes",
               (8, "HDR PQ"): "color_space HDR PQ"}  # fmt: skip
    for (depth, space), words in refused.items():
        create["widgets_values"] = [16, depth, space]
        path.write_text(json.dumps(ui))
        with pytest.raises(ValueError, match=rf"^node {create['id']} \(CreateVideo\): {words}"):
            plan_of(str(path), str(comfy))
    create["widgets_values"] = [16, 8, "sRGB", "auto", "more"]
    path.write_text(json.dumps(ui))
    with pytest.raises(ValueError, match="5 widget values where paradit knows 4 widgets"):
        plan_of(str(path), str(comfy))


def test_a_bypassed_node_with_nothing_to_pass_drops_its_link(comfy, tmp_path, capsys):
    """ComfyUI's frontend drops the link of a bypassed node with no input of its output's
    type: the sampler's latent_image is then unconnected, refused naming the sampler."""
    ui = to_ui(GRAPHS["wan21_t2v"]())
    _ui_node(ui, "EmptyHunyuanLatentVideo")["mode"] = 4
    path = tmp_path / "bypassed.json"
    path.write_text(json.dumps(ui))
    assert main(["workflow", "import", str(path), "--comfyui-dir", str(comfy)]) == 2
    err = capsys.readouterr().err
    node = _ui_node(ui, "KSampler")["id"]
    assert err.startswith(f"error: node {node} (KSampler): input latent_image is not connected")


# -- subgraphs, switches, math ----------------------------------------------------------------


def _wrap(ui: dict, outside: tuple[str, ...], sub_id: str) -> dict:
    """`ui` with every node whose type is not in `outside` moved into one subgraph (its
    definition in `definitions.subgraphs`, one instance node in the graph), as ComfyUI's
    "Convert to Subgraph" saves it: each link crossing the boundary routed through a subgraph
    input (-10) or output (-20) of the link's type."""
    links = {item[0]: item for item in ui["links"]}
    inner = [n for n in ui["nodes"] if n["type"] not in outside]
    inner_ids = {n["id"] for n in inner}
    instance_id = max(n["id"] for n in ui["nodes"]) + 1
    next_link = max(links) + 1
    definition = {"id": sub_id, "name": sub_id, "inputs": [], "outputs": [], "nodes": inner,
                  "links": [], "inputNode": {"id": -10}, "outputNode": {"id": -20}}  # fmt: skip
    instance = {"id": instance_id, "type": sub_id, "mode": 0, "inputs": [], "outputs": [],
                "widgets_values": [], "properties": {"proxyWidgets": []}}  # fmt: skip
    outer_links = []
    for link_id, origin, slot, target, target_slot, kind, *_ in links.values():
        if origin in inner_ids and target in inner_ids:
            definition["links"].append({"id": link_id, "origin_id": origin, "origin_slot": slot,
                                        "target_id": target, "target_slot": target_slot,
                                        "type": kind})  # fmt: skip
        elif origin in inner_ids:  # out through a subgraph output
            index = len(definition["outputs"])
            definition["outputs"].append({"name": kind, "type": kind, "linkIds": [link_id]})
            definition["links"].append({"id": link_id, "origin_id": origin, "origin_slot": slot,
                                        "target_id": -20, "target_slot": index,
                                        "type": kind})  # fmt: skip
            instance["outputs"].append({"name": kind, "type": kind, "links": [next_link]})
            outer_links.append([next_link, instance_id, index, target, target_slot, kind])
            for node in ui["nodes"]:
                for entry in node.get("inputs") or ():
                    if node["id"] == target and entry["link"] == link_id:
                        entry["link"] = next_link
            next_link += 1
        elif target in inner_ids:  # in through a subgraph input
            index = len(definition["inputs"])
            name = next(i["name"] for n in inner if n["id"] == target for i in n["inputs"]
                        if i["link"] == link_id)  # fmt: skip
            definition["inputs"].append({"name": name, "type": kind, "linkIds": [next_link]})
            definition["links"].append({"id": next_link, "origin_id": -10, "origin_slot": index,
                                        "target_id": target, "target_slot": target_slot,
                                        "type": kind})  # fmt: skip
            for node in inner:
                for entry in node["inputs"]:
                    if node["id"] == target and entry["link"] == link_id:
                        entry["link"] = next_link
            instance["inputs"].append({"name": name, "type": kind, "link": link_id,
                                       "widget": {"name": name}})  # fmt: skip
            outer_links.append([link_id, origin, slot, instance_id, index, kind])
            next_link += 1
        else:
            outer_links.append([link_id, origin, slot, target, target_slot, kind])
    nodes = [n for n in ui["nodes"] if n["id"] not in inner_ids] + [instance]
    subgraphs = (ui.get("definitions") or {}).get("subgraphs", [])
    return {**ui, "nodes": nodes, "links": outer_links,
            "definitions": {"subgraphs": [*subgraphs, definition]}}  # fmt: skip


def test_nested_subgraphs_read_as_comfyui_runs_them(comfy, tmp_path, capsys):
    """The Wan 2.1 T2V fixture inside a subgraph inside another: the same job; the seed
    widget promoted to a subgraph input keeps its own value unlinked, takes the value of an
    outer PrimitiveInt linked; a refusal inside names the path to the node."""
    ui = to_ui(GRAPHS["wan21_t2v"]())
    sampler = _ui_node(ui, "KSampler")
    primitive = {"id": 200, "type": "PrimitiveInt", "mode": 0, "inputs": [],
                 "outputs": [{"name": "INT", "type": "INT", "links": [300]}],
                 "widgets_values": [77, "fixed"]}  # fmt: skip
    ui["nodes"].append(primitive)
    sampler["inputs"].append({"name": "seed", "type": "INT", "link": 300,
                              "widget": {"name": "seed"}})  # fmt: skip
    ui["links"].append([300, 200, 0, sampler["id"], len(sampler["inputs"]) - 1, "INT"])
    inner = _wrap(ui, ("SaveVideo", "PrimitiveInt", "Note"), "0d3e2c1a-inner")
    nested = _wrap(inner, ("SaveVideo", "PrimitiveInt", "Note"), "0d3e2c1a-outer")
    outer_id = max(n["id"] for n in nested["nodes"])
    inner_id = max(n["id"] for n in inner["nodes"])
    path = tmp_path / "nested.json"
    path.write_text(json.dumps(nested))
    plan, _ = plan_of(str(path), str(comfy))
    expected, _ = _absolute(comfy, EXPECTED["wan21_t2v"][1], EXPECTED["wan21_t2v"][2])
    assert plan.request == {**expected, "seed": 77}  # the outer PrimitiveInt's
    assert f"{outer_id}:{inner_id}:{sampler['id']}" in [i for i, _, _ in plan.lines]
    # unlinked outside: the promoted widget keeps the sampler's own seed, 3
    del nested["links"][[link[0] for link in nested["links"]].index(300)]
    nested["nodes"][-1]["inputs"][0]["link"] = None
    path.write_text(json.dumps(nested))
    plan, _ = plan_of(str(path), str(comfy))
    assert plan.request == expected
    sampler["widgets_values"][4] = "dpmpp_sde"  # a sampler paradit lacks, two levels down
    path.write_text(json.dumps(nested))
    assert main(["workflow", "import", str(path), "--comfyui-dir", str(comfy)]) == 2
    err = capsys.readouterr().err
    where = f"subgraph {outer_id} > subgraph {inner_id} > node {sampler['id']} (KSampler)"
    assert err.startswith(f"error: {where}: sampler dpmpp_sde"), err


def test_a_switch_reads_only_its_branch_and_math_gives_widget_values(comfy, tmp_path, capsys):
    """API form: ComfySwitchNode picks the model (the other branch, a custom node, is not
    needed until the switch picks it); PrimitiveInt/PrimitiveFloat and ComfyMathExpression
    give the latent's length and the sampler's steps."""
    graph = GRAPHS["wan21_t2v"]()
    graph["90"] = {"class_type": "WanVideoModelLoader", "inputs": {"model": "x"}}
    graph["91"] = {
        "class_type": "ComfySwitchNode",
        "inputs": {"switch": False, "on_false": ["48", 0], "on_true": ["90", 0]},
    }
    graph["92"] = {"class_type": "PrimitiveFloat", "inputs": {"value": 0.25}}
    graph["93"] = {"class_type": "PrimitiveInt", "inputs": {"value": 16}}
    graph["94"] = {"class_type": "ComfyMathExpression",
                   "inputs": {"expression": "floor(a * b) + 1", "values.a": ["92", 0],
                              "values.b": ["93", 0]}}  # fmt: skip
    graph["3"]["inputs"]["model"] = ["91", 0]
    graph["40"]["inputs"]["length"] = ["94", 1]  # its INT output: floor(0.25 * 16) + 1 = 5
    graph["3"]["inputs"]["steps"] = ["93", 0]  # 16
    path = tmp_path / "switch.json"
    path.write_text(json.dumps(graph))
    plan, _ = plan_of(str(path), str(comfy))
    expected, _ = _absolute(comfy, EXPECTED["wan21_t2v"][1], EXPECTED["wan21_t2v"][2])
    assert plan.request == {**expected, "num_frames": 5, "num_inference_steps": 16}
    graph["91"]["inputs"]["switch"] = True
    path.write_text(json.dumps(graph))
    assert main(["workflow", "import", str(path), "--comfyui-dir", str(comfy)]) == 2
    assert capsys.readouterr().err.startswith("error: node 90 (WanVideoModelLoader): not a node")
    graph["91"]["inputs"]["switch"] = False
    graph["94"]["inputs"]["expression"] = "__import__('os')"
    path.write_text(json.dumps(graph))
    assert main(["workflow", "import", str(path), "--comfyui-dir", str(comfy)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: node 94 (ComfyMathExpression): expression"), err


@pytest.mark.parametrize(
    ("text", "value"),
    [("floor(a * b) + 1", 81), ("floor (a * b + 1)", 81), ("a / b", 5 / 16), ("-a ** 2", -25),
     ("max(a, b) // 3", 5), ("round(a * 1.5)", 8), ("sqrt(b) + ceil(0.2)", 5)],
)  # fmt: skip
def test_math_expressions_evaluate_as_python_arithmetic(text, value):
    """ComfyMathExpression's arithmetic with a = 5, b = 16 (values worked by hand)."""
    from paradit.backend.workflow.handlers import evaluate_expression

    assert evaluate_expression(text, {"a": 5, "b": 16}) == pytest.approx(value)
