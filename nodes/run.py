"""Running one generation node's job on a backend (no ComfyUI import).

`generate` submits the request, reports steps, cancels the backend job when the caller says
so, and returns the frames (uint8), the mp4 and an info text. Every wait is bounded: each HTTP
call has a timeout, a job whose progress stalls fails, and a cancel that the backend does not
confirm in time still ends the wait.
"""

from __future__ import annotations

import io
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..backend.client.http import BackendError, Client, JobFailed, encode_image
from ..backend.client.summary import backend_summary, plan_text  # noqa: F401 (the node's plan)
from ..backend.contract import IMAGE_EDIT, model_tasks, task_name
from ..backend.request import is_unset, recipe_wins
from .params import AUTO_SIZE_FIELDS, TaskNode

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)


class Interrupted(Exception):
    """The caller asked to stop; the backend job was cancelled."""


@dataclass(frozen=True)
class Generation:
    frames: np.ndarray
    """(F, H, W, 3) uint8, exactly the backend's PNG frames."""
    video: bytes | None
    """The backend's mp4 (H.264) when the job made more than one frame."""
    fps: float
    job: dict[str, Any]
    info: str
    audio: tuple[np.ndarray, int] | None = None
    """The audio track generated with the video (LTX-2): float32 (channels, samples) in -1..1
    and its sample rate; None for models that make none."""


def build_request(
    node: TaskNode,
    values: dict[str, Any],
    image_png: bytes | None = None,
    more_pngs: tuple[bytes, ...] = (),
) -> dict:
    """The body of `POST /v1/jobs` from a node's widget values (the backend validates it);
    `more_pngs`: the optional IMAGE inputs after `image` (an edit's `images`)."""
    if node.needs_image and image_png is None:
        what = "an image to edit" if node.task == IMAGE_EDIT else "a start image"
        raise ValueError(f"{node.node_id} needs {what}: connect an IMAGE to `image`")
    convert = {"int": int, "float": float, "text": str, "combo": str}
    body = {
        param.field: convert[param.kind](values[param.name])
        for param in node.params
        if param.name in values and not is_unset(param.field, values[param.name])
    }
    body = recipe_wins(body)
    if node.auto_size:  # 0: the backend sizes the output from the image
        for name in AUTO_SIZE_FIELDS:
            if body.get(name) == 0:
                del body[name]
    if image_png is not None:
        body["image"] = encode_image(image_png)
    if more_pngs:
        body["images"] = [encode_image(png) for png in more_pngs]
    return body


def check_task(node: TaskNode, info: dict[str, Any]) -> None:
    """ValueError unless the backend's model does what the node asks."""
    limits = info.get("limits", {})
    task = info.get("task") or limits.get("task")
    if node.task in model_tasks(task, bool(limits.get("accepts_image"))):
        return  # its own task, or the image task of a model that takes an image
    wanted = task_name(node.task)
    raise ValueError(
        f"{node.node_id} runs {wanted}, but the backend serves {info.get('model')!r} "
        f"({task}); choose {'an' if wanted[0] in 'aeiou' else 'a'} {wanted} model in "
        "ParaDiTBackend"
    )


class _Watch:
    """Client.wait callbacks: progress, cancel on request, and the bounds on waiting."""

    def __init__(
        self,
        on_step: Callable[[int, int], None],
        interrupted: Callable[[], bool],
        stall_timeout_s: float,
        cancel_timeout_s: float,
        preview: Callable[[dict[str, Any]], None] | None = None,
    ):
        self.on_step = on_step
        self.preview = preview
        self.interrupted = interrupted
        self.stall_timeout_s = stall_timeout_s
        self.cancel_timeout_s = cancel_timeout_s
        self.cancelled_at: float | None = None
        self._seen: tuple | None = None
        self._changed = time.monotonic()

    def should_cancel(self) -> bool:
        if self.cancelled_at is None and self.interrupted():
            self.cancelled_at = time.monotonic()
            return True
        return False

    def on_progress(self, job: dict[str, Any]) -> None:
        now = time.monotonic()
        progress = job.get("progress") or {}
        seen = (job["status"], progress.get("step"), job.get("queue_position"))
        if seen != self._seen:
            self._seen, self._changed = seen, now
        if self.cancelled_at is not None:
            if now - self.cancelled_at > self.cancel_timeout_s:
                log.warning(
                    "job %s: no cancel confirmation after %.0fs; giving up on it",
                    job["id"],
                    self.cancel_timeout_s,
                )
                raise Interrupted(f"job {job['id']} cancelled (not confirmed by the backend)")
            return
        if now - self._changed > self.stall_timeout_s:
            raise BackendError(
                f"job {job['id']} made no progress for {self.stall_timeout_s:.0f}s "
                f"(status {job['status']}, step {progress.get('step')}); is the backend stuck?"
            )
        if job["status"] == "running":
            self.on_step(int(progress.get("step", 0)), int(progress.get("total", 0)))
            if self.preview is not None:
                self.preview(job)


def generate(
    client: Client,
    node: TaskNode,
    request: dict[str, Any],
    *,
    on_step: Callable[[int, int], None] = lambda step, total: None,
    on_preview: Callable[[int, int, bytes], None] | None = None,
    interrupted: Callable[[], bool] = lambda: False,
    poll_s: float = 0.1,
    stall_timeout_s: float = 1800.0,
    cancel_timeout_s: float = 120.0,
) -> Generation:
    """Run `request` on the backend for `node`; Interrupted when `interrupted()` turned true.

    Raises BackendError (JobFailed) with the backend's own message when the job fails.
    """
    info = client.info()
    check_task(node, info)
    if interrupted():
        raise Interrupted("interrupted before the job was submitted")
    job_id = client.submit(request)
    preview = None if on_preview is None else _Previews(client, on_preview)
    watch = _Watch(on_step, interrupted, stall_timeout_s, cancel_timeout_s, preview)
    try:
        job = client.wait(
            job_id, poll_s=poll_s, on_progress=watch.on_progress, should_cancel=watch.should_cancel
        )
    except JobFailed as exc:
        if exc.job["status"] == "cancelled" and watch.cancelled_at is not None:
            raise Interrupted(f"job {job_id} cancelled") from None
        raise
    except BackendError:
        _cancel_quietly(client, job_id)
        raise
    frames, video = fetch_outputs(client, job)
    fps = (job.get("request") or {}).get("fps") or info.get("limits", {}).get("fps", 16)
    audio = wav_track(client.audio(job["id"])) if "audio.wav" in job.get("files", ()) else None
    return Generation(frames, video, fps, job, describe(info, job), audio)


class _Previews:
    """Fetches the backend's preview PNG whenever a newer one exists (best effort)."""

    def __init__(self, client: Client, show: Callable[[int, int, bytes], None]):
        self.client, self.show, self.step = client, show, 0

    def __call__(self, job: dict[str, Any]) -> None:
        step = int(job.get("preview_step") or 0)
        if step <= self.step:
            return
        self.step = step
        try:
            png = self.client.preview(job["id"])
        except BackendError as exc:  # a missing preview never fails the job
            log.debug("no preview for job %s: %s", job["id"], exc)
            return
        self.show(step, int(job["progress"]["total"]), png)


def _cancel_quietly(client: Client, job_id: str) -> None:
    """Best effort, so a stalled or abandoned job does not keep the group busy."""
    try:
        client.cancel(job_id)
    except BackendError as exc:
        log.debug("could not cancel job %s: %s", job_id, exc)


def fetch_outputs(client: Client, job: dict[str, Any]) -> tuple[np.ndarray, bytes | None]:
    """The finished job's frames as (F, H, W, 3) uint8, and its mp4 when it has one."""
    from PIL import Image

    frames = []
    for index in range(job["num_frames"]):
        with Image.open(io.BytesIO(client.frame(job["id"], index))) as img:
            frames.append(np.asarray(img.convert("RGB")))
    video = client.video(job["id"]) if job["num_frames"] > 1 else None
    return np.stack(frames), video


def wav_track(data: bytes) -> tuple[np.ndarray, int]:
    """The backend's 16-bit WAV as float32 (channels, samples) in -1..1 and its rate."""
    import wave

    with wave.open(io.BytesIO(data)) as wav:
        channels, rate = wav.getnchannels(), wav.getframerate()
        samples = np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2")
    return (samples.reshape(-1, channels).T / 32767.0).astype(np.float32), rate  # as written


def describe(info: dict[str, Any], job: dict[str, Any]) -> str:
    """A few lines for the node's info output: model, plan, request, timings."""
    request, timings = job.get("request", {}), job.get("timings", {})
    lines = [
        f"model: {info.get('model')} ({info.get('task')})",
        f"ranks: {info.get('world_size')} x {info.get('device')}; plan: "
        f"{plan_text(info.get('plan', {}))}",
        f"job {job['id']}: {request.get('width')}x{request.get('height')}, "
        f"{job.get('num_frames')} frame(s), {request.get('num_inference_steps')} steps, "
        f"guidance {request.get('guidance_scale')}, seed {request.get('seed')}",
    ]
    if timings:
        seconds = {key: timings.get(key, 0.0) for key in ("total_s", "encode_s", "decode_s")}
        lines.append(
            f"timings: total {seconds['total_s']:.2f}s, encode {seconds['encode_s']:.2f}s, "
            f"{timings.get('mean_step_s', 0.0):.3f}s/step, decode {seconds['decode_s']:.2f}s"
        )
    return "\n".join(lines)


# -- ComfyUI's IMAGE type: float (B, H, W, C) in 0..1 ------------------------------------------


def to_image_tensor(frames: np.ndarray) -> torch.Tensor:
    """uint8 (F, H, W, 3) frames as ComfyUI's IMAGE: float32 (F, H, W, 3) in 0..1."""
    import torch

    return torch.from_numpy(np.ascontiguousarray(frames)).to(torch.float32) / 255.0


def image_to_png(image: torch.Tensor) -> bytes:
    """The first image of a ComfyUI IMAGE batch as PNG bytes (RGB; alpha dropped)."""
    from PIL import Image

    if image.ndim == 4:
        image = image[0]
    if image.ndim != 3 or image.shape[-1] not in (1, 3, 4):
        raise ValueError(
            f"image must be an IMAGE tensor (B, H, W, C), got shape {tuple(image.shape)}"
        )
    pixels = (image[..., :3].detach().cpu().float().clamp(0, 1) * 255).round().byte().numpy()
    if pixels.shape[-1] == 1:
        pixels = np.repeat(pixels, 3, axis=-1)
    buffer = io.BytesIO()
    Image.fromarray(pixels, "RGB").save(buffer, format="PNG")
    return buffer.getvalue()
