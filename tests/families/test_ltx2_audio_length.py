"""LTX-2's audio length (`audio_latent_frames`): the field's rules (a model with an audio track
only, at most the audio of its longest video, not with `last_image`), and a job of tiny-ltx2
with ComfyUI's count (9 frames at 24 fps: ceil(9.375) = 10 audio latent frames, the
pipeline's own round(9.375) = 9) at world size 1 against `LTX2Pipeline` called directly with
`audio_latents` of that length (zeros re-noised whole at `noise_scale` 1): the same video and
the same waveform, bit for bit, 10 latent frames long. 2 ranks against 1: the family
contract's job "audio length" (`ltx2/tiny_job.py`).

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
import torch
from image_jobs import run_here
from PIL import Image

from paradit.backend.contract import TEXT_TO_VIDEO, Limits
from paradit.backend.models.families.ltx2.tiny_job import AUDIO_LENGTH, called_with_audio
from paradit.backend.models.presets import build_preset
from paradit.backend.request import JobRequest
from paradit.backend.serving.outputs import to_uint8

# LTX-2's limits as far as the field reads them: 8k+1 frames up to 481 at 24 fps, 25 audio
# latent frames a second; the longest video's audio: ceil(481 / 24 x 25) = 502
LTX = dict(task=TEXT_TO_VIDEO, size_multiple=32, min_size=64, max_size=2048, frame_multiple=8)
LTX.update(max_frames=481, fps=24, fps_range=(1.0, 60.0), accepts_image=True, last_frame=True)
BODY = {"prompt": "a bell", "width": 64, "height": 64, "num_frames": 121}


def _png() -> str:
    buffer = io.BytesIO()
    Image.new("RGB", (64, 64), (90, 20, 200)).save(buffer, "PNG")
    return base64.b64encode(buffer.getvalue()).decode()


@pytest.mark.fast
def test_audio_latent_frames_is_the_audio_track_models_field():
    limits = Limits(**LTX, audio_latents_per_second=25.0)
    assert (
        JobRequest.from_body({**BODY, "audio_latent_frames": 127}, limits).audio_latent_frames
        == 127
    )
    assert JobRequest.from_body(BODY, limits).audio_latent_frames is None  # the pipeline's
    assert JobRequest.from_body({**BODY, "audio_latent_frames": 502}, limits).audio_latent_frames
    with pytest.raises(ValueError, match=r"^audio_latent_frames must be between 1 and 502 "):
        JobRequest.from_body({**BODY, "audio_latent_frames": 503}, limits)
    with pytest.raises(ValueError, match=r"^audio_latent_frames must be at least 1"):
        JobRequest.from_body({**BODY, "audio_latent_frames": 0}, limits)
    with pytest.raises(ValueError, match=r"limits.audio_latents_per_second is 0\): leave"):
        JobRequest.from_body({**BODY, "audio_latent_frames": 127}, Limits(**LTX))
    both = {**BODY, "audio_latent_frames": 127, "image": _png(), "last_image": _png()}
    with pytest.raises(ValueError, match=r"^audio_latent_frames is not run with last_image"):
        JobRequest.from_body(both, limits)


def test_world_size_1_with_comfyuis_audio_length_equals_diffusers_given_that_length():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        pipe = build_preset("tiny-ltx2")
        pipe.set_progress_bar_config(disable=True)
        assert JobRequest.from_body(AUDIO_LENGTH, _limits(pipe)).audio_latent_frames == 10
        frames, result = run_here(pipe, AUDIO_LENGTH)
        video, audio = called_with_audio(pipe, AUDIO_LENGTH)
        _, own = run_here(pipe, {**AUDIO_LENGTH, "audio_latent_frames": None})
    finally:
        torch.set_num_threads(threads)
    assert np.array_equal(frames, to_uint8(np.asarray(video[0])))
    assert np.array_equal(result.audio.waveform, audio[0].numpy())
    # 10 audio latent frames: 37 mel frames of 240 samples; the pipeline's own 9: 33
    assert result.audio.waveform.shape == (2, 37 * 240)
    assert own.audio.waveform.shape == (2, 33 * 240)


def _limits(pipe):
    from paradit.backend.models.families import family_of

    limits = family_of(pipe).limits(pipe, tiny=True)
    assert limits.audio_latents_per_second == 25.0  # 16 kHz / hop 160 / 4
    return limits
