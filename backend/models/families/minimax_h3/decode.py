"""H3's video decode as independent pieces: its temporal clips.

`AutoencoderKLMiniMaxH3.decode` decodes the latent video in clips of `tokens_chunk_size`
latent frames plus `token_overlap` more (the frames its encoder dropped), each clip on its
own (spatially tiled, as released: nothing carried from one clip to the next), then cuts
every decoded clip into its chunks, cross-fades consecutive chunks over `frame_overlap`
frames and trims the frames of the latent frames repeated to fill the last clip. The clips
are the pieces any rank can decode (`clip`); `join` is what the VAE does after them, on the
leader, in the same order and arithmetic, so the frames are the VAE's own decode's byte for
byte (tests/families/test_family_contract.py deals the clips over 2 ranks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class ClipPlan:
    """The clips of one decode: the latents padded as the VAE pads them, and its geometry."""

    z: torch.Tensor
    """The latents, denormalised, in the decoder's dtype, padded with repeats of the last
    latent frame to whole clips."""
    pad_tokens: int
    num_clips: int
    chunk: int
    """Latent frames a clip starts apart (`tokens_chunk_size`)."""
    overlap: int
    """Latent frames a clip reads past the next one's start (`token_overlap`)."""

    def __post_init__(self) -> None:
        if self.num_clips < 1 or self.chunk < 1 or self.pad_tokens < 0 or self.overlap < 0:
            raise ValueError(
                f"a decode has at least one clip of at least one latent frame, got "
                f"{self.num_clips} clips of {self.chunk} (+{self.overlap}), {self.pad_tokens} "
                "padded"
            )


def plan_clips(vae: Any, z: torch.Tensor) -> ClipPlan:
    """The clips `vae.decode(z)` decodes (`z` denormalised, one batch item)."""
    if z.shape[0] != 1:
        raise ValueError(f"H3's clip decode takes one video, got a batch of {z.shape[0]}")
    from diffusers.models.modeling_utils import get_parameter_dtype

    z = z.to(get_parameter_dtype(vae.post_quant_conv))  # as `decode` does
    chunk, drop = int(vae.tokens_chunk_size), int(vae.config.token_drop)
    tokens = z.shape[2] + drop
    pad = (-tokens) % chunk
    clips = (tokens + pad) // chunk - int(drop > 0)
    if pad:
        z = torch.cat([z, z[:, :, -1:].repeat(1, 1, pad, 1, 1)], dim=2)
    return ClipPlan(z, pad, clips, chunk, int(vae.token_overlap))


def clip(vae: Any, plan: ClipPlan, index: int) -> torch.Tensor:
    """Clip `index` decoded (spatially tiled when the VAE's tiling is on)."""
    if not 0 <= index < plan.num_clips:
        raise ValueError(f"clip {index} of a decode of {plan.num_clips}")
    start = index * plan.chunk
    with torch.no_grad():
        return vae._decode_clip(plan.z[:, :, start : start + plan.chunk + plan.overlap])  # noqa: SLF001


def join(vae: Any, plan: ClipPlan, decoded: list[torch.Tensor]) -> torch.Tensor:
    """The decoded clips, in order, as the VAE joins them: each cut into its chunks after
    the pre-padding frames, consecutive chunks cross-faded, the padded tail trimmed."""
    if len(decoded) != plan.num_clips:
        raise ValueError(f"a decode of {plan.num_clips} clips joins as many, got {len(decoded)}")
    drop = int(vae.config.token_drop)
    ratio = int(vae.temporal_compression_ratio)
    frames_per_chunk = plan.chunk * ratio
    pieces: list[torch.Tensor] = []
    carried = None
    for one in decoded:
        for part in range(int(drop > 0) + 1):
            start = part * frames_per_chunk
            piece = one[:, :, start : start + frames_per_chunk][:, :, vae.frame_pre_padding :]
            if part == 0:
                if carried is not None:
                    piece = vae._blend(carried, piece, vae.frame_overlap, dim=-3)  # noqa: SLF001
                pieces.append(piece)
            else:
                carried = piece
    if carried is not None:
        pieces.append(carried)
    video = torch.cat(pieces, dim=2)
    if plan.pad_tokens:
        video = video[:, :, : -_padded_frames(vae, plan)]
    return video


def _padded_frames(vae: Any, plan: ClipPlan) -> int:
    """The frames the repeated latent frames made: a clip's last latent frame covers
    `clip_length % ratio` frames, the others `ratio`."""
    ratio = int(vae.temporal_compression_ratio)
    tail = int(vae.config.clip_length) % ratio
    before = plan.z.shape[2] - plan.pad_tokens
    return sum(
        tail if tail and (before + k) % plan.chunk == 0 else ratio for k in range(plan.pad_tokens)
    )
