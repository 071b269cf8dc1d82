"""Writing a finished job (backend/serving/writer.py): its result (the mp4, job.json, the
frames in memory for `/v1/jobs/{id}/frames/{i}`) is ready before its PNG frames are written;
the PNG writer is held back here until the test has seen the job succeed.

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import io
import json
import threading
from types import SimpleNamespace

import numpy as np
from PIL import Image

from paradit.backend.config import ServeConfig
from paradit.backend.contract import Limits
from paradit.backend.request import JobRequest
from paradit.backend.serving import writer as writer_module
from paradit.backend.serving.jobs import Job, JobBook, JobOutput
from paradit.backend.serving.writer import OutputWriter

LIMITS = Limits(
    task="text-to-video",
    size_multiple=16,
    min_size=16,
    max_size=2048,
    frame_multiple=4,
    max_frames=257,
    min_tokens=2,
    max_tokens=4096,
)


def test_the_result_is_ready_before_the_png_frames(tmp_path, monkeypatch):
    started, release = threading.Event(), threading.Event()
    write_frames = writer_module.write_frames

    def held_back(out_dir, frames):  # the PNG writer, slowed until the test lets it go
        started.set()
        assert release.wait(60), "the test never released the PNG writer"
        return write_frames(out_dir, frames)

    monkeypatch.setattr(writer_module, "write_frames", held_back)
    book = JobBook(max_queue=4, keep=10)
    health = SimpleNamespace(rebuilds_in_a_row=0, explain=lambda exc: str(exc))
    writer = OutputWriter(book, ServeConfig(model="tiny-wan", output_dir=str(tmp_path)), health)
    writer.attach({"plan": {}, "world_size": 1, "device": "cpu"}, [[0]], 8)
    job = book.submit(Job(request=JobRequest.from_body({"prompt": "x"}, LIMITS), out_dir=tmp_path))
    job.out_dir = tmp_path / job.id
    assert book.next(timeout_s=1) is job
    frames = np.random.default_rng(0).random((5, 32, 48, 3), dtype=np.float32)
    pixels = (frames * 255).round().astype(np.uint8)

    writer.write(job, JobOutput(frames), started=0.0)
    assert started.wait(30)  # the PNG writer has begun, and is held
    assert job.status == "succeeded" and not job.frames_written
    assert (job.out_dir / "video.mp4").stat().st_size > 0
    record = json.loads((job.out_dir / "job.json").read_text())
    assert record["status"] == "succeeded" and record["frames_written"] is False
    assert "frames/000004.png" in record["files"] and "write_s" in record["timings"]
    assert not list((job.out_dir / "frames").glob("*.png"))  # none written yet
    for index in (0, 4):  # what /v1/jobs/{id}/frames/{i} serves meanwhile: the same pixels
        png = writer.frame_png(job, index)
        np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(png))), pixels[index])
    assert writer.frame_png(job, 5) is None

    release.set()
    writer.flush()
    assert job.frames_written and job.frames is None and writer.frame_png(job, 0) is None
    for index in range(5):
        with Image.open(job.out_dir / "frames" / f"{index:06d}.png") as img:
            np.testing.assert_array_equal(np.asarray(img), pixels[index])
    record = json.loads((job.out_dir / "job.json").read_text())
    assert record["frames_written"] is True and record["timings"]["frames_write_s"] >= 0
    assert book.get(job.id).to_dict()["frames_written"] is True
    writer.stop()
