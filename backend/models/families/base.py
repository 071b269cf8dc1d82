"""What paradit needs to know about a family of diffusers pipelines (`Family`), and the
pieces every family shares: the tiled decode, the video pipelines' common arguments, the
request's start image. A family knows nothing about distribution.
"""

from __future__ import annotations

import dataclasses
import inspect
import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ...audio import Audio
from ...contract import Limits
from ...request import JobRequest

Tensors = dict[str, torch.Tensor]


@dataclass(frozen=True)
class TiledDecode:
    """One job's VAE decode as independent tiles: any rank can decode any tile, and rank 0
    assembles the decoded tiles (all of them, in order) into the frames."""

    costs: tuple[int, ...]
    """Relative cost of each tile (for dealing them out evenly)."""
    decode_tile: Callable[[int], torch.Tensor]
    assemble: Callable[[list[torch.Tensor]], np.ndarray]
    """Decoded tiles -> float frames (F, H, W, 3) in 0..1, as the pipeline post-processes."""
    dtype: torch.dtype
    vae: Any = None
    latents: torch.Tensor | None = None
    """The whole decode's latents, as the VAE takes them."""
    decode_rows: Callable[[torch.Tensor], torch.Tensor] | None = None
    """The VAE's untiled decode of `latents` or of some of their rows (a split decode's band,
    `parallel/vae_bands.py`): the pipeline's own call."""
    to_frames: Callable[[torch.Tensor], np.ndarray] | None = None
    """A whole decoded sample -> float frames, as `assemble`."""

    @property
    def num_tiles(self) -> int:
        return len(self.costs)


def decode_in_tiles(
    vae: Any,
    z: torch.Tensor,
    tiles: Any,
    decode_tile: Callable[[Any, torch.Tensor, Any], torch.Tensor],
    to_frames: Callable[[torch.Tensor], np.ndarray],
    finish: Callable[[Any, torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    decode_args: tuple[Any, ...] = (),
) -> TiledDecode:
    """`vae.decode(z)` as the tiles of `tiles` (a `vae_tiles.TileGrid`), then `to_frames`.

    `decode_tile(vae, z, tile)` decodes one tile of a tiled grid and `finish(vae, z, blended)`
    does what the VAE's tiled decode does after the blend. A grid of one tile (tiling off, or
    latents that fit one tile) is decoded by `vae.decode(z, *decode_args)` itself: the
    pipeline's own call (LTX-2's passes its decode timestep).
    """
    from ..vae_tiles import blend

    def decode_rows(rows: torch.Tensor) -> torch.Tensor:
        return vae.decode(rows, *decode_args, return_dict=False)[0]

    def decode(index: int) -> torch.Tensor:
        if not tiles.tiled:
            return decode_rows(z)
        return decode_tile(vae, z, tiles.tiles[index])

    def assemble(decoded: list[torch.Tensor]) -> np.ndarray:
        sample = blend(vae, tiles, decoded)
        if tiles.tiled and finish is not None:
            sample = finish(vae, z, sample)
        return to_frames(sample)

    return TiledDecode(
        costs=tuple(tile.cost for tile in tiles.tiles),
        decode_tile=decode,
        assemble=assemble,
        dtype=vae.dtype,
        vae=vae,
        latents=z,
        decode_rows=decode_rows,
        to_frames=to_frames,
    )


def video_frames(pipe: Any) -> Callable[[torch.Tensor], np.ndarray]:
    """Decoded video -> float frames (F, H, W, 3), as the video pipelines post-process."""

    def to_frames(video: torch.Tensor) -> np.ndarray:
        frames = pipe.video_processor.postprocess_video(video=video, output_type="np")
        return np.asarray(frames)[0]  # (batch, F, H, W, 3) -> the one video

    return to_frames


@dataclass(frozen=True)
class Upsampler:
    """A latent upscaler (`serve --upscaler FILE`), replicated on every rank (it is small)."""

    module: torch.nn.Module
    factors: tuple[int, ...]
    """What it multiplies a latent's width and height by."""


@dataclass(frozen=True)
class SecondStage:
    """What stage 2 of a two-stage job adds to the pipeline call its family prepares."""

    inputs: dict[str, Any]
    """More arguments: the upscaled latents, their re-noising, the levels."""
    scheduler: Any = None
    """The scheduler stage 2 runs with in place of the pipeline's (None: the pipeline's)."""


@dataclass(frozen=True)
class Family:
    name: str
    task: str
    pipeline_classes: tuple[str, ...]
    encoder_components: frozenset[str]
    """Components only the encoding rank (rank 0) loads."""
    vae_float32: bool = False
    """Keep the VAE in float32 when the rest runs in half precision (Wan's VAE wants it, and
    its pipelines cast latents to the VAE's dtype; Flux's do not)."""
    batched_cfg: bool = False
    """The pipeline runs the unconditional and conditional branches as one batch of 2 through
    the transformer (CogVideoX), not as two calls (Wan, Flux)."""
    step_cache: bool = True
    """diffusers' First-Block-Cache fits the pipeline's transformer calls (Flux.2's pipeline
    calls it outside a cache context and its blocks' outputs are not the hooks' shape;
    Z-Image's blocks take `x`, not the `hidden_states` the hooks read). The loaded model's
    `Limits.step_cache` says it to the frontends, and a request with a `cache` is refused at
    submit when it is False."""
    samplers: tuple[str, ...] = ()
    """paradit's samplers (backend/sampling) the pipeline runs in place of its own scheduler:
    a flow model whose pipeline calls `scheduler.set_timesteps` and `step` as diffusers'
    flow schedulers expect; () for only its own scheduler."""

    plain_cfg: bool = False
    """The pipeline combines its CFG branches as uncond + scale x (cond - uncond) followed by
    a step that leaves two equal branches' combination as it is (Qwen-Image's rescale to the
    conditional norm), not plainly: a job may ask for plain CFG (`cfg_mode`,
    sampling/guidance.py)."""

    cfg_norm_pixels: int = 0
    """With `plain_cfg`: the latent pixels one packed token of the pipeline's DiT holds, its
    channels first (Qwen-Image packs 2x2: 4); above 0 a job may ask for ComfyUI's CFGNorm on
    the plain combination (`cfg_mode` norm), whose norm runs over each pixel's channels."""

    second_prompt: bool = False
    """The pipeline takes a second prompt for its second text encoder (`prompt_2`: Flux.1's
    T5; `Limits.second_prompt`)."""
    own_levels: tuple[str, ...] = ()
    """ComfyUI scheduler nodes whose levels are the pipeline's own scheduler's (Flux.2's
    Flux2Scheduler: tests/workflow/test_flux2_levels.py): a workflow sampled on them runs on
    the model's own scheduler."""

    reference_latents: bool = False
    """ComfyUI's ReferenceLatent of a VAEEncode'd image (at most 1024x1024 pixels) is the
    pipeline's own reference: the same crop, encode, normalisation and token positions
    (FLUX.2: backend/workflow/reference_nodes.py), so a workflow's references run as `image`
    and `images`."""

    def fixed_levels(self, variant: str) -> tuple[float, ...]:
        """The noise levels a file recognised as `variant` runs only (its `Limits.sigmas` once
        loaded: every job takes exactly that many steps); () where any step count runs."""
        return ()

    def workflow_refusal(self, preset: str, request: dict[str, Any]) -> str:
        """Why a workflow's job (`request`, as imported) on a file run as `preset` would not
        be the job ComfyUI runs ("" where it is)."""
        return ""

    image_preps: tuple[str, ...] = ()
    """The ways besides the pipeline's own that the family prepares a job's input images
    (request `image_prep`, e.g. "comfyui"); its `prepare` and `encode` follow the job's."""

    reference_methods: tuple[str, ...] = ()
    """How a job may ask the DiT to condition an edit's reference tokens (request
    `reference_method`); its `prepare` sets the job's and `finish` the model's again."""

    def limits(self, pipe: Any, *, tiny: bool) -> Limits:
        """What the loaded pipeline accepts (`model_limits`) with the family's capabilities."""
        return dataclasses.replace(
            self.model_limits(pipe, tiny=tiny),
            step_cache=self.step_cache,
            plain_cfg=self.plain_cfg,
            cfg_norm_pixels=self.cfg_norm_pixels if self.plain_cfg else 0,
            second_prompt=self.second_prompt,
            image_preps=self.image_preps_of(pipe),
            reference_methods=self.reference_methods,
        )

    def image_preps_of(self, pipe: Any) -> tuple[str, ...]:
        """The loaded pipeline's `image_preps` (the family's, unless its class lacks them)."""
        return self.image_preps

    def model_limits(self, pipe: Any, *, tiny: bool) -> Limits:
        """The loaded pipeline's sizes, frames, steps and defaults (`tiny`: a tiny preset's)."""
        raise NotImplementedError

    def supports_cfg(self, pipe: Any) -> bool:
        return True

    def uses_cfg(self, pipe: Any, request: JobRequest) -> bool:
        return self.supports_cfg(pipe) and request.uses_cfg

    def encode(self, pipe: Any, request: JobRequest, device: torch.device) -> Tensors:
        """Run the text (and image) encoders; rank 0 only."""
        raise NotImplementedError

    def prepare(self, pipe: Any, request: JobRequest, tensors: Tensors) -> dict[str, Any]:
        """Keyword arguments for `pipe(...)` on every rank, from the broadcast tensors."""
        raise NotImplementedError

    def finish(self, pipe: Any) -> None:
        """Undo what `prepare` set on the pipeline for one job (after it ends, on every rank)."""

    def pipeline_for_job(self, pipe: Any, request: JobRequest) -> Any:
        """The pipeline that runs `request`: the loaded one, or (Wan 2.2 TI2V-5B) another
        pipeline class on its components."""
        return pipe

    def audio(self, pipe: Any, output: Any) -> Audio | None:
        """The audio track the pipeline generated with the frames (LTX-2), from the pipeline's
        output on the replica's leader; None for the models that make none."""
        return None

    def audio_latents(self, pipe: Any, output: Any) -> torch.Tensor | None:
        """The final audio latents in the pipeline's output, as `audio` decodes them (what
        `--save-latents` writes as `audio_latents.npy`); None for the models without audio."""
        return None

    def load_upsampler(self, path: str, dtype: torch.dtype) -> Upsampler:
        """The latent upscaler of `serve --upscaler FILE` (a two-stage family's)."""
        raise ValueError(
            f"--upscaler: {self.name} runs one stage (two-stage jobs with a latent upscaler: "
            "LTX-2); leave --upscaler out"
        )

    def second_stage(
        self, pipe: Any, request: JobRequest, first: Any, upsampler: torch.nn.Module
    ) -> SecondStage:
        """A two-stage job's stage 2 (`request` is stage 2's: the final size, its levels as
        `num_inference_steps`), from stage 1's pipeline output `first`, through the upscaler,
        on every rank. The families that set `Limits.two_stage` give it."""
        raise ValueError(f"{self.name} runs one stage: leave upscale out")

    def tiled_decode(self, pipe: Any, request: JobRequest, latents: Any) -> TiledDecode:
        """The decode of the pipeline's final latents, cut into tiles (dealt to the ranks with
        `plan.vae_parallel`): the pipelines stop at the latents on every rank."""
        raise NotImplementedError

    # -- previews (see preview.py) --------------------------------------------------------

    def latent_channels(self, pipe: Any) -> int:
        raise NotImplementedError

    def preview_grid(self, pipe: Any, latents: torch.Tensor, request: JobRequest) -> torch.Tensor:
        """The step's latents as one (channels, h, w) picture (a video's first frame)."""
        raise NotImplementedError

    def decode_for_fit(self, pipe: Any, latent: torch.Tensor) -> torch.Tensor:
        """VAE-decode a (1, channels, h, w) latent in the pipeline's latent space to
        (3, 8h, 8w) in -1..1, as the pipeline itself would."""
        raise NotImplementedError


def text_len(tokenizer: Any, default: int = 512) -> int:
    length = getattr(tokenizer, "model_max_length", default) or default
    return int(min(default, length))


def video_kwargs(request: JobRequest, tensors: Tensors) -> dict[str, Any]:
    """The pipeline arguments every video family passes the same way."""
    return {
        "prompt_embeds": tensors["prompt_embeds"],
        "negative_prompt_embeds": tensors.get("negative_prompt_embeds"),
        "height": request.height,
        "width": request.width,
        "num_frames": request.num_frames,
        "num_inference_steps": request.num_inference_steps,
        "guidance_scale": request.guidance_scale,
    }


def request_image(request: JobRequest):
    """The request's start image as an RGB PIL image at the requested size."""
    import base64

    from PIL import Image

    raw = base64.b64decode(request.image.split(",", 1)[-1])
    with Image.open(io.BytesIO(raw)) as img:
        return img.convert("RGB").resize((request.width, request.height))


def request_images(request: JobRequest) -> list:
    """The request's input images (`image`, then `images`) as RGB PIL images at their own
    size (the edit pipelines resize them as their models want)."""
    import base64

    from PIL import Image

    images = []
    for data in (request.image, *(request.images or ())):
        with Image.open(io.BytesIO(base64.b64decode(data.split(",", 1)[-1]))) as img:
            images.append(img.convert("RGB"))
    return images


def image_limits(
    task: str, size_multiple: int, *, size: int, steps: int, guidance: float, tiny: bool
) -> Limits:
    """An image model's limits: one frame, square `size` by default, sides 16..2048 in steps
    of `size_multiple`; a tiny preset defaults to 64x64 and 4 steps."""
    return Limits(
        task=task,
        size_multiple=size_multiple,
        min_size=16,
        max_size=2048,
        frame_multiple=0,
        max_frames=1,
        default_width=64 if tiny else size,
        default_height=64 if tiny else size,
        default_frames=1,
        default_steps=4 if tiny else steps,
        default_guidance=guidance,
        fps=1,
    )


def same_components_as(pipe: Any, pipeline_class: type) -> Any:
    """`pipe` itself if it is a `pipeline_class`, else a `pipeline_class` on `pipe`'s
    components and settings (the same module objects: nothing is copied)."""
    if type(pipe) is pipeline_class:
        return pipe
    accepted = inspect.signature(pipeline_class.__init__).parameters
    parts = {name: module for name, module in pipe.components.items() if name in accepted}
    settings = {
        name: pipe.config[name]
        for name in ("boundary_ratio", "expand_timesteps")
        if name in accepted and name in pipe.config
    }
    other = pipeline_class(**parts, **settings)
    other.set_progress_bar_config(**getattr(pipe, "_progress_bar_config", {}))
    return other


def called_directly(pipe: Any, body: Any, **arguments: Any) -> np.ndarray:
    """diffusers' pipeline as a user calls it for a job's `body` (its prompt, size, steps and
    seed) and `arguments` (the guidance under the pipeline's own name, a negative prompt,
    frames): float frames (F, H, W, 3) in 0..1 (an image model's images, a video's frames).
    The reference of a family's tiny job (`FamilySpec.tiny_jobs`)."""
    with torch.no_grad():
        output = pipe(
            prompt=body["prompt"],
            height=body["height"],
            width=body["width"],
            num_inference_steps=body["num_inference_steps"],
            generator=torch.Generator().manual_seed(body["seed"]),
            output_type="np",
            **arguments,
        )
    images = getattr(output, "images", None)
    return np.asarray(images if images is not None else output.frames[0])


def called_with_cfg(pipe: Any, body: Any) -> np.ndarray:
    """`called_directly` for a video pipeline that guides with a negative prompt and its own
    `guidance_scale` (Wan's, CogVideoX's): the job's negative prompt, frames and scale."""
    return called_directly(
        pipe,
        body,
        negative_prompt=body["negative_prompt"],
        num_frames=body["num_frames"],
        guidance_scale=body["guidance_scale"],
    )
