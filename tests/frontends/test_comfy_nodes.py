"""The V3 node classes (nodes/comfy_v3.py) against a small stand-in for ComfyUI.

No registry ships ComfyUI, so these tests write a minimal `comfy_api`, `comfy` and
`folder_paths` (only what the pack touches, behaving as ComfyUI a125cd84 does: its progress hook
raises InterruptProcessingException and clears the flag once Cancel was pressed; its
`folder_paths` lists and finds model files as ComfyUI's does: get_filename_list,
get_full_path, get_folder_paths, the unet/clip legacy names) into a temp folder and put it on
the path. The pack was also run by hand in a real ComfyUI (the Wan 2.2 single-file workflow
included).

Cost: about 9 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import POOL_LORA_CACHE_GIB
from PIL import Image

ROOT = Path(__file__).resolve().parents[2]

FAKE_FILES = {
    "comfy_api/__init__.py": "",
    "comfy_api/latest/__init__.py": """
        from types import SimpleNamespace

        class _Slot:
            def __init__(self, id=None, display_name=None, **options):
                self.id, self.display_name, self.options = id, display_name, options

        def _comfy_type(io_type):
            return type(io_type, (), {
                "Input": type("Input", (_Slot,), {"io_type": io_type}),
                "Output": type("Output", (_Slot,), {"io_type": io_type}),
            })

        class ComfyNode:
            pass

        class NodeOutput:
            def __init__(self, *args):
                self.args = args

        class ComfyExtension:
            pass

        class VideoFromFile:
            def __init__(self, file):
                self.file = file

        class VideoFromComponents:
            def __init__(self, components):
                self.components = components

        class VideoComponents:
            def __init__(self, images, frame_rate, audio=None, metadata=None):
                self.images, self.frame_rate = images, frame_rate

        io = SimpleNamespace(
            ComfyNode=ComfyNode, NodeOutput=NodeOutput, Input=_Slot, Custom=_comfy_type,
            Schema=lambda **fields: SimpleNamespace(**fields),
            **{name: _comfy_type(t) for name, t in [("Int", "INT"), ("Float", "FLOAT"),
               ("String", "STRING"), ("Combo", "COMBO"), ("Image", "IMAGE"), ("Video", "VIDEO"),
               ("Boolean", "BOOLEAN"), ("Audio", "AUDIO")]},
        )
        InputImpl = SimpleNamespace(VideoFromFile=VideoFromFile,
                                    VideoFromComponents=VideoFromComponents)
        Types = SimpleNamespace(VideoComponents=VideoComponents)
    """,
    "comfy/__init__.py": "",
    "comfy/model_management.py": """
        class InterruptProcessingException(Exception):
            pass

        interrupt_processing = False

        def interrupt_current_processing(value=True):
            global interrupt_processing
            interrupt_processing = value

        def processing_interrupted():
            return interrupt_processing

        def throw_exception_if_processing_interrupted():
            global interrupt_processing
            if interrupt_processing:
                interrupt_processing = False
                raise InterruptProcessingException()
    """,
    "comfy/utils.py": """
        from comfy import model_management

        UPDATES = []
        PREVIEWS = []
        ON_UPDATE = None  # a test's hook, e.g. pressing Cancel

        class ProgressBar:
            def __init__(self, total, node_id=None):
                self.total = total

            def update_absolute(self, value, total=None, preview=None):
                UPDATES.append((value, total))
                if preview is not None:
                    PREVIEWS.append(preview)
                if ON_UPDATE is not None:
                    ON_UPDATE(value)
                # ComfyUI's progress hook does this first (main.py, hook()).
                model_management.throw_exception_if_processing_interrupted()
    """,
    "folder_paths.py": """
        import os

        # ComfyUI's model folder kinds: their folders under models/ and the file extensions
        # get_filename_list lists (.gguf is not among them: the GGUF pack adds its own kinds).
        models_dir = os.environ["FAKE_COMFY_MODELS"]
        EXTENSIONS = {".ckpt", ".pt", ".pt2", ".bin", ".pth", ".safetensors", ".pkl", ".sft"}
        KINDS = {
            "checkpoints": ["checkpoints"],
            "text_encoders": ["text_encoders", "clip"],
            "diffusion_models": ["unet", "diffusion_models"],
            "vae": ["vae"],
            "clip_vision": ["clip_vision"],
            "loras": ["loras"],
            "diffusers": ["diffusers"],
        }
        LEGACY = {"unet": "diffusion_models", "clip": "text_encoders"}

        def get_temp_directory():
            return os.environ["FAKE_COMFY_TEMP"]

        def get_folder_paths(name):
            if name == "loras":  # a test may point it at the pool backends' --lora-dir
                return [os.environ["FAKE_COMFY_LORAS"]]
            return [os.path.join(models_dir, f) for f in KINDS[LEGACY.get(name, name)]]

        def get_filename_list(name):
            found = set()
            for folder in get_folder_paths(name):
                for dirpath, _, files in os.walk(folder, followlinks=True):
                    for file in files:
                        if os.path.splitext(file)[1].lower() in EXTENSIONS:
                            found.add(os.path.relpath(os.path.join(dirpath, file), folder))
            return sorted(found)

        def get_full_path(name, filename):
            if LEGACY.get(name, name) not in KINDS:
                return None
            for folder in get_folder_paths(name):
                path = os.path.join(folder, filename)
                if os.path.isfile(path):
                    return path
            return None
    """,
}


@pytest.fixture(scope="module")
def fake_comfy(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("fake_comfy")
    for name, text in FAKE_FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))
    (root / "models" / "diffusers" / "my-wan").mkdir(parents=True)
    (root / "models" / "diffusers" / "my-wan" / "model_index.json").write_text("{}")
    (root / "temp").mkdir()
    (root / "loras").mkdir()
    return root


@pytest.fixture(scope="module")
def comfy_v3(fake_comfy):
    """paradit.nodes.comfy_v3 imported with the stand-in on the path; removed afterwards."""
    saved_path, before = list(sys.path), set(sys.modules)
    os.environ["FAKE_COMFY_TEMP"] = str(fake_comfy / "temp")
    os.environ["FAKE_COMFY_MODELS"] = str(fake_comfy / "models")
    os.environ["FAKE_COMFY_LORAS"] = str(fake_comfy / "loras")
    sys.path.insert(0, str(fake_comfy))
    try:
        from paradit.nodes import comfy_v3

        yield comfy_v3
    finally:
        sys.path[:] = saved_path
        # Only the stand-in's modules and the node pack's: libraries first imported here
        # (diffusers, torch._dynamo) stay, since importing them twice in one process fails.
        for name in set(sys.modules) - before:
            origin = getattr(sys.modules[name], "__file__", None) or ""
            if name.startswith("paradit.nodes") or origin.startswith(str(fake_comfy)):
                del sys.modules[name]


def test_import_paradit_stays_cheap_and_exports_nothing_outside_comfyui():
    code = (
        "import sys, paradit; print('torch' in sys.modules, hasattr(paradit, 'comfy_entrypoint'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["False", "False"], out.stderr


def test_comfyui_loads_the_pack_under_its_folder_name(fake_comfy, tmp_path):
    """As ComfyUI's load_custom_node does: the folder path (dots replaced) is the module name."""
    folder = tmp_path / "custom_nodes" / "ComfyUI-paradit.git"
    folder.parent.mkdir()
    folder.symlink_to(ROOT, target_is_directory=True)
    script = f"""
        import asyncio, importlib.util, sys
        import comfy_api.latest  # ComfyUI has imported it before it loads custom nodes
        path = {str(folder)!r}
        name = path.replace(".", "_x_")
        spec = importlib.util.spec_from_file_location(name, path + "/__init__.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        extension = asyncio.run(module.comfy_entrypoint())
        nodes = asyncio.run(extension.get_node_list())
        print(" ".join(node.define_schema().node_id for node in nodes))
        print(module.__version__, nodes[0].__module__.startswith(name + ".nodes"))
    """
    env = {
        **os.environ,
        "PYTHONPATH": str(fake_comfy),
        "FAKE_COMFY_TEMP": str(tmp_path),
        "FAKE_COMFY_MODELS": str(fake_comfy / "models"),
        "FAKE_COMFY_LORAS": str(fake_comfy / "loras"),
    }
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == (
        "ParaDiTBackend ParaDiTTextToVideo ParaDiTImageToVideo ParaDiTTextToImage "
        "ParaDiTImageEdit ParaDiTLora ParaDiTStepCache"
    )
    assert lines[1].endswith(" True")


@pytest.mark.fast
def test_schemas_follow_the_parameter_specs(comfy_v3):
    from paradit.nodes.params import BACKEND_PARAMS, TASK_NODES

    backend = comfy_v3.ParaDiTBackend.define_schema()
    assert [i.id for i in backend.inputs] == [p.name for p in BACKEND_PARAMS]
    options = backend.inputs[0].options["options"]
    assert options[:3] == ["tiny-wan", "tiny-wan-i2v", "tiny-flux"] and "my-wan" in options
    assert "Wan-AI/Wan2.1-T2V-1.3B-Diffusers" in options
    assert [o.io_type for o in backend.outputs] == ["PARADIT_BACKEND", "STRING"]
    optional = [i.id for i in backend.inputs if i.options.get("optional")]
    assert optional == [p.name for p in BACKEND_PARAMS[5:]]  # appended after the first five
    assert {"gpu_memory", "offload", "vae_tiling", "vae_tile", "dp_degree"} <= set(optional)
    assert optional[-1] == "encoder_placement"  # the newest setting last: saved widgets stay
    assert {"cfg_degree", "ulysses_degree", "ring_degree", "no_shard", "plan_for"} <= set(optional)
    for node, cls in zip(TASK_NODES, comfy_v3.NODES[1:5], strict=True):
        schema = cls.define_schema()
        assert schema.node_id == node.node_id and schema.category == "paradit"
        links = ["backend", *node.image_inputs]
        assert [i.id for i in schema.inputs] == links + [p.name for p in node.params]
        seed = next(i for i in schema.inputs if i.id == "seed")
        assert seed.options["control_after_generate"] is True
        expected = ["IMAGE", *(["VIDEO"] if node.makes_video else []), "STRING"]
        expected += ["AUDIO"] if node.gives_audio else []  # appended: older links stay valid
        assert [o.io_type for o in schema.outputs] == expected


@pytest.mark.fast
def test_backend_node_resolves_a_local_folder(comfy_v3, fake_comfy):
    settings = comfy_v3.resolve_settings("my-wan", local_folders=comfy_v3.local_folders())
    assert settings.model == str((fake_comfy / "models" / "diffusers" / "my-wan").resolve())


# -- model files picked through folder_paths ---------------------------------------------------

WAN22 = json.loads((ROOT / "workflows" / "api" / "paradit_wan22_text_to_video.json").read_text())
WAN22_FILES = {k: v for k, v in WAN22["1"]["inputs"].items() if str(v).endswith(".safetensors")}
"""The file names the shipped Wan 2.2 workflow picks (ComfyUI's own Wan 2.2 template names)."""


@pytest.fixture(scope="module")
def comfy_models(fake_comfy) -> Path:
    """ComfyUI's models folder with a tiny Wan 2.2 pair under the shipped workflow's names (the
    high-noise expert in diffusion_models, the low-noise one in unet, both fp8_scaled), its text
    encoder and VAE; and files the pickers must list or leave out."""
    import copy

    from comfy_files import WAN_PREFIX, wan_original, write_safetensors
    from safetensors.torch import save_file

    from paradit.backend.models.presets import build_preset

    models = fake_comfy / "models"
    tiny = build_preset("tiny-wan")
    low = copy.deepcopy(tiny.transformer)
    with torch.no_grad():
        for param in low.parameters():
            param.mul_(0.9)
    places = {
        "model": models / "diffusion_models" / WAN22_FILES["model"],
        "model_2": models / "unet" / WAN22_FILES["model_2"],
        "text_encoder": models / "text_encoders" / WAN22_FILES["text_encoder"],
        "vae": models / "vae" / WAN22_FILES["vae"],
    }
    for path in places.values():
        path.parent.mkdir(parents=True, exist_ok=True)
    for key, dit in (("model", tiny.transformer), ("model_2", low)):
        write_safetensors(places[key], wan_original(dit.state_dict()), "fp8_scaled", WAN_PREFIX)
    encoder = tiny.text_encoder.state_dict()
    save_file({k: v for k, v in encoder.items() if "embed_tokens" not in k}, places["text_encoder"])
    save_file(tiny.vae.state_dict(), str(places["vae"]))
    others = {
        "unet/quantized/wan2.1_t2v_14B-Q4_K_M.gguf": b"GGUF",
        "clip/clip_l.safetensors": b"",
        "checkpoints/flux1-dev-fp8.safetensors": b"",
        "clip_vision/clip_vision_h.safetensors": b"",
        "text_encoders/notes.txt": b"",
        "CogVideo/CogVideoX-5b/model_index.json": b"{}",
    }
    for name, data in others.items():
        (models / name).parent.mkdir(parents=True, exist_ok=True)
        (models / name).write_bytes(data)
    return models


@pytest.mark.fast
def test_backend_node_lists_comfyui_model_files(comfy_v3, comfy_models):
    """As UNETLoader, CLIPLoader, VAELoader and CheckpointLoaderSimple list them (unet and
    diffusion_models, clip and text_encoders are one kind each), plus .gguf files and the
    diffusers folders under models/CogVideo."""
    inputs = {i.id: i for i in comfy_v3.ParaDiTBackend.define_schema().inputs}
    options = {name: inputs[name].options["options"] for name in WAN22_FILES}
    gguf = os.path.join("quantized", "wan2.1_t2v_14B-Q4_K_M.gguf")
    models = [WAN22_FILES["model"], WAN22_FILES["model_2"], gguf, "flux1-dev-fp8.safetensors"]
    model_options = options["model"]
    assert model_options[:3] == ["tiny-wan", "tiny-wan-i2v", "tiny-flux"]
    assert {"my-wan", "CogVideoX-5b", *models} <= set(model_options)
    assert model_options.index("my-wan") < model_options.index(models[0])
    from paradit.nodes.params import KNOWN_HUB_MODELS

    hub = list(KNOWN_HUB_MODELS)
    assert model_options[-len(hub) :] == hub and "THUDM/CogVideoX1.5-5B-I2V" in hub  # hub last
    assert sorted(options["model_2"]) == sorted(["none", *models])
    encoders = ["none", "clip_l.safetensors", WAN22_FILES["text_encoder"]]
    assert options["text_encoder"] == encoders
    assert inputs["text_encoder_2"].options["options"] == encoders
    assert options["vae"] == ["none", WAN22_FILES["vae"]]
    assert inputs["image_encoder"].options["options"] == ["none", "clip_vision_h.safetensors"]
    optional = [name for name in (*WAN22_FILES, "image_encoder") if name != "model"]
    assert all(inputs[name].options["optional"] for name in optional)


@pytest.mark.fast
def test_picked_files_become_the_backends_flags(comfy_v3, comfy_models):
    from paradit.backend.config import ServeConfig
    from paradit.backend.models.loading import ModelSource

    folders = comfy_v3.comfy_folders()
    widgets = {"model_override": "", "gpus": 2, "device": "cpu", "url": "", **WAN22_FILES}
    settings = comfy_v3.resolve_settings(
        **widgets, local_folders=folders.local_folders(), file_path=folders.full_path
    )
    config = settings.config()
    high = comfy_models / "diffusion_models" / WAN22_FILES["model"]
    low = comfy_models / "unet" / WAN22_FILES["model_2"]
    assert config.model == f"{high},{low}"
    encoder = comfy_models / "text_encoders" / WAN22_FILES["text_encoder"]
    assert config.text_encoders == (str(encoder),)
    assert config.vaes == (str(comfy_models / "vae" / WAN22_FILES["vae"]),)
    assert ServeConfig.from_argv(config.to_argv()) == config  # what `paradit serve` is given
    source = ModelSource.parse(config.model, config.text_encoders, config.vaes)  # headers only
    assert source.kind == "file" and source.name == config.model
    cog = comfy_v3.resolve_settings("CogVideoX-5b", local_folders=folders.local_folders())
    assert cog.model == str((comfy_models / "CogVideo" / "CogVideoX-5b").resolve())
    with pytest.raises(ValueError, match="text_encoder, vae go with a model file .* tiny-wan"):
        comfy_v3.resolve_settings("tiny-wan", text_encoder="clip_l.safetensors", vae="a.sft")
    with_clip = {**widgets, "image_encoder": "clip_vision_h.safetensors"}
    config = comfy_v3.resolve_settings(**with_clip, file_path=folders.full_path).config()
    assert config.image_encoders == (
        str(comfy_models / "clip_vision" / "clip_vision_h.safetensors"),
    )
    assert ServeConfig.from_argv(config.to_argv()) == config
    with pytest.raises(ValueError, match="'gone.safetensors' is in none of ComfyUI's vae"):
        gone = {**widgets, "vae": "gone.safetensors"}
        comfy_v3.resolve_settings(**gone, file_path=folders.full_path)


@pytest.fixture(scope="module")
def handle(comfy_v3, backends):
    url = backends.get("tiny-wan", 2).url
    return comfy_v3.ParaDiTBackend.execute(
        model="tiny-wan", model_override="", gpus=2, device="cpu", url=url
    ).args[0]


MEMORY_WIDGETS = {"gpu_memory": 4.0, "offload": "none", "vae_tiling": "on", "vae_tile": "32x32"}
MEMORY_WIDGETS |= {"encoder_placement": "cpu"}
"""What the test below sets on the backend node (tests/frontends/test_web.py sets the same)."""


def test_backend_node_settings_reach_the_backend(
    comfy_v3, fake_comfy, backends, monkeypatch, tmp_path
):
    """The node's memory widgets become the started backend's flags; its text output is the
    backend's memory plan. The pool starts it through the suite's shared backends."""
    from types import SimpleNamespace

    from paradit.nodes.pool import BackendPool
    from paradit.nodes.run import backend_summary

    started = []

    def shared(config, **_kwargs):  # the pool's LocalBackend, from the shared ones
        started.append(config)
        backend = backends.start(config.model, config.world_size, *config.to_argv())
        return SimpleNamespace(
            config=config, client=backend.client, alive=backend.alive, stop=lambda: None
        )

    monkeypatch.setattr(comfy_v3, "pool", lambda: BackendPool(tmp_path, starter=shared))
    handle, text = comfy_v3.ParaDiTBackend.execute(
        model="tiny-wan", model_override="", gpus=1, device="cpu", url="", **MEMORY_WIDGETS
    ).args
    assert len(started) == 1
    config = started[0]
    assert config.lora_dirs == (str(fake_comfy / "loras"),)  # ComfyUI's loras folders
    assert (config.gpu_memory_gib, config.offload, config.vae_tiling, config.vae_tile) == (
        4.0,
        "none",
        "on",
        "32x32",
    )
    assert config.encoder_placement == "cpu"
    info = handle.client().info()
    assert info["memory"]["settings"] == {
        "gpu_memory_gib": 4.0,
        "offload": "none",
        "vae_tiling": "on",
        "plan_for": None,
        "vae_tile": "32x32",
        "lora_cache_gib": float(POOL_LORA_CACHE_GIB),  # ComfyUI's loras folders: LoRAs on
        "weights": "auto",  # the node's default: quantized files stay quantized
        "encoder_placement": "cpu",
    }
    assert info["memory"]["text_encoder"] == "cpu"
    assert info["memory"]["reference_job"]["decode"] == "tiled"  # --vae-tiling on
    assert text == backend_summary(info) and "memory plan:" in text and ": tiled" in text


def values(**overrides):
    base = {
        "prompt": "a lighthouse",
        "negative_prompt": "",
        "width": 32,
        "height": 32,
        "frames": 5,
        "steps": 3,
        "guidance": 5.0,
        "seed": 11,
    }
    return {**base, **overrides}


def test_text_to_video_node_outputs(comfy_v3, handle):
    import comfy.utils

    comfy.utils.UPDATES.clear()
    comfy.utils.PREVIEWS.clear()
    images, video, info, audio = comfy_v3.ParaDiTTextToVideo.execute(handle, **values()).args
    assert audio is None, "tiny-wan makes no audio track"
    assert images.shape == (5, 32, 32, 3) and images.dtype == torch.float32
    assert isinstance(video, comfy_v3.InputImpl.VideoFromFile)
    assert video.file.getvalue()[4:8] == b"ftyp", "an mp4"
    assert "tiny-wan (text-to-video)" in info
    assert comfy.utils.UPDATES and comfy.utils.UPDATES[-1][1] == 3
    assert comfy.utils.PREVIEWS, "the backend's latent previews reach the progress bar"
    kind, picture, max_side = comfy.utils.PREVIEWS[-1]
    assert kind == "JPEG" and picture.size == (32, 32) and max_side == 512

    single, still, _, _ = comfy_v3.ParaDiTTextToVideo.execute(handle, **values(frames=1)).args
    assert single.shape == (1, 32, 32, 3)
    assert isinstance(still, comfy_v3.InputImpl.VideoFromComponents)
    assert still.components.frame_rate == 16 and still.components.images is single


def test_lora_nodes_chain_onto_the_backend(comfy_v3, handle, backends, monkeypatch):
    """Chained like LoraLoaderModelOnly: each node adds its LoRA to the jobs of the backend it
    passes on (the one it was given is unchanged); the backend's refusal is the node's error."""
    from safetensors.torch import save_file

    from paradit.backend.client.http import BackendError
    from paradit.nodes.params import LORA_PARAMS

    monkeypatch.setenv("FAKE_COMFY_LORAS", str(backends.lora_dir))  # the pool backend's
    (backends.lora_dir / "styles").mkdir(exist_ok=True)
    generator = torch.Generator().manual_seed(3)
    module = "transformer.blocks.0.attn1.to_q"  # tiny-wan: 64 wide
    save_file(
        {
            f"{module}.lora_A.weight": torch.randn(4, 64, generator=generator) * 0.3,
            f"{module}.lora_B.weight": torch.randn(64, 4, generator=generator) * 0.3,
        },
        str(backends.lora_dir / "styles" / "node.safetensors"),
    )
    schema = comfy_v3.ParaDiTLora.define_schema()
    assert [i.id for i in schema.inputs] == ["backend", *(p.name for p in LORA_PARAMS)]
    assert "styles/node.safetensors" in schema.inputs[1].options["options"]
    assert [o.io_type for o in schema.outputs] == ["PARADIT_BACKEND"]
    (first,) = comfy_v3.ParaDiTLora.execute(handle, "styles/node.safetensors", 0.5).args
    (second,) = comfy_v3.ParaDiTLora.execute(first, "styles/node.safetensors", -0.25).args
    assert handle.loras == () and [item["strength"] for item in second.lora_items()] == [
        0.5,
        -0.25,
    ]
    with_loras, _, _, _ = comfy_v3.ParaDiTTextToVideo.execute(second, **values()).args
    client = handle.client()
    record = client.record(client.jobs()[0]["id"])
    assert [(item["name"], item["strength"]) for item in record["loras"]] == [
        ("styles/node.safetensors", 0.5),
        ("styles/node.safetensors", -0.25),
    ]
    plain, _, _, _ = comfy_v3.ParaDiTTextToVideo.execute(handle, **values()).args
    assert not torch.equal(with_loras, plain)
    (high,) = comfy_v3.ParaDiTLora.execute(handle, "styles/node.safetensors", 1.0, "high").args
    assert high.lora_items() == [{"name": "styles/node.safetensors", "high": 1.0, "low": 0.0}]
    with pytest.raises(BackendError, match="high/low strengths are for Wan 2.2's two experts"):
        comfy_v3.ParaDiTTextToVideo.execute(high, **values())


def test_step_cache_node_sets_the_jobs_cache(comfy_v3, handle):
    """Chained like the LoRA node: the job it feeds runs with that cache (job.json records
    each step); the node's input backend is left as it was."""
    from paradit.nodes.params import CACHE_PARAMS

    schema = comfy_v3.ParaDiTStepCache.define_schema()
    assert [i.id for i in schema.inputs] == ["backend", *(p.name for p in CACHE_PARAMS)]
    assert [o.io_type for o in schema.outputs] == ["PARADIT_BACKEND"]
    with pytest.raises(ValueError, match="cache threshold must be a number > 0 and <= 1.0"):
        comfy_v3.ParaDiTStepCache.execute(handle, "first-block", 1.5)
    (cached,) = comfy_v3.ParaDiTStepCache.execute(handle, "first-block", 1.0).args
    assert handle.cache == () and dict(cached.cache) == {"method": "first-block", "threshold": 1.0}
    comfy_v3.ParaDiTTextToVideo.execute(cached, **values(steps=4))
    client = handle.client()
    record = client.record(client.jobs()[0]["id"])
    cache = record["cache"]
    assert (cache["method"], cache["threshold"]) == ("first-block", 1.0)
    assert [step["computed"] for step in cache["steps"]][:1] == [True]  # the first always runs
    assert cache["num_computed"] + cache["num_skipped"] == 4 and cache["num_skipped"] >= 1


def test_step_cache_node_refuses_a_model_without_one(comfy_v3):
    """The node's widgets cannot depend on the model; on a backend whose model has no step
    cache (`limits.step_cache` false: Flux.2, Klein, Qwen-Image-Edit, Z-Image) it stops the
    workflow at the node, naming it, before any job is sent."""
    import dataclasses

    from paradit.nodes.pool import BackendHandle

    class StandIn:  # a pool whose backend serves Z-Image
        def __init__(self):
            self.jobs = []

        def acquire(self, _settings):
            return self

        def info(self):
            return {"model": "tiny-z-image", "limits": {"step_cache": False}}

    handle = BackendHandle(settings=None, pool=StandIn())
    with pytest.raises(ValueError, match="'tiny-z-image' has no step cache: remove the ParaDiT"):
        comfy_v3.ParaDiTStepCache.execute(handle, "first-block", 0.5)
    with_cache = dataclasses.replace(handle, pool=StandIn())
    with_cache.pool.info = lambda: {"model": "tiny-wan", "limits": {"step_cache": True}}
    (cached,) = comfy_v3.ParaDiTStepCache.execute(with_cache, "first-block", 0.5).args
    assert dict(cached.cache) == {"method": "first-block", "threshold": 0.5}


def test_image_to_video_node_needs_an_i2v_model(comfy_v3, handle):
    image = torch.from_numpy(np.array(Image.new("RGB", (16, 16), "red"))).float()[None] / 255
    with pytest.raises(ValueError, match="runs image-to-video, but the backend serves 'tiny-wan'"):
        comfy_v3.ParaDiTImageToVideo.execute(handle, image, **values())


def test_cancel_in_comfyui_cancels_the_backend_job(comfy_v3, handle):
    import comfy.model_management as mm
    import comfy.utils

    def press_cancel(step: int) -> None:
        if step >= 1:
            mm.interrupt_current_processing(True)

    comfy.utils.ON_UPDATE = press_cancel
    try:
        with pytest.raises(mm.InterruptProcessingException):
            comfy_v3.ParaDiTTextToVideo.execute(handle, **values(width=256, height=256, steps=200))
    finally:
        comfy.utils.ON_UPDATE = None
    job = handle.client().jobs()[0]
    assert job["status"] == "cancelled" and job["progress"]["step"] < 200
    assert not mm.processing_interrupted(), "the interrupt flag is cleared, as ComfyUI does"


def test_backend_error_is_the_node_error(comfy_v3, handle):
    from paradit.backend.client.http import BackendError

    with pytest.raises(BackendError, match="height must be between 16 and 2048"):
        comfy_v3.ParaDiTTextToVideo.execute(handle, **values(height=8))


# -- the shipped CogVideoX workflows, run node by node ------------------------------------------


def run_api_workflow(comfy_v3, workflow: dict, core_nodes: dict) -> dict[str, tuple]:
    """Execute an API-format workflow as ComfyUI would: each node once its inputs exist, links
    resolved to the outputs they name. ComfyUI's core nodes come as stand-ins."""
    pack = {cls.define_schema().node_id: cls for cls in comfy_v3.NODES}
    outputs: dict[str, tuple] = {}
    pending = dict(workflow)
    while pending:
        ready = [
            node_id
            for node_id, node in pending.items()
            if all(v[0] in outputs for v in node["inputs"].values() if isinstance(v, list))
        ]
        assert ready, f"the workflow's links do not resolve: {sorted(pending)}"
        for node_id in sorted(ready, key=int):
            node = pending.pop(node_id)
            inputs = {
                name: outputs[value[0]][value[1]] if isinstance(value, list) else value
                for name, value in node["inputs"].items()
            }
            if node["class_type"] in pack:
                outputs[node_id] = pack[node["class_type"]].execute(**inputs).args
            else:
                outputs[node_id] = core_nodes[node["class_type"]](**inputs)
    return outputs


@pytest.mark.parametrize(
    ("name", "model", "world_size"),
    [
        ("paradit_cogvideox_text_to_video", "tiny-cogvideox", 2),
        ("paradit_cogvideox_image_to_video", "tiny-cogvideox-i2v", 1),
    ],
)
def test_cogvideox_workflows_run(comfy_v3, backends, name, model, world_size):
    workflow = json.loads((ROOT / "workflows" / "api" / f"{name}.json").read_text())
    url = backends.get(model, world_size).url
    saved: dict[str, object] = {}

    def keep(key: str, input_name: str):
        def node(**inputs) -> tuple:
            saved[key] = inputs[input_name]
            return ()

        return node

    start = torch.from_numpy(np.array(Image.new("RGB", (80, 48), "teal"))).float()[None] / 255
    core_nodes = {
        "LoadImage": lambda **_: (start, torch.zeros(1, 48, 80)),
        "SaveVideo": keep("video", "video"),
        "PreviewAny": keep("info", "source"),
    }
    for node in workflow.values():
        if node["class_type"] == "ParaDiTBackend":  # the shipped model, swapped for its preset
            assert node["inputs"]["model"].startswith("THUDM/CogVideoX")
            node["inputs"].update(model=model, gpus=world_size, device="cpu", url=url)
        if node["class_type"].startswith("ParaDiT") and "frames" in node["inputs"]:
            node["inputs"].update(width=80, height=48, frames=9, steps=2)
    outputs = run_api_workflow(comfy_v3, workflow, core_nodes)
    task_node = next(k for k, n in workflow.items() if "frames" in n["inputs"])
    images = outputs[task_node][0]
    assert images.shape == (9, 48, 80, 3) and images.dtype == torch.float32
    assert saved["video"].file.getvalue()[4:8] == b"ftyp", "SaveVideo got the mp4"
    assert f"{model} (" in saved["info"] and f"ranks: {world_size} x cpu" in saved["info"]


def test_wan22_file_workflow_runs(comfy_v3, comfy_models, backends, monkeypatch, tmp_path):
    """The shipped Wan 2.2 workflow, unchanged but for size and device, on ComfyUI's files: the
    backend node resolves the picked files and the pool starts `paradit serve` with them (through
    the suite's shared backends)."""
    from types import SimpleNamespace

    from paradit.nodes.pool import BackendPool

    started = []

    def shared(config, **_kwargs):
        started.append(config)
        backend = backends.start(config.model, config.world_size, *config.to_argv())
        return SimpleNamespace(
            config=config, client=backend.client, alive=backend.alive, stop=lambda: None
        )

    monkeypatch.setattr(comfy_v3, "pool", lambda: BackendPool(tmp_path, starter=shared))
    workflow = json.loads(json.dumps(WAN22))
    workflow["1"]["inputs"].update(gpus=1, device="cpu")
    workflow["2"]["inputs"].update(width=32, height=32, frames=5, steps=2)
    saved: dict[str, object] = {}
    core_nodes = {
        "SaveVideo": lambda video, **_: saved.setdefault("video", video) and (),
        "PreviewAny": lambda source, **_: saved.setdefault("info", source) and (),
    }
    outputs = run_api_workflow(comfy_v3, workflow, core_nodes)
    assert [c.model.count(",") for c in started] == [1]  # the two experts
    info = outputs["1"][0].client().info()
    assert info["model_files"]["variant"] == "tiny-wan A14B pair"
    formats = {slot: f["format"] for slot, f in info["model_files"]["files"].items()}
    assert formats["transformer"] == formats["transformer_2"] == "fp8_scaled"
    assert f"files: tiny-wan A14B pair: transformer {WAN22_FILES['model']}" in outputs["1"][1]
    assert outputs["2"][0].shape == (5, 32, 32, 3)
    assert saved["video"].file.getvalue()[4:8] == b"ftyp"
    assert "ranks: 1 x cpu" in saved["info"]
