"""ComfyUI's FLUX.2 [klein] image-edit templates (`image_flux2_klein_image_edit_{4b,9b}_{base,
distilled}.json`): a loaded image scaled by ImageScaleToTotalPixels (`nearest-exact`, the 9B
base one `lanczos`), VAEEncode'd and given by ReferenceLatent to both prompts, sampled on
Flux2Scheduler's levels (the pipeline's own). The Klein pipeline prepares references with
Flux2Pipeline's own code, which is ComfyUI's (test_templates_flux.py's findings for FLUX.2
[dev]; ComfyUI's `comfy/model_detection.py` gives every FLUX.2 DiT, Klein's too, the `index`
reference method at scale 10) and gives them to both CFG branches, as the templates give
them to both prompts. `nearest-exact` (ComfyUI's `comfy.utils.common_upscale`: torch's
interpolation on the loaded image, channels-last float32 on the CPU) copies pixels: paradit
sends it as an 8-bit image, checked here against torch. Each template imports to its job
(every field by hand from the graph: tests/template_jobs.py's `KLEIN_EDIT`, which
tests/frontends/test_comfyui_templates.py checks the API form against too) on header files
under its names, and runs end to end on the tiny Klein weights under its names. The KV
template's FluxKVCache is refused (test_templates.py's REFUSED table: ComfyUI's cached
references attend to the whole sequence at the first step, the KV pipeline's only to
themselves); with the node bypassed its ReferenceLatent on the KV file is refused.

Cost: about 10 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from comfy_files import flux2_bfl, qwen3_comfy, write_safetensors
from comfy_templates import TEMPLATES, refusal, workflow_run
from comfy_workflow_files import write_comfyui
from conftest import run_job
from PIL import Image as PILImage
from safetensors.torch import save_file
from template_jobs import (
    B4,
    B9,
    D4,
    D9,
    KLEIN_EDIT,
    KLEIN_EDIT_FILES,
    klein_edit_folder,
    klein_edit_headers,
    klein_edit_request,
    seeded_png,
)

from paradit.backend.models.presets import build_preset
from paradit.backend.tools.workflow import plan_of
from paradit.backend.workflow.images import loaded_png


@pytest.fixture(scope="module")
def comfy(tmp_path_factory) -> Path:
    """The tiny ComfyUI files (FLUX.2 [klein]'s and Qwen3's headers at their real widths)."""
    return write_comfyui(tmp_path_factory.mktemp("ComfyUI"))


@pytest.mark.parametrize("template", sorted(KLEIN_EDIT))
def test_klein_edit_template_imports_to_the_job_comfyui_runs(comfy, tmp_path, template):
    """As saved, with a 512x512 input: every field by hand (`KLEIN_EDIT`), the files the
    template names, and the image sent is ImageScaleToTotalPixels' (1024x1024)."""
    folder = klein_edit_folder(
        tmp_path / "ComfyUI", template, klein_edit_headers(comfy, template), (512, 512)
    )
    plan, variant = plan_of(str(TEMPLATES / template), str(folder))
    image = folder / "input" / KLEIN_EDIT_FILES[template][3]
    assert variant == KLEIN_EDIT[template][0]
    assert plan.request == klein_edit_request(template, image)
    models = folder / "models"
    dit, encoder, vae, _ = KLEIN_EDIT_FILES[template]
    assert plan.serve == {
        "model": str(models / f"{dit}.safetensors"),
        "text_encoders": [str(models / f"{encoder}.safetensors")],
        "vaes": [str(models / f"{vae}.safetensors")], "image_encoders": [], "lora_dirs": [],
    }  # fmt: skip
    assert plan.to_dict()["scaled_to_total_pixels"] == {str(image): [1024, 1024]}
    sent = PILImage.open(io.BytesIO(base64.b64decode(plan.body()["image"])))
    assert sent.size == (1024, 1024)
    loaded = np.asarray(PILImage.open(image).convert("RGB"))
    if KLEIN_EDIT[template][2] == "nearest-exact":  # 512 -> 1024: each pixel twice
        expected = loaded.repeat(2, axis=0).repeat(2, axis=1)
    else:
        expected = np.asarray(
            PILImage.fromarray(loaded).resize((1024, 1024), PILImage.Resampling.LANCZOS)
        )
    assert np.array_equal(np.asarray(sent.convert("RGB")), expected)


@pytest.mark.fast
def test_nearest_exact_is_comfyuis_image_at_8_bits(tmp_path):
    """ComfyUI's ImageScaleToTotalPixels nearest-exact: `common_upscale` on LoadImage's
    image (value / 255 in float32, channels moved first), torch's `nearest-exact`, gives
    8-bit values exactly (every value is an input pixel's), and they are the image paradit
    sends: sizes where torch's source index is neither float32's nor exact arithmetic's
    (8 -> 836, 12 -> 1254) and seeded others, up and down."""
    rng = np.random.default_rng(4)
    pairs = [((8, 12), (836, 1254)), ((12, 8), (1254, 836)), ((600, 400), (1254, 836))]
    pairs += [(tuple(rng.integers(1, 700, 2)), tuple(rng.integers(1, 1400, 2))) for _ in range(30)]
    for (w, h), (width, height) in pairs:
        pixels = rng.integers(0, 256, (int(h), int(w), 3), dtype=np.uint8)
        path = tmp_path / "in.png"
        PILImage.fromarray(pixels).save(path)
        image = torch.from_numpy(pixels.astype(np.float32) / 255.0)[None]  # LoadImage's
        scaled = torch.nn.functional.interpolate(
            image.movedim(-1, 1), size=(int(height), int(width)), mode="nearest-exact"
        ).movedim(1, -1)[0]
        data = loaded_png(path, (int(width), int(height)), crop=False, method="nearest-exact")
        sent = np.asarray(PILImage.open(io.BytesIO(data)).convert("RGB"))
        assert sent.shape == (height, width, 3)
        # what the VAE reads: the sent 8-bit values / 255 are ComfyUI's floats, bit for bit
        assert torch.equal(torch.from_numpy(sent.astype(np.float32) / 255.0), scaled)


@pytest.fixture(scope="module")
def tiny_klein_files(tmp_path_factory) -> tuple[Path, Path, Path]:
    """The tiny Klein weights (tiny-flux2-klein-base's = tiny-flux2-klein's): the DiT in
    Black Forest Labs' names, Qwen3 in ComfyUI's, the Flux.2 VAE in diffusers'."""
    tiny = build_preset("tiny-flux2-klein-base")
    root = tmp_path_factory.mktemp("tiny_klein")
    dit, encoder, vae = (root / f"{n}.safetensors" for n in ("dit", "encoder", "vae"))
    write_safetensors(dit, flux2_bfl(tiny.transformer.state_dict()), "fp32")
    save_file(qwen3_comfy(tiny.text_encoder.model.state_dict()), str(encoder))
    save_file({k: v.contiguous() for k, v in tiny.vae.state_dict().items()}, str(vae))
    return dit, encoder, vae


def _small(folder: Path, template: str) -> Path:
    """The template with ImageScaleToTotalPixels 80 at 0.01171875 megapixels (the 32x24
    input to 128x96, its method as saved) and 2 steps (Flux2Scheduler 62), saved in
    `folder`."""
    data = json.loads((TEMPLATES / template).read_text())
    sub = next(s for s in data["definitions"]["subgraphs"] if s["id"].startswith("7b34ab90"))
    for node in sub["nodes"]:
        if node["id"] == 80:
            node["widgets_values"][1] = 0.01171875
        if node["id"] == 62:
            node["widgets_values"][0] = 2
    path = folder / template
    path.write_text(json.dumps(data))
    return path


RUN = {B4: "tiny-flux2-klein-base", D4: "tiny-flux2-klein"}
"""The templates `workflow run` runs on a backend of their own files; the 9B ones run their
job on the backend of the 4B template of their kind (the same tiny weights)."""


@pytest.mark.parametrize("template", sorted(RUN))
def test_klein_edit_templates_run_end_to_end(
    tiny_klein_files, tmp_path, paradit_warm, backends, template
):
    """The 4B template on the tiny Klein weights under its names, its 9B sibling's job on
    the same backend: `workflow run` writes the image of its request (at the 128x96 the
    scaled reference gives), whose reference shows (without the image another one)."""
    folder = klein_edit_folder(tmp_path / "ComfyUI", template, tiny_klein_files, (32, 24))
    path = _small(folder, template)
    plan, variant = plan_of(str(path), str(folder))
    assert variant == RUN[template]
    assert (plan.request["width"], plan.request["height"]) == (128, 96)
    assert plan.request["num_inference_steps"] == 2
    server, out, _, _, (image,) = workflow_run(
        paradit_warm, backends, plan, path, folder, tmp_path / "out"
    )
    assert (out / "image.png").read_bytes() == image
    without = {k: v for k, v in plan.body().items() if k != "image"}
    _, (other,) = run_job(server, without)
    assert other != image
    nine = {B4: B9, D4: D9}[template]
    folder9 = klein_edit_folder(tmp_path / "ComfyUI9", nine, tiny_klein_files, (32, 24))
    plan9, variant9 = plan_of(str(_small(folder9, nine)), str(folder9))
    assert variant9 == RUN[template]
    job, frames = run_job(server, plan9.body())
    assert job["status"] == "succeeded", job
    assert {k: job["request"][k] for k in ("width", "height", "guidance_scale")} == {
        "width": 128,
        "height": 96,
        "guidance_scale": plan9.request["guidance_scale"],
    }
    assert len(frames) == 1


def test_a_reference_only_on_the_positive_of_a_cfg_job_is_refused(comfy, tmp_path):
    """The base template with its negative (CLIPTextEncode 67) straight into CFGGuider 63,
    without ReferenceLatent 122: the pipeline's unconditional branch sees the references,
    ComfyUI's would not: refused at the sampler."""
    folder = klein_edit_folder(tmp_path / "ComfyUI", B4, klein_edit_headers(comfy, B4), (512, 512))
    data = json.loads((TEMPLATES / B4).read_text())
    sub = next(s for s in data["definitions"]["subgraphs"] if s["id"].startswith("7b34ab90"))
    link = next(k for k in sub["links"] if k["target_id"] == 63 and k["target_slot"] == 2)
    link["origin_id"], link["origin_slot"] = 67, 0
    path = folder / B4
    path.write_text(json.dumps(data))
    refusal(path, folder, "subgraph 75 > node 64 (SamplerCustomAdvanced): ",
            "its negative prompt is encoded with other images than the positive")  # fmt: skip


def test_the_kv_template_without_fluxkvcache_is_refused_at_its_reference(comfy, tmp_path):
    """`image_flux2_klein_9b_kv_image_edit` with FluxKVCache bypassed (mode 4): its file
    `flux-2-klein-9b-kv-fp8` is the KV model (its name), whose pipeline caches the references
    where ComfyUI without the node recomputes them at the DiT's `index` method: refused at a
    ReferenceLatent, naming the variant."""
    template = "image_flux2_klein_9b_kv_image_edit.json"
    folder = tmp_path / "ComfyUI"
    dit, encoder, vae = klein_edit_headers(comfy, "9b")
    for source, name in (
        (dit, "diffusion_models/flux-2-klein-9b-kv-fp8"),
        (encoder, "text_encoders/qwen_3_8b_fp8mixed"),
        (vae, "vae/flux2-vae"),
    ):
        target = folder / "models" / f"{name}.safetensors"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.hardlink_to(source)
    (folder / "input").mkdir()
    for i, name in enumerate(("safari_outfit.png", "man_in_street.png")):
        seeded_png(folder / "input" / name, (512, 512), 5 + i)
    data = json.loads((TEMPLATES / template).read_text())
    cache = next(n for n in data["nodes"] if n["type"] == "FluxKVCache")
    cache["mode"] = 4
    path = folder / template
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError) as refused:
        plan_of(str(path), str(folder))
    message = str(refused.value)
    assert "(ReferenceLatent): a reference image on flux.2-klein-9b-kv" in message, message
    assert "recomputes them every step" in message, message
