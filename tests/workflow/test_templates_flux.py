"""ComfyUI's Flux templates beyond test_templates.py's table. Flux.1 schnell
(`flux_schnell_full_text_to_image.json`): CLIPTextEncodeFlux's two prompts run as `prompt`
and `prompt_2` end to end on tiny files under the template's names, and its guidance is the
distilled guidance only where the DiT embeds one (the template's graph on Flux.1 dev's file),
as in ComfyUI (`comfy/ldm/flux/model.py` reads guidance only with guidance_embed). FLUX.2
Klein (`image_flux2_klein_text_to_image.json`; both base templates import in test_templates.py's
table): the base template runs end to end with true CFG on tiny files under its names (the
DiT's name says base), the base subgraph on the distilled file (its name does not) is refused
at its sampler, the distilled subgraph's job maps. FLUX.2-dev's Flux2Scheduler refused where
its levels would not be the pipeline's own. FLUX.2-dev with a reference image
(`image_flux2.json`): every field by hand, the image sent is ComfyUI's ImageScaleToTotalPixels,
the pipeline's reference crop is ComfyUI's VAEEncode's, refusals name the node, and the
template runs end to end on tiny-flux2's weights under its names.

Cost: about 6 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import base64
import io
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from comfy_files import flux2_bfl, mistral3_comfy, qwen3_comfy, write_safetensors
from comfy_templates import TEMPLATES, refusal, widget, workflow_run
from comfy_workflow_files import TINY_FLUX_SCHNELL, write_comfyui
from conftest import run_job
from PIL import Image as PILImage
from safetensors.torch import save_file
from template_jobs import (
    FLUX2_REF_REQUEST,
    KLEIN,
    KLEIN_DISTILLED,
    REF_INPUT,
    flux2_ref_copy,
    flux2_ref_folder,
    flux2_ref_headers,
    in_folder,
    klein_distilled,
    klein_folder,
)

from paradit.backend.models.presets import build_preset
from paradit.backend.tools.workflow import plan_of
from paradit.backend.workflow.images import total_pixels_size

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
    server, out, record, _, (image,) = workflow_run(
        paradit_warm, backends, plan, path, folder, tmp_path / "out"
    )
    assert record["request"]["prompt_2"] == widget(TEMPLATE, "41", 1)
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
    refusal(
        _copy(tmp_path, **{"38": dev, "31": sampler}),
        comfy,
        "node 31 (KSampler): cfg 2 with CLIPTextEncodeFlux's guidance (node 41)",
    )


def test_klein_base_subgraph_on_a_distilled_file_is_refused_at_its_sampler(comfy, tmp_path):
    """The base subgraph's UNETLoader 70 given the distilled file (`flux-2-klein-4b`: its name
    does not say base): paradit runs it as the step-distilled model, whose pipeline ignores
    CFGGuider 63's cfg 5 where ComfyUI runs both branches: refused at the sampler, after
    reading the DiT's header. (As saved, the template imports: test_templates.py's table.)"""
    folder = klein_folder(comfy, tmp_path / "ComfyUI")
    data = json.loads((TEMPLATES / KLEIN).read_text())
    sub = next(s for s in data["definitions"]["subgraphs"] if s["id"].startswith("7b34ab90"))
    loader = next(n for n in sub["nodes"] if n["id"] == 70)
    loader["widgets_values"][0] = "flux-2-klein-4b.safetensors"
    path = tmp_path / KLEIN
    path.write_text(json.dumps(data))
    refusal(
        path,
        folder,
        "subgraph 75 > node 64 (SamplerCustomAdvanced): cfg 5 on a step-distilled FLUX.2-klein "
        "file (random:flux.2-klein-4b: its name does not say base",
    )


@pytest.fixture(scope="module")
def tiny_klein(tmp_path_factory) -> Path:
    """A ComfyUI folder with the Klein base template's files under its names, holding the
    tiny Klein weights (tiny-flux2-klein-base's, as tiny-flux2-klein's): the DiT in Black
    Forest Labs' names, Qwen3 in ComfyUI's, the Flux.2 VAE in diffusers'."""
    tiny = build_preset("tiny-flux2-klein-base")
    models = tmp_path_factory.mktemp("ComfyUI") / "models"
    for name in ("diffusion_models", "text_encoders", "vae"):
        (models / name).mkdir(parents=True)
    dit = flux2_bfl(tiny.transformer.state_dict())
    write_safetensors(models / "diffusion_models/flux-2-klein-base-4b.safetensors", dit, "fp32")
    encoder = qwen3_comfy(tiny.text_encoder.model.state_dict())
    save_file(encoder, str(models / "text_encoders/qwen_3_4b.safetensors"))
    vae = {k: v.contiguous() for k, v in tiny.vae.state_dict().items()}
    save_file(vae, str(models / "vae/flux2-vae.safetensors"))
    return models.parent


def test_klein_base_template_runs_end_to_end_with_cfg(tiny_klein, tmp_path, paradit_warm, backends):
    """The base template at 64x64 (PrimitiveInt 68, 69) and 2 steps (Flux2Scheduler 62), the
    rest as saved (cfg 5, the empty negative, seed 0), on its files holding the tiny Klein
    weights: the file's name makes it tiny-flux2-klein-base, `workflow run` writes the image
    of its request, and that request's CFG shows (at cfg 1 another image)."""
    data = json.loads((TEMPLATES / KLEIN).read_text())
    sub = next(s for s in data["definitions"]["subgraphs"] if s["id"].startswith("7b34ab90"))
    for node in sub["nodes"]:
        if node["id"] in (68, 69):
            node["widgets_values"][0] = 64
        if node["id"] == 62:
            node["widgets_values"] = [2, 64, 64]
    path = tiny_klein / KLEIN
    path.write_text(json.dumps(data))
    plan, variant = plan_of(str(path), str(tiny_klein))
    assert variant == "tiny-flux2-klein-base"
    assert plan.request == {
        "prompt": widget(KLEIN, "76", 0), "negative_prompt": "",
        "width": 64, "height": 64, "num_frames": 1, "num_inference_steps": 2,
        "guidance_scale": 5.0, "seed": 0,
    }  # fmt: skip
    server, out, _, _, (image,) = workflow_run(
        paradit_warm, backends, plan, path, tiny_klein, tmp_path / "out"
    )
    assert (out / "image.png").read_bytes() == image
    _, (unguided,) = run_job(server, {**plan.body(), "guidance_scale": 1.0})
    assert unguided != image


def test_klein_distilled_subgraph_imports_to_the_job_comfyui_runs(comfy, tmp_path):
    """The template's second subgraph (77, FLUX.2-klein-4B, bypassed as saved) switched on
    and the first (75) bypassed, as a user picks the distilled model: every field from the
    graph (tests/template_jobs.py's KLEIN_DISTILLED)."""
    folder = klein_folder(comfy, tmp_path / "ComfyUI")
    plan, variant = plan_of(str(klein_distilled(tmp_path)), str(folder))
    assert variant == "flux.2-klein-4b"
    assert plan.request == KLEIN_DISTILLED
    models = folder / "models"
    assert plan.serve == {
        "model": str(models / "diffusion_models/flux-2-klein-4b.safetensors"),
        "text_encoders": [str(models / "text_encoders/qwen_3_4b.safetensors")],
        "vaes": [str(models / "vae/flux2-vae.safetensors")],
        "image_encoders": [], "lora_dirs": [],
    }  # fmt: skip


FLUX2 = "image_flux2_text_to_image.json"
FLUX2_REFUSED = {  # case -> (inner node edits of subgraph 98, the node refused, its words)
    "Flux2Scheduler at another size than the latent": (
        {"48": [20, 512, 1024]}, "node 48 (Flux2Scheduler)",
        "levels for 512x1024 where the latent (node 98:47) is 1024x1024",
    ),
    "another sampler than euler on its levels": (
        {"16": ["uni_pc"]}, "node 16 (KSamplerSelect)",
        "sampler uni_pc on Flux2Scheduler's levels: paradit runs them with the model's own",
    ),
    "a side ComfyUI's latent rounds down": (
        {"47": [1000, 1024, 1]}, "node 47 (EmptyFlux2LatentImage)",
        "1000x1024: ComfyUI's latent rounds each side down to a multiple of 16",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(FLUX2_REFUSED))
def test_flux2_scheduler_refusals_name_the_node(comfy, tmp_path, case):
    """Flux2Scheduler maps to the model's own levels only where they are the same: at the
    latent's size, stepped by euler, on sides ComfyUI does not round."""
    inner, where, words = FLUX2_REFUSED[case]
    folder = tmp_path / "ComfyUI"
    for name in ("diffusion_models/flux2_dev_fp8mixed",
                 "text_encoders/mistral_3_small_flux2_bf16"):  # fmt: skip
        (folder / "models" / name).parent.mkdir(parents=True, exist_ok=True)
        os.link(comfy / "models" / f"{name}.safetensors", folder / "models" / f"{name}.safetensors")
    (folder / "models" / "vae").mkdir()
    os.link(comfy / "models/vae/flux2-vae.safetensors",
            folder / "models/vae/full_encoder_small_decoder.safetensors")  # fmt: skip
    data = json.loads((TEMPLATES / FLUX2).read_text())
    (sub,) = data["definitions"]["subgraphs"]
    for node in sub["nodes"]:
        if str(node["id"]) in inner:
            node["widgets_values"] = inner[str(node["id"])]
    path = tmp_path / FLUX2
    path.write_text(json.dumps(data))
    refusal(path, folder, f"subgraph 98 > {where}: ", words)


def test_a_guided_negative_with_two_texts_is_refused(comfy, tmp_path):
    """paradit gives the negative prompt to both encoders: the schnell template's KSampler 31
    reading CLIPTextEncodeFlux 41 (two texts) as its negative too, at cfg 2, is refused."""
    data = json.loads((TEMPLATES / TEMPLATE).read_text())
    sampler = next(n for n in data["nodes"] if n["id"] == 31)
    sampler["widgets_values"][3] = 2.0
    link = next(i["link"] for i in sampler["inputs"] if i["name"] == "negative")
    item = next(k for k in data["links"] if k[0] == link)
    item[1], item[2] = 41, 0  # [id, origin node, origin slot, target, slot, type]
    path = tmp_path / TEMPLATE
    path.write_text(json.dumps(data))
    refusal(
        path,
        comfy,
        "node 31 (KSampler): a negative prompt with two texts (node 41): paradit encodes the "
        "negative prompt with both encoders",
    )


# -- image_flux2.json: a FLUX.2 reference image (ImageScaleToTotalPixels, VAEEncode,
# ReferenceLatent: backend/workflow/reference_nodes.py) ----------------------------------------


def test_flux2_reference_template_imports_to_the_job_comfyui_runs(comfy, tmp_path):
    """As saved, on a square 512x512 input (at 1 megapixel its sides are multiples of 16, so
    EmptyFlux2LatentImage 47 and Flux2Scheduler 48 take GetImageSize 72's size unrounded):
    every field by hand, and the image sent is ComfyUI's ImageScaleToTotalPixels 45 (lanczos,
    1 megapixel: 1024x1024), PIL's Lanczos on the 8-bit pixels, the whole image."""
    folder = flux2_ref_headers(comfy, tmp_path / "ComfyUI", (512, 512))
    plan, variant = plan_of(str(flux2_ref_copy(folder)), str(folder))
    assert variant == "flux.2-dev"
    image = folder / "input" / REF_INPUT
    assert plan.request == in_folder(FLUX2_REF_REQUEST, folder)  # by hand: template_jobs.py
    assert plan.to_dict()["scaled_to_total_pixels"] == {str(image): [1024, 1024]}
    sent = PILImage.open(io.BytesIO(base64.b64decode(plan.body()["image"])))
    loaded = PILImage.open(image).convert("RGB")
    assert sent.size == (1024, 1024)
    expected = loaded.resize((1024, 1024), PILImage.Resampling.LANCZOS)
    assert np.array_equal(np.asarray(sent.convert("RGB")), np.asarray(expected))


@pytest.mark.fast
def test_total_pixels_size_worked_by_hand():
    """ImageScaleToTotalPixels' size (comfy_extras/nodes_post_processing.py): each side
    round(side x sqrt(megapixels x 2^20 / pixels) / steps) x steps."""
    assert total_pixels_size(512, 512, 1.0, 1) == (1024, 1024)
    assert total_pixels_size(600, 400, 1.0, 1) == (1254, 836)  # 1254.14, 836.09
    assert total_pixels_size(500, 300, 1.0, 1) == (1322, 793)  # 1321.98 rounds up
    assert total_pixels_size(600, 400, 1.0, 16) == (1248, 832)  # 78.37 x 16, 52.25 x 16
    assert total_pixels_size(32, 24, 0.01171875, 1) == (128, 96)  # x 4 exactly


@pytest.mark.fast
def test_the_pipelines_reference_crop_is_comfyuis_vae_encode_crop():
    """The finding the mapping rests on: for a 134x103 image (at most 1024x1024 pixels) the
    Flux.2 pipeline's own preparation (its image processor, as `Flux2Pipeline.__call__` calls
    it: sides floored to 16, `resize_mode="crop"`) is ComfyUI's VAEEncode input: the centre
    128x96 at offsets ((side % 16) // 2), pixels / 255 x 2 - 1 in float32."""
    from diffusers.pipelines.flux2.image_processor import Flux2ImageProcessor

    pixels = np.random.default_rng(3).integers(0, 256, (103, 134, 3), dtype=np.uint8)
    processor = Flux2ImageProcessor(vae_scale_factor=16, vae_latent_channels=32)
    got = processor.preprocess(PILImage.fromarray(pixels), height=96, width=128,
                               resize_mode="crop")  # fmt: skip
    top, left = (103 % 16) // 2, (134 % 16) // 2
    comfy = pixels[top : top + 96, left : left + 128].astype(np.float32) / 255.0 * 2.0 - 1.0
    assert torch.equal(got[0], torch.from_numpy(comfy).permute(2, 0, 1))


REF_REFUSED = {  # case -> (input size, inner widget edits, where, the reason's words)
    "another upscale_method than lanczos": (
        (512, 512), {"45": ["area", 1, 1]}, "node 45 (ImageScaleToTotalPixels): ",
        "upscale_method area: ComfyUI scales with torch's interpolation in float",
    ),
    "a reference over 1024x1024 pixels": (
        (512, 512), {"45": ["lanczos", 2, 16]}, "subgraph 68 > node 43 (ReferenceLatent): ",
        "a 1456x1456 reference (over 1024x1024 pixels)",
    ),
    "a 3:2 input at resolution_steps 1 (sides ComfyUI's latent rounds down)": (
        (600, 400), {}, "subgraph 68 > node 47 (EmptyFlux2LatentImage): ",
        "1254x836: ComfyUI's latent rounds each side down to a multiple of 16",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(REF_REFUSED))
def test_flux2_reference_refusals_name_the_node(comfy, tmp_path, case):
    size, inner, where, words = REF_REFUSED[case]
    folder = flux2_ref_headers(comfy, tmp_path / "ComfyUI", size)
    refusal(flux2_ref_copy(folder, **inner), folder, where, words)


def test_flux2_reference_at_resolution_steps_16_maps_any_aspect(comfy, tmp_path):
    """The 3:2 input with ImageScaleToTotalPixels' resolution_steps 16: 1248x832, the size
    the template saves on its latent and scheduler."""
    folder = flux2_ref_headers(comfy, tmp_path / "ComfyUI", (600, 400))
    plan, _ = plan_of(str(flux2_ref_copy(folder, **{"45": ["lanczos", 1, 16]})), str(folder))
    assert (plan.request["width"], plan.request["height"]) == (1248, 832)


def test_a_reference_on_a_model_whose_pipeline_prepares_it_otherwise_is_refused(comfy, tmp_path):
    """The template's graph on tiny Z-Image's files (a model whose pipeline takes no
    reference images): refused at ReferenceLatent 43 after reading the DiT."""
    models = comfy / "models"
    folder = flux2_ref_folder(
        tmp_path / "ComfyUI",
        models / "diffusion_models/z_image_turbo_tiny_bf16.safetensors",
        models / "text_encoders/qwen_3_tiny.safetensors",
        models / "vae/ae_tiny.safetensors",
        (512, 512),
    )
    refusal(flux2_ref_copy(folder), folder, "subgraph 68 > node 43 (ReferenceLatent): ",
            "paradit runs ReferenceLatent only where")  # fmt: skip


@pytest.fixture(scope="module")
def tiny_flux2_files(tmp_path_factory) -> tuple[Path, Path, Path]:
    """tiny-flux2's DiT (Black Forest Labs' names), Mistral 3 (ComfyUI's) and VAE."""
    tiny = build_preset("tiny-flux2")
    root = tmp_path_factory.mktemp("tiny_flux2")
    dit, encoder, vae = (root / f"{n}.safetensors" for n in ("dit", "encoder", "vae"))
    write_safetensors(dit, flux2_bfl(tiny.transformer.state_dict()), "fp32")
    save_file(mistral3_comfy(tiny.text_encoder.state_dict()), str(encoder))
    save_file({k: v.contiguous() for k, v in tiny.vae.state_dict().items()}, str(vae))
    return dit, encoder, vae


def test_flux2_reference_template_runs_end_to_end(
    tiny_flux2_files, tmp_path, paradit_warm, backends
):
    """The template on tiny-flux2's weights under its names, a 32x24 input scaled to 128x96
    (ImageScaleToTotalPixels 45 at 0.01171875 megapixels, lanczos), 2 steps (PrimitiveInt
    91): `workflow run` writes the image of its request, whose reference shows (without the
    image another one)."""
    folder = flux2_ref_folder(tmp_path / "ComfyUI", *tiny_flux2_files, (32, 24))
    path = flux2_ref_copy(folder, **{"45": ["lanczos", 0.01171875, 1], "91": [2, "fixed"]})
    plan, variant = plan_of(str(path), str(folder))
    assert variant == "tiny-flux2"
    assert (plan.request["width"], plan.request["height"]) == (128, 96)
    assert plan.request["num_inference_steps"] == 2
    server, out, _, _, (image,) = workflow_run(
        paradit_warm, backends, plan, path, folder, tmp_path / "out"
    )
    assert (out / "image.png").read_bytes() == image
    without = {k: v for k, v in plan.body().items() if k != "image"}
    _, (other,) = run_job(server, without)
    assert other != image
