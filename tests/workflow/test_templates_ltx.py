"""ComfyUI's LTX-2.3 and LTX-2.5 templates (the installed `comfyui-workflow-templates-json`),
in their saved form: each is refused naming the node (its path inside the subgraph) that
paradit cannot run as ComfyUI does, and why. What they add that paradit maps is checked on
edited copies: `LTXVImgToVideoInplace` with bypass on (the 2.3 text-to-video template) is its
latent, so the import reaches the prompt (refused there while the prompt enhancer is on).
`LTXVDualCFGGuider` (2.5's) is checked on LTX-2's own template in test_templates.py.

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import json

import pytest
from comfy_templates import TEMPLATES, placeholders, refusal

SAVED = {  # template -> (where, node type, the reason's words)
    # 5 s at 25 fps: a * b + 1 = 126 frames, which ComfyUI's video latent rounds down to 121
    # and its audio latent keeps (126 audio latent frames; paradit's for 121 frames: 121)
    "video_ltx2_3_t2v.json": (
        "subgraph 267 > node 214", "LTXVEmptyLatentAudio",
        "126 frames at 25 fps: ComfyUI makes 126 audio latent frames (rounded up: ceil(frames "
        "/ fps x 25)",
    ),
    "video_ltx2_3_i2v.json": (
        "subgraph 320 > node 288", "LTXVImgToVideoInplace", "CRF 33 in the LTX-2 templates, 18",
    ),
    # its audio VAE is a file of its own, through a plain VAELoader
    "video_ltx2_5_t2v.json": (
        "subgraph 405 > node 366", "LTXVEmptyLatentAudio", "(VAELoader) where paradit expects",
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


def test_the_2_3_template_at_8_seconds_without_the_prompt_enhancer_maps_to_its_files(tmp_path):
    """The 2.3 text-to-video template edited as a user would: prompt_enhance off and 8 s at
    its 25 fps (a * b + 1 = 201 frames, 8k+1: ComfyUI's video latent keeps them and its
    audio latent's 201 frames are paradit's too). Every node maps (the frame rate, the
    rounding, the prompt, the two stages); the import stops at the first file it reads, the
    upscaler's (an empty placeholder here): paradit has no tiny files under 2.3's names."""
    template = "video_ltx2_3_t2v.json"
    comfy = placeholders(template, tmp_path / "ComfyUI")
    data = json.loads((TEMPLATES / template).read_text())
    outer = next(n for n in data["nodes"] if n["id"] == 267)
    assert outer["widgets_values"][1:6] == [True, 1280, 720, 5, 25]  # as saved
    outer["widgets_values"][1] = False  # prompt_enhance off
    outer["widgets_values"][4] = 8  # seconds
    path = tmp_path / template
    path.write_text(json.dumps(data))
    refusal(
        path,
        comfy,
        "subgraph 267 > node 233 (LatentUpscaleModelLoader): "
        "ltx-2.3-spatial-upscaler-x2-1.1.safetensors: ",
        "the file has 0 bytes",
    )
