"""MiniMax H3 text-to-audio-video (`MiniMaxH3ModularPipeline`).

What differs from the other video families:

- diffusers has H3 only as a modular pipeline (blocks, no `__call__` with a step callback):
  paradit drives diffusers' own blocks (`steps.py`): the text encoder block on rank 0
  (`encode`), the core denoise blocks with a step-callback block added to the loop on every
  rank (`pipeline_for_job`), and the decode as diffusers' decode blocks do it (`tiled_decode`,
  `audio`).
- One packed 1-D sequence holds the text, audio and video rows, with per-row timesteps and
  modality tags; one DiT call per step steps two schedulers (video shift 12, audio shift 3).
- Guidance-distilled: no negative prompt, no CFG (`supports_cfg` False): every rank runs the
  one branch, the sequence split over all of them.
- Steps: a job's `num_inference_steps` are its DiT calls; diffusers' H3 scheduler counts
  one more (its sigma grid's points, the terminal 0 included): `grid_points`.
- Frames: 24 fps, 17n+5 frames between 5 and 15 seconds (124 to 351), sizes multiples of 32.
- The video VAE decodes with its spatial tiling on, as released (the released frames are
  the blended-tile ones): paradit's `--vae-tiling` does not change it. Its temporal clips
  are decoded apart (`decode.py`), dealt over the ranks, and joined on the leader as the VAE
  joins them (byte for byte). The audio (stereo, the mono audio VAE taking the two channels
  as two items) decodes on the leader.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....audio import Audio
from ....contract import Limits
from ....request import JobRequest
from ..base import Family, Tensors, TiledDecode
from . import comfyui_prep

FPS = 24
MIN_SECONDS, MAX_SECONDS = 5, 15
FRAMES_PER_CHUNK, LATENTS_PER_CHUNK = 17, 5
DEFAULT_WIDTH, DEFAULT_HEIGHT, DEFAULT_FRAMES, DEFAULT_STEPS = 1344, 768, 124, 30
TINY_SIZE, TINY_STEPS = 32, 2
ENCODED = ("prompt_embeds", "text_token_tags")
KEYFRAME = "condition_latents_"
"""`encode`'s tensors of the keyframes' latents, `condition_latents_0`, `_1`, ... in packed
order (the first frame's, then the last's)."""


def check_frames(num_frames: int) -> None:
    """H3's frame rule (its video VAE's 17n+5, 5 to 15 s at 24 fps), before the steps."""
    low, high = MIN_SECONDS * FPS, MAX_SECONDS * FPS
    if num_frames % FRAMES_PER_CHUNK != LATENTS_PER_CHUNK or not low <= num_frames <= high:
        raise ValueError(
            f"MiniMax H3 takes 17n+5 frames between {low} and {high} (5 to 15 s at 24 fps; "
            f"e.g. 124, 141, 243), got {num_frames}"
        )


def grid_points(steps: int) -> int:
    """diffusers' `num_inference_steps` for a job of `steps` DiT calls: H3's scheduler counts
    the points of its sigma grid, the terminal 0 included, and makes one DiT call fewer (30
    gives 29). A paradit job's steps are its DiT calls, as for every other family (and
    ComfyUI's KSampler): the job's step callback, progress, last preview and final latents
    (`--save-latents`) come at its `num_inference_steps`-th call."""
    if steps < 1:
        raise ValueError(f"MiniMax H3 takes at least 1 step, got {steps}")
    return steps + 1


def anchors(request: JobRequest) -> tuple[str, ...]:
    """The ends of the video the request's keyframes hold, in packed order (the first
    frame's, then the last's), as diffusers' resize step names them."""
    return tuple(
        end
        for end, image in (("first", request.image), ("last", request.last_image))
        if image is not None
    )


def keyframes(request: JobRequest) -> dict[str, Any]:
    """The request's keyframes as diffusers' fl2va blocks take them (`image`, `last_image`:
    RGB PIL images at their own size); empty for text alone."""
    return {
        name: decoded_image(data)
        for name, data in (("image", request.image), ("last_image", request.last_image))
        if data is not None
    }


def decoded_image(data: str) -> Any:
    """A base64 PNG or JPEG (a data: URL too) as an RGB PIL image at its own size."""
    import base64
    import io

    from PIL import Image

    with Image.open(io.BytesIO(base64.b64decode(data.split(",", 1)[-1]))) as img:
        return img.convert("RGB")


LAST_IMAGE_COMFYUI = (
    "image_prep comfyui with a last_image: ComfyUI's MiniMaxH3ImageToVideo centre-crops the "
    "last frame to the canvas's aspect and then scales it, paradit's H3 (diffusers' resize "
    "step) scales it to cover the canvas and then crops: other pixels; send the last_image "
    "without image_prep"
)


def _comfyui_encode(pipe: Any, request: JobRequest) -> Tensors:
    """The first frame presented, encoded as ComfyUI's nodes do (`comfyui_prep`): diffusers'
    resize and fl2va text steps with ComfyUI's vision input, ComfyUI's keyframe latents."""
    from .steps import keyframe_encoder

    if request.last_image is not None:
        raise ValueError(LAST_IMAGE_COMFYUI)
    out = keyframe_encoder(pipe, comfyui=True)(
        prompt=request.prompt,
        **keyframes(request),
        height=request.height,
        width=request.width,
        output=[*ENCODED, "keyframes"],
    )
    tensors = {name: out[name] for name in ENCODED}
    for index, image in enumerate(out["keyframes"]):
        tensors[f"{KEYFRAME}{index}"] = comfyui_prep.keyframe_latents(
            pipe.vae, image, pipe.pixel_mean, pipe.pixel_std
        )
    return tensors


class MiniMaxH3(Family):
    """Text-to-audio-video on diffusers' blocks (the module's docstring)."""

    def model_limits(self, pipe: Any, *, tiny: bool) -> Limits:
        multiple = int(pipe.canvas_multiple)
        return Limits(
            task=self.task,
            size_multiple=multiple,
            min_size=multiple,
            max_size=2048,
            frame_multiple=1,  # the 17n+5 rule is `check_frames`'
            frames_per_latent=FRAMES_PER_CHUNK / LATENTS_PER_CHUNK,  # 17 frames: 5 latent
            max_frames=MAX_SECONDS * FPS,
            default_width=TINY_SIZE if tiny else DEFAULT_WIDTH,
            default_height=TINY_SIZE if tiny else DEFAULT_HEIGHT,
            default_frames=DEFAULT_FRAMES,
            default_steps=TINY_STEPS if tiny else DEFAULT_STEPS,
            default_guidance=1.0,
            fps=FPS,
            accepts_image=True,  # the first frame: fl2va
            last_frame=True,  # and the last (`last_image`)
            last_frame_alone=True,  # without the first too
        )

    def supports_cfg(self, pipe: Any) -> bool:
        return False  # guidance-distilled: one forward per step

    def encode(self, pipe: Any, request: JobRequest, device: torch.device) -> Tensors:
        """The prompt's hidden states (rank 0); with a first or last frame, diffusers' fl2va
        presentation of the prompt and the keyframes' latents (`steps.keyframe_encoder`)."""
        from .steps import keyframe_encoder, text_encoder

        if not keyframes(request):
            out = text_encoder(pipe)(prompt=request.prompt, output=list(ENCODED))
            return {name: out[name] for name in ENCODED}
        if request.image_prep == comfyui_prep.PREP:
            return _comfyui_encode(pipe, request)
        out = keyframe_encoder(pipe)(
            prompt=request.prompt,
            **keyframes(request),  # at their own size: the resize step puts them on the canvas
            height=request.height,
            width=request.width,
            output=[*ENCODED, "condition_latents"],
        )
        tensors = {name: out[name] for name in ENCODED}
        for index, latents in enumerate(out["condition_latents"]):
            tensors[f"{KEYFRAME}{index}"] = latents
        return tensors

    def prepare(self, pipe: Any, request: JobRequest, tensors: Tensors) -> dict[str, Any]:
        check_frames(request.num_frames)
        kwargs = {
            "prompt_embeds": tensors["prompt_embeds"],
            "text_token_tags": tensors["text_token_tags"],
            "height": request.height,
            "width": request.width,
            "num_frames": request.num_frames,
            "num_inference_steps": grid_points(request.num_inference_steps),
        }
        keyframes = sorted(name for name in tensors if name.startswith(KEYFRAME))
        if keyframes:
            kwargs["condition_latents"] = [tensors[name] for name in keyframes]
            kwargs["keyframe_anchors"] = anchors(request)
        return kwargs

    def pipeline_for_job(self, pipe: Any, request: JobRequest) -> Any:
        from .steps import DenoiseRunner

        comfyui = request.image_prep == comfyui_prep.PREP and bool(anchors(request))
        return DenoiseRunner(
            pipe, keyframes=bool(anchors(request)), comfyui_seed=request.seed if comfyui else None
        )

    def tiled_decode(self, pipe: Any, request: JobRequest, latents: Any) -> TiledDecode:
        """The video VAE's decode as its temporal clips (`decode.py`), each decoded with the
        spatial tiling on (as released): the clips are dealt over the ranks, the leader
        joins them as the VAE does."""
        from . import decode

        vae = pipe.vae

        def denormalised(z: torch.Tensor) -> torch.Tensor:
            mean = torch.tensor(vae.config.latents_mean).view(1, -1, 1, 1, 1).to(z)
            std = torch.tensor(vae.config.latents_std).view(1, -1, 1, 1, 1).to(z)
            return z * std + mean

        def tiled(run: Any) -> Any:
            was = vae.use_tiling
            vae.use_tiling = True  # the released decode (see the module's docstring)
            try:
                return run()
            finally:
                vae.use_tiling = was

        def decode_rows(z: torch.Tensor) -> torch.Tensor:
            return tiled(lambda: vae.decode(denormalised(z), return_dict=False)[0])

        def to_frames(video: torch.Tensor) -> np.ndarray:
            pixel_mean = torch.tensor(pipe.pixel_mean).view(1, -1, 1, 1, 1)
            pixel_std = torch.tensor(pipe.pixel_std).view(1, -1, 1, 1, 1)
            video = (video.float().cpu() * pixel_std + pixel_mean).clamp(0, 1)
            frames = pipe.video_processor.postprocess_video(video, output_type="np")
            return np.asarray(frames)[0]

        z = latents.to(device=vae.device, dtype=vae.dtype)
        plan = decode.plan_clips(vae, denormalised(z))
        return TiledDecode(
            costs=(1,) * plan.num_clips,
            decode_tile=lambda index: tiled(lambda: decode.clip(vae, plan, index)),
            assemble=lambda clips: to_frames(decode.join(vae, plan, clips)),
            dtype=vae.dtype,
            vae=vae,
            latents=z,
            decode_rows=decode_rows,
            to_frames=to_frames,
        )

    def audio(self, pipe: Any, output: Any) -> Audio:
        """The audio latents (one item per stereo channel) through the audio VAE, as
        diffusers' audio decode block does; rank 0 only."""
        audio_vae = pipe.audio_vae
        latents = output[1].to(audio_vae.dtype)
        mean = torch.tensor(audio_vae.config.latents_mean).view(1, -1, 1).to(latents)
        std = torch.tensor(audio_vae.config.latents_std).view(1, -1, 1).to(latents)
        with torch.no_grad():
            waveform = audio_vae.decode(latents * std + mean, return_dict=False)[0]
        samples = waveform.float().permute(1, 0, 2)[0].detach().cpu().numpy()  # (2, samples)
        return Audio(samples, int(pipe.audio_sampling_rate))

    def audio_latents(self, pipe: Any, output: Any) -> torch.Tensor:
        """The normalised audio latents `audio` decodes: (2, channels, latent frames), one
        item per stereo channel."""
        return output[1]

    # -- previews -------------------------------------------------------------------------

    def latent_channels(self, pipe: Any) -> int:
        return int(pipe.vae.config.latent_channels)

    def preview_grid(self, pipe: Any, latents: torch.Tensor, request: JobRequest) -> torch.Tensor:
        # the step's latents are the packed video rows, a (1, 2, 2) patch of channels each;
        # the first latent frame's rows, their patches' first pixel
        multiple = int(pipe.canvas_multiple)
        h, w = request.height // multiple, request.width // multiple
        channels = self.latent_channels(pipe)
        rows = latents[: h * w].reshape(h, w, channels, -1)[..., 0]
        return rows.permute(2, 0, 1)

    def decode_for_fit(self, pipe: Any, latent: torch.Tensor) -> torch.Tensor:
        raise ValueError("MiniMax H3's VAE decodes whole clips (17n+5 frames), not one latent")
