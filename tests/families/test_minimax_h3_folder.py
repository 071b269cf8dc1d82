"""MiniMax H3 from a diffusers folder (`--model <folder>`): the tiny preset written with
diffusers' `save_pretrained` (a modular pipeline's folder: `modular_model_index.json` and
one folder per component) runs the job as the preset does, frames and audio byte for byte;
on 2 ranks its DiT and (`--encoder-placement sharded`) its Qwen3-VL are built empty and each
rank reads its own rows from the folder's files.

Cost: about 6 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import REFERENCE_FLAGS, run_job
from image_jobs import save_h3_folder

from paradit.backend.models.families.minimax_h3.tiny_job import BODY
from paradit.backend.models.loading import ModelSource, load_pipeline, pipeline_index
from paradit.backend.models.presets import build_preset

PRESET = "tiny-minimax-h3"


def pixels(png: bytes) -> np.ndarray:
    import io

    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        return np.asarray(image, dtype=np.int16)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("h3") / "tiny-minimax-h3-folder"
    save_h3_folder(folder)
    return folder


def test_the_folder_loads_as_the_modular_pipeline_without_the_ref2va_partition(folder):
    """The index is the modular one; the processor is read without a video processor
    (torchvision), and the ref2va partition is not loaded even when the folder holds one
    (it would be a second 33B DiT at real size)."""
    index = pipeline_index(folder)
    assert index["_class_name"] == "MiniMaxH3ModularPipeline"
    assert index["transformer"] == ["diffusers", "MiniMaxH3Transformer3DModel"]
    source = ModelSource.parse(str(folder))
    assert source.kind == "folder"
    # a folder holding both partitions, as the released repo does
    full = json.loads((folder / "modular_model_index.json").read_text())
    full["transformer_ref"] = [*full["transformer"][:2], dict(full["transformer"][2])]
    both = folder.parent / "both"
    both.mkdir(exist_ok=True)
    for entry in folder.iterdir():
        if entry.is_dir():
            (both / entry.name).symlink_to(entry, target_is_directory=True)
    (both / "transformer_ref").symlink_to(folder / "transformer", target_is_directory=True)
    (both / "modular_model_index.json").write_text(json.dumps(full))
    pipe = load_pipeline(ModelSource.parse(str(both)))
    assert type(pipe).__name__ == "MiniMaxH3ModularPipeline"
    assert pipe.transformer is not None and pipe.transformer_ref is None
    assert type(pipe.processor).__name__ == "ImageQwen3VLProcessor"
    preset = build_preset(PRESET, components=frozenset({"processor"})).processor
    assert pipe.processor.image_processor.to_dict() == preset.image_processor.to_dict()
    assert pipe.processor.image_token_id == preset.image_token_id


def test_a_folder_job_equals_the_presets(folder, backends, references):
    """World size 1 from the folder equals the preset's job byte for byte (frames, the
    audio track and the final latents); on 2 ranks each rank holds half the DiT, its rows
    read from the folder's file, and the frames equal world size 1's within a level (the
    split sequence sums in another order: the latents within float32 rounding,
    tests/families/test_minimax_h3_ranks.py)."""
    one = backends.get(str(folder), 1, *REFERENCE_FLAGS)
    info = one.info()
    assert info["family"] == "minimax-h3-t2va" and info["model"] == str(folder)
    job, frames = run_job(one, BODY)
    audio, latents = one.audio(job["id"]), one.latents(job["id"])
    audio_latents = one.audio_latents(job["id"])
    backends.stop(one)
    preset = backends.get(PRESET, 1, *REFERENCE_FLAGS)
    ref_job, ref_frames, ref_latents = references.get(PRESET, BODY)
    assert frames == ref_frames
    assert audio == preset.audio(ref_job["id"])
    assert latents.tobytes() == ref_latents.tobytes()
    assert np.array_equal(audio_latents, preset.audio_latents(ref_job["id"]))
    backend = backends.start(str(folder), 2, "--encoder-placement", "sharded")
    two = backend.client
    whole = info["ranks"][0]["dit_param_bytes"]
    assert all(r["dit_param_bytes"] <= 0.55 * whole for r in two.info()["ranks"])
    # Qwen3-VL too: built empty on each rank, its rows read from text_encoder/
    encoder = info["ranks"][0]["encoder_param_bytes"]
    for rank in two.info()["ranks"]:
        assert rank["encoders_built_empty"] == ["text_encoder"], rank
        assert rank["encoder_param_bytes"] <= 0.55 * encoder, (rank, encoder)
    _, frames_two = run_job(two, BODY)
    # the DiT and the encoder (its tokenizer and processor with it, by a second call)
    # left out of the folder's load on rank 0, built empty and filled from their folders
    log = backend.log_path.read_text(errors="replace")
    assert "(skipped: processor, text_encoder, tokenizer, transformer)" in log
    backends.stop(two)
    drift = max(
        int(np.abs(pixels(a) - pixels(b)).max()) for a, b in zip(frames_two, frames, strict=True)
    )
    assert drift <= 1, drift  # a pixel level at most, where a value lies at a rounding edge
