"""Finishing jobs on rank 0: a job's result and job.json, then its final status, then its
PNG frames.

Replica 0's jobs are written on the thread that ran them; with several replicas, the others'
jobs are written on one writer thread (`OutputWriter.submit`), so that a replica takes its next
job as soon as its frames are in. A job succeeds once its video (or image) and job.json are
written: its lossless PNG frames follow on a thread of their own (`frames/`), and meanwhile
`/v1/jobs/{id}/frames/{i}` serves them from memory (`frame_png`). When they are all on disk
the job says `frames_written: true` (`GET /v1/jobs/{id}` and job.json, written again).
"""

from __future__ import annotations

import logging
import platform
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ... import __version__
from ..config import ServeConfig
from .health import GroupHealth
from .jobs import Job, JobBook, JobOutput
from .outputs import (
    AUDIO_LATENTS_FILE,
    frame_names,
    png_bytes,
    to_uint8,
    write_frames,
    write_latents,
    write_record,
    write_result,
)

log = logging.getLogger(__name__)

RUN_NOTES = (
    "sequence_layout",
    "cfg_branches",
    "cache",
    "sampling",
    "expert_swaps",
    "compile",
    "upscale",
)
"""How a job's steps ran (`StepClock.notes`): copied from its timings to job.json's top level."""


def versions() -> dict[str, str]:
    import diffusers
    import torch

    return {
        "paradit": __version__,
        "torch": torch.__version__,
        "diffusers": diffusers.__version__,
        "python": platform.python_version(),
    }


def memory_record(job: Job, output: JobOutput) -> dict[str, Any] | None:
    """job.json's "memory": the job's plan (prediction and reasons) and each rank's
    measured peak."""
    if job.memory is None:
        return None
    measured = {str(rank): value for rank, value in sorted(output.measured.items()) if value}
    record = {**job.memory.to_dict(), "measured": measured}
    if output.lora_memory is not None:  # host memory the plan does not predict (docs/loras.md)
        record["loras"] = output.lora_memory
    return record


class OutputWriter:
    """Writes finished jobs and records their status in the book."""

    def __init__(self, book: JobBook, config: ServeConfig, health: GroupHealth):
        self.book, self.config, self.health = book, config, health
        self.group: dict[str, Any] = {}
        """What job.json says of the group: plan, world size, device (set by `attach`)."""
        self.replica_ranks: list[list[int]] = []
        self.fps: float = 16
        self._pool: ThreadPoolExecutor | None = None
        self._frames = ThreadPoolExecutor(1, "frame-writer")
        """Writes finished jobs' PNG frames, one job after another."""

    def attach(self, group: dict[str, Any], replica_ranks: list[list[int]], fps: float) -> None:
        self.group, self.replica_ranks, self.fps = group, replica_ranks, fps

    def start(self) -> None:
        """Write other replicas' jobs on a thread of their own (until `stop`)."""
        self._pool = ThreadPoolExecutor(1, "output-writer")

    def stop(self) -> None:
        """Every job handed over gets its outputs and its status, and its PNG frames."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        self.flush()

    def flush(self) -> None:
        """Wait until every succeeded job's PNG frames are on disk."""
        self._frames.submit(lambda: None).result()

    def submit(self, job: Job, output: JobOutput, started: float) -> None:
        """Write on the writer thread when there is one (else here)."""
        if self._pool is None:
            self.write(job, output, started)
        else:
            self._pool.submit(self.write, job, output, started)

    def write(self, job: Job, output: JobOutput, started: float) -> None:
        """The outputs and job.json of a job whose frames are in; then it has succeeded."""
        timings = job.timings
        try:
            begin_write = time.perf_counter()
            pixels = to_uint8(output.frames)
            job.files = write_result(job.out_dir, pixels, self.job_fps(job), output.audio)
            if output.latents is not None:
                job.files.append(write_latents(job.out_dir, output.latents))
            if output.audio_latents is not None:
                name = AUDIO_LATENTS_FILE
                job.files.append(write_latents(job.out_dir, output.audio_latents, name))
            job.files += frame_names(len(pixels))  # on disk once `frames_written`
            job.num_frames = len(pixels)
            job.frames = pixels
            timings["write_s"] = round(time.perf_counter() - begin_write, 4)
            timings["total_s"] = round(time.perf_counter() - started, 4)
            self.finish(job, "succeeded", output=output)
            self.health.rebuilds_in_a_row = 0
        except Exception as exc:
            log.exception("job %s failed", job.id)
            self.finish(job, "failed", self.health.explain(exc))
            return
        self._frames.submit(self.write_frames, job, output)

    def write_frames(self, job: Job, output: JobOutput) -> None:
        """A succeeded job's PNG frames, then `frames_written` (job.json written again)."""
        begin = time.perf_counter()
        try:
            write_frames(job.out_dir, job.frames)
        except Exception as exc:  # the job's result stands; say what is missing
            log.exception("job %s: its PNG frames could not be written", job.id)
            job.timings["frames_error"] = f"{type(exc).__name__}: {exc}"
        else:
            job.timings["frames_write_s"] = round(time.perf_counter() - begin, 4)
            job.frames_written = True
            job.frames = None
        write_record(job.out_dir, self.record(job, job.status, output))
        self.book.update(job)

    @staticmethod
    def frame_png(job: Job, index: int) -> bytes | None:
        """Frame `index` of a succeeded job whose PNG frames are not all on disk yet, encoded
        from memory; None when it is on disk (or the job has no such frame)."""
        frames = job.frames
        if frames is None or job.frames_written or not 0 <= index < len(frames):
            return None
        return png_bytes(frames[index])

    def finish(
        self, job: Job, status: str, error: str | None = None, output: JobOutput | None = None
    ) -> None:
        """Record the job's final status (`output`: what a job that succeeded made)."""
        if output is not None:  # job.json exists before anyone sees "succeeded"
            write_record(job.out_dir, self.record(job, status, output))
        else:
            shutil.rmtree(job.out_dir, ignore_errors=True)  # no half-written outputs
        self.book.finish(job, status, error)
        log.info("job %s %s%s", job.id, status, f": {error}" if error else "")

    def job_fps(self, job: Job) -> float:
        """The job's frame rate: its request's `fps`, else the model's."""
        return self.fps if job.request.fps is None else job.request.fps

    def record(self, job: Job, status: str, output: JobOutput) -> dict[str, Any]:
        """job.json: the request, the resolved plan, seed, timings and versions."""
        return {
            "id": job.id,
            "status": status,
            "model": self.config.model,
            "request": job.request.to_dict(with_image=False),
            "seed": job.request.seed,
            "plan": self.group["plan"],
            "attention": self.group.get("attention"),
            "replica": job.replica,
            "replica_ranks": self.replica_ranks[job.replica or 0],
            "world_size": self.group["world_size"],
            "device": self.group["device"],
            "num_frames": job.num_frames,
            "fps": self.job_fps(job),
            "files": job.files,
            "frames_written": job.frames_written,
            "timings": job.timings,
            **{key: job.timings[key] for key in RUN_NOTES if key in job.timings},
            "memory": memory_record(job, output),
            "decode": None if job.memory is None else job.memory.decode_record(),
            "loras": job.loras,
            **({"audio": output.audio.record()} if output.audio is not None else {}),
            "versions": versions(),
        }
