"""What crosses between rank 0 and the leader of another data-parallel replica, through the
control store (never a collective, never pickle): raw tensor bytes plus their JSON shape.

Rank 0 encodes every job (only it holds the text/image encoders) and puts the encoder outputs
under `job/<id>/tensor/<name>`; the replica's leader takes them and broadcasts them inside its
replica. During the job the leader publishes its step and previews (`job/<id>/step`,
`job/<id>/preview`) and checks `job/<id>/cancel`, which rank 0 sets; its decision reaches the
replica's other ranks through the per-step broadcast. At the end the leader puts the float
frames, one key per frame (`job/<id>/frame/<i>`), and its step timings (`job/<id>/timings`),
and rank 0 writes the outputs and job.json as for any job. The store is rank 0's TCPStore,
so this works across machines; frames cost F x H x W x 3 x 4 bytes on the wire.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from ..audio import Audio
from .job import latents_array


def _key(job_id: str, name: str) -> str:
    return f"job/{job_id}/{name}"


def put_tensors(store: dist.Store, job_id: str, tensors: dict[str, torch.Tensor]) -> None:
    """Rank 0: the encoder outputs of a job that another replica runs."""
    for name, tensor in tensors.items():
        data = tensor.detach().contiguous().view(torch.uint8).numpy().tobytes()
        store.set(_key(job_id, f"tensor/{name}"), data)


def take_tensors(store: dist.Store, job_id: str, meta: list[list]) -> dict[str, torch.Tensor]:
    """The leader: the tensors rank 0 put for `job_id` (shapes from the message), removed."""
    out = {}
    for name, shape, dtype in meta:
        key = _key(job_id, f"tensor/{name}")
        raw = torch.frombuffer(bytearray(store.get(key)), dtype=torch.uint8)
        out[name] = raw.view(getattr(torch, dtype)).reshape(shape)
        store.delete_key(key)
    return out


def put_frames(store: dist.Store, job_id: str, frames: np.ndarray) -> None:
    """The leader: float frames (F, H, W, 3), exactly as decoded."""
    frames = np.ascontiguousarray(frames, dtype=np.float32)
    for index, frame in enumerate(frames):
        store.set(_key(job_id, f"frame/{index}"), frame.tobytes())
    header = {"shape": list(frames.shape)}
    store.set(_key(job_id, "frames"), json.dumps(header))


def take_frames(store: dist.Store, job_id: str) -> np.ndarray:
    """Rank 0: the frames the leader put for `job_id`, removed from the store."""
    shape = json.loads(store.get(_key(job_id, "frames")))["shape"]
    frames = np.empty(shape, dtype=np.float32)
    for index in range(shape[0]):
        key = _key(job_id, f"frame/{index}")
        frames[index] = np.frombuffer(store.get(key), dtype=np.float32).reshape(shape[1:])
        store.delete_key(key)
    store.delete_key(_key(job_id, "frames"))
    return frames


def put_audio(store: dist.Store, job_id: str, audio: Audio) -> None:
    """The leader: the job's audio track (LTX-2), float32 samples and their shape and rate."""
    samples = np.ascontiguousarray(audio.waveform, dtype=np.float32)
    store.set(_key(job_id, "audio"), samples.tobytes())
    header = {"shape": list(samples.shape), "sample_rate": audio.sample_rate}
    store.set(_key(job_id, "audio_header"), json.dumps(header))


def take_audio(store: dist.Store, job_id: str) -> Audio | None:
    """Rank 0: the audio track the leader put for `job_id` (None if none), removed."""
    key, header_key = _key(job_id, "audio"), _key(job_id, "audio_header")
    if not store.check([header_key]):
        return None
    header = json.loads(store.get(header_key))
    samples = np.frombuffer(store.get(key), dtype=np.float32).reshape(header["shape"]).copy()
    store.delete_key(key)
    store.delete_key(header_key)
    return Audio(samples, int(header["sample_rate"]))


def put_latents(
    store: dist.Store, job_id: str, latents: torch.Tensor, name: str = "latents"
) -> None:
    """The leader: the final latents, as float32 (what `--save-latents` writes); `name`
    "audio_latents" for the audio's."""
    array = latents_array(latents)
    store.set(_key(job_id, name), array.tobytes())
    store.set(_key(job_id, f"{name}_shape"), json.dumps(list(array.shape)))


def take_latents(store: dist.Store, job_id: str, name: str = "latents") -> np.ndarray | None:
    """Rank 0: the final latents the leader put for `job_id` under `name` (None if none),
    removed."""
    key, shape_key = _key(job_id, name), _key(job_id, f"{name}_shape")
    if not store.check([shape_key]):
        return None
    shape = json.loads(store.get(shape_key))
    latents = np.frombuffer(store.get(key), dtype=np.float32).reshape(shape).copy()
    store.delete_key(key)
    store.delete_key(shape_key)
    return latents


def put_timings(store: dist.Store, job_id: str, timings: dict[str, Any]) -> None:
    """The leader: its step clock's timings (`StepClock.timings`), measured on its own clock
    from the moment it took the job."""
    store.set(_key(job_id, "timings"), json.dumps(timings))


def take_timings(store: dist.Store, job_id: str, handed_over_s: float) -> dict[str, Any]:
    """Rank 0: the timings the leader put for `job_id` ({} if none), removed; its first step
    counted from when rank 0 began the job (`handed_over_s`: encoding and putting the tensors;
    the leader's pick-up of the message, at most one idle poll, is not counted)."""
    key = _key(job_id, "timings")
    if not store.check([key]):
        return {}
    timings = json.loads(store.get(key))
    store.delete_key(key)
    if "first_step_start_s" in timings:
        timings["first_step_start_s"] = round(timings["first_step_start_s"] + handed_over_s, 4)
    return timings


class StoreReporter:
    """The leader of replica k > 0 reports its job (`job.LeaderHooks`) through the store."""

    def __init__(self, store: dist.Store, job_id: str):
        self.store, self.job_id = store, job_id

    def step(self, step: int) -> None:
        self.store.set(_key(self.job_id, "step"), str(step))

    def preview(self, png: bytes, step: int) -> None:
        self.store.set(_key(self.job_id, "preview"), png)
        self.store.set(_key(self.job_id, "preview_step"), str(step))

    def cancel_requested(self) -> bool:
        return self.store.check([_key(self.job_id, "cancel")])


class RemoteJob:
    """Rank 0's view of a job running on another replica (`poll` between reply checks)."""

    def __init__(self, store: dist.Store, job_id: str, tensor_names: list[str]):
        self.store, self.job_id, self.tensor_names = store, job_id, tensor_names
        self.step = 0
        self.preview: tuple[bytes, int] | None = None
        self._cancel_sent = False

    def poll(self, cancel_requested: bool) -> bool:
        """Read the leader's progress and pass on a cancel; True when the step moved on."""
        if cancel_requested and not self._cancel_sent:
            self.store.set(_key(self.job_id, "cancel"), "1")
            self._cancel_sent = True
        moved = False
        key = _key(self.job_id, "step")
        if self.store.check([key]):
            step = int(self.store.get(key))
            moved, self.step = step != self.step, step
        key = _key(self.job_id, "preview_step")
        if self.store.check([key]):
            step = int(self.store.get(key))
            if self.preview is None or step != self.preview[1]:
                self.preview = (self.store.get(_key(self.job_id, "preview")), step)
        return moved

    def clear(self) -> None:
        """Remove what is left of the job's keys (a failed job's tensors too)."""
        names = ["step", "cancel", "preview", "preview_step", "timings"]
        for name in names + [f"tensor/{n}" for n in self.tensor_names]:
            self.store.delete_key(_key(self.job_id, name))
