"""MiniMax H3 from the single files ComfyUI's templates name (issue 56):
`--model minimax_h3_fl2va_pruned_int8_convrot.safetensors --text-encoder
qwen3vl_32b_minimax_h3_nvfp4_awq.safetensors --vae minimax_h3_video_vae_int8_convrot.safetensors
--vae minimax_h3_audio_vae_fp32.safetensors`, the tiny preset written in those layouts
(tests/h3_files.py: the pruned DiT's curve table at full rank on a 33-point grid, the VAEs in
ComfyUI's module names with the preset's latent statistics, Qwen3-VL as `model.` + `visual.`).

- Lossless files (every tensor float32): the pipeline built from them holds exactly the
  preset's text encoder, the pruned DiT `pruned.load_pruned_file` reads (the row reader's
  values equal the whole-file reader's), and VAEs that decode as the preset's; its job (video
  and stereo track) equals the same job on the preset with that DiT, byte for byte.
- The files as the templates hold them (the DiT's and the video VAE's linears int8 with
  ConvRot; the encoder file under the nvfp4 name is float32: paradit's nvfp4 reader is tested
  apart, tests/single_file/test_single_file_fp4.py) served on 1 and 2 ranks: the two jobs
  agree within float32 rounding (Ulysses 2, the DiT sharded), and the int8 job is within
  0.2 of the frame range of the lossless one (the int8 rounding of the weights).
- Refusals: two --vae files none of which is the audio VAE, or no second --vae.

Cost: about 6 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import REFERENCE_FLAGS, run_job
from h3_files import DIT, write_files
from image_jobs import run_here

from paradit.backend.models.families.minimax_h3 import pruned
from paradit.backend.models.families.minimax_h3.tiny_job import BODY
from paradit.backend.models.loading import ModelSource, align_cpu_weights, load_pipeline
from paradit.backend.models.presets import build_preset
from paradit.backend.models.single_file.components import FILE_TOOLS
from paradit.backend.tools.equivalence import FLOAT32, IDENTICAL, WITHIN_ROUNDING, compare
from paradit.backend.tools.verify import decode_png

JOB = BODY  # the contract's smallest H3 job: 32x32, 124 frames, 2 steps


def _settings(model) -> dict:
    """A model's config, tuples as lists, without diffusers' bookkeeping."""
    return {
        k: list(v) if isinstance(v, tuple) else v
        for k, v in model.config.items()
        if not k.startswith("_")
    }


def _source(dit: str, flags: tuple[str, ...]) -> ModelSource:
    return ModelSource.parse(dit, [flags[1]], [flags[3], flags[5]])


def test_lossless_files_make_the_presets_job(tmp_path):
    tiny = build_preset("tiny-minimax-h3")
    dit, flags = write_files(tmp_path, tiny, int8=False)
    pipe = load_pipeline(_source(dit, flags))
    assert type(pipe).__name__ == "MiniMaxH3ModularPipeline"
    assert type(pipe.transformer) is pruned.MiniMaxH3PrunedTransformer3DModel
    whole = pruned.load_pruned_file(dit, torch.float32, FILE_TOOLS)
    reference = build_preset("tiny-minimax-h3")
    reference.update_components(transformer=whole)
    # the encoder's `lm_head`: not in ComfyUI's file (the hidden states are read, not logits)
    for component in ("transformer", "text_encoder"):
        ours = getattr(pipe, component).state_dict()
        theirs = getattr(reference, component).state_dict()
        assert set(ours) == set(theirs), component
        differ = [k for k in theirs if not torch.equal(ours[k], theirs[k])]
        assert differ == (["lm_head.weight"] if component == "text_encoder" else []), differ
    for component in ("vae", "audio_vae"):
        ours, theirs = (_settings(getattr(p, component)) for p in (pipe, reference))
        assert ours == theirs, component
    assert pipe.audio_scheduler.config.shift == reference.audio_scheduler.config.shift == 3.0
    results = []
    for each in (pipe, reference):
        each.set_progress_bar_config(disable=True)
        align_cpu_weights(each)
        results.append(run_here(each, JOB))
    (ours, got), (theirs, expected) = results
    assert np.array_equal(ours, theirs) and ours.std() > 0
    assert np.array_equal(got.latents.numpy(), expected.latents.numpy())
    assert np.array_equal(got.audio.waveform, expected.audio.waveform)
    assert got.audio.waveform.shape[0] == 2  # the stereo track


def test_the_audio_vae_is_asked_for(tmp_path):
    tiny = build_preset("tiny-minimax-h3")
    dit, flags = write_files(tmp_path, tiny, int8=False)
    with pytest.raises(ValueError, match="no --vae file given is the audio VAE"):
        load_pipeline(ModelSource.parse(dit, [flags[1]], [flags[3]]))
    with pytest.raises(ValueError, match="needs the MiniMax H3 video VAE"):
        load_pipeline(ModelSource.parse(dit, [flags[1]], [flags[5]]))


def _frames(pngs: list[bytes]) -> np.ndarray:
    return np.stack([decode_png(p) for p in pngs]).astype(float)


def test_template_files_served_on_one_and_two_ranks(tmp_path, backends):
    tiny = build_preset("tiny-minimax-h3")
    dit, flags = write_files(tmp_path / "int8", tiny, int8=True)
    lossless, plain = write_files(tmp_path / "float", tiny, int8=False)
    one = backends.get(dit, 1, *flags, *REFERENCE_FLAGS)
    two = backends.get(dit, 2, *flags, *REFERENCE_FLAGS)
    assert DIT in one.info()["model"] and len(two.info()["ranks"]) == 2
    first, second = run_job(one, JOB), run_job(two, JOB)
    result = compare(
        np.stack([decode_png(p) for p in first[1]]),
        np.stack([decode_png(p) for p in second[1]]),
        FLOAT32,
        one.latents(first[0]["id"]),
        two.latents(second[0]["id"]),
    )
    assert result.verdict in {IDENTICAL, WITHIN_ROUNDING}, result.overall
    floats = backends.get(lossless, 1, *plain, *REFERENCE_FLAGS)
    exact = _frames(run_job(floats, JOB)[1])
    assert np.abs(_frames(first[1]) - exact).max() < 0.2 * 255
