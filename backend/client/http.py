"""A small HTTP client for a paradit backend (stdlib only, but numpy for `latents`), used by the
CLI, ComfyUI and the UI."""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..contract import FINAL_STATES


class BackendError(RuntimeError):
    """The backend answered with an error, or could not be reached."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class JobFailed(BackendError):
    """The job ended as failed or cancelled."""

    def __init__(self, message: str, job: dict[str, Any]):
        super().__init__(message)
        self.job = job


def encode_image(path_or_bytes: str | Path | bytes) -> str:
    """Base64 for the `image` field, from a file path or raw PNG/JPEG bytes."""
    raw = path_or_bytes if isinstance(path_or_bytes, bytes) else Path(path_or_bytes).read_bytes()
    return base64.b64encode(raw).decode("ascii")


class Client:
    def __init__(self, url: str, token: str | None = None, timeout_s: float = 30.0):
        self.url = url.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s

    # -- plumbing -------------------------------------------------------------------------

    def _request(self, method: str, path: str, body: dict | None = None) -> bytes:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                return resp.read()
        except urllib.error.HTTPError as exc:
            raise BackendError(_error_text(exc), exc.code) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise BackendError(f"cannot reach the backend at {self.url}: {reason}") from None

    def _json(self, method: str, path: str, body: dict | None = None) -> Any:
        return json.loads(self._request(method, path, body))

    # -- the API --------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        """The health document; raises BackendError (status 503) when unhealthy."""
        return self._json("GET", "/health")

    def is_healthy(self) -> bool:
        try:
            self.health()
            return True
        except BackendError:
            return False

    def info(self) -> dict[str, Any]:
        return self._json("GET", "/v1/info")

    def loras(self) -> list[str]:
        """The LoRA names the backend's jobs may use (`GET /v1/loras`)."""
        return [item["name"] for item in self._json("GET", "/v1/loras")["loras"]]

    def submit(self, request: dict[str, Any]) -> str:
        return self._json("POST", "/v1/jobs", request)["id"]

    def submit_workflow(self, workflow: dict[str, Any], dry_run: bool = False) -> dict[str, Any]:
        """`POST /v1/workflows`: a ComfyUI workflow (UI or API format) as a job of this
        backend: {id, status, request}, or with `dry_run` what `workflow import --json`
        prints; BackendError (422) naming the node or file the server refuses."""
        return self._json("POST", "/v1/workflows" + ("?dry_run=1" if dry_run else ""), workflow)

    def job(self, job_id: str) -> dict[str, Any]:
        return self._json("GET", f"/v1/jobs/{job_id}")

    def jobs(self) -> list[dict[str, Any]]:
        return self._json("GET", "/v1/jobs")["jobs"]

    def cancel(self, job_id: str) -> dict[str, Any]:
        return self._json("POST", f"/v1/jobs/{job_id}/cancel")

    def frame(self, job_id: str, index: int) -> bytes:
        return self._request("GET", f"/v1/jobs/{job_id}/frames/{index}")

    def preview(self, job_id: str) -> bytes:
        """The latest preview PNG of a job (404 BackendError before the first step)."""
        return self._request("GET", f"/v1/jobs/{job_id}/preview")

    def latents(self, job_id: str):
        """A finished job's final latents as a float32 numpy array (404 BackendError unless
        the backend runs with --save-latents)."""
        import io

        import numpy as np

        raw = self._request("GET", f"/v1/jobs/{job_id}/latents")
        return np.load(io.BytesIO(raw), allow_pickle=False)

    def audio_latents(self, job_id: str):
        """A finished job's final audio latents as a float32 numpy array (404 BackendError
        unless the backend runs with --save-latents and the model makes audio)."""
        import io

        import numpy as np

        raw = self._request("GET", f"/v1/jobs/{job_id}/audio_latents")
        return np.load(io.BytesIO(raw), allow_pickle=False)

    def video(self, job_id: str) -> bytes:
        return self._request("GET", f"/v1/jobs/{job_id}/video")

    def audio(self, job_id: str) -> bytes:
        """A finished job's audio track as 16-bit WAV (LTX-2; 404 BackendError for a job of
        a model that makes none)."""
        return self._request("GET", f"/v1/jobs/{job_id}/audio")

    def record(self, job_id: str) -> dict[str, Any]:
        return self._json("GET", f"/v1/jobs/{job_id}/record")

    def wait(
        self,
        job_id: str,
        *,
        poll_s: float = 0.1,
        timeout_s: float | None = None,
        on_progress: Callable[[dict[str, Any]], None] | None = None,
        should_cancel: Callable[[], bool] | None = None,
    ) -> dict[str, Any]:
        """Poll until the job ends; JobFailed unless it succeeded.

        `on_progress` sees every polled job document; when `should_cancel` turns true the job
        is cancelled on the backend and this waits for it to stop.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        cancel_sent = False
        while True:
            job = self.job(job_id)
            if on_progress is not None:
                on_progress(job)
            if job["status"] == "succeeded":
                return job
            if job["status"] in FINAL_STATES:
                reason = job.get("error") or job["status"]
                raise JobFailed(f"job {job_id} {job['status']}: {reason}", job)
            if should_cancel is not None and not cancel_sent and should_cancel():
                self.cancel(job_id)
                cancel_sent = True
            if deadline is not None and time.monotonic() > deadline:
                raise BackendError(f"job {job_id} did not finish within {timeout_s:.0f}s")
            time.sleep(poll_s)

    def download(self, job: dict[str, Any], out_dir: str | Path) -> Path:
        """Write a finished job's outputs (video or image, frames, audio, the saved latents,
        job.json) to `out_dir`."""
        out = Path(out_dir)
        (out / "frames").mkdir(parents=True, exist_ok=True)
        job_id = job["id"]
        for index in range(job["num_frames"]):
            (out / "frames" / f"{index:06d}.png").write_bytes(self.frame(job_id, index))
        if job["num_frames"] > 1:
            (out / "video.mp4").write_bytes(self.video(job_id))
        else:
            (out / "image.png").write_bytes((out / "frames" / "000000.png").read_bytes())
        record = self.record(job_id)
        if "audio.wav" in record.get("files", ()):
            (out / "audio.wav").write_bytes(self.audio(job_id))
        for name in ("latents", "audio_latents"):
            if f"{name}.npy" in record.get("files", ()):
                raw = self._request("GET", f"/v1/jobs/{job_id}/{name}")
                (out / f"{name}.npy").write_bytes(raw)
        (out / "job.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
        return out

    def generate(self, request: dict[str, Any], out_dir: str | Path, **wait_kwargs) -> dict:
        """Submit, wait and download; returns the finished job document."""
        job = self.wait(self.submit(request), **wait_kwargs)
        self.download(job, out_dir)
        return job


def _error_text(exc: urllib.error.HTTPError) -> str:
    try:
        return json.loads(exc.read()).get("error") or f"HTTP {exc.code}"
    except (ValueError, AttributeError, OSError):
        return f"HTTP {exc.code} {exc.reason}"
