"""Model adapters: what paradit needs to know about each family of diffusers pipelines.

An adapter knows a family's limits, which components only the encoding rank needs, how to
encode a request on that rank, and which arguments to give the diffusers pipeline on every
rank. It knows nothing about distribution.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..contract import IMAGE_TO_VIDEO, TEXT_TO_IMAGE, TEXT_TO_VIDEO, JobRequest, Limits

Tensors = dict[str, torch.Tensor]


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

    def frames(self, output: Any) -> np.ndarray:
        """The pipeline's numpy output as frames, float (F, H, W, 3) in 0..1."""
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

    def _common(self, request: JobRequest, tensors: Tensors) -> dict[str, Any]:
        return {
            "prompt_embeds": tensors["prompt_embeds"],
            "negative_prompt_embeds": tensors.get("negative_prompt_embeds"),
            "height": request.height,
            "width": request.width,
            "num_frames": request.num_frames,
            "num_inference_steps": request.num_inference_steps,
            "guidance_scale": request.guidance_scale,
        }

    def prepare(self, pipe: Any, request: JobRequest, tensors: Tensors) -> dict[str, Any]:
        return self._common(request, tensors)

    def frames(self, output: Any) -> np.ndarray:
        return np.asarray(output[0])[0]  # (batch, F, H, W, 3) -> the one video

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
        return {**self._common(request, tensors), "image": request_image(request)}

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


_TEXT = frozenset({"text_encoder", "tokenizer"})
FAMILIES: tuple[Family, ...] = (
    _Wan("wan-t2v", TEXT_TO_VIDEO, ("WanPipeline",), _TEXT, vae_float32=True),
    _WanImageToVideo(
        "wan-i2v",
        IMAGE_TO_VIDEO,
        ("WanImageToVideoPipeline",),
        _TEXT | {"image_encoder"},
        vae_float32=True,
    ),
    _Flux(
        "flux",
        TEXT_TO_IMAGE,
        ("FluxPipeline",),
        frozenset({"text_encoder", "text_encoder_2", "tokenizer", "tokenizer_2"}),
    ),
)


def family_for(pipeline_class: str) -> Family:
    """The adapter for a diffusers pipeline class name; ValueError for unsupported ones."""
    for family in FAMILIES:
        if pipeline_class in family.pipeline_classes:
            return family
    supported = sorted(c for f in FAMILIES for c in f.pipeline_classes)
    raise ValueError(f"unsupported pipeline {pipeline_class!r}; supported: {supported}")
