"""The memory plan: where each component lives and how a job decodes, with the reasons.

At start the group takes the cheapest layout that fits the model's default job in the
budget, trying in this order (each level keeps the fallbacks before it):

    0  DiT sharded over the replica's ranks (or resident on one), text encoder on the device
    1  + VAE tiling
    2  + text encoder on CPU (encoding once per job on the CPU)
    3  + DiT model offload (one GPU: the DiTs move in for the steps, out for the decode)
    4  + experts one at a time (two-expert models, Wan 2.2 A14B: the active expert sharded
         or resident on the device, the other in pinned host memory, swapped when the other
         one's first step comes: twice a job, at the switch step and at the next job's start)
    5  + DiT group offload (blocks stream in one by one; FSDP2's CPU offload when sharded)
    6  + DiT sequential offload (one GPU: leaf modules stream in; slowest)

At levels 0 and 1 the text encoder is whole on rank 0's device; where that does not fit and
the replica's ranks shard the DiT (several ranks, one replica), the same level is tried with
the text encoder sharded over the replica's ranks (FSDP2, one unit a layer; every rank runs
each encode together) before the next level: an encode's weight gathers cost well under a
second a job on NVLink, exact, where a tiled decode blends its pixels and a CPU encode of a
32B encoder costs minutes. With several replicas the encoders stay one copy on rank 0.
`--encoder-placement` forces device, sharded or cpu at every level.

Fallbacks are ordered by what they cost: tiling a decode costs seconds, encoding on the CPU
costs seconds per job, moving a whole expert costs seconds per job, streaming the DiT costs
on every step. Once the weights must move, the cheaper fallbacks cost nothing in comparison
and the room they leave absorbs the allocator's fragmentation, so they are kept. On a CPU
device the weights are in host memory already: levels 3-6 do not apply. `--offload` and
`--vae-tiling` override the choice.

The DiTs' weights count as they are stored (`--weights`, `sizes.stored_weights`): in fp8 a
linear layer's weight is one byte a parameter and a scale per row, and the steps hold one
layer upcast to the compute dtype at a time (`ModelSizes.upcast_bytes`).

Each job then gets its decode: whole when it fits and the level does not tile (the decode one
GPU computes, so the output equals a one-GPU run's), else tiled, and the tiles split over the
replica's ranks when it has several (`--vae-tiling on` always tiles, so always splits). Tiles
are blended at their seams: their pixels differ from the whole decode's. On a replica of
several ranks a large decode (`SPLIT_MIN_PIXELS`) that fits whole is split exactly when the
family's VAE allows it ("bands", `parallel/vae_bands.py`: row bands, one a rank, that together
compute the whole decode up to float rounding) and the busiest rank's band is at most
`SPLIT_FASTER` of the rows; `--vae-tiling auto` never blends tiles for speed. A job
that does not fit even so is refused, naming the largest size that fits. Predictions are
bytes per rank: the DiT's share, the encoders on the rank that encodes, the VAE, and the peak
of whichever phase (denoising, decoding) is higher.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from .settings import JobShape, MemorySettings
from .sizes import ONE_BYTE, ModelSizes

GIB = 1024**3
USABLE_FRACTION = 0.9
"""Of a device's memory, what the plan may fill (the rest: CUDA context, fragmentation)."""
DECODES = ("whole", "tiled", "split", "bands")
"""One rank untiled; one rank in blended tiles; blended tiles dealt over the replica; the
whole decode split exactly into row bands over the replica."""
SPLIT_FASTER = 0.75
"""`--vae-tiling auto` splits a decode that fits whole into bands when the busiest rank's band
is at most this part of the latent rows (the rest of the time: the halo exchanges and the
gather on rank 0)."""
SPLIT_MIN_PIXELS = 2**20
"""... and when the whole decode makes at least this many pixels (frames x height x width: a
1024x1024 image, 256x256 x 16 frames): a smaller decode is over in moments."""
MIN_BAND_ROWS = 2
"""Latent rows of the thinnest band `auto` splits into (a reflect-padded 3x3 conv needs 2)."""


@dataclass(frozen=True)
class Budget:
    """Device bytes one rank may plan for, and where the figure came from."""

    total: int
    source: str

    def __post_init__(self) -> None:
        if self.total <= 0:
            raise ValueError(f"a budget must be > 0 bytes, got {self.total}")

    @property
    def usable(self) -> int:
        return int(self.total * USABLE_FRACTION)

    @classmethod
    def of(cls, device: Any, gpu_memory_gib: float | None, local_ranks: int = 1) -> Budget:
        """`--gpu-memory` when given; else the free memory of `device` (a CUDA torch.device)
        or this host's available memory shared by the ranks on it (CPU)."""
        if gpu_memory_gib is not None:
            return cls(int(gpu_memory_gib * GIB), f"--gpu-memory {gpu_memory_gib:g}")
        if getattr(device, "type", device) == "cuda":
            import torch

            free, _total = torch.cuda.mem_get_info(device)
            return cls(int(free), "free memory of the GPU at start")
        available = _host_available()
        return cls(
            max(1, available // max(1, local_ranks)),
            f"available host memory / {local_ranks} rank(s) on this host",
        )


def _host_available() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import os

    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


@dataclass(frozen=True)
class Topology:
    """How the ranks divide a job (from the parallel plan)."""

    device_type: str = "cuda"
    replica_size: int = 1
    sequence_degree: int = 1
    cfg_parallel: bool = False
    batched_cfg: bool = False
    """The family runs CFG's two branches as one batch of 2 (CogVideoX)."""
    shard_weights: bool = True
    paired_cfg: bool = False
    """A guided job's two branches run as one batch of 2 on every rank (`ParallelPlan.
    pairs_branches` for a model with CFG: one weight gather a step, batch-2 activations)."""
    num_replicas: int = 1
    """Data-parallel replicas of the group (each `replica_size` ranks)."""

    @property
    def sharded(self) -> bool:
        return self.shard_weights and self.replica_size > 1

    @property
    def shards_encoder(self) -> bool:
        """The text encoder may be sharded over the replica's ranks: they shard the DiT and
        there is one replica (with several, rank 0's encoders serve them all)."""
        return self.sharded and self.num_replicas == 1

    def batch(self, uses_cfg: bool = True) -> int:
        both = self.batched_cfg or self.paired_cfg
        return 2 if uses_cfg and both and not self.cfg_parallel else 1


ENCODER_PLACES = ("device", "sharded", "cpu")
"""Where a layout keeps the text/image encoders: whole on rank 0's device, sharded over the
replica's ranks (FSDP2), or in rank 0's host memory."""
ENCODER_UNITS_GATHERED = 4
"""A sharded encoder's layers gathered at once in its forward, as the DiT's blocks: the one
computing and its all-gather buffer, and the next one's (FSDP2's prefetch)."""

SWAP = "offload-experts"
"""The layout's `dit` when a two-expert model keeps one expert on the device at a time."""


@dataclass(frozen=True)
class Layout:
    """The group's decisions, fixed while it lives."""

    level: int
    dit: str
    """"sharded", "resident", "offload-model", "offload-group" or "offload-sequential"."""
    text_encoder: str
    """One of ENCODER_PLACES: "device" (whole, rank 0), "sharded" (over the replica's ranks)
    or "cpu" (rank 0's host memory)."""
    tiles: bool
    """This level tiles every decode."""

    def __post_init__(self) -> None:
        if self.text_encoder not in ENCODER_PLACES:
            raise ValueError(
                f"a layout's text encoder is one of {ENCODER_PLACES}, got {self.text_encoder!r}"
            )

    @property
    def offload(self) -> str:
        return self.dit.removeprefix("offload-") if self.dit.startswith("offload-") else "none"

    @property
    def swaps_experts(self) -> bool:
        """One expert on the device at a time, the other in host memory (`memory/swap.py`)."""
        return self.dit == SWAP


@dataclass(frozen=True)
class Prediction:
    """Bytes on the busiest rank of each role, per phase."""

    budget: Budget
    parts: dict[str, int]
    """Each term of the encoding rank's peak, for the reader."""
    leader: int
    """The rank that encodes (rank 0): max of its denoising and decoding phases."""
    others: int

    @property
    def peak(self) -> int:
        return max(self.leader, self.others)

    @property
    def fits(self) -> bool:
        return self.peak <= self.budget.usable

    def to_dict(self) -> dict[str, Any]:
        return {
            "predicted_bytes": {"rank0": self.leader, "other_ranks": self.others},
            "parts_bytes": self.parts,
            "budget_bytes": self.budget.usable,
            "budget": f"{USABLE_FRACTION:.0%} of {_gib(self.budget.total)} ({self.budget.source})",
            "fits": self.fits,
        }


@dataclass(frozen=True)
class JobMemory:
    """One job's memory plan."""

    shape: JobShape
    layout: Layout
    decode: str
    """One of DECODES: "whole" (one rank, untiled), "tiled" (one rank), "split" (blended
    tiles over the replica) or "bands" (the whole decode in exact row bands over it)."""
    tiling_needed: bool
    """The decode is tiled because the whole one would not fit (not just to split it)."""
    prediction: Prediction
    reasons: list[str] = field(default_factory=list)
    ranks: int = 1
    """Ranks of the replica."""
    tiles: int = 1
    """The tiles a tiled decode cuts the picture into (1: it fits one, decoded untiled)."""

    def __post_init__(self) -> None:
        if self.decode not in DECODES:
            raise ValueError(f"decode must be one of {DECODES}, got {self.decode!r}")

    @property
    def vae_tiling(self) -> bool:
        return self.decode in ("tiled", "split")

    def decode_record(self) -> dict[str, Any]:
        """job.json's `decode`: over how many ranks, whether its pixels are the whole
        decode's (up to float rounding; false: blended tiles), and the tiles."""
        tiles = self.tiles if self.vae_tiling else 1
        spread = self.decode == "bands" or (self.decode == "split" and tiles > 1)
        split = self.ranks if spread else 1
        return {"split": split, "exact": tiles == 1, "tiles": tiles, "mode": self.decode}

    @property
    def fits(self) -> bool:
        return self.prediction.fits

    def to_dict(self) -> dict[str, Any]:
        references = [f"{w}x{h}" for w, h in self.shape.references]
        return {
            "size": str(self.shape),
            **({"reference_images": references} if references else {}),
            "dit": self.layout.dit,
            "offload": self.layout.offload,
            "text_encoder": self.layout.text_encoder,
            "decode": self.decode,
            "vae_tiling": self.vae_tiling,
            "exact_decode": self.decode_record()["exact"],
            "tiling_needed": self.tiling_needed,
            **self.prediction.to_dict(),
            "reasons": self.reasons,
        }


class TooLarge(ValueError):
    """The job does not fit with every fallback the group has (HTTP 422)."""


def _gib(n: int) -> str:
    return f"{n / GIB:.2f} GiB"


class MemoryPlanner:
    """Plans a model's group layout at start and each job's decode (same code for
    `paradit plan`, `/v1/info` and job.json)."""

    def __init__(
        self,
        sizes: ModelSizes,
        settings: MemorySettings,
        budget: Budget,
        topology: Topology,
        reference: JobShape,
        size_multiple: int = 16,
    ):
        self.sizes = sizes
        self.settings = settings
        self.budget = budget
        self.topology = topology
        self.size_multiple = size_multiple
        self.reference = reference
        if settings.offload == "experts" and sizes.experts < 2:
            raise ValueError(
                "--offload experts is for a model with two experts (Wan 2.2 A14B); this one "
                "has one DiT"
            )
        self.layout, self.start_reasons = self._choose_layout(reference)

    # -- the group ----------------------------------------------------------------------

    def levels(self) -> list[Layout]:
        """The layouts the settings allow, cheapest first."""
        topo, offload = self.topology, self.settings.offload
        base = "sharded" if topo.sharded else "resident"
        if offload not in ("auto", "none"):
            base = f"offload-{offload}"
        ladder = [
            Layout(0, base, "device", False),
            *([Layout(0, base, "sharded", False)] if topo.shards_encoder else []),
            Layout(1, base, "device", True),
            *([Layout(1, base, "sharded", True)] if topo.shards_encoder else []),
            Layout(2, base, "cpu", True),
        ]
        if offload == "auto" and topo.device_type != "cpu":
            one_rank = topo.replica_size == 1
            experts = self.sizes.experts > 1
            ladder += [
                *([Layout(3, "offload-model", "cpu", True)] if one_rank else []),
                *([Layout(4, SWAP, "cpu", True)] if experts else []),
                Layout(5, "offload-group", "cpu", True),
                *([Layout(6, "offload-sequential", "cpu", True)] if one_rank else []),
            ]
        ladder = self._forced_encoder(ladder)
        if self.settings.vae_tiling != "auto":  # tiling is fixed: the levels differ by placement
            tiles, placements, forced = self.settings.vae_tiling == "on", set(), []
            for layout in ladder:
                if (layout.dit, layout.text_encoder) not in placements:
                    placements.add((layout.dit, layout.text_encoder))
                    forced.append(Layout(layout.level, layout.dit, layout.text_encoder, tiles))
            ladder = forced
        return ladder

    def _forced_encoder(self, ladder: list[Layout]) -> list[Layout]:
        """`--encoder-placement` device, sharded or cpu: every level with it (once each)."""
        forced = self.settings.encoder_placement
        if forced == "auto":
            return ladder
        if forced == "sharded" and not self.topology.shards_encoder:
            raise ValueError(
                "--encoder-placement sharded shards the text encoder over a replica's ranks: "
                "it needs several ranks that shard the DiT, in one replica"
            )
        out: list[Layout] = []
        for layout in ladder:
            placed = replace(layout, text_encoder=forced)
            if placed not in out:
                out.append(placed)
        return out

    def _choose_layout(self, shape: JobShape) -> tuple[Layout, list[str]]:
        tried = [self._stored_reason()]
        for layout in self.levels():
            job = self._job(shape, layout)
            if job.fits:
                return layout, [*tried, self._why(layout, job)]
            tried.append(
                f"level {layout.level} ({self._describe(layout)}) needs "
                f"{_gib(job.prediction.peak)} > {_gib(self.budget.usable)}"
            )
        last = self.levels()[-1]
        tried.append(f"nothing fits {shape}: smaller jobs may (each job is checked)")
        return last, tried

    def _stored_reason(self) -> str:
        """How the DiTs' weights are counted (`--weights`)."""
        sizes = self.sizes
        stored = (
            f"{sizes.stored} (linear weights 1 byte + a scale per row)"
            if sizes.stored in ONE_BYTE
            else (f"{str(sizes.dtype).removeprefix('torch.')}")
        )
        experts = f"{sizes.experts} experts of " if sizes.experts > 1 else ""
        upcast = (
            f", one layer upcast at a time: {_gib(sizes.upcast_bytes)}"
            if sizes.upcast_bytes
            else ""
        )
        return (
            f"DiT weights stored {stored} (--weights {self.settings.weights}): "
            f"{experts}{_gib(sizes.expert_bytes)}{upcast}"
        )

    def _describe(self, layout: Layout) -> str:
        tiling = "tiled decode" if layout.tiles else "whole decode"
        dit = f"DiT {layout.dit}"
        if layout.swaps_experts:
            where = "sharded" if self.topology.sharded else "resident"
            dit = (
                f"experts one at a time (the active one {where} on the device, the other in "
                "host memory, swapped at the switch step)"
            )
        encoder = f"on {layout.text_encoder}"
        if layout.text_encoder == "sharded":
            encoder = f"sharded over {self.topology.replica_size} ranks"
        return f"{dit}, text encoder {encoder}, {tiling}"

    def _why(self, layout: Layout, job: JobMemory) -> str:
        return (
            f"level {layout.level} ({self._describe(layout)}): {job.shape.described} needs "
            f"{_gib(job.prediction.peak)} of {_gib(self.budget.usable)}"
        )

    # -- a job --------------------------------------------------------------------------

    def plan_job(self, shape: JobShape) -> JobMemory:
        """The job's decode and prediction under the group's layout (fits or not)."""
        return self._job(shape, self.layout)

    def check(self, shape: JobShape) -> JobMemory:
        """`plan_job`, or TooLarge naming the largest size that fits."""
        job = self.plan_job(shape)
        if job.fits:
            return job
        counted = (
            " (an edit's reference images are counted: their tokens follow the output's in "
            "the sequence the DiT sees)"
            if shape.references
            else ""
        )
        tiles = self._tiles_that_fit(shape, job)
        if tiles:
            raise TooLarge(tiles)
        raise TooLarge(
            f"{shape.described} needs {_gib(job.prediction.peak)} on a rank{counted}, over the "
            f"budget of {_gib(self.budget.usable)} even with {self._describe(self.layout)}; "
            + self.largest_fit(shape)
        )

    def _tiles_that_fit(self, shape: JobShape, job: JobMemory) -> str:
        """Where a VAE with its own decoder (`ModelSizes.vae_decoder`) decodes `shape`
        whole and that decode does not fit but the job would in the decoder's tiles
        (`decode_tiles`, the first it suggests that fits): the refusal naming them; else ""."""
        own = self.sizes.vae_decoder
        if own is None or shape.decode_tiles is not None:
            return ""
        for tiles in own.suggest(self.sizes.decode_latent(shape)):
            tiled = self.plan_job(replace(shape, decode_tiles=tiles))
            if tiled.fits:
                fields = ", ".join(f"{k} {v}" for k, v in tiles.to_json().items())
                return (
                    f"{shape.described} needs {_gib(job.prediction.peak)} on a rank with "
                    f"{own.name} decoding it whole ({_gib(job.prediction.parts['decode'])} "
                    f"for the decode), over the budget of {_gib(self.budget.usable)}: the "
                    f"decode is whole unless the job asks for ComfyUI's tiles (decode_tiles); "
                    f"with decode_tiles {{{fields}}} it needs "
                    f"{_gib(tiled.prediction.peak)} (the largest tile's decode "
                    f"{_gib(tiled.prediction.parts['decode'])}, the pixels blended as "
                    "ComfyUI's VAEDecodeTiled blends them)"
                )
        return ""

    def largest_fit(self, shape: JobShape) -> str:
        """'the largest WxH at F frames that fits is ...' (same aspect ratio and frames)."""
        job = self.plan_job(shape)
        weights = job.prediction.parts.get("weights", 0)
        variable = max(1, job.prediction.peak - weights)
        room = self.budget.usable - weights
        if room <= 0:
            return f"the weights alone need {_gib(weights)} on a rank: use more GPUs or offload"
        # an edit's references keep their size: only the output's share of the tokens scales
        share = self._output_share(shape)
        fixed = variable * (1 - share)
        estimate = min(1.0, math.sqrt(max(0.0, room - fixed) / max(1.0, variable - fixed)))
        best = self._largest_scale(shape, estimate)
        if best is not None:
            return f"the largest size that fits at {shape.frames} frames is {best}"
        if shape.references:  # an edit's reference tokens are in the DiT's sequence too
            return (
                f"no output size fits with {len(shape.references)} reference image(s): "
                "use fewer input images or more GPUs"
            )
        return f"no size fits at {shape.frames} frames: use fewer frames or more GPUs"

    def _largest_scale(self, shape: JobShape, estimate: float) -> JobShape | None:
        """The largest `shape.scaled(f)` that fits, f in (0, 1), or None when even the smallest
        does not. From the estimate down in ever larger steps (0.9, 0.81, 0.66, ...) to a size
        that fits, then a bisection between it and the last that did not, where the sizes
        differ by one `size_multiple`: the next larger size does not fit. Each size is planned
        once."""
        multiple = self.size_multiple
        fits: dict[tuple[int, int], bool] = {}

        def candidate(factor: float) -> JobShape:
            return shape.scaled(factor, multiple)

        def fit(size: JobShape) -> bool:
            key = (size.width, size.height)
            if key not in fits:
                fits[key] = self._fits(size)
            return fits[key]

        smallest = candidate(0.0)
        high, low, step = 1.0, estimate, 0.9  # candidate(1.0): the job's size, which does not fit
        while not fit(candidate(low)):
            if candidate(low) == smallest:
                return None
            high, low, step = low, low * step, step * step
        for _ in range(64):  # float halvings; only a new size is planned
            middle = (low + high) / 2
            size = candidate(middle)
            if size == candidate(high) or not fit(size):
                high = middle
            else:
                low = middle
            if candidate(low) == candidate(high):
                break
        return candidate(low)

    def _output_share(self, shape: JobShape) -> float:
        """The output's part of the tokens the DiT sees (1 without reference images)."""
        step = self.size_multiple
        output = shape.frames * (shape.width // step) * (shape.height // step)
        references = sum((w // step) * (h // step) for w, h in shape.references)
        return output / max(1, output + references)

    def _fits(self, shape: JobShape) -> bool:
        """`plan_job(shape).fits`; where every decode is tiled, without the whole decode's
        dry run (it only tells whether the tiling was needed)."""
        own = self._own_decode(shape)
        if own is None and self._tiles_every_decode(self.layout):
            return self._predict(shape, self.layout, self._tiled_decode(shape)).fits
        return self.plan_job(shape).fits

    def _own_decode(self, shape: JobShape) -> str | None:
        """The decode of a VAE with its own decoder (`ModelSizes.vae_decoder`: LTX-2.5's
        diffusion decoder), whatever `--vae-tiling` says: on rank 0, in ComfyUI's tiles
        ("tiled": blended, exact when one tile covers the latents) when the job asks for
        them (`decode_tiles`), else "whole"; None for the other VAEs."""
        if self.sizes.vae_decoder is None:
            return None
        return "whole" if shape.decode_tiles is None else "tiled"

    def _tiles_every_decode(self, layout: Layout) -> bool:
        mode = self.settings.vae_tiling
        return mode == "on" or (mode != "off" and layout.tiles)

    def _tiled_decode(self, shape: JobShape) -> str:
        """A tiled decode: "split" over the replica when it spans tiles, else "tiled"."""
        splits = self.topology.replica_size > 1 and self._spans_tiles(shape)
        return "split" if splits else "tiled"

    def _job(self, shape: JobShape, layout: Layout) -> JobMemory:
        topo, mode = self.topology, self.settings.vae_tiling
        reasons = []
        own = self._own_decode(shape)
        if own is not None:
            decode, needed = own, False
            reasons.append(
                f"{self.sizes.vae_decoder.name} decodes on one rank "
                + ("in the job's decode_tiles" if own == "tiled" else "whole (no decode_tiles)")
            )
        elif mode == "off":
            decode, needed = "whole", False
            reasons.append("--vae-tiling off: the whole decode on one rank")
        elif self._tiles_every_decode(layout):
            decode = self._tiled_decode(shape)
            needed = not self._predict(shape, layout, "whole").fits
            reasons.append(
                "--vae-tiling on" if mode == "on" else f"level {layout.level} tiles every decode"
            )
        else:
            whole = self._predict(shape, layout, "whole")
            needed = not whole.fits
            large = shape.frames * shape.height * shape.width >= SPLIT_MIN_PIXELS
            share = self.band_share(shape) if large else 1.0
            # Split when it is faster: a large decode whose busiest rank decodes at most
            # SPLIT_FASTER of the rows, in exact bands (the pixels one GPU computes). Tiled
            # (blended) only when it must, for memory.
            faster = share <= SPLIT_FASTER and self._predict(shape, layout, "bands").fits
            decode = self._tiled_decode(shape) if needed else "bands" if faster else "whole"
            if decode == "bands":
                reasons.append(
                    f"decode split exactly over {topo.replica_size} ranks in row bands (the "
                    f"busiest decodes {share:.0%} of the rows)"
                )
            if needed:
                reasons.append(
                    f"the whole decode would need {_gib(whole.peak)} > {_gib(self.budget.usable)}"
                )
        prediction = self._predict(shape, layout, decode)
        gathered = self.sizes.gathered(replace(shape, batch=topo.batch()), topo.sequence_degree)
        if gathered is not None:
            reasons.append(gathered.reason)
        if topo.paired_cfg and not topo.batched_cfg:
            reasons.append(
                "a guided job's CFG branches run as one batch of 2 on each rank (each block's "
                "weights gathered once a step): activations counted for batch 2"
            )
        tiles = len(self.sizes.tile_costs(shape)) if decode in ("tiled", "split") else 1
        return JobMemory(
            shape, layout, decode, needed, prediction, reasons, topo.replica_size, tiles
        )

    def band_share(self, shape: JobShape) -> float:
        """The busiest rank's part of the latent rows in an exact split decode (bands); 1.0
        where the VAE does not split exactly or the bands would be too thin."""
        from ..models.families import vae_split_of
        from ..parallel.vae_bands import band_rows

        ranks, vae = self.topology.replica_size, self.sizes.vae
        rows = shape.height // self.sizes.spatial
        if ranks < 2 or vae is None or vae_split_of(vae) is None:
            return 1.0
        if rows < ranks * MIN_BAND_ROWS:
            return 1.0
        return max(band_rows(rows, ranks)) / rows

    def _spans_tiles(self, shape: JobShape) -> bool:
        """The tiled decode of `shape` has several tiles (`ModelSizes.tile_costs`)."""
        return self.sizes.vae is not None and len(self.sizes.tile_costs(shape)) > 1

    def _predict(self, shape: JobShape, layout: Layout, decode: str) -> Prediction:
        sizes, topo = self.sizes, self.topology
        shape = replace(shape, batch=topo.batch())
        steps_dit, decode_dit = self._dit_bytes(layout)
        steps_dit += sizes.upcast_bytes  # one fp8 layer upcast at a time in the forward
        encoders, encoding = self._encoder_bytes(layout)
        activations = sizes.activations(shape, topo.sequence_degree)
        gathered = sizes.gathered(shape, topo.sequence_degree)
        # what a split keeps whole (LTX-2), on top of the share's peak: an upper bound
        whole = gathered.total if gathered is not None else 0
        # what the pipeline keeps from the first step to the last (FLUX.2 [klein] KV's cache,
        # Qwen-Image 2.1's prefix cache), per CFG branch the rank runs in turn: both without
        # CFG parallel, unless paired into the batch (a guided job's: an upper bound)
        branches = 1 if topo.cfg_parallel or shape.batch > 1 else 2
        kept = sizes.held_across_steps(shape, topo.sequence_degree, branches)
        steps = steps_dit + activations + whole + kept
        # a band's peak is counted as the whole decode's: an upper bound
        decoding = sizes.decode(shape, tiled=decode in ("tiled", "split"))
        vae = sizes.vae_bytes
        # a two-stage job's latent upscale, between the stages, on every rank (beside the
        # DiT as the decode has it)
        upsampling = sizes.upsample(shape)
        loras = self._lora_bytes(layout) if topo.device_type == "cpu" else 0
        between = decode_dit + upsampling
        # a sharded encoder's encode: its gathered layers beside the DiT at rest, every rank
        encode = decode_dit + encoding
        leader = max(steps, decode_dit + decoding, between, encode) + encoders + vae + loras
        others = 0
        if topo.replica_size > 1 or topo.cfg_parallel:
            split = decoding if decode in ("split", "bands") else 0
            sharded = layout.text_encoder == "sharded"
            held, encode = (encoders, encode) if sharded else (0, 0)
            others = max(steps, decode_dit + split, between, encode) + held + vae + loras
        parts = {
            "weights": steps_dit + encoders + vae + loras,
            "dit_steps": steps_dit,
            "dit_decode": decode_dit,
            **({"upcast": sizes.upcast_bytes} if sizes.upcast_bytes else {}),
            "encoders": encoders,
            **({"encoder_gathered": encoding} if encoding else {}),
            "vae": vae,
            "activations": activations,
            **({"gathered_video": whole} if whole else {}),
            **({"held_across_steps": kept} if kept else {}),
            "decode": decoding,
            **({"upsample": upsampling} if upsampling else {}),
            **({"loras": loras} if loras else {}),
        }
        return Prediction(self.budget, parts, leader, others)

    def _encoder_bytes(self, layout: Layout) -> tuple[int, int]:
        """(bytes the encoding rank holds of the encoders, bytes more during an encode):
        whole on rank 0's device; sharded, each rank's share and `ENCODER_UNITS_GATHERED`
        of the largest layer gathered in the forward; on the CPU, none."""
        sizes = self.sizes
        if layout.text_encoder == "device":
            return sizes.encoder_bytes, 0
        if layout.text_encoder == "sharded":
            share = -(-sizes.encoder_bytes // self.topology.replica_size)
            return share, ENCODER_UNITS_GATHERED * sizes.encoder_layer_bytes
        return 0, 0

    def _lora_bytes(self, layout: Layout) -> int:
        """Host bytes one rank keeps for LoRAs (`--lora-dir`): the parsed-LoRA cache's bound,
        the saved rows of the weights a job's LoRAs change (at most the rank's share of the
        DiTs) and a scratch of the largest layer. Counted where host memory is the budget (a
        CPU device); on GPUs it is host memory beside the budget (`to_dict`'s
        `lora_host_bytes`). Offloaded DiTs (group, sequential) and swapped experts take no
        LoRAs."""
        gib = self.settings.lora_cache_gib
        if gib is None or layout.dit in ("offload-group", "offload-sequential", SWAP):
            return 0
        dit = self.sizes.dit_bytes
        share = dit // self.topology.replica_size if layout.dit == "sharded" else dit
        return int(gib * GIB) + share + self.sizes.largest_leaf_bytes

    def _dit_bytes(self, layout: Layout) -> tuple[int, int]:
        """(bytes during the steps, bytes during the decode) of the DiT(s) on one rank."""
        sizes, topo, ranks = self.sizes, self.topology, self.topology.replica_size
        dit = sizes.dit_bytes
        block, outside = sizes.block_bytes
        if layout.dit == "resident":
            return dit, dit
        if layout.dit == "sharded":  # FSDP2: a block unsharded and its all-gather buffer,
            return dit // ranks + 4 * block, dit // ranks  # and the same for the next one
        if layout.dit == "offload-model":
            return dit, 0  # every DiT moves in for the steps (`placement.steps`)
        if layout.dit == SWAP:  # one expert on the device, through the steps and the decode
            one = sizes.expert_bytes
            if topo.sharded:  # on a CPU device a sharded expert's move is no move: both stay
                share = (dit if topo.device_type == "cpu" else one) // ranks
                return share + 4 * block, share
            if topo.device_type == "cpu":  # host copies of both, and the active one's copy
                return dit + one, dit + one
            return one, one
        if layout.dit == "offload-group":
            return 2 * block + (outside // ranks if self.topology.sharded else outside), 0
        return 2 * sizes.largest_leaf_bytes, 0

    def _experts_host_bytes(self) -> dict[str, int]:
        """Under experts one at a time, the host memory one rank keeps for them (beside the
        budget, as `lora_host_bytes`): one rank a pinned copy of every expert, a sharded rank
        its shards of the expert that waits."""
        sizes, topo = self.sizes, self.topology
        if not self.layout.swaps_experts:
            return {}
        if topo.sharded:
            return {"experts_host_bytes": sizes.expert_bytes // topo.replica_size}
        return {"experts_host_bytes": sizes.dit_bytes}

    def _encoder_host_bytes(self) -> dict[str, int]:
        """With the text encoder on the CPU, the host memory rank 0 keeps for the encoders
        (beside the budget, as `lora_host_bytes`; they encode there once a job): their
        weights in the compute dtype (MiniMax H3's Qwen3-VL 32B: 62.1 GiB)."""
        if self.layout.text_encoder != "cpu":
            return {}
        return {"encoder_host_bytes": self.sizes.encoder_bytes}

    # -- reporting ----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        reference = self.plan_job(self.reference)
        return {
            "settings": asdict(self.settings),
            "level": self.layout.level,
            "dit": self.layout.dit,
            "offload": self.layout.offload,
            "text_encoder": self.layout.text_encoder,
            "weights_bytes": dict(self.sizes.weights),
            "weights_stored": self.sizes.stored,
            "lora_host_bytes": self._lora_bytes(self.layout),
            **self._experts_host_bytes(),
            **self._encoder_host_bytes(),
            "reference_job": reference.to_dict(),
            "reasons": self.start_reasons,
        }


def render(plan: dict[str, Any]) -> str:
    """A plan (`MemoryPlanner.to_dict` or a job's) as lines a person reads."""
    job = plan.get("reference_job", plan)
    host = plan.get("encoder_host_bytes")
    lines = [
        f"DiT: {plan['dit']} (offload: {plan['offload']}); text encoder "
        + ("sharded over the ranks" if plan["text_encoder"] == "sharded" else "on ")
        + ("" if plan["text_encoder"] == "sharded" else plan["text_encoder"])
        + (f" ({_gib(host)} of host memory on rank 0)" if host else ""),
        f"decode of {job['size']}: {job['decode']}"
        + ("" if job.get("exact_decode", True) else " (blended tiles)")
        + (" (tiling needed for memory)" if job["tiling_needed"] else ""),
        f"predicted peak: rank 0 {_gib(job['predicted_bytes']['rank0'])}, other ranks "
        f"{_gib(job['predicted_bytes']['other_ranks'])}; budget {job['budget']}",
        *(f"  {name}: {_gib(value)}" for name, value in job["parts_bytes"].items()),
        *(f"  why: {reason}" for reason in plan.get("reasons", [])),
        "fits" if job["fits"] else "does NOT fit",
    ]
    return "\n".join(lines)
