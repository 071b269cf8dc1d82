"""The shared ComfyUI workflows: valid UI and API format, known node types, consistent links.

workflows/ui/NAME.json   what ComfyUI's Save writes (version 0.4); loads by drag and drop
workflows/api/NAME.json  what `POST /prompt` takes; must equal the UI form converted
example_workflows/NAME.json  a copy of the UI form, for ComfyUI's template browser

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from paradit.backend.models.preset_names import PRESET_NAMES
from paradit.nodes.params import (
    BACKEND_NODE_ID,
    BACKEND_PARAMS,
    BACKEND_TYPE,
    DEVICES,
    KNOWN_HUB_MODELS,
    LORA_NODE_ID,
    LORA_PARAMS,
    MAX_SEED,
    NO_FILE,
    TASK_NODES,
    Param,
)

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[2]
NAMES = (
    "paradit_text_to_video",
    "paradit_image_to_video",
    "paradit_text_to_image",
    "paradit_cogvideox_text_to_video",
    "paradit_cogvideox_image_to_video",
    "paradit_wan22_text_to_video",
    "paradit_hunyuanvideo15_text_to_video",
    "paradit_hunyuanvideo15_image_to_video",
    "paradit_ltx2_text_to_video",
    "paradit_ltx2_image_to_video",
    "paradit_qwen_image_text_to_image",
    "paradit_z_image_text_to_image",
    "paradit_flux2_text_to_image",
    "paradit_image_edit",
    "paradit_wan22_4step",
)
DEFAULT_MODELS = {
    "paradit_text_to_video": "Wan-AI/Wan2.1-T2V-1.3B-Diffusers",
    "paradit_image_to_video": "Wan-AI/Wan2.1-I2V-14B-480P-Diffusers",
    "paradit_text_to_image": "black-forest-labs/FLUX.1-dev",
    "paradit_cogvideox_text_to_video": "THUDM/CogVideoX-5b",
    "paradit_cogvideox_image_to_video": "THUDM/CogVideoX-5b-I2V",
    "paradit_wan22_text_to_video": "wan2.2_t2v_high_noise_14B_fp8_scaled.safetensors",
    "paradit_hunyuanvideo15_text_to_video": (
        "hunyuanvideo-community/HunyuanVideo-1.5-Diffusers-480p_t2v"
    ),
    "paradit_hunyuanvideo15_image_to_video": (
        "hunyuanvideo-community/HunyuanVideo-1.5-Diffusers-480p_i2v"
    ),
    "paradit_ltx2_text_to_video": "Lightricks/LTX-2",
    "paradit_ltx2_image_to_video": "Lightricks/LTX-2",  # LTX2Pipeline: takes an image too
    "paradit_qwen_image_text_to_image": "Qwen/Qwen-Image",
    "paradit_z_image_text_to_image": "z_image_turbo_bf16.safetensors",
    "paradit_flux2_text_to_image": "black-forest-labs/FLUX.2-dev",
    "paradit_image_edit": "Qwen/Qwen-Image-Edit-2509",
    "paradit_wan22_4step": "wan2.2_i2v_high_noise_14B_fp8_scaled.safetensors",
}
FILE_WORKFLOWS = {  # a model from single files: the names ComfyUI's own Wan 2.2 templates use
    "paradit_wan22_text_to_video": {
        "model_2": "wan2.2_t2v_low_noise_14B_fp8_scaled.safetensors",
        "text_encoder": "umt5_xxl_fp8_e4m3fn_scaled.safetensors",
        "text_encoder_2": NO_FILE,
        "vae": "wan_2.1_vae.safetensors",
    },
    "paradit_wan22_4step": {  # ComfyUI's Wan 2.2 A14B image-to-video template's files
        "model_2": "wan2.2_i2v_low_noise_14B_fp8_scaled.safetensors",
        "text_encoder": "umt5_xxl_fp8_e4m3fn_scaled.safetensors",
        "text_encoder_2": NO_FILE,
        "vae": "wan_2.1_vae.safetensors",
    },
    "paradit_z_image_text_to_image": {  # ComfyUI's Z-Image-Turbo template's files
        "model_2": NO_FILE,
        "text_encoder": "qwen_3_4b.safetensors",
        "text_encoder_2": NO_FILE,
        "vae": "ae.safetensors",
    },
}
MODEL_PREFIXES = (
    "cogvideox_",
    "wan22_",
    "hunyuanvideo15_",
    "ltx2_",
    "qwen_image_",
    "z_image_",
    "flux2_",
)
"""A workflow's name: paradit_[MODEL_]TASK (or a recipe's name: RECIPE_WORKFLOWS)."""
RECIPE_WORKFLOWS = {"paradit_wan22_4step": ("image-to-video", "wan2.2-a14b-4step")}
"""Workflows named for the recipe they run: their task and recipe."""
SEED_CONTROLS = ("fixed", "increment", "decrement", "randomize")

# ComfyUI core nodes the workflows use, checked against Comfy-Org/ComfyUI a125cd84 (nodes.py:
# LoadImage, SaveImage; comfy_extras/nodes_video.py: SaveVideo; comfy_extras/
# nodes_preview_any.py: PreviewAny) and its frontend 1.27.10, which adds LoadImage's upload
# widget (saved as "image") and PreviewAny's "preview" text (exported to the API as "").
# SaveAudio (comfy_extras/nodes_audio.py): an AUDIO input and `filename_prefix` (its default
# "audio/ComfyUI"), saved as FLAC.
# links: link inputs and their types; widgets: widget names in `widgets_values` order.
CORE_NODES: dict[str, dict] = {
    "LoadImage": {
        "links": {},
        "widgets": ["image", "upload"],
        "outputs": ["IMAGE", "MASK"],
        "ui_only": {"upload": "image"},
    },
    "SaveImage": {"links": {"images": "IMAGE"}, "widgets": ["filename_prefix"], "outputs": []},
    "SaveVideo": {
        "links": {"video": "VIDEO"},
        "widgets": ["filename_prefix", "format", "codec"],
        "outputs": [],
        "options": {"format": ["auto", "mp4"], "codec": ["auto", "h264"]},
    },
    "SaveAudio": {"links": {"audio": "AUDIO"}, "widgets": ["filename_prefix"], "outputs": []},
    "PreviewAny": {
        "links": {"source": "*"},
        "widgets": [],
        "outputs": [],
        "api_only": {"preview": ""},
    },
}


def pack_nodes() -> dict[str, dict]:
    """The pack's nodes in the same shape, from the parameter specs the nodes are built from."""
    model_options = [*PRESET_NAMES, *KNOWN_HUB_MODELS]
    nodes = {
        BACKEND_NODE_ID: {
            "links": {},
            "params": BACKEND_PARAMS,
            "outputs": [BACKEND_TYPE, "STRING"],
            "options": {"model": model_options, "device": list(DEVICES)},
        },
    }
    for node in TASK_NODES:
        links = {"backend": BACKEND_TYPE, **dict.fromkeys(node.image_inputs, "IMAGE")}
        outputs = ["IMAGE", *(["VIDEO"] if node.makes_video else []), "STRING"]
        outputs += ["AUDIO"] if node.gives_audio else []
        nodes[node.node_id] = {"links": links, "params": node.params, "outputs": outputs}
        nodes[node.node_id]["optional_links"] = set(node.image_inputs[1:])
    nodes[LORA_NODE_ID] = {
        "links": {"backend": BACKEND_TYPE},
        "params": LORA_PARAMS,
        "outputs": [BACKEND_TYPE],
        "files": {"lora_name"},  # the user's models/loras, listed when ComfyUI shows the node
    }
    return nodes


KNOWN = {**CORE_NODES, **pack_nodes()}


def load(folder: str, name: str) -> dict:
    return json.loads((ROOT / folder / f"{name}.json").read_text())


def check_param(param: Param, value, options: list | None) -> None:
    if param.folders and (value == NO_FILE or value.endswith((".safetensors", ".gguf"))):
        return  # a file picker: the user's files, listed when ComfyUI shows the node
    if param.kind == "combo":
        offered = options or list(param.choices)
        assert value in offered, f"{param.name}={value!r} is not one of the offered options"
    elif param.kind == "boolean":
        assert isinstance(value, bool), param.name
    elif param.kind == "int":
        assert isinstance(value, int) and not isinstance(value, bool), param.name
        assert param.low <= value <= param.high, f"{param.name}={value} out of bounds"
        assert (value - param.low) % param.step == 0, f"{param.name}={value} off the step grid"
    elif param.kind == "float":
        assert isinstance(value, (int, float)) and param.low <= value <= param.high, param.name
    else:
        assert isinstance(value, str), param.name


def widget_names(spec: dict) -> list[str]:
    """Names of the `widgets_values` entries, with a seed's control value after it."""
    if "widgets" in spec:
        return list(spec["widgets"])
    names = []
    for param in spec["params"]:
        names.append(param.name)
        if param.control_after_generate:
            names.append(f"{param.name}:control")
    return names


def saved_values(spec: dict, node: dict, *, with_defaults: bool = False) -> dict:
    """A UI node's `widgets_values` by widget name. As ComfyUI loads a workflow, values are
    positional and a workflow saved before optional widgets were appended stops early: those
    keep their defaults (`with_defaults` adds them). Only optional widgets may be missing."""
    names, values = widget_names(spec), node["widgets_values"]
    assert len(values) <= len(names), node["type"]
    missing = [p for p in spec.get("params", ()) if p.name in names[len(values) :]]
    assert len(missing) == len(names) - len(values), f"{node['type']}: a control value is cut"
    assert all(p.optional for p in missing), f"{node['type']} lacks required widgets"
    saved = dict(zip(names, values, strict=False))
    return {**saved, **{p.name: p.default for p in missing}} if with_defaults else saved


def ui_to_api(ui: dict) -> dict:
    """What ComfyUI's frontend exports as the API form of a UI workflow."""
    links = {link[0]: link for link in ui["links"]}
    api = {}
    for node in ui["nodes"]:
        spec = KNOWN[node["type"]]
        values = saved_values(spec, node)
        inputs = {
            name: value
            for name, value in values.items()
            if not name.endswith(":control") and name not in spec.get("ui_only", {})
        }
        inputs.update(spec.get("api_only", {}))
        for slot in node["inputs"]:
            if slot.get("link") is not None:
                link = links[slot["link"]]
                inputs[slot["name"]] = [str(link[1]), link[2]]
        api[str(node["id"])] = {
            "class_type": node["type"],
            "inputs": inputs,
            "_meta": {"title": node.get("title", node["type"])},
        }
    return api


def test_every_workflow_has_its_three_forms():
    for folder in ("workflows/ui", "workflows/api", "example_workflows"):
        assert sorted(p.stem for p in (ROOT / folder).glob("*.json")) == sorted(NAMES), folder
    for name in NAMES:  # the template browser shows NAME.jpg as the thumbnail
        with Image.open(ROOT / "example_workflows" / f"{name}.jpg") as thumbnail:
            assert thumbnail.format == "JPEG" and max(thumbnail.size) <= 800
    # ComfyUI's template browser lists `<pack>/workflows/*.json` too: keep that level empty so
    # templates are not listed twice (and API files not listed at all).
    assert not list((ROOT / "workflows").glob("*.json"))


@pytest.mark.parametrize("name", NAMES)
def test_template_copy_equals_the_ui_workflow(name):
    assert (ROOT / "example_workflows" / f"{name}.json").read_bytes() == (
        ROOT / "workflows" / "ui" / f"{name}.json"
    ).read_bytes()


@pytest.mark.parametrize("name", NAMES)
def test_ui_workflow_format(name):
    ui = load("workflows/ui", name)
    assert ui["version"] == 0.4
    for key in ("last_node_id", "last_link_id", "nodes", "links", "groups", "config", "extra"):
        assert key in ui, key
    ids = [node["id"] for node in ui["nodes"]]
    assert len(set(ids)) == len(ids) and ui["last_node_id"] >= max(ids)
    assert sorted(node["order"] for node in ui["nodes"]) == list(range(len(ids)))
    for node in ui["nodes"]:
        for key in (
            "id",
            "type",
            "pos",
            "size",
            "flags",
            "order",
            "mode",
            "inputs",
            "outputs",
            "properties",
            "widgets_values",
        ):
            assert key in node, f"node {node.get('id')} lacks {key}"
        assert node["mode"] == 0, "every node is active"
        assert node["type"] in KNOWN, f"unknown node type {node['type']}"
        spec = KNOWN[node["type"]]
        types = [o["type"] for o in node["outputs"]]  # outputs added later come after these
        assert types == spec["outputs"][: len(types)], node["type"]
        assert len(types) >= min(1, len(spec["outputs"])), node["type"]
        assert {i["name"]: i["type"] for i in node["inputs"]} == spec["links"], node["type"]
        saved_values(spec, node)


@pytest.mark.parametrize("name", NAMES)
def test_ui_links_are_consistent(name):
    ui = load("workflows/ui", name)
    nodes = {node["id"]: node for node in ui["nodes"]}
    link_ids = [link[0] for link in ui["links"]]
    assert len(set(link_ids)) == len(link_ids) and ui["last_link_id"] >= max(link_ids)
    for link_id, src, src_slot, dst, dst_slot, link_type in ui["links"]:
        output = nodes[src]["outputs"][src_slot]
        target = nodes[dst]["inputs"][dst_slot]
        assert link_id in (output["links"] or []), f"link {link_id} missing on its output"
        assert target["link"] == link_id, f"link {link_id} missing on its input"
        assert output["type"] == link_type
        assert target["type"] in (link_type, "*"), f"link {link_id}: {link_type} -> {target}"
        assert nodes[src]["order"] < nodes[dst]["order"], "order must follow the links"
    for node in ui["nodes"]:
        optional = KNOWN[node["type"]].get("optional_links", set())
        for slot in node["inputs"]:
            connected = slot["link"] is not None or slot["name"] in optional
            assert connected, f"{node['type']}.{slot['name']} is not connected"
        for output in node["outputs"]:
            for link_id in output["links"] or []:
                assert link_id in link_ids


@pytest.mark.parametrize("name", NAMES)
def test_widget_values_are_valid(name):
    ui = load("workflows/ui", name)
    for node in ui["nodes"]:
        spec = KNOWN[node["type"]]
        values = saved_values(spec, node, with_defaults=True)
        options = spec.get("options", {})
        for param in spec.get("params", ()):
            if param.name in spec.get("files", ()) and values[param.name].endswith(".safetensors"):
                continue
            check_param(param, values[param.name], options.get(param.name))
            if param.control_after_generate:
                assert values[f"{param.name}:control"] in SEED_CONTROLS
                assert values[param.name] <= MAX_SEED
        files = {p.name for p in spec.get("params", ()) if p.folders}
        for widget, allowed in options.items():
            if widget in files and values[widget] not in allowed:
                continue  # a file name, checked by check_param above
            assert values[widget] in allowed, f"{node['type']}.{widget}={values[widget]!r}"
        if node["type"] == "ParaDiTTextToVideo" or node["type"] == "ParaDiTImageToVideo":
            assert (values["frames"] - 1) % 4 == 0, "Wan and CogVideoX frame counts are 4k+1"
            if "cogvideox" in name:  # CogVideoX 1.0: 720x480, at most 49 frames
                assert (values["width"], values["height"]) == (720, 480)
                assert values["frames"] <= 49
            if "hunyuanvideo15" in name:  # the model card's 848x480, 121 frames, 50 steps
                assert (values["width"], values["height"], values["frames"]) == (848, 480, 121)
                assert (values["steps"], values["guidance"]) == (50, 6.0)
            if "ltx2" in name:  # the model card's 768x512, 121 frames, 40 steps, guidance 4
                assert (values["width"], values["height"], values["frames"]) == (768, 512, 121)
                assert (values["steps"], values["guidance"]) == (40, 4.0)
        if node["type"] in {n.node_id for n in TASK_NODES}:
            assert values["prompt"].strip(), "workflows ship with a prompt"


@pytest.mark.parametrize("name", NAMES)
def test_workflow_defaults_to_a_real_model(name):
    ui = load("workflows/ui", name)
    backend = next(n for n in ui["nodes"] if n["type"] == BACKEND_NODE_ID)
    values = saved_values(KNOWN[BACKEND_NODE_ID], backend, with_defaults=True)
    assert values["model"] == DEFAULT_MODELS[name]
    assert values["url"] == "" and values["model_override"] == ""
    files = {widget: values[widget] for widget in ("model_2", "text_encoder", "text_encoder_2")}
    files["vae"] = values["vae"]
    assert files == FILE_WORKFLOWS.get(name, dict.fromkeys(files, NO_FILE))
    task_ids = {n.task: n.node_id for n in TASK_NODES}
    used = {n["type"] for n in ui["nodes"]}
    task = name.removeprefix("paradit_")
    for prefix in MODEL_PREFIXES:
        task = task.removeprefix(prefix)
    task = RECIPE_WORKFLOWS[name][0] if name in RECIPE_WORKFLOWS else task.replace("_", "-")
    task = {"image-edit": "edit"}.get(task, task)  # paradit_image_edit serves task "edit"
    assert task_ids[task] in used
    assert {"SaveVideo", "SaveImage"} & used, "every workflow saves its output"
    if name == "paradit_ltx2_text_to_video":  # the audio track, saved on its own as well
        audio = next(link for link in ui["links"] if link[5] == "AUDIO")
        saver = next(n for n in ui["nodes"] if n["id"] == audio[3])
        assert saver["type"] == "SaveAudio" and audio[2] == 3  # the task node's AUDIO output


@pytest.mark.parametrize("name", NAMES)
def test_api_workflow_matches_the_ui_form(name):
    api = load("workflows/api", name)
    for node_id, node in api.items():
        assert node_id.isdigit() and node["class_type"] in KNOWN
        for value in node["inputs"].values():
            if isinstance(value, list):
                assert value[0] in api and isinstance(value[1], int), f"dangling link {value}"
    assert api == ui_to_api(load("workflows/ui", name))


def test_the_4step_workflow_runs_the_recipe_with_a_lora_per_expert():
    """ComfyUI's Wan 2.2 A14B 4-step path: the recipe, and the lightx2v LoRA pair chained
    before the generation node, each at strength 1.0 on its own expert."""
    ui = load("workflows/ui", "paradit_wan22_4step")
    nodes = {node["id"]: node for node in ui["nodes"]}
    task = next(n for n in ui["nodes"] if n["type"] == "ParaDiTImageToVideo")
    values = saved_values(KNOWN["ParaDiTImageToVideo"], task, with_defaults=True)
    assert values["recipe"] == RECIPE_WORKFLOWS["paradit_wan22_4step"][1]
    assert (values["steps"], values["guidance"]) == (4, 1.0)
    chain, node = [], task
    while True:  # follow the backend input back to the backend node
        link = next(link for link in ui["links"] if link[3] == node["id"] and link[4] == 0)
        node = nodes[link[1]]
        if node["type"] != LORA_NODE_ID:
            break
        chain.append(saved_values(KNOWN[LORA_NODE_ID], node))
    assert node["type"] == BACKEND_NODE_ID
    experts = sorted((lora["expert"], lora["strength"]) for lora in chain)
    assert experts == [("high", 1.0), ("low", 1.0)]
    assert all("lightx2v_4steps" in lora["lora_name"] for lora in chain)
