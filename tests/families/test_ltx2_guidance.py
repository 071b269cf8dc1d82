"""LTX-2's own guidance terms (the request's `guidance_terms`, declared by the family in
`Limits.guidance_terms`): the request's rules (the names the model declares, their bounds, an
audio term's 0, the step cache with an extra pass, a family without terms refusing the field),
and LTX-2.0's (`tiny-ltx2`: no perturbable attention, so no STG) modality isolation, rescale
and audio scale at world size 1 against `LTX2Pipeline` called directly, byte for byte.
LTX-2.3's STG, modality and dual CFG at world size 1 and on 2 and 4 ranks are the family
contract's job "guidance terms" (`ltx2/tiny_job.py`).

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from image_jobs import preset_pipeline, run_here

from paradit.backend import guidance_terms
from paradit.backend.contract import TEXT_TO_VIDEO, Limits
from paradit.backend.models.families.ltx2.guidance import guidance_terms as ltx2_terms
from paradit.backend.models.families.ltx2.tiny_job import BODY, FOLLOW, LTX20, called_with_audio
from paradit.backend.request import JobRequest
from paradit.backend.serving.outputs import to_uint8
from paradit.backend.tools.equivalence import FLOAT32, IDENTICAL, compare


def _limits(perturbed: bool = True, layers: int = 48) -> Limits:
    """LTX-2.3's (`perturbed`) or LTX-2.0's limits, with a step cache."""
    config = SimpleNamespace(num_layers=layers, perturbed_attn=perturbed)
    terms = ltx2_terms(SimpleNamespace(config=config))
    return Limits(
        TEXT_TO_VIDEO, 32, 64, 2048, 8, 481, default_frames=9, step_cache=True, guidance_terms=terms
    )


def _request(terms, limits=None, **fields) -> JobRequest:
    body = {"prompt": "p", "guidance_terms": terms, **fields}
    return JobRequest.from_body(body, limits or _limits())


@pytest.mark.fast
def test_the_model_declares_its_terms_off_by_default():
    """LTX-2.3 (perturbable attention) takes STG; LTX-2.0's DiT in diffusers has none, so it
    is not offered; left out, every term runs off (the audio's follow the video's) and the STG
    block is diffusers' 28 on a 48-block DiT, the last on a smaller one."""
    names = [term.name for term in _limits().guidance_terms]
    assert names[:3] == ["stg_scale", "audio_stg_scale", "spatio_temporal_guidance_blocks"]
    assert "stg_scale" not in [term.name for term in _limits(perturbed=False).guidance_terms]
    limits = _limits()
    fields = {"guidance_scale": 4.0}
    assert guidance_terms.resolved(None, limits.guidance_terms, fields) == {
        "stg_scale": 0.0,
        "audio_stg_scale": 0.0,
        "spatio_temporal_guidance_blocks": [28],
        "modality_scale": 1.0,
        "audio_modality_scale": 1.0,
        "guidance_rescale": 0.0,
        "audio_guidance_rescale": 0.0,
        "audio_guidance_scale": 4.0,
    }
    small = _limits(layers=2).guidance_terms
    assert guidance_terms.effective("spatio_temporal_guidance_blocks", None, small) == [1]
    given = {"stg_scale": 1, "audio_guidance_scale": 7}
    request = _request(given)
    assert request.to_dict()["guidance_terms"] == {"stg_scale": 1.0, "audio_guidance_scale": 7.0}
    ran = guidance_terms.resolved(request.guidance_terms, limits.guidance_terms, fields)
    assert ran["audio_stg_scale"] == 1.0 and ran["audio_guidance_scale"] == 7.0
    assert _request(None).guidance_terms is None and _request({}).guidance_terms is None


@pytest.mark.fast
@pytest.mark.parametrize(
    ("terms", "fields", "message"),
    [
        ({"cfg_scale": 2}, {}, "this model takes stg_scale, .*unknown: cfg_scale"),
        ([1.0], {}, "must be an object"),
        ({"stg_scale": -1}, {}, r"stg_scale must be between 0 and 30"),
        ({"modality_scale": 0.5}, {}, r"modality_scale must be between 1 and 30"),
        ({"guidance_rescale": 1.5}, {}, r"guidance_rescale must be between 0 and 1"),
        ({"stg_scale": "1"}, {}, "must be a number"),
        ({"spatio_temporal_guidance_blocks": [48]}, {}, "between 0 and 47"),
        ({"spatio_temporal_guidance_blocks": []}, {}, "at least one"),
        ({"spatio_temporal_guidance_blocks": [3, 3]}, {}, "each once"),
        (
            {"stg_scale": 1, "audio_stg_scale": 0},
            {},
            "audio_stg_scale 0 would run as stg_scale's 1",
        ),
        ({"audio_guidance_scale": 0}, {"guidance_scale": 4}, "as guidance_scale's 4"),
        (
            {"modality_scale": 3},
            {"cache": {"method": "first-block"}},
            "cache is not run with guidance terms that add DiT calls",
        ),
    ],
)
def test_the_rules_refuse_what_the_pipeline_would_not_run(terms, fields, message):
    with pytest.raises(ValueError, match=message):
        _request(terms, **fields)


@pytest.mark.fast
def test_what_the_rules_let_through():
    """An audio term's 0 where the video's is 0 too; the step cache with terms that add no DiT
    call (the audio's scale, the rescale)."""
    limits = _limits()
    assert _request({"audio_stg_scale": 0}, limits).guidance_terms == {"audio_stg_scale": 0.0}
    cached = _request(
        {"audio_guidance_scale": 7, "guidance_rescale": 0.7},
        limits,
        cache={"method": "first-block"},
    )
    assert cached.guidance_terms["audio_guidance_scale"] == 7.0


@pytest.mark.fast
def test_a_model_without_terms_refuses_the_field():
    limits = Limits(TEXT_TO_VIDEO, 16, 16, 1024, 4, 81)
    with pytest.raises(ValueError, match="takes no guidance terms beside guidance_scale"):
        _request({"stg_scale": 1}, limits)
    assert _request(None, limits).guidance_terms is None


def test_ltx_2_0_modality_rescale_and_audio_scale_equal_diffusers():
    """tiny-ltx2 (LTX-2.0's settings) guided at 4 with the audio at 7, modality isolation at 3
    (one more DiT call per step, the cross-modal attention off) and the rescale at 0.7: the
    frames and the audio track equal `LTX2Pipeline` called with the same values, byte for
    byte; and they differ from the job without the terms."""
    terms = {"modality_scale": 3.0, "guidance_rescale": 0.7, "audio_guidance_scale": 7.0}
    body = {**BODY, "seed": 21, "guidance_terms": terms}
    pipe, _family = preset_pipeline("tiny-ltx2", 128)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        frames, result = run_here(pipe, dict(body))
        plain, _ = run_here(pipe, {**body, "guidance_terms": None})
        video, audio = called_with_audio(pipe, body, {**LTX20, **FOLLOW, **terms})
    finally:
        torch.set_num_threads(threads)
    assert compare(frames, to_uint8(np.asarray(video[0])), FLOAT32).verdict == IDENTICAL
    assert np.array_equal(result.audio.waveform, audio[0].numpy())
    assert compare(frames, plain, FLOAT32).verdict != IDENTICAL
