"""The contract every part shares, torch-free: job states, tasks and a model's limits.

The HTTP server, the client, the CLI, the ComfyUI nodes and the Gradio app all import these
names, so a state or a task is spelled in one place. `Limits` is what one loaded model accepts
(reported by `GET /v1/info`). The request's fields are declared in `request.py`, and
`request.JobRequest` is one validated request.
"""

from __future__ import annotations

import base64
import binascii
import io
import math
from dataclasses import asdict, dataclass
from typing import Any

TEXT_TO_VIDEO, IMAGE_TO_VIDEO, TEXT_TO_IMAGE = "text-to-video", "image-to-video", "text-to-image"
IMAGE_EDIT = "edit"
"""Image edit: an instruction applied to one or more input images (Qwen-Image-Edit; Flux.2 with
reference images): the request's `image` is the image to edit, `images` more references."""
TASKS = (TEXT_TO_VIDEO, IMAGE_TO_VIDEO, TEXT_TO_IMAGE, IMAGE_EDIT)
"""What a model makes; `Limits.task` and `GET /v1/info`'s `task` are one of these."""

IMAGE_TASKS = (IMAGE_TO_VIDEO, IMAGE_EDIT)
"""The tasks that take an input image (the request's `image`)."""

IMAGE_TASK_OF = {TEXT_TO_VIDEO: IMAGE_TO_VIDEO, TEXT_TO_IMAGE: IMAGE_EDIT}
"""What a text model that accepts an input image (`Limits.accepts_image`) does with one: Wan
2.2 TI2V-5B and LTX-2 turn it into a video, Flux.2 edits it."""


def task_name(task: str) -> str:
    """A task as a sentence says it ("image edit" for `edit`)."""
    return "image edit" if task == IMAGE_EDIT else task


def model_tasks(task: str, accepts_image: bool) -> tuple[str, ...]:
    """The tasks a model serves: its own, and the image task of its kind when it takes an
    image without needing one."""
    if accepts_image and task in IMAGE_TASK_OF:
        return (task, IMAGE_TASK_OF[task])
    return (task,)


QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED = (
    "queued",
    "running",
    "succeeded",
    "failed",
    "cancelled",
)
JOB_STATES = (QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED)
FINAL_STATES = frozenset({SUCCEEDED, FAILED, CANCELLED})
"""A job in one of these states changes no more."""

MAX_SEED = 2**63 - 1


@dataclass(frozen=True)
class GuidanceTerm:
    """One guidance term a model's pipeline takes beside `guidance_scale`, as a request's
    `guidance_terms` sets it (LTX-2: spatio-temporal, modality-isolation, the rescale, the
    audio stream's own). Declared by the model's family; generic code reads only this."""

    name: str
    """The pipeline's argument (`stg_scale`), the key in the request's `guidance_terms`."""
    default: float | tuple[int, ...] | None
    """The value a job leaves out gets: paradit's own (the term off, so a job without
    `guidance_terms` runs as before); a tuple: the term is a list of block indices; None:
    the term follows `follows`."""
    help: str = ""
    low: float = 0.0
    """A number's least value (a term that does nothing below it starts there)."""
    high: float = 0.0
    """A number's greatest value (0: the model's `max_guidance`); a block list's highest
    index (the DiT's last block)."""
    follows: str = ""
    """The term whose value this one takes when left out or null: and the pipeline reads 0
    that way too, so 0 is refused where the followed term is not 0."""
    extra_pass: bool = False
    """A value other than the default costs one DiT call per step (at batch 1, beside the
    CFG pair)."""

    @property
    def blocks(self) -> bool:
        """The term is a list of block indices, not a number."""
        return isinstance(self.default, tuple)


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
    min_steps: int = 1
    """Qwen-Image's scheduler (`shift_terminal`) divides by zero at 1 step: 2."""
    sigmas: tuple[float, ...] = ()
    """The model's own sigma schedule, when it runs only that one (LTX-2 distilled: diffusers'
    `DISTILLED_SIGMA_VALUES`): every job takes exactly len(sigmas) steps (min_steps and
    max_steps are that); () for the models whose scheduler spaces any step count."""
    samplers: tuple[str, ...] = ()
    """The samplers a job may name besides `default` (ComfyUI's names, backend/sampling);
    () for a model that runs only its own scheduler."""
    schedulers: tuple[str, ...] = ()
    """The noise-level spacings a job may name besides `default` (ComfyUI's names)."""
    default_shift: float = 0.0
    """The flow shift a job that names a sampler but no shift gets (the model's own
    scheduler's); 0 when the model's shift follows the image size (then a job gives one)."""
    two_experts: bool = False
    """A high- and a low-noise expert (Wan 2.2 A14B): `guidance_scale_low` and `switch_step`
    apply."""
    max_guidance: float = 30.0
    max_prompt_chars: int = 4000
    max_image_bytes: int = 16 * 1024 * 1024
    max_image_pixels: int = 4096 * 4096
    needs_image: bool = False
    accepts_image: bool = False
    """The model takes a start image but does not need one: text- and image-to-video in one
    model (Wan 2.2 TI2V-5B), whose `task` is text-to-video; a text-to-image model that also
    edits (Flux.2 with reference images). `needs_image` implies it."""
    last_frame: bool = False
    """The model also takes the frame a video ends on (a request's `last_image`), after the
    start image (`image`): LTX-2's keyframe conditions, MiniMax H3's first/last frame."""
    image_strength: bool = False
    """The model samples its start image at a strength below 1 (a request's `image_strength`)
    as ComfyUI's `LTXVImgToVideoInplace` does: under a noise mask of 1 - strength (LTX-2)."""
    image_crf: int | None = None
    """The H.264 CRF the model's start images (and keyframes) are re-compressed at before they
    condition it, as it was trained (LTX-2: 33, LTX-2.5: 18), when not None: a request's
    `image_crf` may set another (0: the image as sent); None: the model takes images as sent
    (the field is refused)."""
    comfy_decode_tiles: bool = False
    """The model's VAE decodes a job in ComfyUI's `VAEDecodeTiled` tiles when it asks
    (`decode_tiles`), pixels ComfyUI's tiled decode makes and its whole decode does not: LTX-2.5's
    diffusion video decoder, each tile drawing its own seed-0 noise."""
    last_frame_alone: bool = False
    """With `last_frame`: a request may give the last frame without a start image (MiniMax
    H3's fl2va)."""
    min_image_side: int = 1
    """Input images must be at least this many pixels wide and high (Flux.2: 64)."""
    max_images: int = 1
    """Input images one request may give (`image` plus `images`): an edit model's references
    (Qwen-Image-Edit-2509: 3; Flux.2: 10); 1 for a start image."""
    edit_pixels: int = 0
    """An edit's default output area: when the request gives no width and height, the output
    has the first image's aspect at this many pixels (Qwen-Image-Edit: 1024x1024), in steps
    of size_multiple. 0: the model's default size, as for text."""
    edit_keeps_smaller: bool = False
    """An image smaller than edit_pixels keeps its own size (Flux.2) instead of being scaled up."""
    default_width: int = 64
    default_height: int = 64
    default_frames: int = 5
    default_steps: int = 4
    default_guidance: float = 5.0
    fps: int = 16
    """The frame rate a job runs at (its `video.mp4`'s) when the request gives no `fps`."""
    fps_range: tuple[float, float] = ()
    """The frame rates (low, high) a request's `fps` may ask for, where the model's pipeline
    takes one (LTX-2: its positional embeddings in seconds and its audio's length follow
    it); (): the model runs at `fps` only (a request's `fps` is refused unless it is that)."""
    min_tokens: int = 1
    """The sequence-parallel degree: every rank needs at least one token."""
    max_tokens: int = 2**17
    """Latent tokens of one job (Wan 720p x 81 frames is 75,600)."""
    temporal_patch: int = 1
    """Latent frames per token (CogVideoX 1.5 patches 2; an odd count is padded to even)."""
    frames_per_latent: float = 0.0
    """Frames per latent frame where the VAE does not make one of every frame_multiple
    (MiniMax H3's makes 5 of every 17: 3.4; its latent frames counted up); 0: frame_multiple."""
    fixed_width: int = 0
    fixed_height: int = 0
    """The only size the model takes, when not 0 (CogVideoX 1.0 image-to-video's learned
    positional embeddings are for 720x480 only)."""
    step_cache: bool = False
    """The loaded model has a step cache (a request's `cache`): its family declares one and
    the cache hooks fit its transformer's blocks. Without it a request with a `cache` is
    refused at submit, `serve --cache` at start, and the frontends do not offer it."""
    plain_cfg: bool = False
    """The model's pipeline combines its CFG branches other than plainly (Qwen-Image rescales
    to the conditional branch's norm) and a job may ask for plain CFG instead (`cfg_mode`
    plain, as ComfyUI's samplers guide: backend/sampling/guidance.py)."""
    cfg_norm_pixels: int = 0
    """The latent pixels one packed token of the model's DiT holds (Qwen-Image: 2x2, its
    channels first), when above 0: a job may ask for ComfyUI's CFGNorm (`cfg_mode` norm:
    backend/sampling/guidance.py), whose norm runs over each pixel's channels."""
    second_prompt: bool = False
    """The model has a second text encoder a request may give its own prompt (`prompt_2`:
    Flux.1's T5, `prompt` then going to CLIP-L alone, as ComfyUI's CLIPTextEncodeFlux)."""
    image_preps: tuple[str, ...] = ()
    """The ways besides its pipeline's own that the model prepares a job's input images
    (`image_prep`): "comfyui", as ComfyUI's nodes resize and encode them (Qwen-Image-Edit)."""
    reference_methods: tuple[str, ...] = ()
    """How a job may ask the edit's DiT to condition its reference tokens
    (`reference_method`): "index", "index_timestep_zero" (Qwen-Image-Edit)."""
    two_stage: bool = False
    """The family runs two-stage jobs (a request's `upscale`: LTX-2)."""
    upscale_factors: tuple[int, ...] = ()
    """What the latent upscaler loaded with `--upscaler` multiplies width and height by; ()
    without one (a request's `upscale` is refused then)."""
    guidance_terms: tuple[GuidanceTerm, ...] = ()
    """The guidance terms beside `guidance_scale` a request's `guidance_terms` may set (LTX-2's
    spatio-temporal and modality guidance, the rescale, the audio's own scale); () for a
    model whose pipeline has none (the field is refused then)."""
    audio_latents_per_second: float = 0.0
    """The model's audio track's latent frames a second (LTX-2: 25), when above 0: a request
    may set the audio latent's length (`audio_latent_frames`: ComfyUI's LTXVEmptyLatentAudio
    counts them otherwise than the pipeline does); 0: a model without one (the field is
    refused)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def tokens(self, width: int, height: int, num_frames: int) -> int:
        """Latent tokens the DiT sees: one per size_multiple x size_multiple pixels per
        latent frame (the VAE's downsampling times the patch or packing size)."""
        latent_frames = (num_frames - 1) // self.frame_multiple + 1 if self.frame_multiple else 1
        if self.frames_per_latent:
            latent_frames = math.ceil(num_frames / self.frames_per_latent)
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


def decode_image_png(data: str, limits: Limits, name: str = "image") -> bytes:
    """Check a base64 image from a request and return its bytes; raise ValueError if unusable
    (`name`: the field, e.g. "images[1]", as the message names it)."""
    return _decode_image(data, limits, name)[0]


def image_size(data: str, limits: Limits, name: str = "image") -> tuple[int, int]:
    """A request's base64 image's (width, height), checked as `decode_image_png` checks it."""
    return _decode_image(data, limits, name)[1]


def _decode_image(data: str, limits: Limits, name: str) -> tuple[bytes, tuple[int, int]]:
    from PIL import Image  # local: keep `paradit` import cheap

    if not isinstance(data, str):
        raise ValueError(f"{name} must be a base64-encoded PNG or JPEG string")
    if data.startswith("data:"):
        data = data.split(",", 1)[-1]
    if len(data) > limits.max_image_bytes * 4 // 3 + 4:
        raise ValueError(f"{name} must be at most {limits.max_image_bytes} bytes")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{name} is not valid base64") from None
    try:
        with Image.open(io.BytesIO(raw)) as img:
            if img.width * img.height > limits.max_image_pixels:
                raise ValueError(f"{name} must have at most {limits.max_image_pixels} pixels")
            if min(img.size) < limits.min_image_side:
                raise ValueError(
                    f"{name} must be at least {limits.min_image_side} pixels wide and high for "
                    f"this model, got {img.width}x{img.height}"
                )
            img.load()  # decode every pixel: a good CRC over corrupt data is still corrupt
            size = img.size
    except ValueError:
        raise
    except Exception:  # PIL raises many types for corrupt files
        raise ValueError(
            f"{name} could not be decoded: send a PNG or JPEG, base64-encoded"
        ) from None
    return raw, size


def edit_size(image_width: int, image_height: int, limits: Limits) -> tuple[int, int]:
    """An edit's default output size: the image's aspect at `limits.edit_pixels` (not scaled
    up when `edit_keeps_smaller` and the image is smaller), each side rounded to a multiple of
    size_multiple within min_size..max_size."""
    scale = math.sqrt(limits.edit_pixels / (image_width * image_height))
    if limits.edit_keeps_smaller:
        scale = min(scale, 1.0)
    step = limits.size_multiple

    def side(pixels: int) -> int:
        rounded = round(pixels * scale / step) * step
        return max(limits.min_size, min(limits.max_size, rounded))

    return side(image_width), side(image_height)


def reference_sizes(images: list[str], limits: Limits) -> tuple[tuple[int, int], ...]:
    """The (width, height) each input image of an edit has when the pipeline VAE-encodes it
    and appends its tokens to the output's: Qwen-Image-Edit's about 1024x1024 pixels at the
    image's aspect, Flux.2's own size (scaled down to 1024x1024 pixels when larger), as
    `edit_size` sizes them. Empty for a model that does not edit (`edit_pixels` 0): a start
    image is not a reference. The images are base64 ones a request already checked."""
    if not limits.edit_pixels:
        return ()
    from PIL import Image  # local: keep `paradit` import cheap

    sizes = []
    for data in images:
        raw = base64.b64decode(data.split(",", 1)[-1])
        with Image.open(io.BytesIO(raw)) as img:  # the header only: the size
            sizes.append(edit_size(img.width, img.height, limits))
    return tuple(sizes)
