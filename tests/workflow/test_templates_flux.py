"""ComfyUI's Flux.1 schnell template (`flux_schnell_full_text_to_image.json`, its job in
test_templates.py's table) beyond its import: CLIPTextEncodeFlux's two prompts run as
`prompt` and `prompt_2` end to end on tiny files under the template's names, and its guidance
is the distilled guidance only where the DiT embeds one (the template's graph on Flux.1
dev's file), as in ComfyUI (`comfy/ldm/flux/model.py` reads guidance only with
guidance_embed).

Cost: about 12 s (estimated on a loaded 2-core machine, 2026-11-29; not yet measured in the
suite's run).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
from comfy_templates import TEMPLATES, widget
from comfy_workflow_files import TINY_FLUX_SCHNELL, write_comfyui
from conftest import run_job

from paradit.backend.tools.workflow import plan_of

TEMPLATE = "flux_schnell_full_text_to_image.json"
TINY = {  # the file the template names -> the tiny one in its place
    "diffusion_models/flux1-schnell.safetensors": f"diffusion_models/{TINY_FLUX_SCHNELL}",
    "text_encoders/clip_l.safetensors": "text_encoders/clip_l_tiny.safetensors",
    "text_encoders/t5xxl_fp16.safetensors": "text_encoders/t5xxl_tiny.safetensors",
    "vae/ae.safetensors": "vae/flux_ae_tiny.safetensors",
}


@pytest.fixture(scope="module")
def comfy(tmp_path_factory) -> Path:
    """The tiny ComfyUI files (tests/comfy_workflow_files.py: Flux.1 dev's and schnell's
    files as headers at their real names, tiny-flux's files beside them)."""
    return write_comfyui(tmp_path_factory.mktemp("ComfyUI"))


def _tiny_folder(comfy: Path, folder: Path) -> Path:
    """A ComfyUI folder whose files under the template's names are tiny-flux's (hard links)."""
    for name, tiny in TINY.items():
        target = folder / "models" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        os.link(comfy / "models" / tiny, target)
    return folder


def _copy(comfy: Path, **widgets: list) -> Path:
    """The template with nodes' widget values replaced (node id -> widgets_values), saved in
    `comfy`."""
    data = json.loads((TEMPLATES / TEMPLATE).read_text())
    for node in data["nodes"]:
        if str(node["id"]) in widgets:
            node["widgets_values"] = widgets[str(node["id"])]
    path = comfy / TEMPLATE
    path.write_text(json.dumps(data))
    return path


def test_schnell_template_runs_its_two_prompts_end_to_end(comfy, tmp_path, paradit_warm, backends):
    """The template at 64x64 (EmptySD3LatentImage 27 edited; the rest as saved: 4 steps,
    euler/simple, cfg 1, shift 1), its files linked to tiny-flux's: `workflow run` writes the
    image of the job with clip_l as `prompt` and t5xxl as `prompt_2`, which a job without
    `prompt_2` does not give."""
    folder = _tiny_folder(comfy, tmp_path / "ComfyUI")
    path = _copy(folder, **{"27": [64, 64, 1]})
    plan, variant = plan_of(str(path), str(folder))
    assert variant == "tiny-flux"
    assert (plan.request["prompt"], plan.request["prompt_2"]) == (
        widget(TEMPLATE, "41", 0),
        widget(TEMPLATE, "41", 1),
    )
    assert (plan.request["guidance_scale"], plan.request["shift"]) == (1.0, 1.0)
    server = backends.get(plan.serve["model"], 1, *plan.serve_argv()[2:])
    out = tmp_path / "out"
    result = paradit_warm(
        "workflow", "run", str(path), "--out", str(out), "--comfyui-dir", str(folder),
        "--server", server.url,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    record = json.loads((out / "job.json").read_text())
    assert record["request"]["prompt_2"] == widget(TEMPLATE, "41", 1)
    _, (image,) = run_job(server, plan.body())
    assert (out / "image.png").read_bytes() == image
    without = {k: v for k, v in plan.body().items() if k != "prompt_2"}
    _, (other,) = run_job(server, without)
    assert other != image


def test_clip_text_encode_flux_guidance_on_flux_dev(comfy, tmp_path):
    """The template's graph on Flux.1 dev's file (headers only), which embeds guidance:
    CLIPTextEncodeFlux's 3.5 is the job's guidance_scale (no default filled in), and a
    sampler cfg other than 1 beside it is refused at the sampler, as with FluxGuidance."""
    dev = ["flux1-dev.safetensors", "default"]
    plan, variant = plan_of(str(_copy(tmp_path, **{"38": dev})), str(comfy))
    assert variant == "flux.1-dev"
    assert plan.request["guidance_scale"] == 3.5  # CLIPTextEncodeFlux 41's guidance
    assert plan.request["shift"] == pytest.approx(math.exp(1.15), rel=1e-12)
    assert plan.request["prompt_2"] == widget(TEMPLATE, "41", 1)
    sampler = widget(TEMPLATE, "31", slice(None))
    sampler[3] = 2.0  # KSampler 31's cfg
    with pytest.raises(ValueError) as refused:
        plan_of(str(_copy(tmp_path, **{"38": dev, "31": sampler})), str(comfy))
    assert str(refused.value).startswith(
        "node 31 (KSampler): cfg 2 with CLIPTextEncodeFlux's guidance (node 41)"
    ), refused.value
