"""A single-file model served on 2 ranks (each rank reads only its shard's rows of the ComfyUI
file) makes the frames of its preset, Wan 2.1 image-to-video with its `--image-encoder` file
too; Qwen-Image 2.1 with its VAE in ComfyUI's layout (`qwen_image_2.1_vae_bf16`:
3D convolutions of time 1); `paradit models DIR` and the one-line refusals.

Cost: about 10 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import base64
import io

import torch
from comfy_files import (
    WAN_PREFIX,
    qwen_image21_vae_comfy,
    wan_original,
    write_all_in_one,
    write_safetensors,
)
from conftest import run_job
from PIL import Image
from safetensors.torch import save_file

from paradit.backend.models.presets import build_preset
from paradit.backend.tools.cli import main

BODY = {"prompt": "a single file", "seed": 3, "width": 32, "height": 32, "num_frames": 5}
BODY |= {"num_inference_steps": 2, "guidance_scale": 3.0}


def _comfy_files(root):
    tiny = build_preset("tiny-wan")
    model = root / "diffusion_models" / "wan2.1_t2v_tiny_fp32.safetensors"
    encoder = root / "text_encoders" / "umt5_tiny.safetensors"
    vae = root / "vae" / "wan_2.1_vae_tiny.safetensors"
    for path in (model, encoder, vae):
        path.parent.mkdir(parents=True, exist_ok=True)
    write_safetensors(model, wan_original(tiny.transformer.state_dict()), "fp32", WAN_PREFIX)
    state = tiny.text_encoder.state_dict()
    save_file({k: v for k, v in state.items() if "embed_tokens" not in k}, str(encoder))
    save_file(tiny.vae.state_dict(), str(vae))
    full = sum(p.numel() * p.element_size() for p in tiny.transformer.parameters())
    return model, encoder, vae, full


def test_sharded_single_file_matches_the_preset(tmp_path, backends, references):
    model, encoder, vae, full = _comfy_files(tmp_path)
    client = backends.get(str(model), 2, "--text-encoder", str(encoder), "--vae", str(vae))
    info = client.info()
    assert info["model"] == str(model) and info["family"] == "wan-t2v"
    files = info["model_files"]
    assert files["variant"] == "tiny-wan"
    assert files["files"]["transformer"]["format"] == "f32"
    assert files["files"]["text_encoder"]["file"] == "umt5_tiny.safetensors"
    assert all(r["dit_param_bytes"] <= 0.55 * full for r in info["ranks"])  # shards only
    _, frames = run_job(client, BODY)
    backends.stop(client)
    assert frames == references.frames("tiny-wan", BODY)


def test_flux_all_in_one_file_served_on_two_ranks(tmp_path, backends, references):
    """`--model flux1-...safetensors` alone (ComfyUI's models/checkpoints layout): each rank
    reads its shard of the DiT from under the file's `model.diffusion_model.` prefix, the
    encoders and VAE come from the same file; the frames are the tiny-flux preset's."""
    tiny = build_preset("tiny-flux")
    path = tmp_path / "checkpoints" / "flux1-tiny-all-in-one.safetensors"
    path.parent.mkdir()
    write_all_in_one(path, tiny)
    full = sum(p.numel() * p.element_size() for p in tiny.transformer.parameters())
    client = backends.get(str(path), 2)
    info = client.info()
    files = info["model_files"]
    assert files["variant"] == "all-in-one tiny-flux (DiT, clip_l, t5xxl, vae)"
    assert {slot: f["file"] for slot, f in files["files"].items()} == dict.fromkeys(
        ("transformer", "text_encoder", "text_encoder_2", "vae"), path.name
    )
    assert all(r["dit_param_bytes"] <= 0.55 * full for r in info["ranks"])  # shards only
    body = {"prompt": "one file", "seed": 3, "width": 32, "height": 32, "num_inference_steps": 2}
    _, frames = run_job(client, body)
    backends.stop(client)
    assert frames == references.frames("tiny-flux", body)


def test_wan21_i2v_files_served_on_two_ranks(tmp_path, backends, references):
    """`--image-encoder` reaches the ranks: Wan 2.1 image-to-video from ComfyUI-layout files
    (the CLIP vision tower on rank 0 only, each rank reading its shard of the DiT) makes the
    frames of the tiny-wan-i2v preset at world size 1."""
    tiny = build_preset("tiny-wan-i2v")
    model = tmp_path / "wan2.1_i2v_480p_tiny_fp32.safetensors"
    encoder, vae = tmp_path / "umt5_tiny.safetensors", tmp_path / "wan_2.1_vae_tiny.safetensors"
    clip = tmp_path / "clip_vision_tiny.safetensors"
    write_safetensors(model, wan_original(tiny.transformer.state_dict()), "fp32", WAN_PREFIX)
    state = tiny.text_encoder.state_dict()
    save_file({k: v for k, v in state.items() if "embed_tokens" not in k}, str(encoder))
    save_file(tiny.vae.state_dict(), str(vae))
    state = tiny.image_encoder.state_dict()
    save_file({"vision_model." + k: v for k, v in state.items()}, str(clip))
    flags = ("--text-encoder", str(encoder), "--vae", str(vae), "--image-encoder", str(clip))
    client = backends.get(str(model), 2, *flags)
    info = client.info()
    assert (info["family"], info["model_files"]["variant"]) == ("wan-i2v", "tiny-wan-i2v")
    assert info["model_files"]["files"]["image_encoder"]["file"] == clip.name
    assert (info["limits"]["default_width"], info["limits"]["default_steps"]) == (64, 4)
    # test_http's job: a tiny architecture's files take its preset's tiny defaults
    body = {"prompt": "the ball rolls", "image": _png(40, 24), "seed": 4}
    _, frames = run_job(client, body)
    backends.stop(client)
    assert frames == references.frames("tiny-wan-i2v", body)


def test_qwen_image21_files_served(tmp_path, backends, references):
    """Qwen-Image 2.1 from ComfyUI-layout files (the DiT's gate and up projections fused, the
    VAE as ComfyUI's `WanVAE(temporal_kernel=1)` holds it, Qwen3-VL with its tower) on 2
    ranks, a guided job split over them: its image is the tiny-qwen-image2.1 preset's at
    world size 1. (Rank 1 encodes nothing but builds the processor: the pipeline reads its
    chat template when built; without it rank 1 stopped at start-up.)"""
    tiny = build_preset("tiny-qwen-image2.1")
    model = tmp_path / "qwen_image_2.1_tiny_fp32.safetensors"
    encoder, vae = (
        tmp_path / "qwen3vl_tiny.safetensors",
        tmp_path / "qwen_image_2.1_vae.safetensors",
    )
    state = tiny.transformer.state_dict()
    dit = {k: v for k, v in state.items() if ".img_mlp.gate_layer." not in k}
    for name, value in state.items():
        if name.endswith("img_mlp.gate_layer.weight"):  # ComfyUI's fused gate_up, gate rows first
            up = dit.pop(name.replace("gate_layer", "proj"))
            dit[name.replace("gate_layer", "gate_up")] = torch.cat([value, up])
    write_safetensors(model, dit, "fp32", WAN_PREFIX)
    text = tiny.text_encoder.state_dict()
    save_file(
        {
            k.replace("model.language_model.", "model.").replace("model.visual.", "visual."): v
            for k, v in text.items()
            if k != "lm_head.weight"
        },
        str(encoder),
    )
    save_file(qwen_image21_vae_comfy(tiny.vae.state_dict()), str(vae))
    client = backends.get(str(model), 2, "--text-encoder", str(encoder), "--vae", str(vae))
    info = client.info()
    assert info["model_files"]["variant"] == "tiny-qwen-image2.1"
    assert info["model_files"]["files"]["vae"]["file"] == vae.name
    body = {"prompt": "a single file", "seed": 3, "width": 64, "height": 64}
    body |= {"num_inference_steps": 2, "guidance_scale": 3.0, "negative_prompt": "blur"}
    _, frames = run_job(client, body)
    backends.stop(client)
    assert frames == references.frames("tiny-qwen-image2.1", body)


def _png(width: int, height: int, colour: tuple[int, int, int] = (200, 30, 30)) -> str:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def test_models_lists_a_comfy_folder_and_refusals_are_one_line(tmp_path, capsys):
    model, encoder, vae, _ = _comfy_files(tmp_path)
    (tmp_path / "diffusion_models" / "cut.safetensors").write_bytes(model.read_bytes()[:5000])
    assert main(["models", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "diffusion_models/wan2.1_t2v_tiny_fp32.safetensors  transformer  tiny-wan" in out
    assert "text_encoders/umt5_tiny.safetensors" in out and "umt5 32" in out
    assert "vae/wan_2.1_vae_tiny.safetensors" in out and "wan2.1 vae" in out
    assert "cut.safetensors is truncated" in out
    argv = ["generate", "x", "--out", str(tmp_path / "out"), "--model", str(vae)]
    assert main([*argv, "--text-encoder", str(encoder), "--vae", str(vae)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --model wan_2.1_vae_tiny.safetensors: expected a transformer")
    assert "\n" not in err
    argv[-1] = str(model)
    assert main(argv) == 2  # no encoder, no VAE
    assert "needs 1 text encoder file(s) (umt5)" in capsys.readouterr().err
    assert main(["generate", "x", "--out", "o", "--model", "tiny-wan", "--vae", str(vae)]) == 2
    assert "--text-encoder, --vae and --image-encoder go with a single-file --model" in (
        capsys.readouterr().err
    )
