"""ComfyUI's Qwen-Image-Edit templates (`image_qwen_image_edit`, `_2509`, `_2511`,
`_2511_int8`; the `comfyui-workflow-templates-json` package) in their saved form, on a
ComfyUI folder of tiny files under the templates' own names (the tiny edit DiT in bf16 and
as int8_convrot, the tiny Qwen2.5-VL with its vision tower in ComfyUI's names, the VAE, a tiny
LoRA under each Lightning name, seeded input images): each imports to the job ComfyUI runs
(every field written by hand from the graph, the node that gives it named beside it), the
image sent is FluxKontextImageScale's, and each runs end to end through `paradit workflow
run` at 2 steps on a backend of its own files (the int8 one on its int8_convrot file), the
image the one its request makes there.

Cost: about 58 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import numpy as np
import pytest
from comfy_templates import TEMPLATES, workflow_run
from PIL import Image
from template_jobs import (
    E2509,
    E2511,
    EDIT_EXPECTED,
    FIRST,
    INT8,
    in_folder,
    qwen_edit_files,
    seeded_png,
)

from paradit.backend.tools.workflow import plan_of, render
from paradit.backend.workflow.images import kontext_size, loaded_png


@pytest.fixture(scope="module")
def comfy(tmp_path_factory) -> Path:
    """The ComfyUI folder: every file the templates name, tiny (tests/template_jobs.py)."""
    return qwen_edit_files(tmp_path_factory.mktemp("ComfyUI"))


@pytest.mark.parametrize("template", sorted(EDIT_EXPECTED))
def test_edit_template_imports_to_the_job_comfyui_runs(comfy, template):
    plan, variant = plan_of(str(TEMPLATES / template), str(comfy))
    request, serve = EDIT_EXPECTED[template]
    request = in_folder(request, comfy)
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
    seeded_png(path, (100, 40), 4)
    with Image.open(path) as opened:
        pixels = np.asarray(opened.convert("RGB"))
    want = Image.fromarray(pixels[:, 3:97]).resize((1568, 672), Image.Resampling.LANCZOS)
    got = Image.open(io.BytesIO(loaded_png(path, (1568, 672))))
    assert got.size == (1568, 672) and got.tobytes() == want.tobytes()


STEPS = {FIRST: "106", E2509: "436", E2511: "166", INT8: "166"}
"""Each template's PrimitiveInt that gives its steps on the branch it saves (Lightning on in
2509's, off in the others)."""


@pytest.mark.parametrize("template", sorted(STEPS))
def test_edit_template_runs_end_to_end(comfy, tmp_path, paradit_warm, backends, template):
    """`paradit workflow run` of each template (its steps, `STEPS`, set to 2; its size the
    one its graph gives: the first model's 64x48 image, the Kontext size of the others'),
    on a backend of its own files (each template names its own DiT file, so a backend each):
    job.json records the imported request (ComfyUI's image preparation, 2509's Lightning
    LoRA, 2511's reference method and CFGNorm...), the int8 DiT's linears stay int8 on its
    backend, and the image is the one the plan's request makes on that backend, byte for
    byte."""
    data = json.loads((TEMPLATES / template).read_text())
    (inner,) = data["definitions"]["subgraphs"]
    steps = next(n for n in inner["nodes"] if str(n["id"]) == STEPS[template])
    steps["widgets_values"][0] = 2
    workflow = tmp_path / template
    workflow.write_text(json.dumps(data))
    plan, _ = plan_of(str(workflow), str(comfy))
    request, _ = EDIT_EXPECTED[template]
    assert plan.request == {**in_folder(request, comfy), "num_inference_steps": 2}
    server, out, record, _, frames = workflow_run(
        paradit_warm, backends, plan, workflow, comfy, tmp_path / "out"
    )
    if template == INT8:
        assert server.info()["ranks"][0]["weights"]["stored"] == {"int8": 28}
    ran = record["request"]
    expected = {k: v for k, v in plan.request.items() if k not in ("image", "images")}
    assert {k: ran[k] for k in expected} == expected
    assert (out / "image.png").read_bytes() == frames[0]
    with Image.open(out / "image.png") as image:
        assert image.size == (request["width"], request["height"])


def test_first_template_on_an_image_of_other_sides_is_refused(comfy, tmp_path):
    """VAEEncode of the first model's image gives the output's size: a 60x40 image (not in
    sides of 16) is refused there, naming the rule."""
    text = (TEMPLATES / FIRST).read_text()
    name = "image_qwen_image_edit_input_image.png"
    seeded_png(comfy / "input" / "sixty_by_forty.png", (60, 40), 9)
    workflow = tmp_path / FIRST
    workflow.write_text(text.replace(name, "sixty_by_forty.png"))
    with pytest.raises(ValueError, match=r"\(VAEEncode\): a 60x40 image: .* sides of 16"):
        plan_of(str(workflow), str(comfy))
