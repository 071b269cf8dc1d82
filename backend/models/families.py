"""Model adapters: what paradit needs to know about each family of diffusers pipelines.

An adapter knows a family's limits, which components only the encoding rank needs, how to
encode a request on that rank, and which arguments to give the diffusers pipeline on every
rank. It knows nothing about distribution.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..contract import IMAGE_TO_VIDEO, TEXT_TO_IMAGE, TEXT_TO_VIDEO, Limits
from ..request import JobRequest

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

    @property
    def num_tiles(self) -> int:
        return len(self.costs)


def _tiled_decode(
    vae: Any,
    z: torch.Tensor,
    tiles: Any,
    decode_tile: Callable[[Any, torch.Tensor, Any], torch.Tensor],
    to_frames: Callable[[torch.Tensor], np.ndarray],
    finish: Callable[[Any, torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
) -> TiledDecode:
    """`vae.decode(z)` as the tiles of `tiles` (a `vae_tiles.TileGrid`), then `to_frames`.

    `decode_tile(vae, z, tile)` decodes one tile of a tiled grid and `finish(vae, z, blended)`
    does what the VAE's tiled decode does after the blend. A grid of one tile (tiling off, or
    latents that fit one tile) is decoded by `vae.decode(z)` itself: the pipeline's own call.
    """
    from .vae_tiles import blend

    def decode(index: int) -> torch.Tensor:
        if not tiles.tiled:
            return vae.decode(z, return_dict=False)[0]
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
    )


def _video_frames(pipe: Any) -> Callable[[torch.Tensor], np.ndarray]:
    """Decoded video -> float frames (F, H, W, 3), as the video pipelines post-process."""

    def to_frames(video: torch.Tensor) -> np.ndarray:
        frames = pipe.video_processor.postprocess_video(video=video, output_type="np")
        return np.asarray(frames)[0]  # (batch, F, H, W, 3) -> the one video

    return to_frames


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
    decodes_in_job: bool = False
    """The pipeline stops at the latents on every rank and the job decodes them with
    `tiled_decode` (tiles can be dealt to the ranks); otherwise rank 0's pipeline decodes."""

    def limits(self, pipe: Any, *, tiny: bool) -> Limits:
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

    def frames(self, output: Any) -> np.ndarray:
        """The pipeline's numpy output as frames, float (F, H, W, 3) in 0..1."""
        raise NotImplementedError

    def tiled_decode(self, pipe: Any, request: JobRequest, latents: Any) -> TiledDecode:
        """The decode of the pipeline's final latents, cut into tiles (`decodes_in_job`)."""
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


def _text_len(tokenizer: Any, default: int = 512) -> int:
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


class _Wan(Family):
    def limits(self, pipe: Any, *, tiny: bool) -> Limits:
        patch = pipe.transformer.config.patch_size
        return Limits(
            task=self.task,
            size_multiple=int(pipe.vae_scale_factor_spatial * patch[1]),
            min_size=16,
            max_size=2048,
            frame_multiple=int(pipe.vae_scale_factor_temporal),
            max_frames=257,
            needs_image=self.task == IMAGE_TO_VIDEO,
            default_width=64 if tiny else 832,
            default_height=64 if tiny else 480,
            default_frames=5 if tiny else 81,
            default_steps=4 if tiny else 40,
            default_guidance=5.0,
            fps=16,
        )

    def _text(self, pipe: Any, request: JobRequest, device: torch.device) -> Tensors:
        positive, negative = pipe.encode_prompt(
            prompt=request.prompt,
            negative_prompt=request.negative_prompt,
            do_classifier_free_guidance=request.uses_cfg,
            max_sequence_length=_text_len(pipe.tokenizer),
            device=device,
        )
        tensors = {"prompt_embeds": positive}
        if negative is not None:
            tensors["negative_prompt_embeds"] = negative
        return tensors

    def encode(self, pipe: Any, request: JobRequest, device: torch.device) -> Tensors:
        return self._text(pipe, request, device)

    def prepare(self, pipe: Any, request: JobRequest, tensors: Tensors) -> dict[str, Any]:
        return video_kwargs(request, tensors)

    def frames(self, output: Any) -> np.ndarray:
        return np.asarray(output[0])[0]  # (batch, F, H, W, 3) -> the one video

    def tiled_decode(self, pipe: Any, request: JobRequest, latents: Any) -> TiledDecode:
        from . import wan_vae

        vae = pipe.vae
        config = vae.config
        # as the pipeline before its decode: to the VAE's dtype, then undo the normalisation
        z = latents.to(device=vae.device, dtype=vae.dtype)
        shape = (1, config.z_dim, 1, 1, 1)
        mean = torch.tensor(config.latents_mean).view(shape).to(z.device, z.dtype)
        std = 1.0 / torch.tensor(config.latents_std).view(shape).to(z.device, z.dtype)
        z = z / std + mean
        tiles = wan_vae.tile_grid(vae, z)
        return _tiled_decode(
            vae, z, tiles, wan_vae.decode_tile, _video_frames(pipe), wan_vae.finish
        )

    def latent_channels(self, pipe: Any) -> int:
        return int(pipe.vae.config.z_dim)

    def preview_grid(self, pipe: Any, latents: torch.Tensor, request: JobRequest) -> torch.Tensor:
        return latents[0, :, 0]  # (batch, channels, frames, h, w)

    def decode_for_fit(self, pipe: Any, latent: torch.Tensor) -> torch.Tensor:
        config = pipe.vae.config
        mean = torch.tensor(config.latents_mean).view(1, -1, 1, 1, 1).to(latent)
        std = torch.tensor(config.latents_std).view(1, -1, 1, 1, 1).to(latent)
        video = pipe.vae.decode(latent[:, :, None] * std + mean, return_dict=False)[0]
        return video[0, :, 0]


def request_image(request: JobRequest):
    """The request's start image as an RGB PIL image at the requested size."""
    import base64

    from PIL import Image

    raw = base64.b64decode(request.image.split(",", 1)[-1])
    with Image.open(io.BytesIO(raw)) as img:
        return img.convert("RGB").resize((request.width, request.height))


class _WanImageToVideo(_Wan):
    def encode(self, pipe: Any, request: JobRequest, device: torch.device) -> Tensors:
        tensors = self._text(pipe, request, device)
        if pipe.transformer.config.image_dim is not None:  # Wan 2.1 i2v conditions on CLIP
            # The class's method: `prepare` hands the pipeline a per-job stand-in.
            tensors["image_embeds"] = type(pipe).encode_image(pipe, request_image(request), device)
        return tensors

    def prepare(self, pipe: Any, request: JobRequest, tensors: Tensors) -> dict[str, Any]:
        if "image_embeds" in tensors:
            # diffusers refuses `image` together with `image_embeds`, yet needs the image for
            # the VAE condition; this job's embeddings (from rank 0) stand in for the encoder
            # until `finish` removes them again.
            embeds = tensors["image_embeds"]
            pipe.encode_image = lambda *_args, **_kwargs: embeds
        return {**video_kwargs(request, tensors), "image": request_image(request)}

    def finish(self, pipe: Any) -> None:
        pipe.__dict__.pop("encode_image", None)


class _Flux(Family):
    def limits(self, pipe: Any, *, tiny: bool) -> Limits:
        guidance = 4.0 if self.supports_cfg(pipe) else 3.5
        return Limits(
            task=self.task,
            size_multiple=int(pipe.vae_scale_factor * 2),
            min_size=16,
            max_size=2048,
            frame_multiple=0,
            max_frames=1,
            default_width=64 if tiny else 1024,
            default_height=64 if tiny else 1024,
            default_frames=1,
            default_steps=4 if tiny else 28,
            default_guidance=guidance,
            fps=1,
        )

    def supports_cfg(self, pipe: Any) -> bool:
        # Guidance-distilled Flux (dev) embeds the guidance scale: one branch, no CFG.
        return not pipe.transformer.config.guidance_embeds

    def _max_len(self, pipe: Any) -> int:
        return _text_len(pipe.tokenizer_2) if pipe.tokenizer_2 is not None else 512

    def encode(self, pipe: Any, request: JobRequest, device: torch.device) -> Tensors:
        max_len = self._max_len(pipe)
        embeds, pooled, _ids = pipe.encode_prompt(
            prompt=request.prompt, prompt_2=None, device=device, max_sequence_length=max_len
        )
        tensors = {"prompt_embeds": embeds, "pooled_prompt_embeds": pooled}
        if self.uses_cfg(pipe, request):
            neg, neg_pooled, _ids = pipe.encode_prompt(
                prompt=request.negative_prompt,
                prompt_2=None,
                device=device,
                max_sequence_length=max_len,
            )
            tensors["negative_prompt_embeds"] = neg
            tensors["negative_pooled_prompt_embeds"] = neg_pooled
        return tensors

    def prepare(self, pipe: Any, request: JobRequest, tensors: Tensors) -> dict[str, Any]:
        cfg = self.uses_cfg(pipe, request)
        return {
            **tensors,
            "true_cfg_scale": request.guidance_scale if cfg else 1.0,
            "guidance_scale": request.guidance_scale,
            "height": request.height,
            "width": request.width,
            "num_inference_steps": request.num_inference_steps,
            "max_sequence_length": tensors["prompt_embeds"].shape[1],
        }

    def frames(self, output: Any) -> np.ndarray:
        return np.asarray(output[0])[:1]  # (batch, H, W, 3) -> one frame

    def tiled_decode(self, pipe: Any, request: JobRequest, latents: Any) -> TiledDecode:
        from . import kl_vae

        vae = pipe.vae
        # as the pipeline before its decode: unpack (batch, seq, channels * 4) to (batch,
        # channels, h, w), then undo the scaling and shift
        z = pipe._unpack_latents(latents, request.height, request.width, pipe.vae_scale_factor)
        z = (z / vae.config.scaling_factor) + vae.config.shift_factor
        tiles = kl_vae.tile_grid(vae, z)

        def to_frames(image: torch.Tensor) -> np.ndarray:
            return np.asarray(pipe.image_processor.postprocess(image, output_type="np"))[:1]

        return _tiled_decode(vae, z, tiles, kl_vae.decode_tile, to_frames)

    def latent_channels(self, pipe: Any) -> int:
        return int(pipe.vae.config.latent_channels)

    def preview_grid(self, pipe: Any, latents: torch.Tensor, request: JobRequest) -> torch.Tensor:
        unpacked = pipe._unpack_latents(
            latents, request.height, request.width, pipe.vae_scale_factor
        )  # (batch, seq, channels * 4) -> (batch, channels, h, w)
        return unpacked[0]

    def decode_for_fit(self, pipe: Any, latent: torch.Tensor) -> torch.Tensor:
        config = pipe.vae.config
        scaled = latent / config.scaling_factor + config.shift_factor
        return pipe.vae.decode(scaled, return_dict=False)[0][0]


@dataclass(frozen=True)
class _CogVersion:
    """What one CogVideoX generation was made for (diffusers' docs and the model cards)."""

    width: int
    height: int
    frames: int
    max_frames: int
    fps: int


# 1.0 (2B, 5B, 5B-I2V): 720x480, 49 frames (13 latent frames, the transformer config's
# sample_frames) at 8 fps; 1.5 (5B, 5B-I2V): 1360x768, 81 frames at 16 fps, 161 at most (the
# model card's 10 s). Both: 50 steps, guidance 6 (the pipelines' defaults).
_COG_10 = _CogVersion(width=720, height=480, frames=49, max_frames=49, fps=8)
_COG_15 = _CogVersion(width=1360, height=768, frames=81, max_frames=161, fps=16)


class _CogVideoX(Family):
    """CogVideoX 1.0 and 1.5 (`patch_size_t` set: two latent frames per token).

    Cond and uncond run as one batch of 2 (`batched_cfg`). The job decodes: the pipeline stops
    at the latents and `tiled_decode` decodes them tile by tile, as `vae.enable_tiling()`
    would, at every world size (so every world size gives the same frames).
    """

    def _version(self, pipe: Any) -> _CogVersion:
        return _COG_15 if pipe.transformer.config.patch_size_t else _COG_10

    def limits(self, pipe: Any, *, tiny: bool) -> Limits:
        config = pipe.transformer.config
        version = self._version(pipe)
        spatial = int(pipe.vae_scale_factor_spatial)
        fixed = (0, 0)
        if config.use_learned_positional_embeddings:  # 1.0 I2V: positions for one size only
            fixed = (config.sample_width * spatial, config.sample_height * spatial)
        width, height = fixed if fixed[0] else (version.width, version.height)
        return Limits(
            task=self.task,
            size_multiple=spatial * int(config.patch_size),
            min_size=16,
            max_size=2048,
            frame_multiple=int(pipe.vae_scale_factor_temporal),
            max_frames=version.max_frames,
            needs_image=self.task == IMAGE_TO_VIDEO,
            default_width=64 if tiny and not fixed[0] else width,
            default_height=64 if tiny and not fixed[0] else height,
            default_frames=9 if tiny else version.frames,
            default_steps=4 if tiny else 50,
            default_guidance=6.0,
            fps=version.fps,
            temporal_patch=int(config.patch_size_t or 1),
            fixed_width=fixed[0],
            fixed_height=fixed[1],
        )

    def encode(self, pipe: Any, request: JobRequest, device: torch.device) -> Tensors:
        positive, negative = pipe.encode_prompt(
            prompt=request.prompt,
            negative_prompt=request.negative_prompt,
            do_classifier_free_guidance=request.uses_cfg,
            max_sequence_length=int(pipe.transformer.config.max_text_seq_length),
            device=device,
        )
        tensors = {"prompt_embeds": positive}
        if negative is not None:
            tensors["negative_prompt_embeds"] = negative
        return tensors

    def prepare(self, pipe: Any, request: JobRequest, tensors: Tensors) -> dict[str, Any]:
        kwargs = {
            **video_kwargs(request, tensors),
            "max_sequence_length": tensors["prompt_embeds"].shape[1],
        }
        if self.task == IMAGE_TO_VIDEO:
            kwargs["image"] = request_image(request)
        return kwargs

    def padding_frames(self, pipe: Any, request: JobRequest) -> int:
        """Latent frames CogVideoX 1.5 puts in front so the count divides by `patch_size_t`
        (the pipeline drops them before decoding; its "latent" output still has them)."""
        patch_t = pipe.transformer.config.patch_size_t
        if not patch_t:
            return 0
        latent_frames = (request.num_frames - 1) // pipe.vae_scale_factor_temporal + 1
        return (patch_t - latent_frames % patch_t) % patch_t

    def tiled_decode(self, pipe: Any, request: JobRequest, latents: Any) -> TiledDecode:
        from .cogvideox_vae import decode_tile, tile_grid

        latents = latents[:, self.padding_frames(pipe, request) :]
        # as the pipeline's decode_latents: (B, F, C, H, W) -> (B, C, F, H, W), then unscale
        z = 1 / pipe.vae_scaling_factor_image * latents.permute(0, 2, 1, 3, 4)
        tiles = tile_grid(pipe.vae, z)
        return _tiled_decode(pipe.vae, z, tiles, decode_tile, _video_frames(pipe))

    def latent_channels(self, pipe: Any) -> int:
        return int(pipe.vae.config.latent_channels)

    def preview_grid(self, pipe: Any, latents: torch.Tensor, request: JobRequest) -> torch.Tensor:
        return latents[0, self.padding_frames(pipe, request)]  # (batch, frames, channels, h, w)

    def decode_for_fit(self, pipe: Any, latent: torch.Tensor) -> torch.Tensor:
        z = 1 / pipe.vae_scaling_factor_image * latent[:, :, None]
        return pipe.vae.decode(z, return_dict=False)[0][0, :, 0]


_TEXT = frozenset({"text_encoder", "tokenizer"})
FAMILIES: tuple[Family, ...] = (
    _Wan(
        "wan-t2v",
        TEXT_TO_VIDEO,
        ("WanPipeline",),
        _TEXT,
        vae_float32=True,
        decodes_in_job=True,
    ),
    _WanImageToVideo(
        "wan-i2v",
        IMAGE_TO_VIDEO,
        ("WanImageToVideoPipeline",),
        _TEXT | {"image_encoder"},
        vae_float32=True,
        decodes_in_job=True,
    ),
    _Flux(
        "flux",
        TEXT_TO_IMAGE,
        ("FluxPipeline",),
        frozenset({"text_encoder", "text_encoder_2", "tokenizer", "tokenizer_2"}),
        decodes_in_job=True,
    ),
    _CogVideoX(
        "cogvideox-t2v",
        TEXT_TO_VIDEO,
        ("CogVideoXPipeline",),
        _TEXT,
        batched_cfg=True,
        decodes_in_job=True,
    ),
    _CogVideoX(
        "cogvideox-i2v",
        IMAGE_TO_VIDEO,
        ("CogVideoXImageToVideoPipeline",),
        _TEXT,
        batched_cfg=True,
        decodes_in_job=True,
    ),
)


def family_for(pipeline_class: str) -> Family:
    """The adapter for a diffusers pipeline class name; ValueError for unsupported ones.

    A loaded pipeline's settings may pick a more specific family: `registry.family_of`.
    """
    for family in FAMILIES:
        if pipeline_class in family.pipeline_classes:
            return family
    supported = sorted(c for f in FAMILIES for c in f.pipeline_classes)
    raise ValueError(f"unsupported pipeline {pipeline_class!r}; supported: {supported}")
