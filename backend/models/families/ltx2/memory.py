"""LTX-2's DiT in the memory plan: its dry run, and what a split sequence keeps whole.

`families/ltx2/parallel.py` splits only the video tokens; the audio stream and the text
stay whole on every rank. The dry run (`forward`) runs the DiT at one rank's share of the video
tokens. Two things hold the whole video on every rank under a split, beyond that share
(`gathered`):

- the rotary tables: the rope modules compute them for every video token and the plan splits
  their output into views, which keep the whole tables alive for the forward (`rope` at the
  video width and `cross_attn_rope` at the audio-video width, a cosine and a sine each, in
  float32);
- the audio's attention to the video (`video_to_audio_attn`, one block at a time): the video
  tokens and their key rotary table are gathered, then projected to keys and values of every
  video token. Its peak is measured by running that attention on meta at the whole video.

The gathered output of `proj_out` (the video's output channels, every token) is added too.
The sum is counted on top of the share's peak: an upper bound, as the gather happens while
part of the share's activations are live.

LTX-2.5's diffusion video decoder (`diffusion_vae.py`, `vae.diffusion_decoder`) decodes in
place of the conv decoder the VAE's config describes: `diffusion_decode` gives the plan its
weights and ComfyUI's decode budget (`diffusion_vae.decode_bytes`: comfy/sd.py's
`memory_used_decode` of that VAE, 1700 x 512 elements a latent voxel), whole or per tile of a
job's `decode_tiles`. A formula, not a dry run: diffusers' attention there is FlexAttention
(or NATTEN on a GPU), whose meta run would count the score matrix a CPU without
`torch.compile` materialises, not what a GPU's kernel holds.

LTX-2.3 (the same classes): its rotary tables are per head (`rope_type="split"`: (batch,
heads, tokens, width / 2 / heads), half the interleaved table's elements per token), and its
DiT reads the text at the streams' own widths (the connectors project it per stream; LTX-2.0's
DiT projects the connectors' Gemma-wide text itself).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from ....decode_tiles import DecodeTiles
from . import diffusion_tiles, diffusion_vae
from .adapter import FPS

FLOAT32 = 4
"""Bytes of a rotary table's elements (the rope modules compute in float32)."""


@dataclass(frozen=True)
class Grid:
    """A job's tokens as LTX-2's DiT sees them on one rank (patch 1 over the latents)."""

    frames: int
    rows: int
    """This rank's rows of latent pixels (all of them when the sequence is whole)."""
    cols: int
    audio: int
    """Audio latent frames: the job's own (`audio_latent_frames`), else the pipeline's count
    for the video's seconds at the job's frame rate."""
    fps: float
    """The job's frame rate (the family's own where the job gives none)."""

    @property
    def video(self) -> int:
        return self.frames * self.rows * self.cols


def grid(sizes: Any, shape: Any, sequence_degree: int = 1) -> Grid:
    """The job's grid on one rank of a sequence split `sequence_degree` ways (by rows)."""
    config = sizes.dit.config
    fps = shape.fps or FPS
    per_second = config["audio_sampling_rate"] / config["audio_hop_length"]
    counted = max(1, round(shape.frames / fps * per_second / config["audio_scale_factor"]))
    return Grid(
        frames=sizes.latent_frames(shape.frames),
        rows=math.ceil(shape.height // sizes.spatial / sequence_degree),
        cols=shape.width // sizes.spatial,
        audio=shape.audio_latent_frames or counted,
        fps=float(fps),
    )


@dataclass(frozen=True)
class Gathered:
    """What one rank holds of the whole video beyond its share, in bytes."""

    video_tokens: int
    rotary_tables: int
    """The whole rotary tables beyond this rank's share of them."""
    attention: int
    """The peak of the audio's attention over the gathered video (inputs included)."""
    output: int
    """The gathered `proj_out` output."""

    @property
    def total(self) -> int:
        return self.rotary_tables + self.attention + self.output

    @property
    def reason(self) -> str:
        gib = 1024**3
        return (
            f"LTX-2's audio attends to all {self.video_tokens} video tokens: under the split "
            f"each rank gathers them in every block ({self.attention / gib:.2f} GiB at the "
            f"attention's peak) and keeps the whole rotary tables "
            f"({self.rotary_tables / gib:.2f} GiB more than its share): gathered_video"
        )


def gathered(sizes: Any, shape: Any, sequence_degree: int) -> Gathered | None:
    """What a split sequence keeps whole on every rank (None when the sequence is whole)."""
    if sequence_degree <= 1:
        return None
    dit, config = sizes.dit, sizes.dit.config
    whole, share = grid(sizes, shape), grid(sizes, shape, sequence_degree)
    batch, element = shape.batch, torch.tensor([], dtype=sizes.dtype).element_size()
    widths = _table_width(dit.rope) + _table_width(dit.cross_attn_rope)
    rotary = 2 * batch * (whole.video - share.video) * widths * FLOAT32
    output = batch * whole.video * config["out_channels"] * element
    attention = sizes.peak_bytes(lambda: _audio_to_whole_video(sizes, batch, whole))
    return Gathered(whole.video, rotary, attention, output)


def _audio_to_whole_video(sizes: Any, batch: int, whole: Grid) -> Any:
    """One block's `video_to_audio_attn` with its video keys' inputs gathered (made here, so
    the measure counts them) and the audio queries whole (counted by the share's dry run)."""
    dit = sizes.dit
    attn = dit.transformer_blocks[0].video_to_audio_attn
    meta = {"device": "meta", "dtype": sizes.dtype}
    audio = torch.empty((batch, whole.audio, attn.to_q.in_features), **meta)
    query_table = _rotary_table(dit.cross_attn_audio_rope, batch, whole.audio)
    video = torch.empty((batch, whole.video, attn.to_k.in_features), **meta)
    key_tables = tuple(_rotary_table(dit.cross_attn_rope, batch, whole.video) for _ in "cs")
    return attn(
        audio,
        encoder_hidden_states=video,
        query_rotary_emb=(query_table, query_table),
        key_rotary_emb=key_tables,
    )


def _table_width(rope: Any) -> int:
    """A rotary table's elements per token (a cosine's or a sine's): the rope's width when
    interleaved, half of it split over the heads."""
    return rope.dim if rope.rope_type == "interleaved" else rope.dim // 2


def _rotary_table(rope: Any, batch: int, tokens: int) -> torch.Tensor:
    """A meta cosine (or sine) table of `rope` for `tokens` tokens, in its layout."""
    if rope.rope_type == "interleaved":
        return torch.empty((batch, tokens, rope.dim), device="meta")
    heads = rope.num_attention_heads
    return torch.empty((batch, heads, tokens, rope.dim // 2 // heads), device="meta")


def text_widths(config: Any) -> tuple[int, int]:
    """The widths of the text the DiT reads (video, audio): the Gemma width the connectors
    keep for LTX-2.0's DiT (it projects the text itself), the streams' cross-attention
    widths for LTX-2.3's (the connectors project it)."""
    if config.get("use_prompt_embeddings", True):
        return config["caption_channels"], config["caption_channels"]
    return config["cross_attention_dim"], config["audio_cross_attention_dim"]


def forward(sizes: Any, shape: Any, sequence_degree: int) -> Any:
    """LTX-2's DiT at this rank's share of the video tokens, the whole audio stream and the
    whole text, as `families/ltx2/parallel.py` splits them (what stays whole beyond the share:
    `gathered`)."""
    dit, config = sizes.dit, sizes.dit.config
    batch, meta = shape.batch, {"device": "meta", "dtype": sizes.dtype}
    share = grid(sizes, shape, sequence_degree)
    video_text, audio_text = text_widths(config)
    text = (batch, sizes.text_tokens, video_text)
    audio_text_shape = (batch, sizes.text_tokens, audio_text)
    audio = (batch, share.audio, config["audio_in_channels"])
    step = torch.empty((batch,), device="meta")
    blocks = dit.transformer_blocks
    dit.transformer_blocks = blocks[:1]  # one block's peak is every block's (on meta: 48x faster)
    try:
        return dit(
            hidden_states=torch.empty((batch, share.video, config["in_channels"]), **meta),
            audio_hidden_states=torch.empty(audio, **meta),
            encoder_hidden_states=torch.empty(text, **meta),
            audio_encoder_hidden_states=torch.empty(audio_text_shape, **meta),
            timestep=step,
            sigma=step,
            encoder_attention_mask=torch.empty(text[:2], **meta),
            audio_encoder_attention_mask=torch.empty(text[:2], **meta),
            num_frames=share.frames,
            height=share.rows,
            width=share.cols,
            fps=share.fps,
            audio_num_frames=share.audio,
            return_dict=False,
        )
    finally:
        dit.transformer_blocks = blocks


SUGGESTED_TILES = (
    DecodeTiles(512, 64, 64, 16),
    DecodeTiles(384, 64, 48, 16),
    DecodeTiles(256, 64, 32, 8),
)
"""`decode_tiles` a refusal names, the first whose tiles fit: ComfyUI's LTX-2.5 templates'
VAEDecodeTiled (512, 64, 64, 16), then smaller tiles of the node's rules."""


@dataclass(frozen=True)
class DiffusionDecode:
    """LTX-2.5's diffusion video decoder as the memory plan counts it (`FamilySpec.
    vae_decoder`): ComfyUI's budget per decode (one whole decode, or each tile's)."""

    module: torch.nn.Module
    temporal: int
    spatial: int
    name: str = "LTX-2.5's diffusion video decoder"

    def peak(self, latent: tuple[int, int, int], dtype: torch.dtype) -> int:
        """One decode of latents (F, H, W) (a whole decode or one tile's): ComfyUI's budget."""
        return diffusion_vae.decode_bytes(latent, dtype)

    def output(self, latent: tuple[int, int, int], dtype: torch.dtype) -> int:
        """The decoded pixels of latents (F, H, W): (8F - 7) x 32H x 32W x 3 elements."""
        frames, height, width = latent
        size = diffusion_tiles.out_length(0, frames, self.temporal, self.spatial)
        size *= height * self.spatial * width * self.spatial * 3
        return size * torch.tensor([], dtype=dtype).element_size()

    def tiles(self, latent: tuple[int, int, int], tiles: DecodeTiles) -> list[tuple[int, ...]]:
        """Each tile's latents (f, h, w) of one sample's latents `latent` (F, H, W) under
        ComfyUI's tiles (`diffusion_tiles.placements`); one: the latents fit one tile."""
        where = diffusion_tiles.placements((1, 1, *latent), tiles, self.temporal, self.spatial)
        return [tuple(n for _, n in p.latent) for p in where]

    def suggest(self, latent: tuple[int, int, int]) -> list[DecodeTiles]:
        """`SUGGESTED_TILES` that cut `latent` into more than one tile, each of whose
        grids the decoder's attention windows fit (`diffusion_vae.window_problem`)."""
        out = []
        for tiles in SUGGESTED_TILES:
            shapes = set(self.tiles(latent, tiles))
            if len(shapes) > 1 or shapes != {latent}:
                fits = all(diffusion_vae.window_problem(self.module, s) is None for s in shapes)
                out += [tiles] if fits else []
        return out


def diffusion_decode(vae: Any) -> DiffusionDecode | None:
    """The plan's view of a pipeline's `vae` that carries LTX-2.5's diffusion decoder
    (`FamilySpec.vae_decoder`), its decoder a copy on meta (the plan keeps no weights);
    None for the conv VAE."""
    decoder = diffusion_vae.decoder_of(vae)
    if decoder is None:
        return None
    with torch.device("meta"):
        meta = type(decoder).from_config(dict(decoder.config))
    temporal, spatial = diffusion_tiles.ratios(meta)
    return DiffusionDecode(meta, temporal, spatial)
