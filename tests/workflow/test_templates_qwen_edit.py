"""ComfyUI's Qwen-Image-Edit templates (`image_qwen_image_edit`, `_2509`, `_2511`,
`_2511_int8`; the `comfyui-workflow-templates-json` package) in their saved form, on a
ComfyUI folder of tiny files under the templates' own names (the tiny edit DiT in bf16 and
as int8_convrot, the tiny Qwen2.5-VL with its vision tower in ComfyUI's names, the VAE, a tiny
LoRA under each Lightning name, seeded input images): each imports to the job ComfyUI runs
(every field written by hand from the graph, the node that gives it named beside it), the
image sent is FluxKontextImageScale's, and the int8 one runs end to end through `paradit
workflow run` on its int8_convrot file. The first model's (`image_qwen_image_edit`) imports
too.

Cost: about 20 s (the tiny files; an end-to-end 2-step job at the Kontext size of a 60x40
image, 1248x832, with its 1024x1024-pixel reference).
"""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import numpy as np
import pytest
from comfy_files import quantizable, write_safetensors
from comfy_templates import TEMPLATES, widget
from conftest import run_job
from lora_files import peft_lora
from PIL import Image
from quant_files import write_int8
from safetensors.torch import save_file

from paradit.backend.models.presets import build_preset
from paradit.backend.tools.workflow import plan_of, render
from paradit.backend.workflow.images import kontext_size, loaded_png

E2509, E2511, INT8 = (f"image_qwen_image_edit_{v}.json" for v in ("2509", "2511", "2511_int8"))
FIRST = "image_qwen_image_edit.json"
IMAGES = {  # the input files the templates name -> (width, height) of the seeded stand-in
    "image_qwen_image_edit_input_image.png": (64, 48),  # sides of 16: VAEEncode's size
    "image_qwen_image_edit_2509_input_image.png": (60, 40),
    "lily_girl_blue.png": (60, 40),
}


def _png(path: Path, size: tuple[int, int], seed: int) -> None:
    width, height = size
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path, format="PNG")


@pytest.fixture(scope="module")
def comfy(tmp_path_factory) -> Path:
    """The ComfyUI folder: every file the three templates name, tiny."""
    root = tmp_path_factory.mktemp("ComfyUI")
    models = root / "models"
    for sub in ("diffusion_models", "text_encoders", "vae", "loras"):
        (models / sub).mkdir(parents=True)
    (root / "input").mkdir()
    tiny = build_preset("tiny-qwen-image-edit")
    dits = models / "diffusion_models"
    state = tiny.transformer.state_dict()
    names = ("qwen_image_edit_fp8_e4m3fn", "qwen_image_edit_2509_fp8_e4m3fn",
             "qwen_image_edit_2511_fp8mixed")  # fmt: skip
    for name in names:
        write_safetensors(dits / f"{name}.safetensors", state, "bf16")
    write_int8(dits / "qwen_image_edit_2511_int8_convrot.safetensors", state, quantizable,
               group=64)  # fmt: skip
    encoder = {
        k.replace("model.language_model.", "model.").replace("model.visual.", "visual."): v
        for k, v in tiny.text_encoder.state_dict().items()
    }
    save_file(encoder, str(models / "text_encoders" / "qwen_2.5_vl_7b_fp8_scaled.safetensors"))
    save_file(tiny.vae.state_dict(), str(models / "vae" / "qwen_image_vae.safetensors"))
    for release in ("2509", "2511"):
        name = f"Qwen-Image-Edit-{release}-Lightning-4steps-V1.0-bf16.safetensors"
        peft_lora(models / "loras" / name, tiny.transformer, ("attn.to_q",), seed=3)
    for seed, (name, size) in enumerate(IMAGES.items()):
        _png(root / "input" / name, size, seed)
    for name in _template_images(E2511):
        if name not in IMAGES:
            _png(root / "input" / name, (40, 56), 7)
    return root


def _template_images(template: str) -> list[str]:
    data = json.loads((TEMPLATES / template).read_text())
    return [n["widgets_values"][0] for n in data["nodes"] if n["type"] == "LoadImage"]


EXPECTED = {  # template -> (request, serve settings relative to models/), by hand
    FIRST: (  # subgraph 102, Lightning (PrimitiveBoolean 111) false; ImageScaleToTotalPixels
        # 93 feeds nothing: passed over, as ComfyUI does not run it
        {"prompt": widget(FIRST, "102:76", 0),  # TextEncodeQwenImageEdit 76
         "negative_prompt": widget(FIRST, "102:77", 0),  # 77: the same image
         # VAEEncode 88 of the loaded image itself (64x48)
         "width": 64, "height": 48, "num_frames": 1,
         # switches on_false: PrimitiveInt 106 (20), PrimitiveFloat 107 (2.5); KSampler 3
         "num_inference_steps": 20, "guidance_scale": 2.5, "seed": widget(FIRST, "102:3", 0),
         "sampler": "euler", "scheduler": "simple", "shift": 3.0,  # ModelSamplingAuraFlow 66
         "image": "input/image_qwen_image_edit_input_image.png", "image_prep": "comfyui",
         "cfg_mode": "norm", "cfg_norm": 1.0},  # CFGNorm 75
        {"model": "diffusion_models/qwen_image_edit_fp8_e4m3fn.safetensors",
         "text_encoders": ["text_encoders/qwen_2.5_vl_7b_fp8_scaled.safetensors"],
         "vaes": ["vae/qwen_image_vae.safetensors"], "image_encoders": [], "lora_dirs": []},
    ),
    E2509: (  # subgraph 433, "Enable Lightning LoRA" (PrimitiveBoolean 443) true
        {"prompt": widget(E2509, "433:111", 0),  # TextEncodeQwenImageEditPlus 111
         "negative_prompt": widget(E2509, "433:110", 0),  # 110: the same image
         # VAEEncode 88 of FluxKontextImageScale 117: a 60x40 image's Kontext size
         "width": 1248, "height": 832, "num_frames": 1,
         # switches 441/442 on_true: PrimitiveInt 436 (4), PrimitiveFloat 437 (1); KSampler
         # 3's seed, euler/simple; ModelSamplingAuraFlow 66: 3; CFGNorm 75 at cfg 1: none
         "num_inference_steps": 4, "guidance_scale": 1.0, "seed": widget(E2509, "433:3", 0),
         "sampler": "euler", "scheduler": "simple", "shift": 3.0,
         "image": "input/image_qwen_image_edit_2509_input_image.png", "image_prep": "comfyui",
         # switch 440 on_true: LoraLoaderModelOnly 89
         "loras": [{"name": "Qwen-Image-Edit-2509-Lightning-4steps-V1.0-bf16.safetensors",
                    "strength": 1.0}]},
        {"model": "diffusion_models/qwen_image_edit_2509_fp8_e4m3fn.safetensors",
         "text_encoders": ["text_encoders/qwen_2.5_vl_7b_fp8_scaled.safetensors"],
         "vaes": ["vae/qwen_image_vae.safetensors"], "image_encoders": [],
         "lora_dirs": ["loras"]},
    ),
    E2511: (  # subgraph 170, Lightning (PrimitiveBoolean 168) false
        {"prompt": widget(E2511, "170:151", 0), "negative_prompt": widget(E2511, "170:149", 0),
         # VAEEncode 156 of FluxKontextImageScale 160: a 40x56 image's Kontext size
         "width": 880, "height": 1184, "num_frames": 1,
         # switches on_false: PrimitiveInt 166 (40), PrimitiveFloat 154 (4); KSampler 169
         "num_inference_steps": 40, "guidance_scale": 4.0, "seed": widget(E2511, "170:169", 0),
         "sampler": "euler", "scheduler": "simple", "shift": 3.1,  # ModelSamplingAuraFlow 145
         # image1 the Kontext-scaled LoadImage 41, image2 LoadImage 83 as loaded
         "image": "input/leather_sofa.png", "images": ["input/texture_fur.png"],
         "image_prep": "comfyui", "reference_method": "index_timestep_zero",  # 147, 148
         "cfg_mode": "norm", "cfg_norm": 1.0},  # CFGNorm 152
        {"model": "diffusion_models/qwen_image_edit_2511_fp8mixed.safetensors",
         "text_encoders": ["text_encoders/qwen_2.5_vl_7b_fp8_scaled.safetensors"],
         "vaes": ["vae/qwen_image_vae.safetensors"], "image_encoders": [], "lora_dirs": []},
    ),
    INT8: (  # 2511's graph on the int8_convrot file, one image
        {"prompt": widget(INT8, "170:151", 0), "negative_prompt": widget(INT8, "170:149", 0),
         "width": 1248, "height": 832, "num_frames": 1,
         "num_inference_steps": 40, "guidance_scale": 4.0, "seed": widget(INT8, "170:169", 0),
         "sampler": "euler", "scheduler": "simple", "shift": 3.1,
         "image": "input/lily_girl_blue.png", "image_prep": "comfyui",
         "reference_method": "index_timestep_zero", "cfg_mode": "norm", "cfg_norm": 1.0},
        {"model": "diffusion_models/qwen_image_edit_2511_int8_convrot.safetensors",
         "text_encoders": ["text_encoders/qwen_2.5_vl_7b_fp8_scaled.safetensors"],
         "vaes": ["vae/qwen_image_vae.safetensors"], "image_encoders": [], "lora_dirs": []},
    ),
}  # fmt: skip


@pytest.mark.parametrize("template", sorted(EXPECTED))
def test_edit_template_imports_to_the_job_comfyui_runs(comfy, template):
    plan, variant = plan_of(str(TEMPLATES / template), str(comfy))
    request, serve = EXPECTED[template]
    request = dict(request)
    for key in ("image", "images"):
        if key in request:
            value = request[key]
            request[key] = (
                [str(comfy / v) for v in value] if key == "images" else str(comfy / value)
            )
    assert plan.request == request
    models = comfy / "models"
    assert plan.serve == {
        "model": str(models / serve["model"]),
        **{k: [str(models / p) for p in serve[k]] for k in serve if k != "model"},
    }
    assert variant == ("tiny-qwen-image-edit" if template == FIRST else "tiny-qwen-image-edit-plus")
    # the image sent is FluxKontextImageScale's (said in `import`'s JSON and lines); a second
    # image goes as loaded
    scaled = {} if template == FIRST else {request["image"]: [request["width"], request["height"]]}
    assert plan.to_dict().get("kontext_scaled", {}) == scaled
    said = [line for line in render(plan, variant, ()).splitlines() if line.startswith("sent:")]
    assert said == [
        f"sent:    {Path(p).name} scaled to {w}x{h} (Kontext)" for p, (w, h) in scaled.items()
    ]
    body = plan.body()
    sent = Image.open(io.BytesIO(base64.b64decode(body["image"])))
    assert sent.size == (request["width"], request["height"])
    for path, data in zip(request.get("images", ()), body.get("images", ()), strict=True):
        with Image.open(path) as loaded:
            assert Image.open(io.BytesIO(base64.b64decode(data))).tobytes() == loaded.tobytes()


@pytest.mark.fast
def test_kontext_scale_worked_by_hand(tmp_path):
    """A 100x40 image (aspect 2.5): the nearest Kontext size is 1568x672 (2.33; 1504x688 is
    2.19); the centre crop keeps 94 columns from column 3 (round((100 - 100 x 2.33 / 2.5) /
    2) = round(3.33)); then Lanczos on the 8-bit pixels. ComfyUI's float round trip (value /
    255 in float32, times 255, truncated) gives every 8-bit value back."""
    assert kontext_size(100, 40) == (1568, 672)
    assert kontext_size(60, 40) == (1248, 832) and kontext_size(40, 56) == (880, 1184)
    assert kontext_size(1, 1) == (1024, 1024)
    values = np.arange(256, dtype=np.uint8)
    floats = values.astype(np.float32) / np.float32(255.0)
    assert (np.clip(np.float32(255.0) * floats, 0, 255).astype(np.uint8) == values).all()
    path = tmp_path / "wide.png"
    _png(path, (100, 40), 4)
    with Image.open(path) as opened:
        pixels = np.asarray(opened.convert("RGB"))
    want = Image.fromarray(pixels[:, 3:97]).resize((1568, 672), Image.Resampling.LANCZOS)
    got = Image.open(io.BytesIO(loaded_png(path, (1568, 672))))
    assert got.size == (1568, 672) and got.tobytes() == want.tobytes()


def test_int8_template_runs_end_to_end(comfy, tmp_path, paradit_warm, backends):
    """`paradit workflow run` of the _int8 template (its steps, PrimitiveInt 166, set to 2)
    on a backend of its files: the DiT's linears stay int8 on the backend, job.json records
    ComfyUI's image preparation and 2511's reference method, and the image is the one the
    plan's request makes on that backend, byte for byte."""
    data = json.loads((TEMPLATES / INT8).read_text())
    (inner,) = data["definitions"]["subgraphs"]
    steps = next(n for n in inner["nodes"] if n["id"] == 166)
    steps["widgets_values"][0] = 2
    workflow = tmp_path / INT8
    workflow.write_text(json.dumps(data))
    plan, _ = plan_of(str(workflow), str(comfy))
    assert plan.request["num_inference_steps"] == 2
    server = backends.get(plan.serve["model"], 1, *plan.serve_argv()[2:])
    assert server.info()["ranks"][0]["weights"]["stored"] == {"int8": 28}
    out = tmp_path / "out"
    result = paradit_warm(
        "workflow", "run", str(workflow), "--out", str(out), "--comfyui-dir", str(comfy),
        "--server", server.url,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    record = json.loads((out / "job.json").read_text())
    assert record["request"]["image_prep"] == "comfyui"
    assert record["request"]["reference_method"] == "index_timestep_zero"
    assert record["request"]["cfg_mode"] == "norm"
    _, frames = run_job(server, plan.body())
    assert (out / "image.png").read_bytes() == frames[0]


def test_first_template_on_an_image_of_other_sides_is_refused(comfy, tmp_path):
    """VAEEncode of the first model's image gives the output's size: a 60x40 image (not in
    sides of 16) is refused there, naming the rule."""
    text = (TEMPLATES / FIRST).read_text()
    name = "image_qwen_image_edit_input_image.png"
    _png(comfy / "input" / "sixty_by_forty.png", (60, 40), 9)
    workflow = tmp_path / FIRST
    workflow.write_text(text.replace(name, "sixty_by_forty.png"))
    with pytest.raises(ValueError, match=r"\(VAEEncode\): a 60x40 image: .* sides of 16"):
        plan_of(str(workflow), str(comfy))
