"""ComfyUI's LTX-2 templates (the installed `comfyui-workflow-templates-json`) in their saved
form. LTX-2's text-to-video ones (dev and distilled, 121 frames at 24 fps) import to the
two-stage job with ComfyUI's audio length (`audio_latent_frames` 127: LTXVEmptyLatentAudio's
ceil(121 / 24 x 25), where LTX2Pipeline would make 126), every field by hand from the graph;
the dev one runs end to end at its saved 121 frames on the tiny files under its names (the
size and LTXVScheduler's steps made tiny) and writes an audio track of 127 latent frames.
The LTX-2.3 and LTX-2.5 ones are refused naming the node (its path inside the subgraph) that
paradit cannot run as ComfyUI does, and why. What they add that paradit maps is checked on
edited copies: `LTXVImgToVideoInplace` with bypass on (the 2.3 text-to-video template) is its
latent, so the import reaches the prompt (refused there while the prompt enhancer is on); the
2.3 template with the enhancer off maps its 5 s at 25 fps (126 frames: the video latent's
121, the audio's 126) up to its files. `LTXVDualCFGGuider` (2.5's) is checked on LTX-2's own
template in test_templates.py.

Cost: about 12 s (1 s measured in the suite's two-worker run on 2 cores, 2026-11-29, before
the LTX-2 rows; their import and end-to-end run estimated on a loaded machine).
"""

from __future__ import annotations

import json
import wave
from pathlib import Path

import pytest
from comfy_templates import TEMPLATES, placeholders, refusal
from conftest import run_job
from template_jobs import LTX2_AS_SAVED, LTX2_FILES, comfy_for, tiny_files

from paradit.backend.tools.workflow import plan_of


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """The tiny ComfyUI files (tests/template_jobs.py), written once."""
    return tiny_files(tmp_path_factory.mktemp("ComfyUI"))


@pytest.mark.parametrize("template", sorted(LTX2_AS_SAVED))
def test_ltx2_templates_as_saved_map_with_comfyuis_audio_length(base, tmp_path, template):
    """LTX-2's text-to-video templates as saved, on the tiny files under their names: the
    two-stage job at 121 frames with ComfyUI's audio latent length (127, one longer than
    the pipeline's own), the files of the two-stage job."""
    comfy = comfy_for(base, template, tmp_path / "ComfyUI")
    plan, variant = plan_of(str(TEMPLATES / template), str(comfy))
    expected_variant, request = LTX2_AS_SAVED[template]
    assert plan.request == request
    assert variant == expected_variant
    models = comfy / "models"
    checkpoint = {"video_ltx2_t2v.json": "ltx-2-19b-dev-fp8"}.get(template, "ltx-2-19b-distilled")
    assert plan.serve == {
        "model": str(models / f"checkpoints/{checkpoint}.safetensors"),
        "text_encoders": [str(models / p) for p in LTX2_FILES["text_encoders"]],
        "vaes": [], "image_encoders": [],
        "lora_dirs": [str(models / "loras")] if request["upscale"]["loras"] else [],
        "upscaler": str(models / LTX2_FILES["upscaler"]),
    }  # fmt: skip


def test_ltx2_t2v_template_at_its_121_frames_runs_with_comfyuis_audio_length(
    base, tmp_path, paradit_warm, backends
):
    """The dev template at its saved 121 frames, its size made tiny (the subgraph's 128x128:
    stage 1 64x64) and LTXVScheduler at 2 steps, on a backend of the tiny files under its
    names: `workflow run` runs both stages with audio_latent_frames 127 and writes the frames
    and audio of its request: 127 audio latent frames are 505 mel frames of 240 samples at
    24 kHz (the pipeline's own 126 would be 501)."""
    template = "video_ltx2_t2v.json"
    comfy = comfy_for(base, template, tmp_path / "ComfyUI")
    data = json.loads((TEMPLATES / template).read_text())
    (sub,) = data["definitions"]["subgraphs"]
    outer = next(n for n in data["nodes"] if n["id"] == 92)
    assert outer["widgets_values"][2] == 121  # as saved
    outer["widgets_values"][:2] = [128, 128]
    next(n for n in sub["nodes"] if n["id"] == 9)["widgets_values"] = [2, 2.05, 0.95, True, 0.1]
    path = comfy / template
    path.write_text(json.dumps(data))
    plan, _ = plan_of(str(path), str(comfy))
    assert (plan.request["num_frames"], plan.request["audio_latent_frames"]) == (121, 127)
    server = backends.get(plan.serve["model"], 1, *plan.serve_argv()[2:])
    out = tmp_path / "out"
    result = paradit_warm(
        "workflow", "run", str(path), "--out", str(out), "--comfyui-dir", str(comfy),
        "--server", server.url,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    record = json.loads((out / "job.json").read_text())
    assert record["request"]["audio_latent_frames"] == 127
    assert record["timings"]["upscale"]["stage_1"] == {"width": 64, "height": 64, "steps": 2}
    with wave.open(str(out / "audio.wav")) as track:
        assert (track.getframerate(), track.getnframes()) == (24000, 505 * 240)
    job, frames = run_job(server, plan.body())
    assert len(frames) == 121
    assert [(out / "frames" / f"{i:06d}.png").read_bytes() for i in range(121)] == frames
    assert (out / "audio.wav").read_bytes() == server.audio(job["id"])


SAVED = {  # template -> (where, node type, the reason's words)
    # its audio length now maps (audio_latent_frames 126); its prompt enhancer is on as saved
    "video_ltx2_3_t2v.json": (
        "subgraph 267 > node 327", "TextGenerateLTX2Prompt", "a prompt written at run time",
    ),
    "video_ltx2_3_i2v.json": (
        "subgraph 320 > node 288", "LTXVImgToVideoInplace", "CRF 33 in the LTX-2 templates, 18",
    ),
    # its audio VAE is a file of its own, through a plain VAELoader (no released file seen)
    "video_ltx2_5_t2v.json": (
        "subgraph 405 > node 366", "LTXVEmptyLatentAudio", "node 405:386 (VAELoader) where",
    ),
    "video_ltx2_5_i2v.json": (
        "subgraph 398 > node 349", "LTXVImgToVideoInplace", "one H.264 frame at LTXVPreprocess",
    ),
}  # fmt: skip


@pytest.mark.parametrize("template", sorted(SAVED))
def test_ltx2_3_and_2_5_templates_as_saved_are_refused_at_their_node(tmp_path, template):
    where, kind, words = SAVED[template]
    comfy = placeholders(template, tmp_path / "ComfyUI")
    refusal(TEMPLATES / template, comfy, f"{where} ({kind}): ", words)


def test_bypassed_image_in_place_passes_its_latent_to_the_prompt_enhancer_refusal(tmp_path):
    """The 2.3 text-to-video template at 24 fps and 4 x 24 + 17 = 113 frames (its duration
    and frame rate on the subgraph node, its length expression edited): both
    LTXVImgToVideoInplace copies have bypass on, so the import reaches the prompt, which the
    saved prompt_enhance (true) writes with TextGenerateLTX2Prompt: refused there."""
    template = "video_ltx2_3_t2v.json"
    comfy = placeholders(template, tmp_path / "ComfyUI")
    data = json.loads((TEMPLATES / template).read_text())
    outer = next(n for n in data["nodes"] if n["id"] == 267)
    assert outer["widgets_values"][1] is True  # prompt_enhance, as saved
    outer["widgets_values"][4:6] = [4, 24]  # duration 4 s, frame rate 24
    (sub,) = data["definitions"]["subgraphs"]
    next(n for n in sub["nodes"] if n["id"] == 277)["widgets_values"] = ["a * b + 17"]
    path = tmp_path / template
    path.write_text(json.dumps(data))
    refusal(
        path,
        comfy,
        "subgraph 267 > node 327 (TextGenerateLTX2Prompt): a prompt written at run time",
    )


@pytest.mark.parametrize("seconds", [5, 8])
def test_the_2_3_template_without_the_prompt_enhancer_maps_to_its_files(tmp_path, seconds):
    """The 2.3 text-to-video template with prompt_enhance off, at its saved 5 s at 25 fps (a
    * b + 1 = 126 frames: ComfyUI's video latent rounds them down to 121, its audio latent
    keeps 126, ceil(126 / 25 x 25): paradit's job sets audio_latent_frames 126 where its
    pipeline would make 121) and at 8 s (201 frames, 8k+1: both 201). Every node maps (the
    frame rate, the rounding, the audio length, the prompt, the two stages); the import stops
    at the first file it reads, the upscaler's (an empty placeholder here): paradit has no
    tiny files under 2.3's names."""
    template = "video_ltx2_3_t2v.json"
    comfy = placeholders(template, tmp_path / "ComfyUI")
    data = json.loads((TEMPLATES / template).read_text())
    outer = next(n for n in data["nodes"] if n["id"] == 267)
    assert outer["widgets_values"][1:6] == [True, 1280, 720, 5, 25]  # as saved
    outer["widgets_values"][1] = False  # prompt_enhance off
    outer["widgets_values"][4] = seconds
    path = tmp_path / template
    path.write_text(json.dumps(data))
    refusal(
        path,
        comfy,
        "subgraph 267 > node 233 (LatentUpscaleModelLoader): "
        "ltx-2.3-spatial-upscaler-x2-1.1.safetensors: ",
        "the file has 0 bytes",
    )
