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
  `_turbo_image_edit`) on the tiny preset's files under their names: each as saved imports
  to the job ComfyUI runs (TextEncodeQwenImage21, QwenImage21Cache passed over; the edits'
  output the first reference's own size) and runs end to end: the Turbo ones on ManualSigmas'
  levels, the base ones on KSampler's euler/simple at Qwen-Image 2.1's own model sampling
  (no ModelSampling node: ModelSamplingFlux at mu 0.69, families/qwen_image21/comfyui.json),
  the levels checked against ComfyUI's worked by hand from its formulas (a fast test too);
  the enhancer switched on is refused at its TextGenerate, a quantized prefix cache at
  QwenImage21Cache; the edits' references at their own size (resolution 0, as saved) import
  with `image_prep` comfyui whatever the output's size (the Turbo edit's outer `switch` on:
  1024x1024); at a resolution above 0 the pipeline's own preparation where both size the
  references alike (the sizes worked by hand in a fast test), with ComfyUI's vision input
  (`image_prep` comfyui-vision).

Cost: about 8 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from comfy_templates import TEMPLATES, refusal, shifted, workflow_run
from PIL import Image
from template_jobs import (
    KREA2,
    KREA2_SHIFT,
    QWEN21_EDIT,
    QWEN21_MU,
    QWEN21_T2I,
    QWEN21_TURBO_SIGMAS,
    enhancer_off,
    krea2_files,
    krea2_request,
    qwen21_comfy_sigmas,
    qwen21_edit_request,
    qwen21_files,
    qwen21_sized,
    qwen21_t2i_request,
    qwen21_turbo_edit_request,
    qwen21_turbo_t2i_request,
)

from paradit.backend.sampling.schedules import levels
from paradit.backend.tools.workflow import plan_of
from paradit.backend.workflow.defaults import default_for
from paradit.backend.workflow.qwen21_nodes import comfy_reference_size, pipeline_reference_size

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
    server, out, record, _, frames = workflow_run(
        paradit_warm, backends, plan, path, krea2_comfy, tmp_path / "out"
    )
    stored = server.info()["ranks"][0]["weights"]["stored"]
    assert ("int8" in stored) == template.endswith("_int8.json"), stored
    assert record["workflow"]["variant"] == "tiny-krea2"
    assert record["sampling"]["sigmas"] == pytest.approx(
        [shifted(1 - k / 8, KREA2_SHIFT) for k in range(8)] + [0.0], abs=1e-6
    )
    assert (out / "image.png").read_bytes() == frames[0]
    with Image.open(out / "image.png") as image:
        assert image.size == (256, 256)


QWEN21_ENHANCERS = {  # template -> (the outer enhancer switch's index, its TextGenerate)
    "image_qwen_image_2_1_turbo_t2i.json": (1, "subgraph 459 > node 471"),
    "image_qwen_image_2_1_turbo_image_edit.json": (2, "subgraph 459 > node 500"),
}
QWEN21_CACHES = {  # template -> (the outer dtype's index, its QwenImage21Cache)
    "image_qwen_image_2_1_turbo_t2i.json": (14, "subgraph 459 > node 490"),
    "image_qwen_image_2_1_turbo_image_edit.json": (16, "subgraph 459 > node 469"),
}


@pytest.fixture(scope="module")
def qwen21_comfy(tmp_path_factory) -> Path:
    """The tiny Qwen-Image 2.1 files and input images under the templates' names."""
    return qwen21_files(tmp_path_factory.mktemp("ComfyUI"))


def _outer(template: str, folder: Path, index: int, value) -> Path:
    """The template with the subgraph node's `index`-th widget value set, as a user sets it."""
    data = json.loads((TEMPLATES / template).read_text())
    outer = next(node for node in data["nodes"] if node["id"] == 459)
    outer["widgets_values"][index] = value
    path = folder / template
    path.write_text(json.dumps(data))
    return path


def _qwen21_serve(comfy: Path, dit: str) -> dict:
    models = comfy / "models"
    return {
        "model": str(models / f"diffusion_models/{dit}.safetensors"),
        "text_encoders": [str(models / "text_encoders/qwen3vl_8b_int8_convrot.safetensors")],
        "vaes": [str(models / "vae/qwen_image_2.1_vae_bf16.safetensors")],
        "image_encoders": [],
        "lora_dirs": [],
    }


def test_qwen_image21_base_templates_import_to_comfyuis_job(qwen21_comfy):
    """Each base template as saved (the enhancer off, the cache auto/default) imports to the
    job written by hand from its graph (tests/template_jobs.py): KSampler's euler/simple with
    no ModelSampling node at Qwen-Image 2.1's own mu 0.69 (the static shift e^0.69), on the
    base DiT's file."""
    expected = {
        QWEN21_T2I[0]: qwen21_t2i_request(),
        QWEN21_EDIT[0]: qwen21_edit_request(qwen21_comfy),
    }
    for template, request in expected.items():
        plan, variant = plan_of(str(TEMPLATES / template), str(qwen21_comfy))
        assert variant == "tiny-qwen-image2.1"
        assert plan.request == request, template
        assert plan.serve == _qwen21_serve(qwen21_comfy, "qwen_image_2.1_int8_convrot")
        assert plan.workflow["comfyui_defaults"].startswith(
            "mu 0.69 -> shift 1.99372, flow_levels 10000 "
        )


@pytest.mark.fast
@pytest.mark.parametrize("steps", [25, 30, 40])
def test_qwen_image21_default_levels_are_comfyuis(steps):
    """The levels paradit runs for euler/simple at Qwen-Image 2.1's declared default are
    ComfyUI's, worked by hand (tests/template_jobs.py `qwen21_comfy_sigmas`: ModelSamplingFlux's
    10000-level table at mu 0.69, simple_scheduler's picks). Two levels by hand: the second of
    25 at t = 0.96 is e^0.69 / (e^0.69 + 1/0.96 - 1) = 1.993716 / 2.035382 = 0.979529, the
    last before 0 at t = 0.04 is 1.993716 / 25.993716 = 0.076700: no terminal stretch (the
    pipeline's own schedule ends its levels at 0.02) and no size in it. At 30 steps, which do
    not divide 1000, only ModelSamplingFlux's table of 10000 (`flow_levels`) gives them."""
    default = default_for("qwen-image2.1", {})
    assert default is not None and default.shift == QWEN21_MU
    assert default.flow_levels == 10000
    ours = levels("simple", steps, default.static_shift, table=default.flow_levels)
    assert ours == pytest.approx(qwen21_comfy_sigmas(steps), abs=1e-12)
    if steps == 25:
        assert ours[1] == pytest.approx(0.979529, abs=1e-6)
        assert ours[-2] == pytest.approx(0.076700, abs=1e-6)


def test_qwen_image21_turbo_templates_import_to_comfyuis_job(qwen21_comfy):
    """Each Turbo template as saved (the enhancer off, the cache auto/default) imports to the
    job written by hand from its graph (tests/template_jobs.py), on the templates' files."""
    serve = _qwen21_serve(qwen21_comfy, "qwen_image_2.1_turbo_int8_convrot")
    expected = {
        QWEN21_T2I[1]: qwen21_turbo_t2i_request(),
        QWEN21_EDIT[1]: qwen21_turbo_edit_request(qwen21_comfy),
    }
    for template, request in expected.items():
        plan, variant = plan_of(str(TEMPLATES / template), str(qwen21_comfy))
        assert variant == "tiny-qwen-image2.1"
        assert plan.request == request, template
        assert plan.serve == serve


@pytest.mark.parametrize("template", sorted(QWEN21_ENHANCERS))
def test_qwen_image21_enhancer_on_refused_at_its_textgenerate(qwen21_comfy, tmp_path, template):
    index, where = QWEN21_ENHANCERS[template]
    path = _outer(template, tmp_path, index, True)
    refusal(path, qwen21_comfy, f"{where} (TextGenerate): ", "an LLM prompt enhancer")


@pytest.mark.parametrize("template", sorted(QWEN21_CACHES))
def test_qwen_image21_quantized_prefix_cache_refused(qwen21_comfy, tmp_path, template):
    """QwenImage21Cache's dtype int8 stores the prefix's keys and values quantized: refused;
    its device (off: recomputed every step) changes nothing: the same job."""
    index, where = QWEN21_CACHES[template]
    refusal(
        _outer(template, tmp_path, index, "int8"), qwen21_comfy,
        f"{where} (QwenImage21Cache): dtype int8", "quantized", "set dtype to default",
    )  # fmt: skip
    saved, _ = plan_of(str(TEMPLATES / template), str(qwen21_comfy))
    off, _ = plan_of(str(_outer(template, tmp_path, index - 1, "off")), str(qwen21_comfy))
    assert off.request == saved.request


def test_qwen_image21_edit_at_another_size_than_its_reference(qwen21_comfy, tmp_path):
    """The Turbo edit with its `switch` on (the output from ResolutionSelector's 1024x1024,
    not the reference's size): ComfyUI keeps the 96x64 reference at its own size (resolution
    0), and so does the job (`image_prep` comfyui), where the pipeline alone would resize it
    to the output's area (1248x832): imported, the output 1024x1024."""
    path = _outer(QWEN21_EDIT[1], tmp_path, 7, True)
    plan, _ = plan_of(str(path), str(qwen21_comfy))
    assert plan.request == qwen21_turbo_edit_request(qwen21_comfy, (1024, 1024))


def test_qwen_image21_edit_at_a_resolution_keeps_the_pipelines_preparation(qwen21_comfy, tmp_path):
    """TextEncodeQwenImage21 at a resolution (the outer widget 0): the 96x64 reference at 64
    is sqrt(4096 * 1.5) = 78.4 -> 64 wide, sqrt(4096 / 1.5) = 52.3 -> 64 high, the latent that
    size, and the pipeline at the 64x64 output's area the same; at 160: 196.0 -> 192 by
    130.6 -> 128, the pipeline at the 192x128 output's (157) the same: the pipeline's own
    preparation, with ComfyUI's vision input (`image_prep` comfyui-vision)."""
    for resolution, size in ((64, (64, 64)), (160, (192, 128))):
        plan, _ = plan_of(str(_outer(QWEN21_EDIT[1], tmp_path, 0, resolution)), str(qwen21_comfy))
        assert plan.request["image_prep"] == "comfyui-vision"
        assert (plan.request["width"], plan.request["height"]) == size


@pytest.mark.fast
def test_qwen_image21_reference_sizes_as_comfyui_and_the_pipeline_make_them():
    """TextEncodeQwenImage21's sizes (comfy_extras/nodes_qwen.py) and QwenImage21Pipeline's
    (`calculate_dimensions`), worked by hand: a 1000x750 image at 1024 is
    sqrt(1024^2 * 4/3) = 1182.4 -> 37 x 32 = 1184 wide, sqrt(1024^2 * 3/4) = 886.8 -> 28 x 32
    = 896 high at both; at 0 ComfyUI keeps a 1000x760 image at its size rounded to the
    nearest sides of 32 (31.25 -> 992, 23.75 -> 768); a 20x10 image's sides become at least
    32."""
    assert comfy_reference_size(1000, 750, 1024) == (1184, 896)
    assert pipeline_reference_size(1000, 750, 1024) == (1184, 896)
    assert comfy_reference_size(1000, 760, 0) == (992, 768)
    assert comfy_reference_size(20, 10, 0) == (32, 32)
    assert comfy_reference_size(20, 10, 64) == (96, 32)  # 90.5 -> 96, 45.3 -> 32


@pytest.mark.parametrize("template", [*QWEN21_T2I, *QWEN21_EDIT])
def test_qwen_image21_template_runs_end_to_end(
    qwen21_comfy, tmp_path, paradit_warm, backends, template
):
    """Each template (the text-to-image ones at 256x256, ResolutionSelector's megapixels 1/16;
    the edits at their first reference's 96x64), on a backend of its files: `workflow run
    --server` writes the image its request makes on that backend, on ManualSigmas' levels
    (Turbo) or ComfyUI's euler/simple levels at mu 0.69 worked by hand (base, 25 steps)."""
    path = qwen21_sized(template, tmp_path, 1 / 16) if template in QWEN21_T2I else None
    path = path or TEMPLATES / template
    plan, _ = plan_of(str(path), str(qwen21_comfy))
    server, out, record, _, frames = workflow_run(
        paradit_warm, backends, plan, path, qwen21_comfy, tmp_path / "out"
    )
    base = template in (QWEN21_T2I[0], QWEN21_EDIT[0])
    assert record["workflow"]["variant"] == "tiny-qwen-image2.1"
    sigmas = qwen21_comfy_sigmas(25) if base else QWEN21_TURBO_SIGMAS
    assert record["sampling"]["sigmas"] == pytest.approx(sigmas, abs=1e-6)
    assert (out / "image.png").read_bytes() == frames[0]
    with Image.open(out / "image.png") as image:
        assert image.size == ((256, 256) if template in QWEN21_T2I else (96, 64))
