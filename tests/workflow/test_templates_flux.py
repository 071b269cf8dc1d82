"""ComfyUI's Flux templates beyond test_templates.py's table. Flux.1 schnell
(`flux_schnell_full_text_to_image.json`): CLIPTextEncodeFlux's two prompts run as `prompt`
and `prompt_2` end to end on tiny files under the template's names, and its guidance is the
distilled guidance only where the DiT embeds one (the template's graph on Flux.1 dev's file),
as in ComfyUI (`comfy/ldm/flux/model.py` reads guidance only with guidance_embed). FLUX.2
Klein (`image_flux2_klein_text_to_image.json`; both base templates import in test_templates.py's
table): the base template runs end to end with true CFG on tiny files under its names (the
DiT's name says base), the base subgraph on the distilled file (its name does not) is refused
at its sampler, the distilled subgraph's job maps. FLUX.2-dev's Flux2Scheduler refused where
its levels would not be the pipeline's own.

Cost: about 3 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
from comfy_files import flux2_bfl, qwen3_comfy, write_safetensors
from comfy_templates import TEMPLATES, refusal, widget
from comfy_workflow_files import TINY_FLUX_SCHNELL, write_comfyui
from conftest import run_job
from safetensors.torch import save_file
from template_jobs import KLEIN, KLEIN_DISTILLED, klein_distilled, klein_folder

from paradit.backend.models.presets import build_preset
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
    server = backends.get(plan.serve["model"], 1, *plan.serve_argv()[2:])
    out = tmp_path / "out"
    result = paradit_warm(
        "workflow", "run", str(path), "--out", str(out), "--comfyui-dir", str(tiny_klein),
        "--server", server.url,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    _, (image,) = run_job(server, plan.body())
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
