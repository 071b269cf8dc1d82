"""ComfyUI's official Krea 2 Turbo and Qwen-Image 2.1 templates (the
`comfyui-workflow-templates-json` package, read where it is installed), with the files they
name written as the tiny presets' files under the templates' own names.

- Krea 2 Turbo (`image_krea2_turbo_t2i`, its `_int8` twin): as saved, refused at the prompt
  enhancer the template turns on (`TextGenerate`, an LLM writing the prompt at run time); with
  its `prompt_enhance` switch off (the one change the refusal asks for), each imports to the
  job ComfyUI runs (every field written by hand from the graph) on its files: the DiT
  (`krea2_turbo_fp8_scaled` / `krea2_turbo_int8_convrot`), Qwen3-VL-4B
  (`qwen3vl_4b_fp8_scaled`) and the Qwen-Image VAE; each runs end to end on a backend of
  those files (`workflow run --server`, at 256x256; the int8 one's linears int8 there),
  sampled as ComfyUI does (euler/simple at Krea 2's shift e^1.15), the image the one its
  request makes on that backend.
- Qwen-Image 2.1 (`image_qwen_image_2_1_t2i`, `_image_edit`, `_turbo_t2i`,
  `_turbo_image_edit`): refused, naming the node and why (their ComfyUI nodes and the
  model's ComfyUI sampling defaults were not available to read; the edit ones, past their
  ImageCompare viewer, at TextEncodeQwenImage21).

Cost: about 6 s (2 s in the suite's two-worker run on 2 cores, 2026-11-29, before the int8
run and the image check were added: measure again).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from comfy_templates import TEMPLATES, placeholders, refusal, shifted
from conftest import run_job
from PIL import Image
from template_jobs import KREA2, KREA2_SHIFT, enhancer_off, krea2_files, krea2_request

from paradit.backend.tools.workflow import plan_of

ENHANCER = ("subgraph 30 > node 16", "TextGenerate", "an LLM prompt enhancer")


@pytest.fixture(scope="module")
def krea2_comfy(tmp_path_factory) -> Path:
    """The tiny Krea 2 files under the templates' names (tests/template_jobs.py)."""
    return krea2_files(tmp_path_factory.mktemp("ComfyUI"))


@pytest.mark.parametrize("template", KREA2)
def test_krea2_turbo_template_refused_as_saved_and_imported_with_theenhancer_off(
    krea2_comfy, tmp_path, template
):
    where, kind, words = ENHANCER
    refusal(TEMPLATES / template, krea2_comfy, f"{where} ({kind}): ", words)
    plan, variant = plan_of(str(enhancer_off(template, tmp_path)), str(krea2_comfy))
    dit = "krea2_turbo_fp8_scaled" if template == KREA2[0] else "krea2_turbo_int8_convrot"
    models = krea2_comfy / "models"
    assert variant == "tiny-krea2"
    assert plan.request == krea2_request(template)
    assert plan.serve == {
        "model": str(models / f"diffusion_models/{dit}.safetensors"),
        "text_encoders": [str(models / "text_encoders/qwen3vl_4b_fp8_scaled.safetensors")],
        "vaes": [str(models / "vae/qwen_image_vae.safetensors")],
        "image_encoders": [],
        "lora_dirs": [],
    }


@pytest.mark.parametrize("template", KREA2)
def test_krea2_turbo_template_runs_end_to_end(
    krea2_comfy, tmp_path, paradit_warm, backends, template
):
    """Each template with the enhancer off (8 steps; at 256x256, ResolutionSelector's
    megapixels 1/16, to keep the test cheap), on a backend of its files (the int8 one's DiT
    linears int8 there): `workflow run --server` writes the image its request makes on that
    backend, sampled on euler/simple at e^1.15."""
    path = enhancer_off(template, tmp_path, megapixels=1 / 16)
    plan, _ = plan_of(str(path), str(krea2_comfy))
    server = backends.get(plan.serve["model"], 1, *plan.serve_argv()[2:])
    stored = server.info()["ranks"][0]["weights"]["stored"]
    assert ("int8" in stored) == template.endswith("_int8.json"), stored
    out = tmp_path / "out"
    result = paradit_warm(
        "workflow", "run", str(path), "--out", str(out),
        "--comfyui-dir", str(krea2_comfy), "--server", server.url,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    record = json.loads((out / "job.json").read_text())
    assert record["workflow"]["variant"] == "tiny-krea2"
    assert record["sampling"]["sigmas"] == pytest.approx(
        [shifted(1 - k / 8, KREA2_SHIFT) for k in range(8)] + [0.0], abs=1e-6
    )
    _, frames = run_job(server, plan.body())
    assert (out / "image.png").read_bytes() == frames[0]
    with Image.open(out / "image.png") as image:
        assert image.size == (256, 256)


QWEN21_REFUSED = {  # template -> (where, node type, the reason's words)
    "image_qwen_image_2_1_t2i.json": (
        "subgraph 459 > node 480", "QwenImage21Cache", "Qwen-Image 2.1 graphs are not mapped",
    ),
    "image_qwen_image_2_1_turbo_t2i.json": (
        "subgraph 459 > node 490", "QwenImage21Cache", "Qwen-Image 2.1 graphs are not mapped",
    ),
    # past their ImageCompare (a viewer: nothing saved), the prompt's encoder node
    "image_qwen_image_2_1_image_edit.json": (
        "subgraph 459 > node 474", "TextEncodeQwenImage21", "Qwen-Image 2.1 graphs are not mapped",
    ),
    "image_qwen_image_2_1_turbo_image_edit.json": (
        "subgraph 459 > node 474", "TextEncodeQwenImage21", "Qwen-Image 2.1 graphs are not mapped",
    ),
}  # fmt: skip


@pytest.mark.parametrize("template", sorted(QWEN21_REFUSED))
def test_qwen_image21_template_refused_names_the_node_and_why(tmp_path, template):
    where, kind, words = QWEN21_REFUSED[template]
    comfy = placeholders(template, tmp_path / "ComfyUI")
    refusal(TEMPLATES / template, comfy, f"{where} ({kind}): ", words)
