"""ComfyUI's MiniMax H3 templates (`video_minimax_h3_t2v`, `video_minimax_h3_i2v`, from the
installed comfyui-workflow-templates-json) import to the job ComfyUI runs, every field written
by hand from the graph (its nodes read in ComfyUI's comfy_extras/nodes_minimax_h3.py), up to
the files they name (the serve settings: the pruned DiT, the Qwen3-VL encoder, the video and
the audio VAE), and both run end to end through `workflow run` on one backend of the tiny
preset written as those four files under the templates' names (tests/h3_files.py; the
resolution made tiny, 2 steps). The turbo switch's path (LoraLoaderModelOnly, 8 steps) maps
and the family takes its LoRA; what the H3 nodes cannot run as ComfyUI does is refused on
small API-format graphs, naming the node.

Cost: about 9 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import json

import pytest
from comfy_templates import TEMPLATES, placeholders, widget, workflow_run
from template_jobs import H3_EXPECTED, H3_OUTER, h3_folder, h3_request

from paradit.backend.models.families import family_for
from paradit.backend.models.families.minimax_h3 import adapter, sampling
from paradit.backend.tools.workflow import plan_of
from paradit.backend.workflow import h3_nodes
from paradit.backend.workflow.defaults import default_for
from paradit.backend.workflow.files import ComfyFolders
from paradit.backend.workflow.graph import WorkflowError, graph_of
from paradit.backend.workflow.mapping import map_workflow

DIT = "diffusion_models/minimax_h3_fl2va_pruned_int8_convrot.safetensors"
ENCODER = "text_encoders/qwen3vl_32b_minimax_h3_nvfp4_awq.safetensors"
VIDEO_VAE = "vae/minimax_h3_video_vae_int8_convrot.safetensors"
AUDIO_VAE = "vae/minimax_h3_audio_vae_fp32.safetensors"
TURBO = "minimax_h3_fl2v_turbo_8step_v1.0_comfyui_bf16.safetensors"
INNER = {"video_minimax_h3_t2v.json": "140:131", "video_minimax_h3_i2v.json": "105:104"}
"""Its MiniMaxH3ImageToVideo, whose own saved prompt is another (not the one that runs)."""


def _plan(data: dict, comfy):
    graph = graph_of(data, "0" * 64, TEMPLATES / "h3.json")
    return map_workflow(graph, ComfyFolders.find(str(comfy), graph.path))


def _template(name: str) -> dict:
    return json.loads((TEMPLATES / name).read_text())


@pytest.mark.fast
@pytest.mark.parametrize("template", sorted(H3_EXPECTED))
def test_h3_template_imports_to_comfyuis_job_up_to_its_files(tmp_path, template):
    comfy = placeholders(template, tmp_path / "ComfyUI")
    plan = _plan(_template(template), comfy)
    assert widget(template, H3_OUTER[template], 0) != widget(template, INNER[template], 0)
    assert plan.request == h3_request(template, comfy)
    models = comfy / "models"
    assert plan.serve == {
        "model": str(models / DIT),
        "text_encoders": [str(models / ENCODER)],
        "vaes": [str(models / VIDEO_VAE), str(models / AUDIO_VAE)],
        "image_encoders": [],
        "lora_dirs": [],
    }
    assert plan.sampler.type == "SamplerCustomAdvanced"
    kinds = [kind for _, kind, _ in plan.lines]
    assert "VAEDecodeAudio" in kinds and kinds[-1] == "SaveVideo"
    # the shift ComfyUI runs where no node sets one, filled in when the files are read
    assert default_for("minimax-h3", {}).static_shift == sampling.VIDEO_SHIFT == 12.0


@pytest.mark.fast
def test_h3_turbo_switch_maps_the_lora_and_8_steps(tmp_path):
    """The templates' turbo switch on (the subgraph's `value` widget): the LoRA branch
    (LoraLoaderModelOnly at strength 1) and the turbo steps (8); H3's family takes the LoRA
    (ComfyUI's layout on the pruned DiT: tests/families/test_minimax_h3_lora.py)."""
    template = "video_minimax_h3_t2v.json"
    data = _template(template)
    outer = next(n for n in data["nodes"] if str(n["id"]) == H3_OUTER[template])
    assert outer["widgets_values"][9] is False and outer["widgets_values"][12] == 8
    outer["widgets_values"][9] = True
    comfy = placeholders(template, tmp_path / "ComfyUI")
    plan = _plan(data, comfy)
    expected = {
        **h3_request(template, comfy),
        "num_inference_steps": 8,
        "loras": [{"name": TURBO, "strength": 1.0}],
    }
    assert plan.request == expected
    assert plan.serve["lora_dirs"] == [str(comfy / "models" / "loras")]
    family = family_for("MiniMaxH3ModularPipeline")
    assert family.workflow_refusal("minimax-h3", plan.request) == ""
    assert family.workflow_refusal("minimax-h3", h3_request(template, comfy)) == ""


def _api(image: bool = False, more: dict | None = None, **changes) -> dict:
    """A small H3 graph in the API format: the templates' nodes without the subgraph, with
    `more` nodes (id -> (type, inputs)) and `changes` (`node__input`: a value, None drops it)."""
    nodes = {
        "1": ("UNETLoader", {"unet_name": DIT.split("/")[1], "weight_dtype": "default"}),
        "2": (
            "CLIPLoader",
            {"clip_name": ENCODER.split("/")[1], "type": "minimax", "device": "default"},
        ),
        "3": ("VAELoader", {"vae_name": VIDEO_VAE.split("/")[1]}),
        "4": ("VAELoader", {"vae_name": AUDIO_VAE.split("/")[1]}),
        "5": (
            "MiniMaxH3ImageToVideo",
            {
                "clip": ["2", 0],
                "vae": ["3", 0],
                "prompt": "a fox",
                "width": 320,
                "height": 192,
                "length": 100,
            },
        ),
        "6": ("RandomNoise", {"noise_seed": 7}),
        "7": ("BasicGuider", {"model": ["1", 0], "conditioning": ["5", 0]}),
        "8": ("KSamplerSelect", {"sampler_name": "euler"}),
        "9": (
            "BasicScheduler",
            {"model": ["1", 0], "scheduler": "simple", "steps": 4, "denoise": 1.0},
        ),
        "10": (
            "SamplerCustomAdvanced",
            {
                "noise": ["6", 0],
                "guider": ["7", 0],
                "sampler": ["8", 0],
                "sigmas": ["9", 0],
                "latent_image": ["5", 1],
            },
        ),
        "11": ("VAEDecode", {"samples": ["10", 0], "vae": ["3", 0]}),
        "12": ("VAEDecodeAudio", {"samples": ["10", 0], "vae": ["4", 0]}),
        "13": ("CreateVideo", {"images": ["11", 0], "audio": ["12", 0], "fps": 24}),
        "14": (
            "SaveVideo",
            {"video": ["13", 0], "filename_prefix": "h3", "format": "auto", "codec": "auto"},
        ),
        "15": ("LoadImage", {"image": "start.png"}),
        **(more or {}),
    }
    data = {k: {"class_type": t, "inputs": dict(i)} for k, (t, i) in nodes.items()}
    if image:
        data["5"]["inputs"]["first_frame"] = ["15", 0]
    for key, value in changes.items():
        node, name = key.split("__")
        if value is None:
            data[node]["inputs"].pop(name)
        else:
            data[node]["inputs"][name] = value
    return data


SHIFT = "MiniMaxH3SigmaShift"


@pytest.fixture
def comfy(tmp_path):
    from PIL import Image

    folder = tmp_path / "ComfyUI"
    for path in (DIT, ENCODER, VIDEO_VAE, AUDIO_VAE):
        (folder / "models" / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / "models" / path).touch()
    (folder / "input").mkdir()
    Image.new("RGB", (48, 32)).save(folder / "input" / "start.png")
    return folder


@pytest.mark.fast
def test_h3_api_graph_maps_length_snapped_and_first_frame(comfy):
    plan = _plan(_api(image=True), comfy)
    assert plan.request == {
        "prompt": "a fox",
        "negative_prompt": "",
        "width": 320,
        "height": 192,
        "num_frames": 107,  # 100 snapped up to 17k+5 (ComfyUI's align_frame_count)
        "num_inference_steps": 4,
        "guidance_scale": 1.0,
        "seed": 7,
        "sampler": "euler",
        "scheduler": "simple",
        "image": str(comfy / "input" / "start.png"),
        "image_prep": "comfyui",
    }


@pytest.mark.fast
def test_h3_empty_av_latent_with_a_text_prompt_and_the_sigma_shift(comfy):
    more = {
        "5": ("CLIPTextEncode", {"clip": ["2", 0], "text": "rain"}),
        "16": ("EmptyMiniMaxH3LatentAV", {"width": 256, "height": 256, "length": 124}),
        "17": (SHIFT, {"model": ["1", 0], "shift_video": 12.0, "shift_audio": 3.0}),
    }
    links = {"10__latent_image": ["16", 0], "7__model": ["17", 0], "9__model": ["17", 0]}
    plan = _plan(_api(more=more, **links), comfy)
    request = plan.request
    assert (request["prompt"], request["num_frames"], request["shift"]) == ("rain", 124, 12)
    assert (request["width"], request["height"], "image" not in request) == (256, 256, True)


SHIFT_10 = {"17": (SHIFT, {"model": ["1", 0], "shift_video": 10.0, "shift_audio": 3.0})}
REFUSALS = {  # case -> (more nodes, changes, the node refused, words of the reason)
    "last frame": ({}, {"5__last_frame": ["15", 0]}, "5", "centre-crops"),
    "size": ({}, {"5__width": 336}, "5", "multiples of 32"),
    "fps": ({}, {"13__fps": 25}, "13", "24 fps"),
    "no audio": ({}, {"13__audio": None}, "13", "VAEDecodeAudio"),
    "shift": (SHIFT_10, {"7__model": ["17", 0], "9__model": ["17", 0]}, "17", "model's own"),
    "second shift": (
        {"17": (SHIFT, {"model": ["18", 0], "shift_video": 12.0, "shift_audio": 3.0}),
         "18": (SHIFT, {"model": ["1", 0], "shift_video": 12.0, "shift_audio": 3.0})},
        {"7__model": ["17", 0], "9__model": ["17", 0]}, "17",
        "a second ModelSampling node on one model (after node 18)",
    ),
}  # fmt: skip


@pytest.mark.fast
@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_h3_nodes_refused_where_comfyui_runs_otherwise(comfy, case):
    more, changes, node, words = REFUSALS[case]
    with pytest.raises(WorkflowError) as refused:
        _plan(_api(image=True, more=more, **changes), comfy)
    message = str(refused.value)
    assert message.startswith(f"node {node} (") and words in message, message


@pytest.mark.fast
def test_h3_node_constants_are_the_familys():
    assert h3_nodes.H3_FPS == adapter.FPS
    assert h3_nodes.H3_SHIFTS == (sampling.VIDEO_SHIFT, sampling.AUDIO_SHIFT)
    # ComfyUI's align_frame_count(max(5, length)), by hand
    snapped = {1: 5, 5: 5, 6: 22, 22: 22, 23: 39, 120: 124, 124: 124, 125: 141, 345: 345, 351: 362}
    assert {n: h3_nodes.h3_frames(n) for n in snapped} == snapped


RUN_NODES = {  # template -> (its ResolutionSelector, its turbo-off steps PrimitiveInt)
    "video_minimax_h3_t2v.json": (115, 137),
    "video_minimax_h3_i2v.json": (115, 124),
}


@pytest.fixture(scope="module")
def h3_comfy(tmp_path_factory):
    """A ComfyUI folder with both templates' names: tiny-minimax-h3 written as the four files
    the templates load, in the formats they name (tests/template_jobs.py `h3_folder`)."""
    return h3_folder(tmp_path_factory.mktemp("h3") / "ComfyUI")


@pytest.mark.parametrize("template", sorted(RUN_NODES))
def test_h3_template_runs_end_to_end_on_its_tiny_files(
    h3_comfy, tmp_path, template, paradit_warm, backends
):
    """The template as saved but for ResolutionSelector's megapixels (0.001: 32x32, the tiny
    preset's size) and the turbo-off steps (2): its 124 frames (5 s snapped to 17k+5),
    res_multistep on simple at ComfyUI's shift 12, the i2v one's first frame; `workflow run`
    on a backend of the four files writes the frames and the audio of the plan's request, and
    the backend's record is that request."""
    data = _template(template)
    selector, steps = RUN_NODES[template]
    nodes = {n["id"]: n for n in data["nodes"]}
    nodes[selector]["widgets_values"][1] = 0.001
    for sub in data["definitions"]["subgraphs"]:
        for node in sub["nodes"]:
            if node["id"] == steps and node["type"] == "PrimitiveInt":
                assert node["widgets_values"][0] == 20
                node["widgets_values"][0] = 2
    path = tmp_path / template
    path.write_text(json.dumps(data))
    plan, variant = plan_of(str(path), str(h3_comfy))
    assert variant == "tiny-minimax-h3-pruned"
    expected = {**h3_request(template, h3_comfy), "width": 32, "height": 32}
    # the steps made 2; ComfyUI's default shift (no ModelSampling node) filled in with the files
    expected |= {"num_inference_steps": 2, "shift": 12.0}
    assert plan.request == expected
    server, out, record, job, frames = workflow_run(
        paradit_warm, backends, plan, path, h3_comfy, tmp_path / "out"
    )
    assert record["request"]["sampler"] == "res_multistep"
    assert record["request"]["shift"] == 12.0
    assert len(frames) == 124
    assert [(out / "frames" / f"{i:06d}.png").read_bytes() for i in range(124)] == frames
    assert (out / "audio.wav").read_bytes() == server.audio(job["id"])
