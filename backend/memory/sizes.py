"""What a model needs in memory: weights per component, and a job's activations and decode.

Weights come from the component configs (modules built on the meta device: no file is read,
so a folder holding only the `*.json` files of a model can be planned before downloading it).
Activations and decode peaks come from running the real modules on meta tensors
(`dryrun.py`); the decode of many frames is extrapolated from a few (the causal VAEs keep a
fixed cache, and only the output grows with the frame count), so planning a 720p x 81 job
takes seconds, not the decode's minutes.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..models.families import SPECS, spec_for_dit
from ..parallel.fsdp import encoder_layers
from .dit_inputs import Share, share
from .dryrun import peak_bytes
from .settings import JobShape

log = logging.getLogger(__name__)

DIT_COMPONENTS = ("transformer", "transformer_2")
ENCODER_COMPONENTS = ("text_encoder", "text_encoder_2", "image_encoder")
ACTIVATION_FACTOR = 11
"""Fallback: a DiT block's peak activations are about 11 x tokens x hidden width elements
(measured on meta for Wan 1.3B/14B; used when a model's dry run is not possible)."""
FRAMES_DRY = {False: 3, True: 1}
"""Latent frames the decode dry run uses, whole and tiled; more are extrapolated from the
output's growth (whole: the causal cache is warm after 3; tiled: the tiles' buffers hold about
4 copies of the output: tiles kept per row with their overlap, blended rows, the joined video).
Checked against full dry runs of Wan's VAE at 832x480x81 and 1280x720x81: within 10%."""
OUTPUT_COPIES = {False: 1, True: 4}
FP8_SCALE_BYTES = 4
"""An fp8 linear weight's scale per output row (float32)."""
UNQUANTIZED_FORMATS = ("bf16", "f16", "fp16", "f32", "fp32", "float32", "empty")
DEQUANTIZED_FORMATS = ("nvfp4", "nvfp4_awq", "w4a8", "mxfp8")
"""File formats read to the compute dtype at load (never kept as the file holds them)."""
ONE_BYTE = ("fp8", "int8")
"""Stored kinds that hold a linear weight in one byte a value with a float32 scale a row."""


def _kept_quantized(fmt: str) -> bool:
    """Whether a file format (`quantization`) is counted as kept quantized under `--weights
    file`: not a float file, nor one dequantized at load (nvfp4, w4a8, mxfp8); a mix of
    layer formats by its largest (an fp4_mixed file's few fp8 layers are counted in the
    compute dtype: more than they take, never less)."""
    largest = fmt.lower().removeprefix("mixed:").split("+")[0]
    return largest not in UNQUANTIZED_FORMATS and largest not in DEQUANTIZED_FORMATS


def stored_weights(mode: str, formats: tuple[str, ...] = ()) -> str:
    """How the DiTs' weights are stored under `--weights` `mode`: "fp8", "int8" (both one byte
    a linear weight and a float32 scale a row: `ONE_BYTE`) or "compute" (the compute dtype,
    today's bf16). `formats`: the DiT files' formats (`quantization`: bf16, fp8_scaled,
    int8_convrot, Q8_0...), empty for a folder or a preset. `auto` and `file` keep a
    quantized file quantized (int8 files as int8); a GGUF file is counted as fp8 (one byte a
    weight: Q8_0's 1.06 and a Q4's 0.56 are not told apart)."""
    quantized = [f for f in formats if _kept_quantized(f)]
    if mode in ONE_BYTE:
        return mode
    if mode in ("auto", "file") and quantized:
        return "int8" if all(f.startswith("int8") for f in quantized) else "fp8"
    return "compute"


@dataclass
class ModelSizes:
    """One model's weights (bytes as served) and its DiT and VAE on meta for dry runs."""

    pipeline: str
    weights: dict[str, int]
    dit: torch.nn.Module
    vae: torch.nn.Module | None
    dtype: torch.dtype
    vae_dtype: torch.dtype
    spatial: int
    """VAE downsampling (8)."""
    temporal: int
    """VAE frames per latent frame (4; 1 for images)."""
    text_tokens: int = 512
    stored: str = "compute"
    """How the DiTs' weights are stored (`stored_weights`): "fp8"/"int8" count every linear layer's
    weight as one byte a parameter and a float32 scale per row; norms, biases, embeddings and
    convolutions keep the compute dtype."""
    upsampler: torch.nn.Module | None = None
    """The latent upscaler of two-stage jobs (`serve --upscaler`) on meta; None without."""
    upscale_factor: int = 1
    """What it multiplies the latents' width and height by."""
    vae_decoder: Any = None
    """The family's view of a VAE that decodes with a decoder of its own (`FamilySpec.
    vae_decoder`: LTX-2.5's diffusion decoder): its decode is counted by it, whole or per
    tile of the job's `decode_tiles`, not by the dry run of the config's decoder; None."""
    encoder_layer_bytes: int = 0
    """The encoders' largest shard unit (`parallel.fsdp.encoder_layers`), in the compute
    dtype: what a sharded encoder gathers at a time."""
    _cache: dict[tuple, Any] = field(default_factory=dict, repr=False)
    _dry_runs: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)
    """One dry run at a time: they run on the same meta modules (the VAE's causal cache, the
    DiT's cut block lists), and requests plan new sizes from several HTTP threads at once."""

    @property
    def dit_bytes(self) -> int:
        return sum(self.weights.get(name, 0) for name in DIT_COMPONENTS)

    @property
    def encoder_bytes(self) -> int:
        return sum(self.weights.get(name, 0) for name in ENCODER_COMPONENTS)

    @property
    def vae_bytes(self) -> int:
        """The VAE and every other module each rank holds besides the DiTs and the encoders
        (LTX-2's text connectors, audio VAE and vocoder)."""
        skip = (*DIT_COMPONENTS, *ENCODER_COMPONENTS)
        return sum(size for name, size in self.weights.items() if name not in skip)

    @functools.cached_property
    def spec(self) -> Any:
        """The family spec of this DiT (`FamilySpec`: its dry run and what else the plan
        reads); None for a DiT no family holds."""
        return spec_for_dit(type(self.dit).__name__)

    @property
    def experts(self) -> int:
        """How many DiTs the model holds (2: a high- and a low-noise expert, Wan 2.2 A14B)."""
        return max(1, sum(1 for name in DIT_COMPONENTS if self.weights.get(name)))

    @property
    def expert_bytes(self) -> int:
        """The largest of the DiTs, as stored."""
        return max((self.weights.get(name, 0) for name in DIT_COMPONENTS), default=0)

    @functools.cached_property
    def block_bytes(self) -> tuple[int, int]:
        """(largest block, everything outside the blocks) of one DiT, in bytes as stored."""
        from ..parallel.fsdp import transformer_blocks

        blocks = transformer_blocks(self.dit)
        largest = max((self._stored(b) for b in blocks), default=self._stored(self.dit))
        outside = self._stored(self.dit) - sum(self._stored(b) for b in blocks)
        return largest, outside

    @functools.cached_property
    def largest_leaf_bytes(self) -> int:
        leaves = (m for m in self.dit.modules() if not list(m.children()))
        return max((self._stored(m) for m in leaves), default=0)

    @functools.cached_property
    def upcast_bytes(self) -> int:
        """The buffer a stored-fp8 DiT upcasts one layer into in its forward: the largest
        linear weight in the compute dtype (0 when the weights are stored in it)."""
        if self.stored not in ONE_BYTE:
            return 0
        size = torch.tensor([], dtype=self.dtype).element_size()
        linears = (m.weight.numel() for m in self.dit.modules() if _quantizable(m))
        return max(linears, default=0) * size

    def _stored(self, module: torch.nn.Module) -> int:
        return stored_bytes(module, self.dtype, self.stored)

    def latent_frames(self, frames: int) -> int:
        return (frames - 1) // self.temporal + 1 if self.temporal > 1 else 1

    # -- what a family's dry run is handed (`FamilySpec.dit_forward`, `gathered`) -------------

    def share(self, shape: JobShape, sequence_degree: int) -> Share:
        """One rank's share of `shape`'s latents for this DiT (`dit_inputs.share`): what a
        family's dry run builds its meta inputs from, without importing the memory plan."""
        return share(self, shape, sequence_degree)

    @staticmethod
    def peak_bytes(run: Callable[[], Any]) -> int:
        """The peak bytes `run` allocates on the meta device (`dryrun.peak_bytes`)."""
        return peak_bytes(run)

    # -- activations ------------------------------------------------------------------

    def activations(self, shape: JobShape, sequence_degree: int) -> int:
        """Peak activation bytes of one DiT forward on one rank (its share of the tokens)."""
        key = ("dit", shape.width, shape.height, shape.frames, shape.batch, shape.references)
        key = (*key, sequence_degree)
        with self._dry_runs:
            return self._activations(key, shape, sequence_degree)

    def _activations(self, key: tuple, shape: JobShape, sequence_degree: int) -> int:
        if key not in self._cache:
            try:
                with _first_blocks(self):
                    self._cache[key] = peak_bytes(
                        lambda: _dit_forward(self, shape, sequence_degree)
                    )
            except Exception as exc:  # a model the dry run does not know: the rule of thumb
                log.debug("dry run of %s failed (%s): estimating", type(self.dit).__name__, exc)
                self._cache[key] = self._activation_rule(shape, sequence_degree)
        return self._cache[key]

    def gathered(self, shape: JobShape, sequence_degree: int) -> Any:
        """What a rank holds of the whole video beyond its share of the tokens when the
        sequence is split (`FamilySpec.gathered`: LTX-2's `families/ltx2/memory.py`); None for
        the other DiTs, whose plans split every activation that grows with the video."""
        if sequence_degree <= 1 or self.spec is None or self.spec.gathered is None:
            return None
        key = ("gathered", shape.width, shape.height, shape.frames, shape.batch, sequence_degree)
        with self._dry_runs:
            if key not in self._cache:
                self._cache[key] = self.spec.gathered(self, shape, sequence_degree)
            return self._cache[key]

    def held_across_steps(self, shape: JobShape, sequence_degree: int, branches: int = 1) -> int:
        """Bytes the pipeline keeps on one rank through its steps beside a forward's
        activations, as its family counts them (`FamilySpec.held_across_steps`: FLUX.2
        [klein] KV's cached references, Qwen-Image 2.1's cached prompt prefix); 0 for the
        pipelines that keep nothing more. `branches`: CFG's branches the rank runs in turn
        (2 without CFG parallel nor paired branches), each of which may keep its own."""
        from ..models.families import held_across_steps_for

        count = held_across_steps_for(self.pipeline)
        return 0 if count is None else count(self, shape, sequence_degree, branches)

    def _activation_rule(self, shape: JobShape, sequence_degree: int) -> int:
        config = self.dit.config
        hidden = config.get("num_attention_heads", 1) * config.get("attention_head_dim", 64)
        tokens = self.latent_frames(shape.frames) * (shape.height // (self.spatial * 2))
        tokens = tokens * (shape.width // (self.spatial * 2))
        tokens += sum(rows * cols for rows, cols in self.reference_grids(shape))
        local = math.ceil(tokens / sequence_degree) + self.text_tokens
        size = torch.tensor([], dtype=self.dtype).element_size()
        return ACTIVATION_FACTOR * shape.batch * local * hidden * size

    def reference_grids(self, shape: JobShape, sequence_degree: int = 1) -> list[tuple[int, int]]:
        """(rows, columns) of tokens of each reference image of an edit (2x2 latent patches;
        with sequence parallel, one rank's share of the rows), appended to the output's."""
        patch = self.spatial * 2
        return [
            (max(1, math.ceil(height // patch / sequence_degree)), width // patch)
            for width, height in shape.references
        ]

    # -- decode -----------------------------------------------------------------------

    def decode(self, shape: JobShape, *, tiled: bool) -> int:
        """Peak bytes of the VAE decode of one job (weights not included)."""
        if self.vae is None:
            return 0
        if self.vae_decoder is not None:  # its own budget: paradit's tiling does not apply
            return self._own_decode(shape)
        key = ("vae", shape.width, shape.height, shape.frames, tiled)
        with self._dry_runs:
            if key not in self._cache:
                self._cache[key] = self._decode(shape, tiled)
            return self._cache[key]

    def decode_latent(self, shape: JobShape) -> tuple[int, int, int]:
        """The latents (F, H, W) one sample of `shape` decodes."""
        spatial = self.spatial
        return self.latent_frames(shape.frames), shape.height // spatial, shape.width // spatial

    def _own_decode(self, shape: JobShape) -> int:
        """The decode by the VAE's own decoder (`vae_decoder`): its whole decode's peak, or
        with the job's `decode_tiles` the largest tile's peak and the pixels of the tiles
        decoded before it, kept on the device until the gather (all of them: one rank may
        decode every tile)."""
        own, latent = self.vae_decoder, self.decode_latent(shape)
        if shape.decode_tiles is None:
            return own.peak(latent, self.vae_dtype)
        tiles = own.tiles(latent, shape.decode_tiles)
        largest = max(own.peak(tile, self.vae_dtype) for tile in tiles)
        kept = sum(own.output(tile, self.vae_dtype) for tile in tiles)
        return largest + kept

    def _dry_area(self, shape: JobShape, tiled: bool) -> tuple[int, int]:
        """Pixels (height, width) the decode dry run covers. A tiled decode's working set is
        a few tiles whatever the size (the VAE's tiles are decoded one by one): it runs on 3 x 3
        tiles at most, and the output's growth beyond them is added, as for frames."""
        geometry = self._tile_geometry() if tiled else None
        if geometry is None:
            return shape.height, shape.width
        (tile_h, tile_w), (stride_h, stride_w) = geometry
        step = self.spatial
        height = min(shape.height, (tile_h + 2 * stride_h) // step * step)
        width = min(shape.width, (tile_w + 2 * stride_w) // step * step)
        return height, width

    def _tile_geometry(self) -> tuple[tuple[int, int], tuple[int, int]] | None:
        """The VAE's tiles: (height, width) and strides in sample pixels; None: no tiling."""
        vae = self.vae
        tile_h = getattr(vae, "tile_sample_min_height", None) or getattr(
            vae, "tile_sample_min_size", None
        )
        tile_w = getattr(vae, "tile_sample_min_width", None) or tile_h
        if not tile_h or not tile_w:
            return None
        overlap = getattr(vae, "tile_overlap_factor", 0.25)
        stride_h = getattr(vae, "tile_sample_stride_height", None) or int(tile_h * (1 - overlap))
        stride_w = getattr(vae, "tile_sample_stride_width", None) or int(tile_w * (1 - overlap))
        return (tile_h, tile_w), (stride_h, stride_w)

    def tile_costs(self, shape: JobShape) -> list[int]:
        """Each tile's pixels in a tiled decode of `shape` (tiles every stride, the last ones
        ragged, as `vae_tiles.grid` cuts them); one entry: the decode is one tile. A VAE
        with its own decoder (`vae_decoder`): each tile's latent voxels of the job's
        `decode_tiles`."""
        if self.vae_decoder is not None:  # the job's `decode_tiles`, else one whole decode
            if shape.decode_tiles is None:
                return [shape.height * shape.width * shape.frames]
            tiles = self.vae_decoder.tiles(self.decode_latent(shape), shape.decode_tiles)
            return [math.prod(tile) for tile in tiles]
        geometry = None if self.vae is None else self._tile_geometry()
        if geometry is None:
            return [shape.height * shape.width]
        (tile_h, tile_w), (stride_h, stride_w) = geometry
        if shape.height <= tile_h and shape.width <= tile_w:
            return [shape.height * shape.width]
        rows = [min(tile_h, shape.height - top) for top in range(0, shape.height, stride_h)]
        cols = [min(tile_w, shape.width - left) for left in range(0, shape.width, stride_w)]
        return [rows_px * cols_px for rows_px in rows for cols_px in cols]

    def add_upsampler(self, module: torch.nn.Module, factor: int) -> None:
        """Count the latent upscaler (`serve --upscaler`): its weights, whole on every rank
        (with the VAE's), and its activations between a two-stage job's stages."""
        meta = torch.nn.Module.to(_on_meta(module), self.dtype)
        self.weights["latent_upsampler"] = stored_bytes(meta, self.dtype)
        self.upsampler, self.upscale_factor = meta, factor

    def upsample(self, shape: JobShape) -> int:
        """Peak activation bytes of the latent upscaler for a two-stage job whose final size
        is `shape`: its dry run on stage 1's latents (the final latent size / the factor, every
        latent frame, batch 1) up to the final latent size; 0 without an upscaler. Counted
        for every job while one is loaded (an upper bound for one-stage jobs)."""
        if self.upsampler is None:
            return 0
        factor = self.upscale_factor
        height = max(1, shape.height // factor // self.spatial)
        width = max(1, shape.width // factor // self.spatial)
        channels = int(self.upsampler.config["in_channels"])
        z_shape = (1, channels, self.latent_frames(shape.frames), height, width)
        key = ("upsample-dry", z_shape)
        with self._dry_runs:
            if key not in self._cache:
                z = torch.empty(z_shape, dtype=self.dtype, device="meta")
                self._cache[key] = peak_bytes(lambda: self.upsampler(z))
        return self._cache[key]

    def _decode(self, shape: JobShape, tiled: bool) -> int:
        frames = self.latent_frames(shape.frames)
        video = self.temporal > 1
        least = self.spec.vae_dry_frames if self.spec is not None else 0
        dry = min(frames, max(FRAMES_DRY[tiled], least)) if video else 1
        dry_height, dry_width = self._dry_area(shape, tiled)
        latent = (dry_height // self.spatial, dry_width // self.spatial)
        channels = int(self.vae.config.get("latent_channels") or self.vae.config.get("z_dim"))
        frame_axis = video or (self.spec is not None and self.spec.vae_frame_axis)
        z_shape = (1, channels, dry, *latent) if frame_axis else (1, channels, *latent)

        peak = self._dry_decode(z_shape, tiled)
        # the output (and its copies while tiles and frames are joined) grows beyond the dry run
        full = frames * shape.height * shape.width
        grown = full - dry * dry_height * dry_width
        if grown > 0:
            element = torch.tensor([], dtype=self.vae_dtype).element_size()
            out_frames = self.temporal if video else 1
            peak += grown * 3 * out_frames * element * OUTPUT_COPIES[tiled]
        return peak

    def _dry_decode(self, z_shape: tuple[int, ...], tiled: bool) -> int:
        """The decode dry run's peak on latents of `z_shape`. Kept by the latents' shape, not
        the job's: every job larger than 3 x 3 tiles runs the same tiled dry run, so finding
        the largest size that fits (one plan per candidate size) runs it once, not per size."""
        key = ("vae-dry", z_shape, tiled)
        with self._dry_runs:
            return self._dry_decode_locked(key, z_shape, tiled)

    def _dry_decode_locked(self, key: tuple, z_shape: tuple[int, ...], tiled: bool) -> int:
        if key not in self._cache:

            def run() -> Any:
                z = torch.empty(z_shape, dtype=self.vae_dtype, device="meta")
                return self.vae.decode(z, return_dict=False)[0]

            switch = self.vae.enable_tiling if tiled else self.vae.disable_tiling
            switch()
            try:
                self._cache[key] = peak_bytes(run)
            finally:
                self.vae.disable_tiling()
        return self._cache[key]


ONE_BLOCK_EXACT = frozenset(
    name for spec in SPECS if spec.dry_run_one_block for name in spec.transformer_classes
)
"""DiTs whose blocks of one list all peak alike (`FamilySpec.dry_run_one_block`)."""


@contextlib.contextmanager
def _first_blocks(sizes: ModelSizes) -> Iterator[None]:
    """The meta DiT with its top-level block lists cut to their first block, where that is
    exact (`FamilySpec.dry_run_one_block`)."""
    dit = sizes.dit
    if sizes.spec is None or not sizes.spec.dry_run_one_block:
        yield
        return
    _ = sizes.block_bytes, sizes.largest_leaf_bytes, sizes.upcast_bytes  # kept before the cut
    lists = {
        name: child
        for name, child in dit.named_children()
        if isinstance(child, torch.nn.ModuleList) and len(child) > 1
    }
    for name, blocks in lists.items():
        setattr(dit, name, blocks[:1])
    try:
        yield
    finally:
        for name, blocks in lists.items():
            setattr(dit, name, blocks)


def _numel(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def _quantizable(module: torch.nn.Module) -> bool:
    """A layer `--weights fp8` stores in fp8: a linear layer (its weight; the bias stays), or
    one a loaded DiT holds stored already (`models.quantized.QuantLinear`)."""
    from ..models.quantized import QuantLinear

    return isinstance(module, (torch.nn.Linear, QuantLinear))


def stored_bytes(module: torch.nn.Module, dtype: torch.dtype, stored: str = "compute") -> int:
    """Bytes of `module`'s parameters as stored: every parameter in `dtype`, or with `stored`
    "fp8"/"int8" each linear weight in one byte a parameter and a float32 scale per output
    row."""
    size = torch.tensor([], dtype=dtype).element_size()
    total = _numel(module) * size
    if stored in ONE_BYTE:
        for layer in module.modules():
            if _quantizable(layer):
                weight = layer.weight
                total -= weight.numel() * (size - 1)
                scale = getattr(layer, "weight_scale", None)  # counted above in `dtype`
                total -= 0 if scale is None else scale.numel() * size
                total += weight.shape[0] * FP8_SCALE_BYTES
    return total


def _dit_forward(sizes: ModelSizes, shape: JobShape, sequence_degree: int) -> Any:
    """One forward of the meta DiT at this rank's share of the job's tokens: its family's
    dry run (`FamilySpec.dit_forward`)."""
    spec = sizes.spec
    if spec is None or spec.dit_forward is None:
        raise ValueError(f"no dry run for {type(sizes.dit).__name__}")
    return spec.dit_forward(sizes, shape, sequence_degree)


# -- building a model's sizes --------------------------------------------------------------


def sizes_of_pipeline(
    pipe: Any, family: Any, dtype: torch.dtype, stored: str = "compute"
) -> ModelSizes:
    """Sizes of a built pipeline (real weights, sharded or not, or on meta already), the
    DiTs counted as `stored` (`stored_weights`): the plan's model of the stored bytes, from
    the architecture, whatever the loaded modules hold."""
    vae_dtype = torch.float32 if family.vae_float32 else dtype
    weights, metas = {}, {}
    spec = spec_for_dit(type(pipe.transformer).__name__)
    for name, module in pipe.components.items():
        if not isinstance(module, torch.nn.Module):
            continue
        meta = _on_meta(module)
        metas[name] = meta
        component_dtype = vae_dtype if name == "vae" else dtype
        weights[name] = stored_bytes(
            meta, component_dtype, stored if name in DIT_COMPONENTS else "compute"
        )
    own = _vae_decoder(spec, getattr(pipe, "vae", None))
    if own is not None:  # its own decoder in place of the config's
        weights["vae"] += stored_bytes(own.module, vae_dtype)
        weights["vae"] -= stored_bytes(metas["vae"].decoder, vae_dtype)
    # nn.Module.to, not diffusers' (which warns about modules it would keep in float32: these
    # copies only count bytes and run on meta)
    dit = torch.nn.Module.to(metas["transformer"], dtype)
    vae = metas.get("vae")
    if vae is not None:  # the tile sizes the real VAE was given (PARADIT_VAE_TILE)
        for name, value in vars(pipe.vae).items():
            if name.startswith("tile_"):
                setattr(vae, name, value)
    temporal = int(
        getattr(pipe, "vae_scale_factor_temporal", 0)
        or getattr(pipe, "vae_temporal_compression_ratio", 0)  # LTX-2's name
        or getattr(getattr(pipe, "vae", None), "temporal_compression_ratio", 1)  # the VAE's
        or 1
    )
    spatial = int(
        getattr(pipe, "vae_scale_factor_spatial", 0)
        or getattr(pipe, "vae_spatial_compression_ratio", 0)  # LTX-2's name
        or getattr(pipe, "vae_scale_factor", 8)
    )
    text_tokens = int(getattr(family, "text_tokens", lambda _pipe: 512)(pipe))
    layer_bytes = max(
        (
            stored_bytes(layer, dtype, "compute")
            for name in ENCODER_COMPONENTS
            if name in metas
            for layer in encoder_layers(metas[name])
        ),
        default=0,
    )
    return ModelSizes(
        pipeline=type(pipe).__name__,
        weights=weights,
        dit=dit,
        vae=None if vae is None else torch.nn.Module.to(vae, vae_dtype),
        dtype=dtype,
        vae_dtype=vae_dtype,
        spatial=spatial,
        temporal=temporal if family.task != "text-to-image" else 1,
        text_tokens=text_tokens,
        stored=stored,
        vae_decoder=own,
        encoder_layer_bytes=layer_bytes,
    )


def _vae_decoder(spec: Any, vae: Any) -> Any:
    """The family's view of a VAE that decodes with its own decoder (`FamilySpec.
    vae_decoder`), else None."""
    if vae is None or spec is None or spec.vae_decoder is None:
        return None
    return spec.vae_decoder(vae)


def _on_meta(module: torch.nn.Module) -> torch.nn.Module:
    """The same architecture on the meta device (built from its config, nothing copied)."""
    config = module.config
    with torch.device("meta"):
        if hasattr(type(module), "from_config"):  # diffusers
            return type(module).from_config(dict(config))
        return type(module)(config)  # transformers


def file_formats(model: str) -> tuple[str, ...]:
    """The weight format of each DiT file of a single-file model (`quantization`: bf16,
    fp8_scaled, Q8_0...); () for a preset or a folder. Headers only."""
    from ..models.loading import ModelSource
    from ..models.single_file.quant import quantization

    source = ModelSource.parse(model)
    if source.kind != "file":
        return ()
    dits = source.resolved_files().dits
    return tuple(quantization(part.header) for part in dits.values())


def meta_pipeline(model: str) -> Any:
    """A model's pipeline with every module on meta: from a preset or a folder's configs
    (weights need not be there). Hub ids are refused: nothing can be read without them."""
    from ..models.loading import ModelSource
    from ..models.preset_names import is_tiny_preset
    from ..models.presets import build_preset
    from ..models.single_file.build import meta_pipeline_of_files
    from ..models.single_file.given import is_model_file

    if is_model_file(model):  # the DiT(s) from the file headers; encoders as the presets'
        return meta_pipeline_of_files(model)
    source = ModelSource.parse(model)
    if source.kind == "preset":
        if is_tiny_preset(source.name):
            return build_preset(source.name)  # tiny: built for real in a moment
        return build_preset(source.name, device="meta")
    if source.kind == "hub":
        raise ValueError(
            "planning reads the model's configs: give a preset or a folder (the *.json files "
            "of a diffusers repo are enough)"
        )
    return _folder_on_meta(Path(source.name))


def _folder_on_meta(folder: Path) -> Any:
    import diffusers
    import transformers

    from ..models.loading import is_modular_index, pipeline_index
    from ..models.random_presets import assemble_pipeline

    index = pipeline_index(folder) or {}
    parts: dict[str, Any] = {}
    for name, value in index.items():
        if not (isinstance(value, list) and len(value) == 2 and value[0]):
            if not name.startswith("_"):
                parts[name] = None if isinstance(value, list) else value
            continue
        library, class_name = value
        path = folder / name
        if class_name.endswith(("Scheduler", "Guidance")):  # settings, no weights
            parts[name] = getattr(diffusers, class_name).from_config(
                getattr(diffusers, class_name).load_config(path)
            )
        elif library == "diffusers" or hasattr(diffusers.pipelines, library):
            # components that live with their pipeline: ("ltx2", "LTX2TextConnectors")
            model_class = getattr(diffusers, class_name, None) or _pipeline_class(
                library, class_name
            )
            with torch.device("meta"):
                parts[name] = model_class.from_config(model_class.load_config(path))
        elif library == "transformers" and not class_name.endswith(("Tokenizer", "TokenizerFast")):
            if "Processor" in class_name:
                parts[name] = None
                continue
            model_class = getattr(transformers, class_name)
            config = transformers.AutoConfig.from_pretrained(path)
            with torch.device("meta"):
                parts[name] = model_class(config)
        else:
            parts[name] = None
    if is_modular_index(index):  # its blocks declare the components: no settings passed
        components = {name: parts[name] for name in parts if isinstance(index[name], list)}
        return assemble_pipeline(index["_class_name"], components, {})
    return getattr(diffusers, index["_class_name"])(**parts)


def _pipeline_class(library: str, class_name: str) -> Any:
    """A component class that a pipeline package holds (LTX-2's connectors and vocoder)."""
    import importlib

    package = importlib.import_module(f"diffusers.pipelines.{library}")
    found = getattr(package, class_name, None)
    if found is None:  # LTX2Vocoder is only in its module
        for module in ("vocoder", "connectors"):
            try:
                found = getattr(importlib.import_module(f"{package.__name__}.{module}"), class_name)
                break
            except (ImportError, AttributeError):
                continue
    if found is None:
        raise ValueError(f"no class {class_name!r} in diffusers' {library} pipelines")
    return found
