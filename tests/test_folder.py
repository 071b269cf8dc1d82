"""A tiny model saved to a folder and served by path gives the same frames as its preset."""

from __future__ import annotations

from conftest import run_job

from paradit.backend.presets import build_preset

# Explicit sizes: a folder model gets the real-model defaults (832x480, 81 frames).
BODY = {
    "prompt": "a folder model",
    "seed": 21,
    "guidance_scale": 3.0,
    "width": 64,
    "height": 48,
    "num_frames": 5,
    "num_inference_steps": 4,
}


def test_saved_folder_matches_preset(tmp_path, backends):
    folder = tmp_path / "tiny-wan-folder"
    build_preset("tiny-wan").save_pretrained(folder)
    client = backends.get(str(folder), 2)
    info = client.info()
    assert info["model"] == str(folder) and info["family"] == "wan-t2v"
    _, from_folder = run_job(client, BODY)
    backends.stop(client)
    _, from_preset = run_job(backends.get("tiny-wan", 1), BODY)
    assert from_folder == from_preset
