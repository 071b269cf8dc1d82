"""ComfyUI's LTX-2 templates (the installed `comfyui-workflow-templates-json`) in their saved
form. LTX-2's text-to-video ones (dev and distilled, 121 frames at 24 fps) import to the two-
stage job with ComfyUI's audio length (`audio_latent_frames` 127: LTXVEmptyLatentAudio's
ceil(121 / 24 x 25), where LTX2Pipeline would make 126), every field by hand from the graph;
the dev one runs end to end at its saved 121 frames on the tiny files under its names (the size
and LTXVScheduler's steps made tiny) and writes an audio track of 127 latent frames. The
LTX-2.3 and LTX-2.5 ones are refused naming the node (its path inside the subgraph) that
paradit cannot run as ComfyUI does, and why. What they add that paradit maps is checked on
edited copies: `LTXVImgToVideoInplace` with bypass on (the 2.3 text-to-video template) is its
latent, so the import reaches the prompt (refused there while the prompt enhancer is on); the
2.3 template with the enhancer off maps its 5 s at 25 fps (126 frames: the video latent's 121,
the audio's 126) up to its files. The 2.5 templates (text and image to video) import as saved:
their VAEDecodeTiled on the diffusion video VAE becomes `decode_tiles` (ComfyUI's tiles);
made tiny it runs end to end with that VAE, in one tile (1 and 2 ranks) and in two (2 ranks
within the DiT's float32 rounding, their latents decoded at world size 1 byte for byte).
`LTXVDualCFGGuider` (2.5's) is checked on LTX-2's own template in test_templates.py.
LTX-2's image-to-video templates (dev and
distilled) import as saved to the two-stage job with the start image and ComfyUI's image
preparation (`image_prep` comfyui, `image_crf` 33, stage 2 on gradient_estimation), the image
sent through ResizeImageMaskNode's resizes as worked by hand; both run end to end made tiny;
what the preparation cannot run (strength 0.7, one stage without the image, bicubic, CRF 0
after a float resize) is refused at its node.

Cost: about 74 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import base64
import io
import json
import wave
from pathlib import Path

import numpy as np
import pytest
from comfy_templates import TEMPLATES, placeholders, refusal, widget, workflow_run
from conftest import run_job
from PIL import Image
from template_jobs import (
    CONV_VAE,
    DIFFUSION_VAE,
    LTX2_AS_SAVED,
    LTX2_I2V,
    LTX2_I2V_RESIZES,
    LTX23_FILES,
    LTX23_I2V,
    LTX23_I2V_RESIZES,
    LTX25_I2V_SAVED,
    LTX25_JOB,
    LTX25_SAVED,
    T23,
    T23_I2V,
    T25,
    comfy_for,
    in_folder,
    ltx2_serve,
    ltx23_copy,
    ltx23_job,
    ltx25_copy,
)

from paradit.backend.tools.equivalence import FLOAT32, IDENTICAL, WITHIN_ROUNDING, compare
from paradit.backend.tools.workflow import plan_of, render


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
    checkpoint = {"video_ltx2_t2v.json": "ltx-2-19b-dev-fp8"}.get(template, "ltx-2-19b-distilled")
    assert plan.serve == ltx2_serve(comfy, checkpoint, bool(request["upscale"]["loras"]))


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
    server, out, record, job, frames = workflow_run(
        paradit_warm, backends, plan, path, comfy, tmp_path / "out"
    )
    assert record["request"]["audio_latent_frames"] == 127
    assert record["timings"]["upscale"]["stage_1"] == {"width": 64, "height": 64, "steps": 2}
    with wave.open(str(out / "audio.wav")) as track:
        assert (track.getframerate(), track.getnframes()) == (24000, 505 * 240)
    assert len(frames) == 121
    assert [(out / "frames" / f"{i:06d}.png").read_bytes() for i in range(121)] == frames
    assert (out / "audio.wav").read_bytes() == server.audio(job["id"])


SAVED = {  # template -> (where, node type, the reason's words)
    # its audio length now maps (audio_latent_frames 126); its prompt enhancer is on as saved
    "video_ltx2_3_t2v.json": (
        "subgraph 267 > node 327", "TextGenerateLTX2Prompt", "a prompt written at run time",
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
def test_the_2_3_template_without_the_prompt_enhancer_imports_to_comfyuis_job(
    base, tmp_path, seconds
):
    """The 2.3 text-to-video template with prompt_enhance off, on the tiny files under its
    names, at its saved 5 s at 25 fps (126 frames: the video latent's 121, the audio's 126)
    and at 8 s (201 frames, where both agree): the two-stage job written by hand
    (`ltx23_job`), tiny-ltx2.3's checkpoint and its files; CreateVideo's bit_depth `auto`
    with sRGB is ComfyUI's 8 bits."""
    comfy = comfy_for(base, T23, tmp_path / "ComfyUI")
    plan, variant = plan_of(str(ltx23_copy(comfy, seconds)), str(comfy))
    assert variant == "all-in-one tiny-ltx2.3 (DiT, connectors, vae, audio_vae, vocoder)"
    assert plan.request == ltx23_job(seconds)
    models = comfy / "models"
    assert plan.serve == {
        "model": str(models / LTX23_FILES["model"]),
        "text_encoders": [str(models / p) for p in LTX23_FILES["text_encoders"]],
        "vaes": [], "image_encoders": [], "lora_dirs": [str(models / "loras")],
        "upscaler": str(models / LTX23_FILES["upscaler"]),
    }  # fmt: skip


def test_the_2_3_template_runs_end_to_end_on_its_tiny_files(base, tmp_path, paradit_warm, backends):
    """The 2.3 template (prompt_enhance off) at 1 s at 25 fps (26 frames: the video's 25, the
    audio's 26 latent frames), 128x128 (stage 1 64x64), its ManualSigmas cut to 2 steps a
    stage, through `workflow run` on a backend of the tiny files under its names: job.json
    records the imported request, the frames and the audio are the plan's request's."""
    comfy = comfy_for(base, T23, tmp_path / "ComfyUI")
    path = ltx23_copy(comfy, 1, (128, 128))
    data = json.loads(path.read_text())
    (sub,) = data["definitions"]["subgraphs"]
    for node_id, cut in ((252, "1.0, 0.725, 0.0"), (211, "0.85, 0.4219, 0.0")):
        next(n for n in sub["nodes"] if n["id"] == node_id)["widgets_values"] = [cut]
    path.write_text(json.dumps(data))
    plan, _ = plan_of(str(path), str(comfy))
    assert (plan.request["num_frames"], plan.request["audio_latent_frames"]) == (25, 26)
    assert (plan.request["width"], plan.request["height"]) == (128, 128)
    server, out, record, job, frames = workflow_run(
        paradit_warm, backends, plan, path, comfy, tmp_path / "out"
    )
    assert record["request"]["audio_latent_frames"] == 26
    assert record["request"]["upscale"]["sigmas"] == [0.85, 0.4219]
    assert record["timings"]["upscale"]["stage_1"] == {"width": 64, "height": 64, "steps": 2}
    assert len(frames) == 25
    assert [(out / "frames" / f"{i:06d}.png").read_bytes() for i in range(25)] == frames
    assert (out / "audio.wav").read_bytes() == server.audio(job["id"])


def test_the_2_5_template_imports_as_saved_with_comfyuis_tiles(base, tmp_path):
    """The 2.5 template as saved: its video VAE `ltx-2.5-video-vae-bf16` (tiny: a conv VAE's
    encoder beside a diffusion decoder, `comfy_files.ltx25_diffusion_vae`) loads through
    VAELoader 385; its VAEDecodeTiled 374 (512, 64, 64, 16) at the saved 1280x704 x 121
    frames spans many of ComfyUI's tiles (8 latent frames x 16 x 16 sharing 2 x 2 x 2), each
    drawing its own seed-0 noise (comfy/sd.py `decode_tiled_3d`, comfy/utils.py
    `tiled_scale_multidim`): the job is LTX25_JOB's with that VAE and the node's widgets as
    `decode_tiles`, every field by hand (tests/template_jobs.py)."""
    comfy = comfy_for(base, T25, tmp_path / "ComfyUI")
    plan, variant = plan_of(str(TEMPLATES / T25), str(comfy))
    assert variant == "tiny-ltx2.5-distilled"
    assert plan.request == LTX25_SAVED
    assert plan.serve["vaes"][0] == str(comfy / "models" / "vae" / DIFFUSION_VAE)
    line = next(text for node, kind, text in plan.lines if kind == "VAEDecodeTiled")
    assert "ComfyUI's tiles of 8 x 16 x 16 latents sharing 2 x 2 x 2" in line


def test_the_2_5_template_with_its_diffusion_vae_runs_end_to_end(
    base, tmp_path, paradit_warm, backends
):
    """The 2.5 template with its own diffusion video VAE at 128x128 and 1 s (25 frames: 4 x
    4 x 4 latents, one of VAEDecodeTiled 374's tiles, so ComfyUI decodes whole): the import
    names the diffusion VAE with --vae, the plan runs through `workflow run` on a backend of
    the tiny separate files, and its frames are the plan's request's; a backend of 2 ranks
    (CFG parallel off: guidance 1; the steps over both, the decode on the leader) makes the
    same frames and audio."""
    comfy = comfy_for(base, T25, tmp_path / "ComfyUI")
    path = ltx25_copy(comfy, (128, 128), seconds=1, vae=DIFFUSION_VAE)
    plan, _ = plan_of(str(path), str(comfy))
    assert plan.serve["vaes"][0] == str(comfy / "models" / "vae" / DIFFUSION_VAE)
    line = next(text for node, kind, text in plan.lines if kind == "VAEDecodeTiled")
    assert "the diffusion decoder's whole decode, seed-0 noise" in line
    server, out, _, job, frames = workflow_run(
        paradit_warm, backends, plan, path, comfy, tmp_path / "out"
    )
    assert len(frames) == 25
    assert [(out / "frames" / f"{i:06d}.png").read_bytes() for i in range(25)] == frames
    pair = backends.get(plan.serve["model"], 2, *plan.serve_argv()[2:])
    their_job, theirs = run_job(pair, plan.body())
    assert theirs == frames
    assert pair.audio(their_job["id"]) == server.audio(job["id"])


def _decoded_here(plan, latents) -> list[np.ndarray]:
    """`latents` (a backend's saved final latents, `--save-latents`) decoded in this process
    at world size 1, on
    the plan's files loaded as a rank loads them, in the request's tiles one after another:
    uint8 frames."""
    import torch

    from paradit.backend.models.families import family_of
    from paradit.backend.models.loading import ModelSource, load_pipeline
    from paradit.backend.request import JobRequest
    from paradit.backend.runtime.job import job_limits
    from paradit.backend.serving.outputs import to_uint8

    serve = plan.serve
    source = ModelSource.parse(serve["model"], tuple(serve["text_encoders"]), tuple(serve["vaes"]))
    pipe = load_pipeline(source)
    family = family_of(pipe)
    body = {k: v for k, v in plan.body().items() if k != "upscale"}  # the decode's fields
    request = JobRequest.from_body(body, job_limits(family, pipe, tiny=True))
    # the saved latents are the last step's, packed and normalised: LTX2Pipeline's own unpack
    # and denormalisation make the pipeline's "latent" output, the decode's input
    z = pipe._unpack_latents(
        torch.from_numpy(latents), (request.num_frames - 1) // 8 + 1, request.height // 32,
        request.width // 32, pipe.transformer_spatial_patch_size,
        pipe.transformer_temporal_patch_size,
    )  # fmt: skip
    vae = pipe.vae
    z = pipe._denormalize_latents(z, vae.latents_mean, vae.latents_std, vae.config.scaling_factor)
    with torch.no_grad():
        tiles = family.tiled_decode(pipe, request, z)
        frames = tiles.assemble([tiles.decode_tile(i) for i in range(tiles.num_tiles)])
    return list(to_uint8(frames))


def _pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


def test_the_2_5_template_decodes_in_comfyuis_tiles(base, tmp_path, paradit_warm, backends):
    """The 2.5 template with its diffusion video VAE at 128x128 and 3 s (73 frames: 10 latent
    frames, beyond VAEDecodeTiled 374's 8): two of ComfyUI's tiles (latent frames 0-7 and
    6-9, each with its own seed-0 noise, feathered over 9 frames); the job's `decode_tiles`
    reaches job.json; without `decode_tiles` (one whole decode) the frames differ. On 2 ranks
    (both stages unguided, so each spreads its tokens over the ranks: the DiT's split
    sequence) the final latents are within float32 rounding of 1 rank's, not equal (measured
    2026-11-29 with --save-latents on both: relative L2 1.3e-7, at most 5.4e-7 apart), so
    the frames may differ by one step in a few values (then 1 of 3.6 million, in frame 39:
    the "2 ranks differ" of the s41-ltx25tiles report); the decode itself is exact: those 2
    ranks' latents decoded here at world size 1 give the 2-rank job's frames byte for byte
    (the tiles dealt one a rank, gathered and summed on rank 0 in world size 1's order: the
    family contract's `2.5 comfyui decode tiles` job checks the float frames)."""
    comfy = comfy_for(base, T25, tmp_path / "ComfyUI")
    path = ltx25_copy(comfy, (128, 128), seconds=3, vae=DIFFUSION_VAE)
    plan, _ = plan_of(str(path), str(comfy))
    assert plan.request["num_frames"] == 73
    assert plan.request["decode_tiles"] == {
        "tile_size": 512, "overlap": 64, "temporal_size": 64, "temporal_overlap": 16,
    }  # fmt: skip
    server, out, record, job, frames = workflow_run(
        paradit_warm, backends, plan, path, comfy, tmp_path / "out"
    )
    assert record["request"]["decode_tiles"] == plan.request["decode_tiles"]
    assert len(frames) == 73
    whole = {k: v for k, v in plan.body().items() if k != "decode_tiles"}
    _, untiled = run_job(server, whole)
    assert untiled != frames
    pair = backends.get(plan.serve["model"], 2, *plan.serve_argv()[2:], "--save-latents")
    their_job, theirs = run_job(pair, plan.body())
    ours, two = np.stack([_pixels(f) for f in frames]), np.stack([_pixels(f) for f in theirs])
    assert compare(ours, two, FLOAT32).verdict in {IDENTICAL, WITHIN_ROUNDING}
    decoded = _decoded_here(plan, pair.latents(their_job["id"]))
    assert len(decoded) == 73
    assert all(np.array_equal(a, b) for a, b in zip(decoded, two, strict=True))


def test_the_2_5_template_imports_from_its_separate_files(base, tmp_path):
    """LTX-2.5's separate files as the template loads them, on tiny-ltx2.5's files under their
    names: the DiT through UNETLoader 384 (--model: a distilled file, tiny-ltx2.5-distilled),
    the Gemma 4 file with the text projection through CLIPLoader 387 (--text-encoder), the
    video VAE through VAELoader 385 and the audio VAE through VAELoader 386 (both --vae; the
    audio one feeds LTXVEmptyLatentAudio 366 and LTXVAudioVAEDecode 358). The job by hand:
    1280x720 halved (ComfyMathExpression 353/355) into EmptyLTXVLatentVideo 356 (640x352)
    and doubled by the upsampler: 1280x704; 5 s x 24 fps + 1 = 121 frames, the audio
    ceil(121 / 24 x 25) = 127 latent frames (the pipeline's 126); LTXVDualCFGGuider 388 at
    1 and 1; euler_ancestral (KSamplerSelect 352, 341); ManualSigmas 404 and 395."""
    comfy = comfy_for(base, T25, tmp_path / "ComfyUI")
    plan, variant = plan_of(str(ltx25_copy(comfy)), str(comfy))
    assert variant == "tiny-ltx2.5-distilled"
    assert plan.request == LTX25_JOB  # by hand: tests/template_jobs.py
    models = comfy / "models"
    assert plan.serve == {
        "model": str(models / f"diffusion_models/{widget(T25, '405', 7)}"),
        "text_encoders": [str(models / f"text_encoders/{widget(T25, '405', 10)}")],
        "vaes": [str(models / f"vae/{CONV_VAE}"), str(models / f"vae/{widget(T25, '405', 9)}")],
        "image_encoders": [], "lora_dirs": [],
        "upscaler": str(models / f"latent_upscale_models/{widget(T25, '405', 11)}"),
    }  # fmt: skip


def test_the_2_5_template_runs_end_to_end_on_its_tiny_files(base, tmp_path, paradit_warm, backends):
    """The 2.5 template (conv video VAE) at 128x128 (stage 1 64x64) and 1 s (1 x 24 + 1 = 25
    frames, the audio ceil(25 / 24 x 25) = 27 latent frames where the pipeline would make 26;
    a short length keeps the run cheap), the distilled file's 8 + 3 levels, through
    `workflow run` on a backend of the tiny separate files: job.json and the frames and audio
    are the plan's request's."""
    comfy = comfy_for(base, T25, tmp_path / "ComfyUI")
    path = ltx25_copy(comfy, (128, 128), seconds=1)
    plan, _ = plan_of(str(path), str(comfy))
    server, out, record, job, frames = workflow_run(
        paradit_warm, backends, plan, path, comfy, tmp_path / "out"
    )
    assert record["request"]["audio_latent_frames"] == 27
    assert len(frames) == 25
    assert [(out / "frames" / f"{i:06d}.png").read_bytes() for i in range(25)] == frames
    assert (out / "audio.wav").read_bytes() == server.audio(job["id"])


# -- image to video: ComfyUI's image preparation (image_prep comfyui) -------------------------


@pytest.mark.parametrize("template", sorted(LTX2_I2V))
def test_ltx2_i2v_templates_as_saved_map_with_comfyuis_image_preparation(base, tmp_path, template):
    """LTX-2's image-to-video templates as saved, on the tiny files under their names: the
    two-stage job with the start image, `image_prep` comfyui at LTXVPreprocess's CRF 33,
    the second stage on gradient_estimation; the image is sent through ResizeImageMaskNode's
    two resizes (1280x720 centre-cut by lanczos, then the longer side to 1536)."""
    comfy = comfy_for(base, template, tmp_path / "ComfyUI")
    plan, variant = plan_of(str(TEMPLATES / template), str(comfy))
    expected_variant, request = LTX2_I2V[template]
    assert plan.request == in_folder(request, comfy)
    assert variant == expected_variant
    (steps,) = plan.resized.values()
    assert [(r.width, r.height, r.method, r.crop) for r in steps] == LTX2_I2V_RESIZES[template]
    (w1, h1, m1, _), (w2, h2, m2, _) = LTX2_I2V_RESIZES[template]
    image = Path(plan.request["image"]).name
    line = f"sent:    {image} {w1}x{h1} by {m1} then {w2}x{h2} by {m2}, in 8 bits as"
    assert line in render(plan, variant, ())
    assert plan.to_dict()["resized"] == {
        plan.request["image"]: [[w, h, m, "center" if c else "disabled"]
                                for w, h, m, c in LTX2_I2V_RESIZES[template]]
    }  # fmt: skip
    checkpoint = "ltx-2-19b-distilled" if "distilled" in template else "ltx-2-19b-dev-fp8"
    assert plan.serve == ltx2_serve(comfy, checkpoint, bool(request["upscale"]["loras"]))


def _edited(template: str, folder: Path, outer: dict, inner: dict) -> Path:
    """The template with outer nodes' and the subgraph's nodes' widget values replaced."""
    data = json.loads((TEMPLATES / template).read_text())
    (sub,) = data["definitions"]["subgraphs"]
    for nodes, values in ((data["nodes"], outer), (sub["nodes"], inner)):
        for node in nodes:
            if node["id"] in values:
                node["widgets_values"] = values[node["id"]]
    path = folder / template
    path.write_text(json.dumps(data))
    return path


def test_the_sent_image_is_comfyuis_resized_and_truncated(tmp_path):
    """`resized_pixels.resized_png` against the procedure worked by hand (ComfyUI's
    `scale_dimensions`, `scale_longer_dimension`, `common_upscale`, then LTXVPreprocess's x 255
    truncation): a 40x30 image to 32x32 centre-cut by lanczos cuts round((40 - 40 x 1 /
    1.3333) / 2) = 5 columns off each side, then PIL's Lanczos on the 8-bit 30x30; the longer
    side to 48 by area is torch's average over each output pixel's input cells (adaptive
    average pooling) in float32, turned into 8 bits by truncation, not rounding."""
    import numpy as np
    import torch
    from PIL import Image as PILImage

    from paradit.backend.workflow.graph import Node
    from paradit.backend.workflow.resized_pixels import resized_png
    from paradit.backend.workflow.values import Resize

    pixels = np.random.default_rng(4).integers(0, 256, (30, 40, 3), dtype=np.uint8)
    path = tmp_path / "in.png"
    PILImage.fromarray(pixels).save(path)
    node = Node("1", "ResizeImageMaskNode")
    steps = (Resize(32, 32, "lanczos", True, node), Resize(48, 48, "area", False, node))
    sent = np.asarray(PILImage.open(io.BytesIO(resized_png(path, steps))))
    lanczos = PILImage.fromarray(pixels[:, 5:35]).resize((32, 32), PILImage.Resampling.LANCZOS)
    floats = torch.from_numpy(np.asarray(lanczos).astype(np.float32) / 255).movedim(-1, 0)
    area = torch.nn.functional.adaptive_avg_pool2d(floats[None], (48, 48))[0]
    scaled = area.movedim(0, -1).numpy() * np.float32(255)
    assert sent.shape == (48, 48, 3)
    assert np.array_equal(sent, np.floor(scaled).astype(np.uint8))  # truncated
    assert not np.array_equal(sent, np.round(scaled).astype(np.uint8))  # not rounded
    only = resized_png(path, ())  # no resize: LoadImage's bytes
    assert np.array_equal(np.asarray(PILImage.open(io.BytesIO(only))), pixels)


TINY_I2V = {  # template -> its subgraph's edits: the inner resize's longer side 160 (and
    # the dev one's LTXVScheduler at 2 steps; the distilled one keeps its 8 levels)
    "video_ltx2_i2v.json": {
        113: ["scale longer dimension", 160, "area"], 9: [2, 2.05, 0.95, True, 0.1],
    },
    "video_ltx2_i2v_distilled.json": {115: ["scale longer dimension", 160, "lanczos"]},
}  # fmt: skip


@pytest.mark.parametrize("template", sorted(TINY_I2V))
def test_ltx2_i2v_template_runs_end_to_end_with_comfyuis_image(
    base, tmp_path, paradit_warm, backends, template
):
    """The image-to-video templates made tiny (ResizeImageMaskNode 102 to 128x128: stage 1 at
    64x64, stage 2 at 128x128; the inner resize's longer side 160; 17 frames) on a backend of
    the tiny files under their names: `workflow run` sends the image resized (160x160) with
    image_prep comfyui and image_crf 33, runs both stages and writes the frames of its
    request."""
    comfy = comfy_for(base, template, tmp_path / "ComfyUI")
    path = _edited(
        template, comfy, {102: ["scale dimensions", 128, 128, "center", "lanczos"]},
        {**TINY_I2V[template], 62: [17, "fixed"]},
    )  # fmt: skip
    data = json.loads(path.read_text())
    next(n for n in data["nodes"] if n["id"] == 92)["widgets_values"][0] = 17
    path.write_text(json.dumps(data))
    plan, _ = plan_of(str(path), str(comfy))
    assert (plan.request["width"], plan.request["height"], plan.request["num_frames"]) == (
        128, 128, 17,
    )  # fmt: skip
    body = plan.body()
    sent = Image.open(io.BytesIO(base64.b64decode(body["image"])))
    assert sent.size == (160, 160)
    server, out, record, job, frames = workflow_run(
        paradit_warm, backends, plan, path, comfy, tmp_path / "out"
    )
    assert (record["request"]["image_prep"], record["request"]["image_crf"]) == ("comfyui", 33)
    assert record["request"]["upscale"]["sampler"] == "gradient_estimation"
    assert len(frames) == 17
    assert [(out / "frames" / f"{i:06d}.png").read_bytes() for i in range(17)] == frames


@pytest.mark.parametrize(
    ("inner", "where", "words"),
    [
        # below 1 after the upscaler (stage 1's 0.7 is image_strength)
        ({108: [0.7, False]}, "subgraph 92 > node 108 (LTXVImgToVideoInplace): ",
         "strength 0.7: paradit's two-stage job writes the start image into stage 2's"),
        # the image not written after the upscaler: stage 2 would not keep ComfyUI's frame
        ({108: [1, True]}, "subgraph 92 > node 70 (SamplerCustomAdvanced): ",
         "has no start image written into it"),
        ({113: ["scale longer dimension", 1536, "bicubic"]},
         "subgraph 92 > node 113 (ResizeImageMaskNode): ", "scale_method 'bicubic'"),
        ({99: [0]}, "subgraph 92 > node 99 (LTXVPreprocess): ", "img_compression 0 after"),
    ],
)  # fmt: skip
def test_what_the_i2v_preparation_cannot_run_is_refused_at_its_node(
    base, tmp_path, inner, where, words
):
    template = "video_ltx2_i2v.json"
    comfy = comfy_for(base, template, tmp_path / "ComfyUI")
    refusal(_edited(template, tmp_path, {}, inner), comfy, where, words)


def test_the_2_3_i2v_template_as_saved_maps_its_strength(base, tmp_path):
    """LTX-2.3's image-to-video template as saved, on the tiny files under its names: the
    two-stage job with the start image at LTXVImgToVideoInplace 296's 0.7 (`image_strength`,
    sampled as ComfyUI's noise mask: tests/families/test_ltx2_image_strength.py), stage 2's
    288 at 1, every field by hand (`template_jobs.LTX23_I2V`)."""
    comfy = comfy_for(base, T23_I2V, tmp_path / "ComfyUI")
    plan, variant = plan_of(str(TEMPLATES / T23_I2V), str(comfy))
    expected_variant, request = LTX23_I2V[T23_I2V]
    assert plan.request == in_folder(request, comfy)
    assert variant == expected_variant
    (steps,) = plan.resized.values()
    assert [(r.width, r.height, r.method, r.crop) for r in steps] == LTX23_I2V_RESIZES
    assert "image, strength 0.7 -> image_strength" in render(plan, variant, ())
    models = comfy / "models"
    assert plan.serve == {
        "model": str(models / LTX23_FILES["model"]),
        "text_encoders": [str(models / p) for p in LTX23_FILES["text_encoders"]],
        "vaes": [], "image_encoders": [], "lora_dirs": [str(models / "loras")],
        "upscaler": str(models / LTX23_FILES["upscaler"]),
    }  # fmt: skip


def test_the_2_3_i2v_template_runs_end_to_end_at_its_strength(
    base, tmp_path, paradit_warm, backends
):
    """The 2.3 image-to-video template at 1 s (25 frames, 26 audio latent frames), 128x128
    (stage 1 64x64), its ManualSigmas cut to 2 steps a stage, through `workflow run` on a
    backend of the tiny files under its names: job.json records image_strength 0.7 (stage 2
    at 1), the frames and audio are the plan's request's."""
    data = json.loads((TEMPLATES / T23_I2V).read_text())
    outer = next(n for n in data["nodes"] if n["id"] == 320)
    assert outer["widgets_values"][1:6] == [False, 1280, 720, 5, 25]  # as saved
    outer["widgets_values"][2:5] = [128, 128, 1]
    (sub,) = data["definitions"]["subgraphs"]
    for node_id, cut in ((306, "1.0, 0.725, 0.0"), (281, "0.85, 0.4219, 0.0")):
        next(n for n in sub["nodes"] if n["id"] == node_id)["widgets_values"] = [cut]
    comfy = comfy_for(base, T23_I2V, tmp_path / "ComfyUI")
    path = comfy / T23_I2V
    path.write_text(json.dumps(data))
    plan, _ = plan_of(str(path), str(comfy))
    assert (plan.request["num_frames"], plan.request["audio_latent_frames"]) == (25, 26)
    assert plan.request["image_strength"] == 0.7
    server = backends.get(plan.serve["model"], 1, *plan.serve_argv()[2:])
    out = tmp_path / "out"
    result = paradit_warm(
        "workflow", "run", str(path), "--out", str(out), "--comfyui-dir", str(comfy),
        "--server", server.url,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    record = json.loads((out / "job.json").read_text())
    assert record["request"]["image_strength"] == 0.7
    assert record["timings"]["upscale"]["stage_1"] == {"width": 64, "height": 64, "steps": 2}
    job, frames = run_job(server, plan.body())
    assert len(frames) == 25
    assert [(out / "frames" / f"{i:06d}.png").read_bytes() for i in range(25)] == frames
    assert (out / "audio.wav").read_bytes() == server.audio(job["id"])


def test_the_2_5_i2v_template_imports_as_saved_with_comfyuis_tiles(base, tmp_path):
    """The 2.5 image-to-video template on the tiny files under its names: its start image at
    LTXVImgToVideoInplace 357's 0.7 (`image_strength`), its video VAE the diffusion decoder,
    and its VAEDecodeTiled 374 (512, 64, 64, 16), as the text-to-video template's, the job's
    `decode_tiles`: every field by hand (tests/template_jobs.py)."""
    template = "video_ltx2_5_i2v.json"
    comfy = comfy_for(base, template, tmp_path / "ComfyUI")
    plan, _ = plan_of(str(TEMPLATES / template), str(comfy))
    assert plan.request == in_folder(LTX25_I2V_SAVED, comfy)
    assert plan.serve["vaes"][0] == str(comfy / "models" / "vae" / DIFFUSION_VAE)
