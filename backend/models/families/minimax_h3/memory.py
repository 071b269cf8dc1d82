"""The family's DiT in the memory plan: its dry run on the meta device."""

from __future__ import annotations

import math
from typing import Any

import torch

from .adapter import FPS

FRAMES_PER_CHUNK, LATENTS_PER_CHUNK = 17, 5
"""The video VAE's chunks: 17n+5 frames make 5n+2 latent frames (`adapter.check_frames`)."""
AUDIO_LATENTS_PER_SECOND, AUDIO_CHANNELS = 40, 2
TIMESTEPS = 3
"""Distinct timesteps of one step: the video's, the audio's and the text's."""


def latent_frames(frames: int) -> int:
    """The video VAE's latent frames for `frames` (17n+5 -> 5n+2; other counts rounded down)."""
    chunks = max(0, frames - LATENTS_PER_CHUNK) // FRAMES_PER_CHUNK
    return chunks * LATENTS_PER_CHUNK + 2


def audio_rows(frames: int, fps: float = FPS) -> int:
    """The packed sequence's audio rows for `frames` at `fps`: 40 latents a second, one block
    per stereo channel."""
    return round(frames / fps * AUDIO_LATENTS_PER_SECOND) * AUDIO_CHANNELS


def dit_forward(sizes: Any, shape: Any, sequence_degree: int) -> Any:
    """MiniMax H3's DiT at this rank's share of the packed sequence (text, audio and video
    rows). The model's `_cp_plan` splits the packed buffer at the first block, so the dry
    run calls what its forward calls with the shapes each part sees: the input projections,
    the text refiner and the packed buffer whole, the blocks and the output norm over this
    rank's share, the two output heads' gathered outputs whole."""
    dit, config = sizes.dit, sizes.dit.config
    local = sizes.share(shape, sequence_degree)
    batch, meta = local.batch, local.meta
    patch = config["patch_size"]
    rows, cols = shape.height // sizes.spatial // patch[1], shape.width // sizes.spatial // patch[2]
    video = latent_frames(shape.frames) // patch[0] * rows * cols
    audio, text = audio_rows(shape.frames, shape.fps or FPS), sizes.text_tokens
    tokens = text + audio + video
    share = math.ceil(tokens / sequence_degree)
    video_width = config["in_channels"] * math.prod(patch)
    hidden = torch.zeros((batch, tokens, config["hidden_size"]), **meta)
    hidden = hidden.index_copy(
        1,
        torch.empty((video,), device="meta", dtype=torch.long),
        dit.proj_in(torch.empty((batch, video, video_width), **meta)),
    )
    hidden = hidden.index_copy(
        1,
        torch.empty((audio,), device="meta", dtype=torch.long),
        dit.audio_proj_in(torch.empty((batch, audio, config["audio_in_channels"]), **meta)),
    )
    text_rows = dit.context_embedder(torch.empty((batch, text, config["text_dim"]), **meta))
    hidden = hidden.index_copy(
        1, torch.empty((text,), device="meta", dtype=torch.long), dit.token_refiner(text_rows)
    )
    cos, sin = dit.rope(torch.empty((tokens, 3), device="meta", dtype=torch.long))
    rotary = (cos[:share], sin[:share])
    temb = dit.time_embedder(dit.time_proj(torch.empty((TIMESTEPS,), device="meta")).to(hidden))
    indices = torch.empty((share,), device="meta", dtype=torch.long)
    hidden = hidden[:, :share]
    for block in dit.transformer_blocks:
        hidden = block(hidden, temb, indices, rotary)
    hidden = dit.norm_out(hidden, temb, indices)
    gathered = (batch, tokens, video_width)
    return dit.proj_out(hidden).new_empty(gathered), dit.audio_proj_out(hidden)
