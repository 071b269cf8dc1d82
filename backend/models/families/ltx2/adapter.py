"""LTX-2 text-to-video with its audio track (`LTX2Pipeline`).

What differs from the other video families:

- One DiT runs two streams, video and audio tokens, with cross-attention both ways; each step
  denoises both. The video decodes with the video VAE, the audio with the audio VAE and the
  vocoder: `audio` hands the waveform to the job, which writes `audio.wav` and muxes it into
  `video.mp4` as an AAC track (`backend/audio.py`).
- The text encoder (Gemma 3, rank 0) gives every hidden state, stacked; the text connectors
  that turn them into the two streams' text tokens run inside the pipeline, on every rank.
- CFG runs as one batch of 2 (negative first) through the DiT (`batched_cfg`): CFG parallel
  gives each half of the group one row, video and audio together (`parallel/cfg.py`).
- paradit runs plain CFG by default, with one guidance scale for both streams: diffusers'
  defaults (those of LTX-2.3) add spatio-temporal guidance and modality-isolation guidance,
  one DiT call each per step at batch 1, and a guidance rescale; paradit's defaults turn them
  off, as the LTX-2 model card runs it (guidance 4, 40 steps, 768x512, 121 frames at 24 fps),
  and a request's `guidance_terms` sets them (`guidance.py`). Under CFG parallel the batch-1
  calls run whole on each half (`parallel/cfg.py`), split by Ulysses within it.
- Decode: the pipeline stops at the latents (video and audio) on every rank; the job decodes
  the video as the pipeline would, tile by tile when tiling is on (`vae.py`: the tiles
  can be dealt to the ranks), and rank 0 decodes the audio (`audio`). The audio stays there:
  its VAE and vocoder are small (0.11B parameters against the video VAE's 1.22B, on 25
  latent frames a second), and a split would add collectives for little.

The distilled model (`ltx-2-19b-distilled*.safetensors`, `random:ltx-2-distilled`) has the dev
model's shapes and runs on its own schedule: 8 steps at the sigmas it was distilled for
(diffusers' `DISTILLED_SIGMA_VALUES`, Lightricks' `ltx_pipelines.distilled`) taken as given,
without CFG (guidance 1). Its pipeline says so in its scheduler: no token-dependent shift and
no terminal stretch (`DISTILLED_SCHEDULER`, what diffusers' LTX-2 converter writes for the
distilled checkpoint and its docs swap in to run sigmas "as is"). Its limits fix the step
count at the table's length (`Limits.sigmas`): another count is refused, not resampled, as
the model saw no other noise levels and Lightricks' distilled pipeline takes no step count.
A request may still give guidance above 1 (CFG on the same schedule).

Image-to-video (`LTX2ImageToVideoPipeline`, `LTX2ImageToVideo`): the start image, through the
video VAE's encoder (every rank, in the pipeline), is the first latent frame; its tokens get
timestep 0 (a per-token timestep: the sequence plan splits it with the tokens) and the
scheduler never steps them. The image is first re-compressed as one H.264 frame at the job's
`image_crf` (as the model was trained: `image_crf.py`). The audio is generated as for
text-to-video. The hub's
`Lightricks/LTX-2` ships `LTX2Pipeline` and both pipelines take the same components, so the
text-to-video family also takes an optional image, as Wan 2.2 TI2V-5B does: a job with one
runs `LTX2ImageToVideoPipeline` on the loaded components (nothing reloaded or copied).
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from ....audio import Audio
from ....contract import IMAGE_TO_VIDEO, TEXT_TO_VIDEO, Limits
from ....decode_tiles import DecodeTiles
from ....request import JobRequest
from ..base import (
    Family,
    SecondStage,
    Tensors,
    TiledDecode,
    Upsampler,
    decode_in_tiles,
    request_image,
    same_components_as,
    text_len,
    video_frames,
)
from . import comfyui_image, diffusion_tiles, diffusion_vae, image_crf
from .detect import DISTILLED
from .guidance import audio_guidance, guidance_terms, pipeline_kwargs

# The LTX-2 model card: 768x512, 121 frames at 24 fps, 40 steps, guidance 4. The pipeline
# predicts at most 20 s (its `max_seconds`): 481 frames at 24 fps.
DEFAULT_WIDTH, DEFAULT_HEIGHT, DEFAULT_FRAMES, FPS = 768, 512, 121, 24
DEFAULT_STEPS, DEFAULT_GUIDANCE, MAX_FRAMES = 40, 4.0, 481
FPS_RANGE = (1.0, 60.0)
"""The frame rates a job may ask for (`fps`): the pipeline takes any (its positional
embeddings are in seconds, the audio's length is the video's); ComfyUI's LTX-2.3 templates
run at 25, Lightricks' pipelines at 24 to 50."""
PROMPT_TENSORS = (
    "prompt_embeds",
    "prompt_attention_mask",
    "negative_prompt_embeds",
    "negative_prompt_attention_mask",
)
"""`encode_prompt`'s outputs, in its order."""
DISTILLED_SCHEDULER = {"use_dynamic_shifting": False, "shift_terminal": None}
"""The distilled model's scheduler settings over the dev model's FlowMatch Euler: the sigmas
run as given (diffusers' `convert_ltx2_to_diffusers` writes these for a distilled checkpoint)."""
DISTILLED_GUIDANCE = 1.0


def distilled_sigmas() -> tuple[float, ...]:
    """The distilled model's 8 sigmas (the scheduler appends the final 0)."""
    from diffusers.pipelines.ltx2.utils import DISTILLED_SIGMA_VALUES

    return tuple(DISTILLED_SIGMA_VALUES)


def is_distilled(pipe: Any) -> bool:
    """Whether `pipe` holds the distilled model: its scheduler takes the sigmas as given."""
    return pipe.scheduler.config.get("use_dynamic_shifting") is False


class LTX2(Family):
    """Text-to-video with its audio track; with an image in the request, image-to-video on the
    same components (`LTX2ImageToVideo`'s job)."""

    def image_preps_of(self, pipe: Any) -> tuple[str, ...]:
        """ComfyUI's preparation of the start image (its LTX-2 image-to-video templates':
        `comfyui_image.py`), on every LTX-2 model."""
        return (comfyui_image.PREP,)

    def fixed_levels(self, variant: str) -> tuple[float, ...]:
        """A distilled file's (its variant says so, `detect.DISTILLED`) own 8 levels."""
        return distilled_sigmas() if variant.endswith(DISTILLED) else ()

    def model_limits(self, pipe: Any, *, tiny: bool) -> Limits:
        patch = int(pipe.transformer_spatial_patch_size)
        multiple = int(pipe.vae_spatial_compression_ratio) * patch
        steps, guidance = 4 if tiny else DEFAULT_STEPS, DEFAULT_GUIDANCE
        schedule: dict[str, Any] = {}
        if is_distilled(pipe):  # its own schedule, whatever the size: see the module's docstring
            sigmas = distilled_sigmas()
            steps, guidance = len(sigmas), DISTILLED_GUIDANCE
            schedule = {"sigmas": sigmas, "min_steps": steps, "max_steps": steps}
        return Limits(
            task=self.task,
            size_multiple=multiple,
            min_size=2 * multiple,  # the decoder's reflect padding needs 2 latent rows
            max_size=2048,
            frame_multiple=int(pipe.vae_temporal_compression_ratio),
            max_frames=MAX_FRAMES,
            default_width=64 if tiny else DEFAULT_WIDTH,
            default_height=64 if tiny else DEFAULT_HEIGHT,
            default_frames=9 if tiny else DEFAULT_FRAMES,
            default_steps=steps,
            default_guidance=guidance,
            fps=FPS,
            fps_range=FPS_RANGE,
            last_frame=True,
            image_strength=True,
            image_crf=image_crf.default_crf(pipe),
            comfy_decode_tiles=diffusion_vae.decoder_of(pipe.vae) is not None,
            needs_image=self.task == IMAGE_TO_VIDEO,
            accepts_image=self.task == TEXT_TO_VIDEO,
            two_stage=True,
            guidance_terms=guidance_terms(pipe.transformer),
            audio_latents_per_second=audio_latent_rate(pipe),
            **schedule,
        )

    def load_upsampler(self, path: str, dtype: torch.dtype) -> Upsampler:
        from . import upscaler

        return upscaler.load(path, dtype)

    def second_stage(
        self, pipe: Any, request: JobRequest, first: Any, upsampler: torch.nn.Module
    ) -> SecondStage:
        from ....upscale import UpscaleSettings
        from . import upscaler

        settings = UpscaleSettings.parse(request.upscale)
        size = (request.width // settings.factor, request.height // settings.factor)
        image = None  # the start image at the final size, re-compressed as at stage 1
        if request.image is not None and request.image_prep == comfyui_image.PREP:
            # ComfyUI's: the one compressed frame, scaled in float to the final size
            sent = _decoded(request.image)
            image = comfyui_image.stage_pixels(
                sent, job_crf(pipe, request), request.width, request.height
            )
        elif request.image is not None:
            image = image_crf.round_trip(request_image(request), job_crf(pipe, request))
        return upscaler.second_stage(
            pipe, size, first, upsampler, list(settings.sigmas), DISTILLED_SCHEDULER, image
        )

    def pipeline_for_job(self, pipe: Any, request: JobRequest) -> Any:
        from diffusers import LTX2ConditionPipeline, LTX2ImageToVideoPipeline, LTX2Pipeline

        wanted = LTX2Pipeline if request.image is None else LTX2ImageToVideoPipeline
        if request.last_image is not None:  # first and last frame: keyframe conditions
            wanted = LTX2ConditionPipeline
        elif below_full_strength(request):  # ComfyUI's noise mask on the first frame
            from . import strength

            wanted = strength.pipeline_class()
        return same_components_as(pipe, wanted)

    def uses_cfg(self, pipe: Any, request: JobRequest) -> bool:
        """The negative branch runs where either stream's CFG scale is above 1."""
        return super().uses_cfg(pipe, request) or audio_guidance(pipe, request) > 1

    def text_tokens(self, pipe: Any) -> int:
        """The prompt's tokens (padded): each stream's cross-attention reads them."""
        return text_len(pipe.tokenizer, 1024)

    def encode(self, pipe: Any, request: JobRequest, device: torch.device) -> Tensors:
        cfg = self.uses_cfg(pipe, request)
        if request.upscale is not None:  # the negative branch for either stage's guidance
            cfg = cfg or request.upscale["guidance_scale"] > 1
        encoded = pipe.encode_prompt(
            prompt=request.prompt,
            negative_prompt=request.negative_prompt or "",
            do_classifier_free_guidance=cfg,
            max_sequence_length=self.text_tokens(pipe),
            device=device,
        )
        return {
            name: tensor
            for name, tensor in zip(PROMPT_TENSORS, encoded, strict=True)
            if tensor is not None
        }

    def prepare(self, pipe: Any, request: JobRequest, tensors: Tensors) -> dict[str, Any]:
        from . import vae as ltx2_vae

        # a tiled decode that would leave a one-pixel tile fails now, not after the steps
        ratio = int(pipe.vae_spatial_compression_ratio)
        latent_size = (request.height // ratio, request.width // ratio)
        decoder = diffusion_vae.decoder_of(pipe.vae)
        if decoder is None:
            ltx2_vae.tile_grid(pipe.vae, torch.empty(1, 1, 1, *latent_size, device="meta"))
        else:  # the diffusion decoder's attention windows must fit every stage's grid
            frames = (request.num_frames - 1) // int(pipe.vae_temporal_compression_ratio) + 1
            problem = diffusion_vae.window_problem(decoder, (frames, *latent_size))
            if request.decode_tiles is not None:  # and every one of ComfyUI's tiles'
                shape = (1, 1, frames, *latent_size)
                tiles = DecodeTiles.from_json(request.decode_tiles)
                problem = problem or diffusion_tiles.window_problem(decoder, shape, tiles)
            if problem:
                raise ValueError(problem)
        cfg = "negative_prompt_embeds" in tensors
        return {
            **tensors,
            "height": request.height,
            "width": request.width,
            "num_frames": request.num_frames,
            "frame_rate": job_fps(request),
            "num_inference_steps": request.num_inference_steps,
            **({"sigmas": list(distilled_sigmas())} if is_distilled(pipe) else {}),
            **pipeline_kwargs(pipe, request, cfg),
            "use_cross_timestep": use_cross_timestep(pipe),
            "max_sequence_length": tensors["prompt_embeds"].shape[1],
            **image_kwargs(pipe, request),
            **audio_length(pipe, request),
            **strength_noise(request),
        }

    def tiled_decode(self, pipe: Any, request: JobRequest, latents: Any) -> TiledDecode:
        from . import vae as ltx2_vae

        vae = pipe.vae
        decoder = diffusion_vae.decoder_of(vae)
        if decoder is not None and request.decode_tiles is not None:  # ComfyUI's tiles
            z = latents.to(device=decoder.device, dtype=decoder.dtype)
            tiles = DecodeTiles.from_json(request.decode_tiles)
            return diffusion_tiles.tiled_decode(decoder, z, tiles, video_frames(pipe))
        if decoder is not None:  # LTX-2.5's diffusion decoder: whole, on one rank
            return diffusion_decode(pipe, decoder, latents)
        # the pipeline's "latent" output is denormalised already; the rest as its decode
        z = latents.to(device=vae.device, dtype=vae.dtype)
        temb = None
        if vae.config.timestep_conditioning:  # decode timestep 0 (and no noise mixed in)
            temb = torch.zeros(z.shape[0], device=z.device, dtype=z.dtype)
        tiles = ltx2_vae.tile_grid(vae, z)
        decode_tile = functools.partial(ltx2_vae.decode_tile, temb=temb)
        return decode_in_tiles(
            vae, z, tiles, decode_tile, video_frames(pipe), ltx2_vae.crop, (temb,)
        )

    def audio(self, pipe: Any, output: Any) -> Audio:
        """The audio latents (the pipeline's "latent" output, denormalised) through the audio
        VAE and the vocoder, as the pipeline decodes them; rank 0 only."""
        audio_vae = pipe.audio_vae
        with torch.no_grad():
            mel = audio_vae.decode(output[1].to(audio_vae.dtype), return_dict=False)[0]
            waveform = pipe.vocoder(mel)[0]
        samples = waveform.detach().to("cpu", torch.float32).numpy()  # (channels, samples)
        return Audio(samples, int(pipe.vocoder.config.output_sampling_rate))

    def audio_latents(self, pipe: Any, output: Any) -> torch.Tensor:
        """The pipeline's "latent" output's audio latents (B, C, L, mel bins), as `audio`
        decodes them."""
        return output[1]

    # -- previews -------------------------------------------------------------------------

    def latent_channels(self, pipe: Any) -> int:
        return int(pipe.vae.config.latent_channels)

    def preview_grid(self, pipe: Any, latents: torch.Tensor, request: JobRequest) -> torch.Tensor:
        # the step's latents are packed tokens (batch, frames*h*w, channels), patch 1
        ratio = int(pipe.vae_spatial_compression_ratio)
        h, w = request.height // ratio, request.width // ratio
        return latents[0, : h * w].reshape(h, w, -1).permute(2, 0, 1)

    def decode_for_fit(self, pipe: Any, latent: torch.Tensor) -> torch.Tensor:
        vae = pipe.vae
        z = pipe._denormalize_latents(
            latent[:, :, None], vae.latents_mean, vae.latents_std, vae.config.scaling_factor
        )
        decoder = diffusion_vae.decoder_of(vae)
        if decoder is not None:
            return diffusion_vae.decode(decoder, z)[0, :, 0]
        return vae.decode(z.to(vae.dtype), None, return_dict=False)[0][0, :, 0]


def diffusion_decode(pipe: Any, decoder: Any, latents: torch.Tensor) -> TiledDecode:
    """The job's decode by LTX-2.5's diffusion decoder (`diffusion_vae.py`): one tile, the
    whole latents (the pipeline's "latent" output, denormalised) at once with ComfyUI's
    seed-0 noise, so the leader decodes it alone; it does not split into bands."""
    z = latents.to(device=decoder.device, dtype=decoder.dtype)
    to_frames = video_frames(pipe)

    def decode_tile(index: int) -> torch.Tensor:
        return diffusion_vae.decode(decoder, z)

    def assemble(decoded: list[torch.Tensor]) -> Any:
        return to_frames(decoded[0])

    return TiledDecode((1,), decode_tile, assemble, decoder.dtype, decoder, z, None, to_frames)


class LTX2ImageToVideo(LTX2):
    """Image-to-video (`LTX2ImageToVideoPipeline` loaded): the image is required."""


def job_fps(request: JobRequest) -> float:
    """The job's frame rate: the request's `fps`, else the family's own (24)."""
    return float(FPS if request.fps is None else request.fps)


def audio_latent_rate(pipe: Any) -> float:
    """The audio latent frames a second, as the pipeline counts them: its audio VAE's sampling
    rate over the mel hop over its temporal compression (LTX-2: 16000 / 160 / 4 = 25)."""
    ratio = float(pipe.audio_vae_temporal_compression_ratio)
    return pipe.audio_sampling_rate / pipe.audio_hop_length / ratio


def audio_length(pipe: Any, request: JobRequest) -> dict[str, Any]:
    """The pipeline's arguments for a request's `audio_latent_frames` (none without): the
    pipeline counts round(frames / fps x 25) audio latent frames and takes another length
    only from `audio_latents` of that length (B, C, L, mel bins); given zeros and
    `noise_scale` 1 it re-noises them to the generator's next draw, the whole noise (1 x
    noise + 0 x zeros), where its own count would draw its noise. The video's noise is drawn
    first, as without the field; `noise_scale` is the audio's alone in these pipelines at
    stage 1 (stage 2's inputs set both again)."""
    frames = request.audio_latent_frames
    if frames is None:
        return {}
    config = pipe.audio_vae.config
    bins = int(config.mel_bins) // int(pipe.audio_vae_mel_compression_ratio)
    zeros = torch.zeros(1, int(config.latent_channels), frames, bins)
    return {"audio_latents": zeros, "noise_scale": 1.0}


def job_crf(pipe: Any, request: JobRequest) -> int:
    """The CRF the job's images are re-compressed at: the request's (`JobRequest.from_body`
    fills in the model's), else the model's (`image_crf.default_crf`)."""
    if request.image_crf is not None:
        return int(request.image_crf)
    return image_crf.default_crf(pipe)


def image_kwargs(pipe: Any, request: JobRequest) -> dict[str, Any]:
    """The image-to-video pipeline's arguments for a request with an image (none without):
    the image at the job's size, re-compressed as one H.264 frame at the job's CRF (as the
    model was trained; `image_crf.py`), conditions the first latent frame. The round trip is
    paradit's (x264 on one thread, the same bytes on every machine and rank), so the pipeline
    takes the image as given (`image_crf=0`): diffusers' own is the same procedure on as many
    threads as the machine has CPUs. With a last frame: the condition pipeline's two
    keyframes (`keyframe_conditions`). With `image_prep` comfyui: the sent image compressed
    once at its own size and scaled in float to the job's (`comfyui_image.py`), given to the
    pipeline as float pixels."""
    if request.image is None:
        return {}
    comfyui = request.image_prep == comfyui_image.PREP
    if request.last_image is not None:
        if comfyui:
            raise ValueError(
                "image_prep comfyui with last_image: ComfyUI's LTX-2 image preparation is "
                "built for the start image alone; leave one of them out"
            )
        return {"conditions": keyframe_conditions(pipe, request)}
    crf = job_crf(pipe, request)
    if comfyui:  # ComfyUI's: compressed once at the sent size, scaled in float
        pixels = comfyui_image.stage_pixels(
            _decoded(request.image), crf, request.width, request.height
        )
        image: Any = pixels
    else:
        image = image_crf.round_trip(request_image(request), crf)
    if below_full_strength(request):
        return {"conditions": [strength_condition(image, float(request.image_strength))]}
    return {"image": image, "image_crf": 0}


def below_full_strength(request: JobRequest) -> bool:
    """A start image at a strength below 1 (`image_strength`; left out: 1)."""
    value = request.image_strength
    return request.image is not None and value is not None and value < 1


def strength_condition(image: Any, value: float) -> Any:
    """The condition pipeline's first frame at `value` (`strength.py`): a PIL image, or float
    pixels (1, 3, height, width) in 0..1 at the job's size (`image_prep` comfyui; the
    pipeline takes tensors in 0..255 and maps them to the VAE's -1..1 itself, where the
    image-to-video pipeline takes 0..1: the same pixels within float32's rounding), already
    re-compressed (`crf=0`)."""
    from diffusers.pipelines.ltx2.pipeline_ltx2_condition import LTX2VideoCondition

    frames = image * 255.0 if torch.is_tensor(image) else image
    return LTX2VideoCondition(frames=frames, index=0, strength=value, crf=0)


def strength_noise(request: JobRequest) -> dict[str, Any]:
    """The condition pipeline's `noise_scale` for a start image below full strength: the job's
    first level (ComfyUI's state starts at sigma_0 noise + (1 - sigma_0) latent, video and
    audio alike), which `strength.py`'s pipeline fills in where it is None; `audio_length`'s
    1 (the image-to-video pipelines') is taken back."""
    if not below_full_strength(request) or request.audio_latent_frames is None:
        return {}
    return {"noise_scale": None}


def keyframe_conditions(pipe: Any, request: JobRequest) -> list[Any]:
    """`LTX2ConditionPipeline`'s conditions for a first and a last frame, each re-compressed
    at its own size at the job's CRF (as the pipeline re-compresses single-frame conditions:
    `image_crf.py` does it, the conditions say `crf=0`), at full strength: the first writes
    the first latent frame (timestep 0, as image to video); the last (latent index -1) is
    appended to the video tokens as keyframe tokens of their own, with the last latent
    frame's coordinates (the sequence plan splits them with the rest: `parallel.py`). The
    pipeline resizes each image to cover the job's size and crops the centre."""
    from diffusers.pipelines.ltx2.pipeline_ltx2_condition import LTX2VideoCondition

    crf = job_crf(pipe, request)
    first = image_crf.round_trip(_decoded(request.image), crf)
    last = image_crf.round_trip(_decoded(request.last_image), crf)
    return [
        LTX2VideoCondition(frames=first, index=0, strength=1.0, crf=0),
        LTX2VideoCondition(frames=last, index=-1, strength=1.0, crf=0),
    ]


def _decoded(data: str) -> Any:
    """A request's base64 image as an RGB PIL image at its own size."""
    import base64
    import io

    from PIL import Image

    with Image.open(io.BytesIO(base64.b64decode(data.split(",", 1)[-1]))) as img:
        return img.convert("RGB")


def use_cross_timestep(pipe: Any) -> bool:
    """LTX-2.0's DiT (a caption projection inside it) modulates the cross-modal attention by
    its own stream's timestep; LTX-2.3 and later by the other stream's (diffusers' default)."""
    return not pipe.transformer.config.use_prompt_embeddings
