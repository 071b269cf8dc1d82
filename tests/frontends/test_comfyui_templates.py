"""ComfyUI's official templates of paradit's families in the API form ComfyUI's own frontend
exports: each imports to the same job as its saved form, or is refused at the same node.

ComfyUI's frontend (the `comfyui-frontend-package` wheel's built files, unchanged) is served
by the stand-in of tests/comfyui_page.py with node definitions generated from
paradit's own knowledge of each node (`backend/workflow/sockets.py`: linked inputs, widget
kinds and outputs; the widget orders of `nodes.py`). One headless Chromium page (Debian's
package, driven by Playwright) loads every template tests/template_jobs.py maps or refuses
(`app.loadGraphData`, as the template browser opens one) and exports it
(`app.graphToPrompt()`: subgraphs flattened to `128:81` ids, legacy primitives and reroutes
resolved, bypassed and muted nodes left out, widget values by name). paradit's reading of
the saved form is that graph (the same nodes, links and widget values). In the ComfyUI folder
of tiny files the template's own workflow test builds (tests/template_jobs.py's builders,
each written once per module or session), `paradit workflow import` of the export gives the
saved form's job (every request field, the files the backend serves, the images as sent:
scaled or resized, the variant) and the job written by hand (tests/template_jobs.py's tables,
which the owning workflow tests check the saved form against): test_templates.py's table,
HunyuanVideo 1.5's i2v template among it, the Qwen-Image-Edit templates, Krea 2 Turbo's with
prompt_enhance off, FLUX.2 [klein]'s distilled subgraph, FLUX.2 [dev] with a reference image
(`image_flux2`), FLUX.2 [klein]'s four image-edit templates, MiniMax H3's two (on
tiny-minimax-h3's four files), Qwen-Image 2.1's four templates; a refused template is refused
at the same node path with the same reason. LTX-2's text-to-video templates as saved (121
frames, ComfyUI's audio length `audio_latent_frames` 127: test_templates_ltx.py's jobs), and
at 113 frames too, the copies test_templates.py maps to the two-stage job; LTX-2's two and
LTX-2.3's image-to-video templates as saved (ResizeImageMaskNode's resizes, 2.3's
`image_strength`); LTX-2.3's text-to-video template with prompt_enhance off and LTX-2.5's with
its convolutional video VAE (as saved each is refused: test_templates_ltx.py). Every other
template of the package whose nodes all have a definition (of the families other branches
map, and others built of the same core nodes) is compared as a graph.
Needs `apt-get install -y chromium`, `pip install playwright` and the test extra's
`comfyui-frontend-package` (as test_comfyui_queue.py).

Cost: about 38 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import NEEDS_CHROMIUM, chromium, new_page
from comfy_templates import TEMPLATES, placeholders
from comfyui_page import comfyui_page
from template_jobs import (
    EDIT_EXPECTED,
    EXPECTED,
    FLUX2_REF_REQUEST,
    H3_EXPECTED,
    KLEIN_DISTILLED,
    KLEIN_EDIT,
    KLEIN_EDIT_FILES,
    KREA2,
    LTX2_AS_SAVED,
    LTX2_I2V,
    LTX2_I2V_RESIZES,
    LTX2_TWO_STAGE,
    LTX23_I2V,
    LTX23_I2V_RESIZES,
    LTX25_JOB,
    QWEN21_EDIT,
    QWEN21_T2I,
    REF,
    REF_INPUT,
    REFUSED,
    T23,
    T23_I2V,
    T25,
    comfy_for,
    enhancer_off,
    flux2_ref_headers,
    h3_folder,
    h3_request,
    in_folder,
    klein_distilled,
    klein_edit_folder,
    klein_edit_headers,
    klein_edit_request,
    klein_folder,
    krea2_files,
    krea2_request,
    ltx2_copy,
    ltx23_copy,
    ltx23_job,
    ltx25_copy,
    qwen21_edit_request,
    qwen21_files,
    qwen21_t2i_request,
    qwen21_turbo_edit_request,
    qwen21_turbo_t2i_request,
    qwen_edit_files,
)

from paradit.backend.serving.http import HttpServer
from paradit.backend.tools.workflow import plan_of
from paradit.backend.workflow.graph import Link, graph_of
from paradit.backend.workflow.nodes import UI_ONLY
from paradit.backend.workflow.sockets import SOCKETS

pytestmark = NEEDS_CHROMIUM

FRONTEND_ONLY = UI_ONLY
"""Node types ComfyUI's frontend itself defines (notes, reroutes, legacy primitives)."""

EXPORT = """async workflow => {
  await window.app.loadGraphData(workflow);
  return (await window.app.graphToPrompt()).output;
}"""


@pytest.fixture(scope="module")
def edit_comfy(tmp_path_factory) -> Path:
    """The tiny Qwen-Image-Edit files under the templates' names (tests/template_jobs.py)."""
    return qwen_edit_files(tmp_path_factory.mktemp("ComfyUI"))


@pytest.fixture(scope="module")
def krea2_comfy(tmp_path_factory) -> Path:
    """The tiny Krea 2 files under the templates' names (tests/template_jobs.py)."""
    return krea2_files(tmp_path_factory.mktemp("ComfyUI"))


@pytest.fixture(scope="module")
def qwen21_comfy(tmp_path_factory) -> Path:
    """The tiny Qwen-Image 2.1 files and input images under the templates' names."""
    return qwen21_files(tmp_path_factory.mktemp("ComfyUI"))


@pytest.fixture(scope="module")
def h3_comfy(tmp_path_factory) -> Path:
    """tiny-minimax-h3 as the four files both MiniMax H3 templates name (tests/template_jobs.py
    `h3_folder`)."""
    return h3_folder(tmp_path_factory.mktemp("h3") / "ComfyUI")


@pytest.fixture(scope="module")
def frontend() -> Iterator[object]:
    """One page of ComfyUI's frontend whose server describes the nodes paradit knows."""
    http = HttpServer(comfyui_page({"Comfy.TutorialCompleted": True}), "127.0.0.1", 0)
    http.start()
    try:
        with chromium() as browser:
            page = new_page(browser, 1400, 900)
            page.goto(http.url)
            page.wait_for_function("() => window.app?.graph && window.app.extensionManager")
            yield page
    finally:
        http.stop()


def _node_types(data: dict) -> set[str]:
    subgraphs = (data.get("definitions") or {}).get("subgraphs") or ()
    nodes = [*data["nodes"], *(n for s in subgraphs for n in s["nodes"])]
    return {n["type"] for n in nodes} - {s["id"] for s in subgraphs}


def _known_templates() -> list[str]:
    """Every other template of the package whose nodes all have a definition here (of
    paradit's families, and others built of the same core nodes)."""
    known = []
    for path in sorted(TEMPLATES.glob("*.json")):
        if path.name in {
            *EXPECTED,
            *REFUSED,
            *EDIT_EXPECTED,
            *KREA2,
            *LTX2_AS_SAVED,
            *QWEN21,
            *LTX2_I2V,
            *LTX23_I2V,
            REF,
            *KLEIN_EDIT,
            *H3_EXPECTED,
            T23,
            T25,
        }:
            continue  # compared job by job above
        try:
            data = json.loads(path.read_text())
        except ValueError:
            continue
        ui = isinstance(data, dict) and isinstance(data.get("nodes"), list)
        if ui and _node_types(data) <= {*SOCKETS, *FRONTEND_ONLY}:
            known.append(path.name)
    return known


def exported(page, data: dict, folder: Path, name: str, same_ids: bool = True) -> Path:
    """The workflow loaded into ComfyUI's frontend and exported in the API form, saved in
    `folder` as `name`; read as the same graph as the saved form unless `same_ids` is false
    (where the frontend gives nodes new ids on loading)."""
    unknown = _node_types(data) - set(SOCKETS) - set(FRONTEND_ONLY)
    assert not unknown, f"no node definition in backend/workflow/sockets.py for {unknown}"
    api = page.evaluate(EXPORT, data)
    assert api and all("class_type" in node for node in api.values()), api
    if same_ids:
        _same_graph(data, api)
    path = folder / f"{name}.api.json"
    path.write_text(json.dumps(api, indent=1))
    return path


def _same_graph(saved: dict, api: dict) -> None:
    """paradit reads the saved form as the frontend flattens it: the same nodes (ids with
    their subgraph paths, types), every link the same, and a widget value the same wherever
    both forms give one (the export adds the defaults of widgets a node saved without; the
    saved form has values paradit reads by position that the frontend does not export, as
    LoadImage's upload button)."""
    ours = graph_of(saved, "saved").nodes
    theirs = graph_of(api, "api").nodes
    assert {k: n.type for k, n in ours.items()} == {k: n.type for k, n in theirs.items()}
    for key, node in ours.items():
        other = theirs[key].inputs
        links = {k for k, v in node.inputs.items() if isinstance(v, Link)}
        links |= {k for k, v in other.items() if isinstance(v, Link)}
        shared = links | (set(node.inputs) & set(other))
        mine = {k: node.inputs.get(k) for k in shared}
        assert mine == {k: other.get(k) for k in shared}, (node.where, node.type)


def _sent(plan) -> tuple[dict, dict]:
    """How the plan's images are sent: each one's scale and its resizes (sizes, methods,
    crops; not the node each resize was read from, whose title the export may fill in)."""
    resized = {
        path: [(r.width, r.height, r.method, r.crop) for r in steps]
        for path, steps in plan.resized.items()
    }
    return plan.images, resized


def _same_job(saved: Path, api: Path, comfy: Path):
    """Both forms imported in `comfy`: the same request, files, images as sent (scaled,
    resized) and variant (the API form's plan and variant returned)."""
    plan, variant = plan_of(str(saved), str(comfy))
    api_plan, api_variant = plan_of(str(api), str(comfy))
    assert api_plan.workflow["format"] == "api" and plan.workflow["format"] == "ui"
    assert api_plan.request == plan.request
    assert api_plan.serve == plan.serve
    assert _sent(api_plan) == _sent(plan)
    assert api_variant == variant
    return api_plan, api_variant


@pytest.mark.parametrize("template", sorted(EXPECTED))
def test_exported_template_imports_to_the_saved_forms_job(
    frontend,
    base,
    tmp_path,
    template,
):
    comfy = comfy_for(base, template, tmp_path / "ComfyUI")
    data = json.loads((TEMPLATES / template).read_text())
    api = exported(frontend, data, tmp_path, template)
    plan, variant = _same_job(TEMPLATES / template, api, comfy)
    expected, request, _ = EXPECTED[template]  # and the job written by hand from the graph
    assert plan.request == in_folder(request, comfy)
    assert variant == expected


@pytest.mark.parametrize("template", sorted(EDIT_EXPECTED))
def test_exported_qwen_edit_template_imports_to_the_saved_forms_job(
    frontend, edit_comfy, tmp_path, template
):
    """The Qwen-Image-Edit templates on their tiny files (tests/workflow/
    test_templates_qwen_edit.py's): the API form's job is the saved form's and the one
    written by hand, the images in the ComfyUI folder."""
    data = json.loads((TEMPLATES / template).read_text())
    api = exported(frontend, data, tmp_path, template)
    plan, _ = _same_job(TEMPLATES / template, api, edit_comfy)
    request, _ = EDIT_EXPECTED[template]
    assert plan.request == in_folder(request, edit_comfy)


@pytest.mark.parametrize("template", KREA2)
def test_exported_krea2_template_with_the_enhancer_off_imports_to_its_job(
    frontend, krea2_comfy, tmp_path, template
):
    """Krea 2 Turbo's templates with `prompt_enhance` off (as saved, refused at their
    TextGenerate: tests/workflow/test_templates_qi21_krea2.py) on their tiny files."""
    saved = enhancer_off(template, tmp_path)
    api = exported(frontend, json.loads(saved.read_text()), tmp_path, template)
    plan, _ = _same_job(saved, api, krea2_comfy)
    assert plan.request == krea2_request(template)


QWEN21 = (*QWEN21_T2I, *QWEN21_EDIT)
"""Qwen-Image 2.1's base and Turbo templates, mapped (tests/workflow/
test_templates_qi21_krea2.py)."""


@pytest.mark.parametrize("template", QWEN21)
def test_exported_qwen21_template_imports_to_its_job(frontend, qwen21_comfy, tmp_path, template):
    """Qwen-Image 2.1's templates as saved, exported: the job of the saved form, written by
    hand (tests/template_jobs.py), on their tiny files (the base ones at ComfyUI's own mu
    0.69, the Turbo ones on ManualSigmas' levels)."""
    data = json.loads((TEMPLATES / template).read_text())
    api = exported(frontend, data, tmp_path, template)
    plan, _ = _same_job(TEMPLATES / template, api, qwen21_comfy)
    expected = {
        QWEN21_T2I[0]: qwen21_t2i_request,
        QWEN21_T2I[1]: qwen21_turbo_t2i_request,
        QWEN21_EDIT[0]: lambda: qwen21_edit_request(qwen21_comfy),
        QWEN21_EDIT[1]: lambda: qwen21_turbo_edit_request(qwen21_comfy),
    }
    assert plan.request == expected[template]()


def test_exported_klein_distilled_subgraph_imports_to_its_job(frontend, base, tmp_path):
    """FLUX.2 [klein]'s template with its distilled subgraph on (tests/workflow/
    test_templates_flux.py's; the base one as saved is in the table above). Its job only, not
    its graph node by node: the two subgraphs' inner nodes share ids (61 to 76), and the
    frontend gives the second one's new ids on loading (77:80 to 77:93 in the export where
    the saved form has 77:61 to 77:76), so node paths differ while the job is the same."""
    folder = klein_folder(base, tmp_path / "ComfyUI")
    saved = klein_distilled(tmp_path)
    data = json.loads(saved.read_text())
    api = exported(frontend, data, tmp_path, saved.name, same_ids=False)
    plan, variant = _same_job(saved, api, folder)
    assert plan.request == KLEIN_DISTILLED
    assert variant == "flux.2-klein-4b"


@pytest.mark.parametrize("template", sorted(LTX2_AS_SAVED))
def test_exported_ltx2_template_as_saved_imports_to_its_job(frontend, base, tmp_path, template):
    """LTX-2's text-to-video templates as saved (121 frames at 24 fps): the API form the
    frontend exports is the saved form's job and the one written by hand
    (tests/workflow/test_templates_ltx.py's), ComfyUI's audio length (`audio_latent_frames`
    127) included."""
    comfy = comfy_for(base, template, tmp_path / "ComfyUI")
    data = json.loads((TEMPLATES / template).read_text())
    api = exported(frontend, data, tmp_path, template)
    plan, variant = _same_job(TEMPLATES / template, api, comfy)
    expected, request = LTX2_AS_SAVED[template]
    assert plan.request == request
    assert variant == expected
    assert plan.request["audio_latent_frames"] == 127


I2V = {**LTX2_I2V, **LTX23_I2V}
"""LTX-2's and LTX-2.3's image-to-video templates, mapped as saved (tests/workflow/
test_templates_ltx.py), by hand in tests/template_jobs.py."""
I2V_RESIZES = {**LTX2_I2V_RESIZES, T23_I2V: LTX23_I2V_RESIZES}


@pytest.mark.parametrize("template", sorted(I2V))
def test_exported_ltx2_i2v_template_imports_to_its_job(frontend, base, tmp_path, template):
    """LTX-2's and LTX-2.3's image-to-video templates as saved: the API form the frontend
    exports (its ResizeImageMaskNode's dynamic widgets named `resize_type.width` ...) is the
    saved form's job and the one written by hand, the image's resizes and 2.3's
    `image_strength` 0.7 included."""
    comfy = comfy_for(base, template, tmp_path / "ComfyUI")
    data = json.loads((TEMPLATES / template).read_text())
    api = exported(frontend, data, tmp_path, template)
    plan, variant = _same_job(TEMPLATES / template, api, comfy)
    expected, request = I2V[template]
    assert plan.request == in_folder(request, comfy)
    assert variant == expected
    (steps,) = plan.resized.values()
    assert [(r.width, r.height, r.method, r.crop) for r in steps] == I2V_RESIZES[template]


def test_exported_ltx2_3_and_2_5_t2v_templates_import_to_their_jobs(frontend, base, tmp_path):
    """LTX-2.3's text-to-video template with prompt_enhance off (as saved, refused at its
    TextGenerateLTX2Prompt) and LTX-2.5's with its convolutional video VAE (as saved, refused
    at its VAEDecodeTiled: tests/workflow/test_templates_ltx.py) on the tiny files under their
    names: each API form's job is its saved form's and the one written by hand (`ltx23_job`
    at 5 s: 121 video and 126 audio latent frames; `LTX25_JOB`: 2.5's separate files)."""
    comfy = comfy_for(base, T23, tmp_path / "ComfyUI")
    saved = ltx23_copy(comfy, 5)
    api = exported(frontend, json.loads(saved.read_text()), tmp_path, T23)
    plan, variant = _same_job(saved, api, comfy)
    assert plan.request == ltx23_job(5)
    assert variant == "all-in-one tiny-ltx2.3 (DiT, connectors, vae, audio_vae, vocoder)"
    comfy = comfy_for(base, T25, tmp_path / "ComfyUI25")
    saved = ltx25_copy(comfy)
    api = exported(frontend, json.loads(saved.read_text()), tmp_path, T25)
    plan, variant = _same_job(saved, api, comfy)
    assert plan.request == LTX25_JOB
    assert variant == "tiny-ltx2.5-distilled"


@pytest.mark.parametrize("template", sorted(LTX2_TWO_STAGE))
def test_exported_ltx2_template_imports_to_the_two_stage_job(
    frontend,
    base,
    tmp_path,
    template,
):
    comfy = comfy_for(base, template, tmp_path / "ComfyUI")
    saved = ltx2_copy(template, comfy, 113)
    api = exported(frontend, json.loads(saved.read_text()), tmp_path, template)
    plan, variant = _same_job(saved, api, comfy)
    assert plan.request == LTX2_TWO_STAGE[template][2]
    assert variant == LTX2_TWO_STAGE[template][1]


def test_exported_flux2_reference_template_imports_to_its_job(frontend, base, tmp_path):
    """FLUX.2 [dev] with a reference image (`image_flux2.json`, tests/workflow/
    test_templates_flux.py's) on FLUX.2-dev's headers and a 512x512 input: the API form's job
    is the saved form's and the one written by hand, the image sent scaled to 1024x1024
    (ImageScaleToTotalPixels 45)."""
    folder = flux2_ref_headers(base, tmp_path / "ComfyUI", (512, 512))
    api = exported(frontend, json.loads((TEMPLATES / REF).read_text()), tmp_path, REF)
    plan, variant = _same_job(TEMPLATES / REF, api, folder)
    assert plan.request == in_folder(FLUX2_REF_REQUEST, folder)
    assert variant == "flux.2-dev"
    image = folder / "input" / REF_INPUT
    assert plan.to_dict()["scaled_to_total_pixels"] == {str(image): [1024, 1024]}


@pytest.mark.parametrize("template", sorted(KLEIN_EDIT))
def test_exported_klein_edit_template_imports_to_its_job(frontend, base, tmp_path, template):
    """FLUX.2 [klein]'s four image-edit templates (tests/workflow/test_templates_klein_edit.py's)
    on their headers and a 512x512 input: the API form's job is the saved form's and the one
    written by hand (`KLEIN_EDIT`), the image sent scaled to 1024x1024 by the template's
    method."""
    headers = klein_edit_headers(base, template)
    folder = klein_edit_folder(tmp_path / "ComfyUI", template, headers, (512, 512))
    data = json.loads((TEMPLATES / template).read_text())
    api = exported(frontend, data, tmp_path, template)
    plan, variant = _same_job(TEMPLATES / template, api, folder)
    image = folder / "input" / KLEIN_EDIT_FILES[template][3]
    assert plan.request == klein_edit_request(template, image)
    assert variant == KLEIN_EDIT[template][0]
    # ImageScaleToTotalPixels 80: 1024x1024, no crop, the template's method
    assert [tuple(size) for size in plan.images.values()] == [
        (1024, 1024, False, KLEIN_EDIT[template][2])
    ]


@pytest.mark.parametrize("template", sorted(H3_EXPECTED))
def test_exported_h3_template_imports_to_its_job(frontend, h3_comfy, tmp_path, template):
    """MiniMax H3's templates (tests/workflow/test_templates_h3.py's) on tiny-minimax-h3's
    four files under their names: the API form's job is the saved form's and the one written
    by hand, with the shift the files fill in (ComfyUI's 12: no ModelSampling node)."""
    data = json.loads((TEMPLATES / template).read_text())
    api = exported(frontend, data, tmp_path, template)
    plan, variant = _same_job(TEMPLATES / template, api, h3_comfy)
    assert plan.request == {**h3_request(template, h3_comfy), "shift": 12.0}
    assert variant == "tiny-minimax-h3-pruned"


@pytest.mark.parametrize("template", sorted(REFUSED))
def test_exported_refused_template_is_refused_at_the_same_node(frontend, tmp_path, template):
    comfy = placeholders(template, tmp_path / "ComfyUI")
    data = json.loads((TEMPLATES / template).read_text())
    api = exported(frontend, data, tmp_path, template)
    with pytest.raises(ValueError) as saved:
        plan_of(str(TEMPLATES / template), str(comfy))
    with pytest.raises(ValueError) as refused:
        plan_of(str(api), str(comfy))
    where, kind, words = REFUSED[template]
    assert str(refused.value) == str(saved.value)
    assert str(refused.value).startswith(f"{where} ({kind}): ") and words in str(refused.value)


@pytest.mark.parametrize("template", _known_templates())
def test_paradit_reads_each_template_as_the_frontend_flattens_it(frontend, tmp_path, template):
    """Beyond the templates mapped or refused above: every template made of nodes defined
    here (41 more of the package's 0.1.x: LTX-2.5's image-to-video one, Qwen-Image 2.1's
    base ones, MiniMax H3's continuation, SDXL, ...)
    is read from its saved form as the frontend exports it (nodes, links, widget values)."""
    exported(frontend, json.loads((TEMPLATES / template).read_text()), tmp_path, template)
