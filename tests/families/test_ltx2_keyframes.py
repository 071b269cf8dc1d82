"""LTX-2's first and last frame (the request's `last_image`, `LTX2ConditionPipeline`) and a
job's frame rate (the request's `fps`), both declared by the family in its `Limits`
(`last_image`, `fps_range`): the request's rules (a family without them refuses them, a last
frame needs a first, not with `upscale` yet), a job at 25 fps at world size 1 against
`LTX2Pipeline` called directly with `frame_rate=25` (video and audio, byte for byte; the
audio shorter than at 24), and the mp4 written at the job's rate. The first/last-frame job
against `LTX2ConditionPipeline` at world size 1, and on 2 and 3 ranks against world size 1
(the keyframe tokens split with the rest), is the family contract's job "keyframes"
(`ltx2/tiny_job.py`).

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from image_jobs import preset_pipeline, run_here

from paradit.backend.config import ServeConfig
from paradit.backend.contract import IMAGE_TO_VIDEO, TEXT_TO_VIDEO, Limits
from paradit.backend.models.families.ltx2.tiny_job import BODY, KEYFRAMES, called_with_audio
from paradit.backend.request import JobRequest
from paradit.backend.serving.jobs import Job, JobBook, JobOutput
from paradit.backend.serving.outputs import to_uint8
from paradit.backend.serving.writer import OutputWriter
from paradit.backend.tools.equivalence import FLOAT32, IDENTICAL, compare

IMAGE, LAST = KEYFRAMES["image"], KEYFRAMES["last_image"]


def _limits(task: str = TEXT_TO_VIDEO, *, ltx2: bool = True) -> Limits:
    """LTX-2's limits as its family declares them (`ltx2`), or another video model's."""
    declared = {"fps": 24, "fps_range": (1.0, 60.0), "last_frame": True} if ltx2 else {}
    return Limits(
        task, 32, 64, 2048, 8, 481, default_frames=9,
        accepts_image=task == TEXT_TO_VIDEO, needs_image=task == IMAGE_TO_VIDEO,
        two_stage=ltx2, upscale_factors=(2,) if ltx2 else (), **declared,
    )  # fmt: skip


def _request(limits: Limits | None = None, **fields) -> JobRequest:
    return JobRequest.from_body({"prompt": "p", **fields}, limits or _limits())


@pytest.mark.fast
def test_last_image_goes_with_a_first_on_the_models_that_take_one():
    request = _request(image=IMAGE, last_image=LAST)
    assert request.last_image == LAST and request.image == IMAGE
    shown = request.to_dict(with_image=False)
    assert shown["last_image"] == f"<{len(LAST)} base64 chars>"
    # an image-to-video model needs its image, not a last one
    assert _request(_limits(IMAGE_TO_VIDEO), image=IMAGE).last_image is None
    assert _request(_limits(IMAGE_TO_VIDEO), image=IMAGE, last_image=LAST).last_image == LAST


@pytest.mark.fast
@pytest.mark.parametrize(
    ("limits", "fields", "message"),
    [
        (
            _limits(ltx2=False),
            {"image": IMAGE, "last_image": LAST},
            "only accepted by models that take",
        ),
        (None, {"last_image": LAST}, "last_image needs image"),
        (None, {"image": IMAGE, "last_image": "not base64!"}, "last_image is not valid base64"),
        (
            None,
            {"image": IMAGE, "last_image": LAST, "width": 128, "upscale": {"factor": 2}},
            "last_image is not run with upscale",
        ),
        (None, {"fps": 61}, "fps must be between 1 and 60 for this model, got 61"),
        (None, {"fps": 0}, "fps must be between 1 and 60"),
        (_limits(ltx2=False), {"fps": 25}, "runs at 16 fps only .*got 25: leave fps out"),
    ],
)
def test_the_rules_refuse(limits, fields, message):
    with pytest.raises(ValueError, match=message):
        _request(limits, **fields)


@pytest.mark.fast
def test_fps_within_the_models_range_or_its_own():
    assert _request(fps=25).fps == 25.0 and _request(fps=23.976).fps == 23.976
    assert _request().fps is None  # the model's own, as job.json's top-level `fps` says
    assert _request(_limits(ltx2=False), fps=16).fps == 16.0


def test_a_job_at_25_fps_equals_diffusers_at_frame_rate_25():
    """tiny-ltx2 at 17 frames and fps 25: frames and audio equal `LTX2Pipeline` called with
    `frame_rate=25`, byte for byte; the audio is the video's length at 25 fps (17 audio
    latent frames where 24 fps gives 18), and the video differs from the job at 24 fps (the
    positional embeddings are in seconds)."""
    body = {**BODY, "seed": 22, "num_frames": 17, "fps": 25}
    pipe, _family = preset_pipeline("tiny-ltx2", 128)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        frames, result = run_here(pipe, dict(body))
        video, audio = called_with_audio(pipe, body)
        at_24, _ = called_with_audio(pipe, {**body, "fps": None})
    finally:
        torch.set_num_threads(threads)
    assert compare(frames, to_uint8(np.asarray(video[0])), FLOAT32).verdict == IDENTICAL
    assert np.array_equal(result.audio.waveform, audio[0].numpy())
    # 17 frames: 0.68 s at 25 fps, 17 audio latent frames (0.708 s at 24: 18), 4 mel frames each
    assert result.audio.waveform.shape == (2, (17 * 4 - 3) * 240)
    assert compare(frames, to_uint8(np.asarray(at_24[0])), FLOAT32).verdict != IDENTICAL


def test_the_mp4_runs_at_the_jobs_frame_rate(tmp_path):
    """The writer writes video.mp4 at the request's `fps` (25, probed with ffmpeg) and the
    model's (24) without one; job.json says which (`fps`, and the request's)."""
    import imageio_ffmpeg

    book = JobBook(max_queue=4, keep=10)
    health = SimpleNamespace(rebuilds_in_a_row=0, explain=lambda exc: str(exc))
    writer = OutputWriter(book, ServeConfig(model="tiny-ltx2", output_dir=str(tmp_path)), health)
    writer.attach({"plan": {}, "world_size": 1, "device": "cpu"}, [[0]], 24)
    frames = np.random.default_rng(0).random((9, 64, 64, 3), dtype=np.float32)
    rates = {}
    for fps in (25, None):
        request = _request(fps=fps) if fps else _request()
        job = book.submit(Job(request=request, out_dir=tmp_path))
        job.out_dir = tmp_path / job.id
        assert book.next(timeout_s=1) is job
        writer.write(job, JobOutput(frames), started=0.0)
        writer.flush()
        record = json.loads((job.out_dir / "job.json").read_text())
        assert record["status"] == "succeeded", record
        assert (record["fps"], record["request"]["fps"]) == (fps or 24, fps)
        probe = subprocess.run(
            [imageio_ffmpeg.get_ffmpeg_exe(), "-hide_banner", "-i", str(job.out_dir / "video.mp4")],
            capture_output=True,
            text=True,
        )
        rates[fps] = re.search(r"(\d+(?:\.\d+)?) fps", probe.stderr).group(1)
    assert rates == {25: "25", None: "24"}
    writer.stop()
    assert not threading.current_thread().name.startswith("output-writer")
