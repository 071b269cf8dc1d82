"""ComfyUI's official templates (the `comfyui-workflow-templates-json` package, read where it is
installed) of the families paradit runs, in their saved form, with the files they name linked
to the tiny ComfyUI files (tests/comfy_workflow_files.py) under the templates' own names: each
imports to the job ComfyUI runs (every field written by hand from the graph, the widget that
gives it named beside it), or is refused naming the node and why; the Z-Image Turbo one runs
end to end on a backend of its tiny files as saved, and every other one whose tiny files carry
weights (or, for the Flux ones, are linked to tiny files of their architecture: tiny-flux's,
tiny-flux as an all-in-one checkpoint, tiny-flux2's and tiny-flux2-klein-base's in the files'
layouts, the image then the preset's) at a tiny size (`RUN_SMALL`). LTX-2's text-to-video
templates map to paradit's two-stage job (`upscale`) at 24k+17 frames, where ComfyUI's audio
latent length is the pipeline's (as saved, at 121 frames, with ComfyUI's
`audio_latent_frames`: test_templates_ltx.py); the dev one and the distilled one run both
stages end to end at a tiny size.

Cost: about 30 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from pathlib import Path

import pytest
import torch
from comfy_templates import TEMPLATES, refusal, workflow_run
from comfy_templates import placeholders as _placeholders
from comfy_templates import shifted as _shifted
from comfy_workflow_files import TINY_FLUX_DEV
from conftest import run_job
from PIL import Image
from safetensors.torch import save_file
from template_jobs import (
    EXPECTED,
    FLUX2_TINY,
    FLUX_ALL_IN_ONE,
    LTX2_TWO_STAGE,
    REFUSED,
    comfy_for,
    in_folder,
    levels,
    ltx2_copy,
    ltx2_serve,
    ltxv_scheduler,
)

from paradit.backend.config import ServeConfig
from paradit.backend.sampling.names import SAMPLERS
from paradit.backend.serving.workflows import plan_for_server
from paradit.backend.tools.workflow import plan_of, run_overrides


@pytest.mark.parametrize("template", sorted(EXPECTED))
def test_template_imports_to_the_job_comfyui_runs(base, tmp_path, template):
    comfy = comfy_for(base, template, tmp_path / "ComfyUI")
    plan, variant = plan_of(str(TEMPLATES / template), str(comfy))
    expected_variant, request, serve = EXPECTED[template]
    request = in_folder(request, comfy)
    models = comfy / "models"
    assert plan.request == request
    assert plan.serve == {
        "model": ",".join(str(models / p) for p in serve["model"].split(",")),
        **{k: [str(models / p) for p in serve[k]] for k in serve if k != "model"},
    }
    assert variant == expected_variant
    assert plan.workflow["format"] == "ui"
    assert (
        plan.workflow["sha256"] == hashlib.sha256((TEMPLATES / template).read_bytes()).hexdigest()
    )


@pytest.mark.parametrize("template", sorted(REFUSED))
def test_template_refused_names_the_node_and_why(tmp_path, template):
    where, kind, words = REFUSED[template]
    comfy = _placeholders(template, tmp_path / "ComfyUI")
    refusal(TEMPLATES / template, comfy, f"{where} ({kind}): ", words)


def test_z_image_turbo_template_runs_end_to_end(base, tmp_path, paradit_warm, backends):
    """The template as saved (1024x1024, 8 steps), on a backend of its files linked to the
    tiny Z-Image ones: `workflow run --server` writes the image of its request, sampled on
    res_multistep/simple at shift 3 (ModelSamplingAuraFlow 11)."""
    template = "image_z_image_turbo.json"
    comfy = comfy_for(base, template, tmp_path / "ComfyUI")
    plan, _ = plan_of(str(TEMPLATES / template), str(comfy))
    server, out, record, _, _ = workflow_run(
        paradit_warm, backends, plan, TEMPLATES / template, comfy, tmp_path / "out", served=False
    )
    assert record["workflow"]["variant"] == "tiny-z-image"
    assert record["sampling"]["sigmas"] == pytest.approx(
        [_shifted(1 - k / 8, 3.0) for k in range(8)] + [0.0], abs=1e-6
    )
    with Image.open(out / "image.png") as image:
        assert image.size == (1024, 1024)


def test_values_saved_on_a_subgraph_node_override_the_inner_widgets(base, tmp_path):
    """Wan 2.2 14B I2V's subgraph node saves its promoted widgets' values on itself (in the
    order of its widget inputs: text, width, height, duration, noise_seed, ...): edited
    there, the job takes them."""
    template = "video_wan2_2_14B_i2v.json"
    comfy = comfy_for(base, template, tmp_path / "ComfyUI")
    data = json.loads((TEMPLATES / template).read_text())
    outer = next(n for n in data["nodes"] if n["id"] == 129)
    outer["widgets_values"][:5] = ["a white dragon flies", 480, 320, 2, 5]
    path = comfy / "edited.json"
    path.write_text(json.dumps(data))
    plan, _ = plan_of(str(path), str(comfy))
    # duration 2 s at PrimitiveFloat 162's 16 fps: floor(2 * 16 + 1) = 33 frames
    fields = ("prompt", "width", "height", "num_frames", "seed")
    assert [plan.request[k] for k in fields] == ["a white dragon flies", 480, 320, 33, 5]


@pytest.mark.parametrize("template", sorted(LTX2_TWO_STAGE))
def test_ltx2_template_maps_to_the_two_stage_job(base, tmp_path, template):
    """At 113 frames (24k+17), each LTX-2 text-to-video template is paradit's two-stage job:
    stage 1 at half the size on its levels, the upscaler its LatentUpscaleModelLoader names
    (`serve --upscaler`), stage 2 on ManualSigmas' levels with its sampler, guidance and
    LoRA (every field by hand from the graph)."""
    comfy = comfy_for(base, template, tmp_path / "ComfyUI")
    plan, variant = plan_of(str(ltx2_copy(template, comfy, 113)), str(comfy))
    _, expected_variant, request = LTX2_TWO_STAGE[template]
    assert plan.request == request
    checkpoint = {"video_ltx2_t2v.json": "ltx-2-19b-dev-fp8"}.get(template, "ltx-2-19b-distilled")
    assert plan.serve == ltx2_serve(comfy, checkpoint, bool(plan.request["upscale"]["loras"]))
    assert variant == expected_variant
    assert plan.serve_argv()[-2:] == ["--upscaler", plan.serve["upscaler"]]


TEMPORAL = {"in_channels": 128, "mid_channels": 32, "num_blocks_per_stage": 1, "dims": 3,
            "spatial_upsample": False, "temporal_upsample": True}  # fmt: skip
LTX2_REFUSED = {  # case -> (template, inner node edits, outer widget edits, node, type, words)
    "stage 2 read at its denoised_output after uni_pc": (
        "video_ltx2_t2v.json", {"66": ["uni_pc"]}, {},
        "subgraph 92 > node 70", "SamplerCustomAdvanced", "its denoised_output after uni_pc",
    ),
    "stage 2's ManualSigmas without the final 0": (
        "video_ltx2_t2v.json", {"73": ["0.909375, 0.725, 0.421875"]}, {},
        "subgraph 92 > node 73", "ManualSigmas", "the last must be 0",
    ),
    "a temporal latent upscaler": (
        "video_ltx2_t2v.json", {}, {6: "temporal.safetensors"},
        "subgraph 92 > node 76", "LatentUpscaleModelLoader", "a temporal latent upscaler",
    ),
    # LTXVCropGuides 81's positive relinked to CLIPTextEncode 3 itself (no frame rate)
    "stage 2's prompt without LTXVConditioning": (
        "video_ltx2_t2v.json", {}, {"relink": (81, "positive", 3, 0)},
        "subgraph 92 > node 82", "CFGGuider", "other prompts than the first stage's",
    ),
    "stage 1's ManualSigmas below pure noise": (
        "video_ltx2_t2v_distilled.json", {"176": ["0.975, 0.909375, 0.725, 0.421875, 0.0"]},
        {}, "subgraph 177 > node 176", "ManualSigmas", "a first stage's levels must start at 1",
    ),
    # 7 steps where the distilled model runs its own 8 (LTX2.fixed_levels: the server's
    # limits.sigmas), refused at the import as the server would refuse the job
    "stage 1's ManualSigmas at another count than the distilled model's 8": (
        "video_ltx2_t2v_distilled.json",
        {"176": ["1.0, 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.0"]}, {},
        "subgraph 177 > node 176", "ManualSigmas",
        "8 levels (7 steps) on all-in-one tiny-ltx2-distilled (DiT, connectors, vae, audio_vae, "
        "vocoder), which runs only its own 8-step schedule",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(LTX2_REFUSED))
def test_ltx2_two_stage_refusals_name_the_node(base, tmp_path, case):
    """What paradit's two-stage job cannot run as ComfyUI does, each refused at its node."""
    template, inner, outer, where, kind, words = LTX2_REFUSED[case]
    comfy = comfy_for(base, template, tmp_path / "ComfyUI")
    temporal = comfy / "models" / "latent_upscale_models" / "temporal.safetensors"
    save_file({"x": torch.zeros(1)}, str(temporal), metadata={"config": json.dumps(TEMPORAL)})
    path = ltx2_copy(template, comfy, 113, **inner)
    data = json.loads(path.read_text())
    (sub,) = data["definitions"]["subgraphs"]
    node = next(n for n in data["nodes"] if n["type"] == sub["id"])
    for index, value in outer.items():
        if index == "relink":  # (target node, its input, the new origin node, its output)
            target, name, origin, slot = value
            inputs = next(n for n in sub["nodes"] if n["id"] == target)["inputs"]
            link = next(i["link"] for i in inputs if i["name"] == name)
            item = next(k for k in sub["links"] if k["id"] == link)
            item.update(origin_id=origin, origin_slot=slot)
        else:
            node["widgets_values"][index] = value
    path.write_text(json.dumps(data))
    refusal(path, comfy, f"{where} ({kind}): ", words)


def test_ltx2_t2v_template_runs_end_to_end_as_its_request(base, tmp_path, paradit_warm, backends):
    """The dev template at 17 frames, its size made tiny (the subgraph's width and height
    128x128: stage 1 64x64) and LTXVScheduler at 2 steps, on a backend of the tiny files under
    the template's names: `workflow run` runs both stages (job.json's `upscale`: stage 1 at
    64x64, stage 2's levels and LoRA) and writes the frames and audio of its request."""
    template = "video_ltx2_t2v.json"
    comfy = comfy_for(base, template, tmp_path / "ComfyUI")
    path = ltx2_copy(template, comfy, 17, **{"9": [2, 2.05, 0.95, True, 0.1]})
    data = json.loads(path.read_text())
    next(n for n in data["nodes"] if n["id"] == 92)["widgets_values"][:2] = [128, 128]
    path.write_text(json.dumps(data))
    plan, _ = plan_of(str(path), str(comfy))
    assert (plan.request["width"], plan.request["height"]) == (128, 128)
    server, out, record, job, frames = workflow_run(
        paradit_warm, backends, plan, path, comfy, tmp_path / "out"
    )
    upscale = record["timings"]["upscale"]  # the two-stage record (runtime/stages.py)
    assert upscale["stage_1"] == {"width": 64, "height": 64, "steps": 2}
    assert upscale["sigmas"] == [0.909375, 0.725, 0.421875]
    assert upscale["loras"] == [{"name": "ltx-2-19b-distilled-lora-384.safetensors",
                                 "strength": 1.0}]  # fmt: skip
    assert record["sampling"]["sigmas"] == pytest.approx(ltxv_scheduler(2, 3 * 2 * 2), abs=1e-6)
    assert [(out / "frames" / f"{i:06d}.png").read_bytes() for i in range(17)] == frames
    assert (out / "audio.wav").read_bytes() == server.audio(job["id"])
    with Image.open(out / "frames" / "000000.png") as frame:
        assert frame.size == (128, 128)


def test_ltx2_distilled_template_runs_both_stages_end_to_end(
    base, tmp_path, paradit_warm, backends
):
    """The distilled template at 17 frames, its size made tiny (the subgraph's width and height
    128x128: stage 1 64x64), both stages' levels as saved (ManualSigmas 176: the distilled
    model's own 8 steps, the only count it runs; 117: 3), on a backend of the tiny files under
    the template's names (the checkpoint's name says distilled: tiny-ltx2-distilled):
    `workflow run` runs both stages, stage 2 without a LoRA (LoraLoaderModelOnly 170
    bypassed), and writes the frames and audio of its request."""
    template = "video_ltx2_t2v_distilled.json"
    comfy = comfy_for(base, template, tmp_path / "ComfyUI")
    path = ltx2_copy(template, comfy, 17)
    data = json.loads(path.read_text())
    next(n for n in data["nodes"] if n["id"] == 177)["widgets_values"][2:4] = [128, 128]
    path.write_text(json.dumps(data))
    plan, variant = plan_of(str(path), str(comfy))
    assert variant == LTX2_TWO_STAGE[template][1]
    stage_1 = levels(template, "177:176")
    assert [plan.request[k] for k in ("width", "height", "num_frames", "sigmas")] == [
        128, 128, 17, stage_1
    ]  # fmt: skip
    server, out, record, job, frames = workflow_run(
        paradit_warm, backends, plan, path, comfy, tmp_path / "out"
    )
    assert record["workflow"]["variant"] == variant
    upscale = record["timings"]["upscale"]  # the two-stage record (runtime/stages.py)
    assert upscale["stage_1"] == {"width": 64, "height": 64, "steps": 8}
    assert upscale["sigmas"] == levels(template, "177:117")[:-1]
    assert upscale["loras"] == []
    assert record["sampling"]["sigmas"] == pytest.approx(stage_1, abs=1e-6)
    assert [(out / "frames" / f"{i:06d}.png").read_bytes() for i in range(17)] == frames
    assert (out / "audio.wav").read_bytes() == server.audio(job["id"])
    with Image.open(out / "frames" / "000000.png") as frame:
        assert frame.size == (128, 128)


def test_ltx2_two_stage_files_go_to_the_backend_and_the_server_must_hold_them(base, tmp_path):
    """`workflow run` starts its backend with the upscaler the graph names (a user's own
    --upscaler refused, as --model is), and POST /v1/workflows refuses a two-stage graph on a
    server started without that upscaler, naming its LatentUpscaleModelLoader."""
    template = "video_ltx2_t2v.json"
    comfy = comfy_for(base, template, tmp_path / "ComfyUI")
    path = ltx2_copy(template, comfy, 113)
    plan, _ = plan_of(str(path), str(comfy))
    flags = dict.fromkeys(("model", "text_encoders", "vaes", "image_encoders", "upscaler"))
    args = argparse.Namespace(**flags, server=None, lora_dirs=None)
    run_overrides(args, plan)
    assert (args.model, args.upscaler) == (plan.serve["model"], plan.serve["upscaler"])
    with pytest.raises(ValueError, match="^--upscaler: the workflow's loader nodes name"):
        run_overrides(argparse.Namespace(**{**flags, "upscaler": "x"}, server=None), plan)
    data = json.loads(path.read_text())
    argv = plan.serve_argv()[2:]
    without = argv[: argv.index("--upscaler")]
    for given, refused in ((without, True), (argv, False)):
        config = ServeConfig.from_argv(given, model=plan.serve["model"], device="cpu")
        if refused:
            with pytest.raises(ValueError) as error:
                plan_for_server(data, "0" * 64, str(comfy), config, SAMPLERS)
            assert str(error.value).startswith(
                "subgraph 92 > node 76 (LatentUpscaleModelLoader): "
                "ltx-2-spatial-upscaler-x2-1.0.safetensors: this server's upscaler is none"
            ), error.value
        else:
            served, _ = plan_for_server(data, "0" * 64, str(comfy), config, SAMPLERS)
            assert served.request == plan.request


def test_distilled_levels_of_another_count_are_refused_at_their_node_by_the_server(base, tmp_path):
    """POST /v1/workflows' check (`plan_for_server`) on a server of the distilled template's
    files: its saved ManualSigmas 176 (8 steps) passes; at 7 steps it is refused naming that
    node, where the job would otherwise reach the server's limits (num_inference_steps must
    be 8) with no node named."""
    template = "video_ltx2_t2v_distilled.json"
    comfy = comfy_for(base, template, tmp_path / "ComfyUI")
    saved = ltx2_copy(template, comfy, 113)
    plan, _ = plan_of(str(saved), str(comfy))
    config = ServeConfig.from_argv(plan.serve_argv()[2:], model=plan.serve["model"], device="cpu")
    served, _ = plan_for_server(
        json.loads(saved.read_text()), "0" * 64, str(comfy), config, SAMPLERS
    )
    assert served.request["num_inference_steps"] == 8
    seven = "1.0, 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.0"
    edited = ltx2_copy(template, tmp_path, 113, **{"176": [seven]})
    with pytest.raises(ValueError) as error:
        plan_for_server(json.loads(edited.read_text()), "0" * 64, str(comfy), config, SAMPLERS)
    assert str(error.value).startswith(
        "subgraph 177 > node 176 (ManualSigmas): 8 levels (7 steps) on all-in-one "
        "tiny-ltx2-distilled"
    ), error.value


def _dual(saved: Path, folder: Path, node: int, scales: list[float]) -> Path:
    """The workflow `saved` with CFGGuider `node` made an LTXVDualCFGGuider at `scales`."""
    data = json.loads(saved.read_text())
    (sub,) = data["definitions"]["subgraphs"]
    guider = next(n for n in sub["nodes"] if n["id"] == node)
    assert guider["type"] == "CFGGuider"
    guider.update(type="LTXVDualCFGGuider", widgets_values=scales)
    edited = folder / f"dual_{node}_{scales[0]}_{scales[1]}.json"
    edited.write_text(json.dumps(data))
    return edited


def test_dual_cfg_guider_at_two_scales_guides_the_audio_at_its_own(base, tmp_path):
    """LTX-2's dev template (113 frames) with its first stage's CFGGuider 47 swapped for
    LTXVDualCFGGuider: at 4 and 7 (ComfyUI's dual CFG: the audio part guided at 7) the job of
    the template with `guidance_terms.audio_guidance_scale` 7 (LTX2Pipeline's per-stream CFG);
    at 4 and 4 (ComfyUI's single CFG) the template's own job; the second stage's guider 82 at
    two scales is refused there (`upscale` guides both streams at one)."""
    template = "video_ltx2_t2v.json"
    comfy = comfy_for(base, template, tmp_path / "ComfyUI")
    saved = ltx2_copy(template, comfy, 113)
    request = LTX2_TWO_STAGE[template][2]
    plan, _variant = plan_of(str(_dual(saved, tmp_path, 47, [4.0, 7.0])), str(comfy))
    assert plan.request == {**request, "guidance_terms": {"audio_guidance_scale": 7.0}}
    plan, _variant = plan_of(str(_dual(saved, tmp_path, 47, [4.0, 4.0])), str(comfy))
    assert plan.request == request
    refusal(
        _dual(saved, tmp_path, 82, [1.0, 3.0]),
        comfy,
        "subgraph 92 > node 82 (LTXVDualCFGGuider): two scales (video and audio) in the second",
    )


RUN_SMALL = {  # a template's job at a tiny size: width, height, frames, steps (the rest its own)
    "text_to_video_wan.json": (64, 64, 5, 2),
    "image_to_video_wan.json": (64, 64, 5, 2),
    "video_wan2_2_14B_t2v.json": (64, 64, 5, 2),
    "video_wan2_2_14B_i2v.json": (64, 64, 5, 2),
    "video_wan2_2_5B_ti2v.json": (64, 64, 5, 2),
    "image_z_image.json": (64, 64, 1, 2),
    "image_z_image_int8.json": (64, 64, 1, 2),
    "image_qwen_image.json": (64, 64, 1, 2),
    "image_qwen_Image_2512.json": (64, 64, 1, 2),
    "video_hunyuan_video_1.5_720p_t2v.json": (64, 64, 5, 2),
    "video_hunyuan_video_1.5_720p_i2v.json": (64, 64, 5, 2),
    "flux_dev_full_text_to_image.json": (64, 64, 1, 2),
    "flux1_krea_dev.json": (64, 64, 1, 2),
    "flux_dev_checkpoint_example.json": (64, 64, 1, 2),
    "flux_schnell.json": (64, 64, 1, 2),
    "image_flux2_text_to_image.json": (64, 64, 1, 2),
    "image_flux2_text_to_image_9b.json": (64, 64, 1, 2),
}
"""The templates whose tiny files carry weights, and the Flux ones on tiny files of their
architecture (`TINY_FLUX`). The others run elsewhere: Z-Image Turbo and LTX-2 above, Flux.1
schnell's full template and FLUX.2-klein base 4B in test_templates_flux.py, the
Qwen-Image-Edit ones in test_templates_qwen_edit.py, Krea 2 and the Qwen-Image 2.1 Turbo ones in
test_templates_qi21_krea2.py."""
FLUX_DIT = f"diffusion_models/{TINY_FLUX_DEV.removesuffix('.safetensors')}"
FLUX_FILES = {  # Flux.1's files as its templates name them -> tiny-flux's
    "text_encoders/clip_l": "text_encoders/clip_l_tiny",
    "text_encoders/t5xxl_fp16": "text_encoders/t5xxl_tiny",
    "vae/ae": "vae/flux_ae_tiny",
}
FLUX2_DEV, KLEIN_BASE = FLUX2_TINY["tiny-flux2"], FLUX2_TINY["tiny-flux2-klein-base"]
TINY_FLUX = {  # template -> its files in tiny ones' place (the job table links headers)
    "flux_dev_full_text_to_image.json": {
        "diffusion_models/flux1-dev": FLUX_DIT,
        **FLUX_FILES,
    },
    "flux1_krea_dev.json": {
        "diffusion_models/flux1-krea-dev_fp8_scaled": FLUX_DIT,
        **FLUX_FILES,
    },
    # its subgraph's UNETLoader 48 and DualCLIPLoader 49 (no checkpoint despite the name)
    "flux_dev_checkpoint_example.json": {
        "diffusion_models/flux1-dev": FLUX_DIT,
        **FLUX_FILES,
    },
    # CheckpointLoaderSimple 30: tiny-flux as an all-in-one checkpoint
    "flux_schnell.json": {"checkpoints/flux1-schnell-fp8": FLUX_ALL_IN_ONE},
    "image_flux2_text_to_image.json": dict(zip(
        ("diffusion_models/flux2_dev_fp8mixed", "text_encoders/mistral_3_small_flux2_bf16",
         "vae/full_encoder_small_decoder"), FLUX2_DEV, strict=True)),
    # the DiT's name (the template's) says base: tiny-flux2-klein-base
    "image_flux2_text_to_image_9b.json": dict(zip(
        ("diffusion_models/flux-2-klein-base-9b-fp8", "text_encoders/qwen_3_8b_fp8mixed",
         "vae/full_encoder_small_decoder"), KLEIN_BASE, strict=True)),
}  # fmt: skip
PRESET_WEIGHTS = {  # template -> the preset whose weights its tiny files hold, as they are
    "flux_schnell.json": "tiny-flux",
    "image_flux2_text_to_image.json": "tiny-flux2",
    "image_flux2_text_to_image_9b.json": "tiny-flux2-klein-base",
}


@pytest.mark.parametrize("template", sorted(RUN_SMALL))
def test_template_runs_end_to_end_on_its_tiny_files(base, tmp_path, backends, references, template):
    """The template's job, as imported, on a backend of the files it names (linked to the tiny
    ones), at a tiny size and 2 steps (Wan 2.2 A14B switching experts after the first): it
    runs, the backend's record of it is the imported request but for those fields, and where
    the files hold a preset's weights (`PRESET_WEIGHTS`) its image is that preset's."""
    comfy = comfy_for(base, template, tmp_path / "ComfyUI")
    for name, tiny in TINY_FLUX.get(template, {}).items():
        target = comfy / "models" / f"{name}.safetensors"
        target.unlink()
        os.link(base / "models" / f"{tiny}.safetensors", target)
    plan, variant = plan_of(str(TEMPLATES / template), str(comfy))
    assert variant.startswith(("tiny-", "all-in-one tiny-")), variant  # weights, not headers
    width, height, frames, steps = RUN_SMALL[template]
    small = {"width": width, "height": height, "num_frames": frames,
             "num_inference_steps": steps}  # fmt: skip
    if "switch_step" in plan.request:
        small["switch_step"] = 1
    server = backends.get(plan.serve["model"], 1, *plan.serve_argv()[2:])
    job, frames_png = run_job(server, {**plan.body(), **small})
    assert job["status"] == "succeeded", job
    assert len(frames_png) == frames
    ran = {k: v for k, v in job["request"].items() if v is not None}
    expected = {k: v for k, v in {**plan.request, **small}.items() if k != "image"}
    assert {k: ran[k] for k in expected} == expected
    if template in PRESET_WEIGHTS:
        assert frames_png == references.frames(PRESET_WEIGHTS[template], {**plan.body(), **small})
