"""The contract every part shares, torch-free: job fields and their bounds, job states, tasks.

The HTTP server, the client, the CLI, the ComfyUI nodes and the Gradio app all import these
names, so a field, a state or a task is spelled in one place. `Limits` is what one loaded
model accepts (reported by `GET /v1/info`); `JobRequest` is one validated request.
"""

from __future__ import annotations

import base64
import binascii
import io
import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

TEXT_TO_VIDEO, IMAGE_TO_VIDEO, TEXT_TO_IMAGE = "text-to-video", "image-to-video", "text-to-image"
TASKS = (TEXT_TO_VIDEO, IMAGE_TO_VIDEO, TEXT_TO_IMAGE)
"""What a model makes; `Limits.task` and `GET /v1/info`'s `task` are one of these."""

JOB_STATES = ("queued", "running", "succeeded", "failed", "cancelled")
FINAL_STATES = frozenset({"succeeded", "failed", "cancelled"})
"""A job in one of these states changes no more."""

MAX_SEED = 2**63 - 1


@dataclass(frozen=True)
class Limits:
    """What one model accepts. Reported by `GET /v1/info` and enforced on every request."""

    task: str
    """One of TASKS."""
    size_multiple: int
    min_size: int
    max_size: int
    frame_multiple: int
    """Frame counts must be frame_multiple * k + 1 (Wan: 4k+1); 0 means single image only."""
    max_frames: int
    max_steps: int = 200
    max_guidance: float = 30.0
    max_prompt_chars: int = 4000
    max_image_bytes: int = 16 * 1024 * 1024
    max_image_pixels: int = 4096 * 4096
    needs_image: bool = False
    default_width: int = 64
    default_height: int = 64
    default_frames: int = 5
    default_steps: int = 4
    default_guidance: float = 5.0
    fps: int = 16
    min_tokens: int = 1
    """The sequence-parallel degree: every rank needs at least one token."""
    max_tokens: int = 2**17
    """Latent tokens of one job (Wan 720p x 81 frames is 75,600)."""
    temporal_patch: int = 1
    """Latent frames per token (CogVideoX 1.5 patches 2; an odd count is padded to even)."""
    fixed_width: int = 0
    fixed_height: int = 0
    """The only size the model takes, when not 0 (CogVideoX 1.0 image-to-video's learned
    positional embeddings are for 720x480 only)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def tokens(self, width: int, height: int, num_frames: int) -> int:
        """Latent tokens the DiT sees: one per size_multiple x size_multiple pixels per
        latent frame (the VAE's downsampling times the patch or packing size)."""
        latent_frames = (num_frames - 1) // self.frame_multiple + 1 if self.frame_multiple else 1
        token_frames = -(-latent_frames // self.temporal_patch)
        return token_frames * (width // self.size_multiple) * (height // self.size_multiple)

    def size_rule(self) -> str:
        if self.fixed_width:
            return f"this model only takes {self.fixed_width}x{self.fixed_height}"
        return (
            f"width and height must be between {self.min_size} and {self.max_size} "
            f"and multiples of {self.size_multiple}"
        )

    def frames_rule(self) -> str:
        if self.frame_multiple == 0:
            return "num_frames must be 1 for this model (it makes images)"
        return (
            f"num_frames must be {self.frame_multiple}k+1 between 1 and {self.max_frames} "
            f"(e.g. 1, {self.frame_multiple + 1}, {2 * self.frame_multiple + 1}, ...)"
        )


def _need_int(body: dict, name: str, default: int, low: int, high: int, rule: str = "") -> int:
    value = body.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{name} must be between {low} and {high}{rule}, got {value}")
    return value


def _need_str(body: dict, name: str, default: str, max_chars: int) -> str:
    value = body.get(name, default)
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, got {type(value).__name__}")
    if len(value) > max_chars:
        raise ValueError(f"{name} must be at most {max_chars} characters, got {len(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{name} must be valid Unicode text (no lone surrogates)") from None
    return value


def decode_image_png(data: str, limits: Limits) -> bytes:
    """Check a base64 image from a request and return its bytes; raise ValueError if unusable."""
    from PIL import Image  # local: keep `paradit` import cheap

    if not isinstance(data, str):
        raise ValueError("image must be a base64-encoded PNG or JPEG string")
    if data.startswith("data:"):
        data = data.split(",", 1)[-1]
    if len(data) > limits.max_image_bytes * 4 // 3 + 4:
        raise ValueError(f"image must be at most {limits.max_image_bytes} bytes")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("image is not valid base64") from None
    try:
        with Image.open(io.BytesIO(raw)) as img:
            if img.width * img.height > limits.max_image_pixels:
                raise ValueError(f"image must have at most {limits.max_image_pixels} pixels")
            img.load()  # decode every pixel: a good CRC over corrupt data is still corrupt
    except ValueError:
        raise
    except Exception:  # PIL raises many types for corrupt files
        raise ValueError("image could not be decoded: send a PNG or JPEG, base64-encoded") from None
    return raw


JOB_FIELDS = (
    "prompt",
    "negative_prompt",
    "width",
    "height",
    "num_frames",
    "num_inference_steps",
    "guidance_scale",
    "seed",
    "image",
)


@dataclass(frozen=True)
class JobRequest:
    """One validated generation request (the body of `POST /v1/jobs`)."""

    prompt: str
    negative_prompt: str = ""
    width: int = 64
    height: int = 64
    num_frames: int = 5
    num_inference_steps: int = 4
    guidance_scale: float = 5.0
    seed: int = 0
    image: str | None = field(default=None, repr=False)
    """Base64 image (PNG/JPEG) for image-to-video; kept encoded so the spec stays JSON."""

    @classmethod
    def from_body(cls, body: Any, limits: Limits) -> JobRequest:
        """Validate a JSON body against `limits`; raise ValueError saying what is allowed."""
        if not isinstance(body, dict):
            raise ValueError("the body must be a JSON object")
        unknown = sorted(set(body) - set(JOB_FIELDS))
        if unknown:
            raise ValueError(f"unknown fields {unknown}; allowed: {list(JOB_FIELDS)}")
        prompt = _need_str(body, "prompt", "", limits.max_prompt_chars)
        if not prompt.strip():
            raise ValueError("prompt must be a non-empty string")
        negative = _need_str(body, "negative_prompt", "", limits.max_prompt_chars)
        mult = limits.size_multiple
        size_rule = f" and a multiple of {mult}"
        width = _need_int(body, "width", limits.default_width, limits.min_size, limits.max_size)
        height = _need_int(body, "height", limits.default_height, limits.min_size, limits.max_size)
        for name, value in (("width", width), ("height", height)):
            if value % mult:
                raise ValueError(
                    f"{name} must be between {limits.min_size} and {limits.max_size}{size_rule}, "
                    f"got {value}"
                )
        if limits.fixed_width and (width, height) != (limits.fixed_width, limits.fixed_height):
            raise ValueError(f"{limits.size_rule()}, got {width}x{height}")
        frames = cls._frames(body, limits)
        steps = _need_int(body, "num_inference_steps", limits.default_steps, 1, limits.max_steps)
        guidance = body.get("guidance_scale", limits.default_guidance)
        if isinstance(guidance, bool) or not isinstance(guidance, (int, float)):
            raise ValueError(f"guidance_scale must be a number, got {guidance!r}")
        guidance = float(guidance)
        if not math.isfinite(guidance) or not 0.0 <= guidance <= limits.max_guidance:
            raise ValueError(f"guidance_scale must be between 0 and {limits.max_guidance}")
        tokens = limits.tokens(width, height, frames)
        if not limits.min_tokens <= tokens <= limits.max_tokens:
            raise ValueError(
                f"width x height x frames gives {tokens} latent tokens; this backend takes "
                f"{limits.min_tokens} to {limits.max_tokens}"
            )
        seed = _need_int(body, "seed", 0, 0, MAX_SEED)
        image = body.get("image")
        if limits.needs_image and not image:
            raise ValueError("image is required for image-to-video: send a base64 PNG or JPEG")
        if image is not None and not limits.needs_image:
            raise ValueError(f"image is only accepted by image-to-video models ({limits.task})")
        if image is not None:
            decode_image_png(image, limits)
        return cls(prompt, negative, width, height, frames, steps, guidance, seed, image)

    @staticmethod
    def _frames(body: dict, limits: Limits) -> int:
        if limits.frame_multiple == 0:
            frames = body.get("num_frames", 1)
            if frames != 1 or isinstance(frames, bool):
                raise ValueError(limits.frames_rule() + f", got {frames!r}")
            return 1
        frames = _need_int(
            body,
            "num_frames",
            limits.default_frames,
            1,
            limits.max_frames,
            f" and of the form {limits.frame_multiple}k+1",
        )
        if (frames - 1) % limits.frame_multiple:
            raise ValueError(limits.frames_rule() + f", got {frames}")
        return frames

    @property
    def uses_cfg(self) -> bool:
        """Classifier-free guidance needs a second (unconditional) branch."""
        return self.guidance_scale > 1.0

    def to_dict(self, *, with_image: bool = True) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        if not with_image:
            data["image"] = None if self.image is None else f"<{len(self.image)} base64 chars>"
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobRequest:
        """Rebuild a request that was already validated (control-plane messages)."""
        return cls(**{f.name: data[f.name] for f in fields(cls)})
