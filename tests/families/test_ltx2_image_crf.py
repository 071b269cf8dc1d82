"""LTX-2's start image re-compressed as one H.264 frame (`image_crf`, `ltx2/image_crf.py`):
paradit's round trip is diffusers' `apply_image_conditioning_crf` byte for byte where x264
runs on one thread, and gives the same bytes twice in a process and in two processes that may
use different CPU counts (x264's own thread count changes the frame: shown on explicit
counts); the request's rules (declared by the family's `Limits.image_crf`, refused elsewhere,
with an image only, the model's CRF filled in); the adapter hands the pipeline the
re-compressed image. The i2v, keyframe and two-stage jobs against diffusers called with its
default CRF are the family contract's (`ltx2/tiny_job.py`) and tests/families/test_ltx2.py's.

Cost: about 10 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import io
import os
import subprocess
import sys

import numpy as np
import pytest
from diffusers.pipelines.ltx2.utils import apply_image_conditioning_crf
from PIL import Image

from paradit.backend.contract import IMAGE_TO_VIDEO, TEXT_TO_VIDEO, Limits
from paradit.backend.models.families.ltx2 import adapter
from paradit.backend.models.families.ltx2.image_crf import round_trip, round_trip_array
from paradit.backend.models.families.ltx2.tiny_job import KEYFRAMES, one_cpu
from paradit.backend.request import JobRequest


def _pixels(height: int = 130, width: int = 97) -> np.ndarray:
    """A seeded image with flat, graded and noisy parts (odd sides: the crop shows)."""
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    pixels[: height // 2] = np.linspace(0, 255, width, dtype=np.uint8)[None, :, None]
    return pixels


def _digest(pixels: np.ndarray) -> str:
    return hashlib.sha256(pixels.tobytes()).hexdigest()


@pytest.mark.fast
def test_the_round_trip_is_diffusers_on_one_thread():
    pixels = _pixels()
    ours = round_trip_array(pixels, 33)
    with one_cpu():
        theirs = apply_image_conditioning_crf(pixels, 33)
    assert ours.shape == (130, 96, 3) and ours.dtype == np.uint8  # odd width cropped
    assert np.array_equal(ours, theirs)
    assert not np.array_equal(ours, pixels[:, :96])  # it did compress
    # x264's own thread count (0: from the CPUs) is the same procedure otherwise
    assert np.array_equal(
        round_trip_array(pixels, 18, threads=0), apply_image_conditioning_crf(pixels, 18)
    )
    # PIL in, PIL out; 0 leaves the image as it is
    image = Image.fromarray(pixels)
    assert np.array_equal(np.asarray(round_trip(image, 33)), ours)
    assert round_trip(image, 0) is image
    with pytest.raises(ValueError, match="8-bit RGB"):
        round_trip_array(pixels.astype(np.float32), 33)


@pytest.mark.fast
def test_x264s_thread_count_changes_the_frame_and_ours_is_fixed():
    pixels = _pixels(512, 768)
    one, two = round_trip_array(pixels, 33, threads=1), round_trip_array(pixels, 33, threads=2)
    assert not np.array_equal(one, two)  # why paradit fixes it (image_crf.THREADS)
    assert np.array_equal(round_trip_array(pixels, 33), one)  # twice in one process
    # x264 takes a CRF above 51 as 51 (ComfyUI's LTXVPreprocess offers up to 100)
    assert np.array_equal(round_trip_array(pixels, 100), round_trip_array(pixels, 51))


def test_two_processes_on_other_cpu_counts_give_the_same_bytes(tmp_path):
    path = tmp_path / "pixels.npy"
    np.save(path, _pixels(512, 768))
    code = (
        "import hashlib, os, sys, numpy as np\n"
        "from paradit.backend.models.families.ltx2.image_crf import round_trip_array\n"
        "if sys.argv[2] == 'one': os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
        "print(len(os.sched_getaffinity(0)), hashlib.sha256(round_trip_array("
        "np.load(sys.argv[1]), 33).tobytes()).hexdigest())\n"
    )
    runs = []
    for cpus in ("one", "all"):
        done = subprocess.run(
            [sys.executable, "-c", code, str(path), cpus],
            capture_output=True,
            text=True,
            timeout=120,
            env=os.environ,
        )
        assert done.returncode == 0, done.stderr
        runs.append(done.stdout.split())
    assert runs[0][0] == "1"
    assert runs[0][1] == runs[1][1] == _digest(round_trip_array(np.load(path), 33))


def _png(pixels: np.ndarray) -> str:
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return base64.b64encode(out.getvalue()).decode()


LTX2 = Limits(
    IMAGE_TO_VIDEO, 32, 64, 2048, 8, 481, default_frames=9, needs_image=True, image_crf=33
)
LTX2_T2V = Limits(
    TEXT_TO_VIDEO, 32, 64, 2048, 8, 481, default_frames=9, accepts_image=True, image_crf=33
)
LTX2_T2V = dataclasses.replace(LTX2_T2V, last_frame=True)
OTHER = Limits(IMAGE_TO_VIDEO, 16, 16, 2048, 4, 81, needs_image=True)
IMAGE = _png(_pixels(64, 64))


@pytest.mark.fast
def test_the_request_field_is_the_familys():
    body = {"prompt": "p", "image": IMAGE}
    assert JobRequest.from_body(body, LTX2).image_crf == 33  # the model's, filled in
    assert JobRequest.from_body({**body, "image_crf": 0}, LTX2).image_crf == 0
    assert JobRequest.from_body({**body, "image_crf": 51}, LTX2).image_crf == 51
    assert JobRequest.from_body({"prompt": "p"}, LTX2_T2V).image_crf is None  # no image
    last = {**body, "last_image": IMAGE}
    assert JobRequest.from_body(last, LTX2_T2V).image_crf == 33
    assert JobRequest.from_body(body, OTHER).image_crf is None
    with pytest.raises(ValueError, match="takes its images as sent"):
        JobRequest.from_body({**body, "image_crf": 18}, OTHER)
    with pytest.raises(ValueError, match="image_crf needs an image"):
        JobRequest.from_body({"prompt": "p", "image_crf": 18}, LTX2_T2V)
    with pytest.raises(ValueError, match="between 0 and 51"):
        JobRequest.from_body({**body, "image_crf": 52}, LTX2)
    with pytest.raises(ValueError, match="whole number"):
        JobRequest.from_body({**body, "image_crf": 2.5}, LTX2)


class _Pipe:
    """What `image_kwargs` reads of a pipeline: no text encoder (a rank that did not load it)."""

    text_encoder = None


@pytest.mark.fast
def test_the_pipeline_gets_the_image_re_compressed():
    request = JobRequest.from_body({"prompt": "p", "image": IMAGE, "image_crf": 18}, LTX2)
    given = adapter.image_kwargs(_Pipe(), request)
    assert given["image_crf"] == 0  # the pipeline's own round trip is not run again
    expected = round_trip_array(_pixels(64, 64), 18)
    assert np.array_equal(np.asarray(given["image"]), expected)
    sent = JobRequest.from_body({"prompt": "p", "image": IMAGE, "image_crf": 0}, LTX2)
    assert np.array_equal(np.asarray(adapter.image_kwargs(_Pipe(), sent)["image"]), _pixels(64, 64))
    # keyframes: each re-compressed at its own size at the job's CRF
    body = {"prompt": "p", "image": KEYFRAMES["image"], "last_image": KEYFRAMES["last_image"]}
    keyframes = JobRequest.from_body(body, LTX2_T2V)
    first, last = adapter.image_kwargs(_Pipe(), keyframes)["conditions"]
    assert (first.crf, last.crf, first.index, last.index) == (0, 0, 0, -1)
    decoded = adapter._decoded(KEYFRAMES["last_image"])
    assert np.array_equal(np.asarray(last.frames), round_trip_array(np.asarray(decoded), 33))
