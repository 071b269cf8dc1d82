"""What a model family declares once (`FamilySpec`), and the declarations generic code reads
from it; torch-free.

Each family is one folder under `families/` whose `__init__.py` builds its `SPEC`, and
`families/__init__.py` lists the specs (one line per family). Generic code (the adapters'
lookup, sequence parallelism, the step cache, ...) loops over the specs; it never asks which
family a model is by name. `families/README.md` is the checklist for adding one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from .file_spec import FileSpec

if TYPE_CHECKING:
    from .families.base import Family


@dataclass(frozen=True)
class BlockLayout:
    """How a transformer block returns its streams (two, or its hidden states alone), and the
    name of the second one's input: what diffusers' step-cache hooks need to know of a block
    class they do not list."""

    first: int = 0
    """Index of the first stream (`hidden_states`: its residual decides) in what it returns
    (0 for a block that returns one tensor)."""
    second: int | None = 1
    """Index of the second stream in what it returns; None for a block that returns its
    hidden states alone (one tensor: a single-stream block over a joint sequence)."""
    second_input: str = "encoder_hidden_states"
    """The block's argument that takes the second stream (unread with one stream)."""

    def __post_init__(self) -> None:
        if self.second is None:
            if self.first != 0:
                raise ValueError(
                    f"a block that returns one stream returns it alone (first 0), got "
                    f"first {self.first}"
                )
            return
        if min(self.first, self.second) < 0 or self.first == self.second:
            raise ValueError(
                f"a block's two streams are at two indices >= 0 of what it returns, got "
                f"{self.first} and {self.second}"
            )


@dataclass(frozen=True)
class TinyJob:
    """One named job of a family on one of its tiny presets, and diffusers' own pipeline called
    as a user calls it for that job: what the family contract suite
    (tests/families/test_family_contract.py) runs on every family. The smallest job (a
    family's first) gets all of it (world size 1 against diffusers, CFG and Ulysses at 2-4
    ranks, the step cache's decisions, a LoRA against diffusers' `fuse_lora`); the others are
    what the family adds (an image, audio, experts, tiles, token counts): world size 1
    against diffusers where `direct` is given, and the parallel plans on the ranks of
    `ranks`, in the same group."""

    preset: str
    """The tiny preset the job runs on (one of the spec's `tiny_presets`)."""
    body: Mapping[str, Any]
    """The request body: prompt, seed, size, steps and guidance (guided where the family
    guides, so that CFG parallel runs)."""
    direct: Callable[[Any, Mapping[str, Any]], Any] | None
    """`(pipeline, body)` -> the diffusers pipeline's own output for `body` as float frames
    (F, H, W, 3) in 0..1: the pipeline called as its documentation calls it (the guidance under
    its own name), with a generator seeded by the body's seed; None for a job whose world
    size 1 the family's own test file holds against diffusers (the smallest job has one)."""
    tile: int = 64
    """VAE tile size in sample pixels for the job's decode (the pipeline called directly
    decodes with the VAE's own tiling at the same size)."""
    cached: Mapping[str, Any] = field(
        default_factory=lambda: {
            "num_inference_steps": 4,
            "cache": {"method": "first-block", "threshold": 0.9},
        }
    )
    """What the cached job changes in `body`: its step cache (and steps, guidance) such that
    world size 1 skips some steps and computes others on the tiny preset's random weights
    (their metric sits near or above 1: the threshold is set between the steps' metrics);
    unused for a family without a step cache, and for any job but the smallest."""
    name: str = "smallest"
    """What the job shows, for the contract's messages ("smallest" for the first)."""
    ranks: tuple[int, ...] = (4, 3, 2)
    """The group sizes the contract runs the job on (each a sub-group of its one group of 4):
    the smallest job runs on all three; another on those where it shows what it adds."""
    variant: Callable[[Any], Any] | None = None
    """`pipeline` -> the pipeline the job runs on, built from the preset's (a model with no
    preset of its own: CogVideoX 1.5's temporal patches); None: the preset's."""
    upsampler: Callable[[Any], Any] | None = None
    """A two-stage job (its body's `upscale`): `pipeline` -> the latent upscaler
    (`families.base.Upsampler`) the job runs with, as `serve --upscaler FILE` loads it (tiny,
    seeded: every rank makes the same); None: the job runs one stage."""
    forward: Callable[[Any], tuple[Mapping[str, Any], bool]] | None = None
    """`pipeline` -> (the DiT's keyword inputs for one forward alone, whether they are a guided
    batch of both branches): what no request reaches (a prompt of one valid text token, fewer
    than the ranks), or the DiT's own output checked closer than a job's frames (relative
    error <= 1e-5); run on the job's pipeline on every group size of `ranks`, an unguided
    forward spread over a CFG plan as a job is. None: no forward alone."""
    alone_fails: bool = False
    """A job with `cache` whose ranks, each deciding on its own share of the tokens, would
    decide a step differently from world size 1 (the threshold sits between them): run so
    on 2 ranks it fails on both."""

    def __post_init__(self) -> None:
        if not self.preset or not {"prompt", "seed", "num_inference_steps"} <= set(self.body):
            raise ValueError(
                f"a tiny job names its preset and gives a prompt, seed and num_inference_steps, "
                f"got {self.preset!r} with {sorted(self.body)}"
            )
        if not self.name or not set(self.ranks) <= {2, 3, 4}:
            raise ValueError(
                f"a tiny job has a name and runs on groups of 2, 3 or 4 ranks, got "
                f"{self.name!r} on {self.ranks}"
            )
        if self.tile <= 0 or "cache" not in self.cached:
            raise ValueError(
                f"a tiny job's tile is > 0 and its cached job sets `cache`, got {self.tile} "
                f"and {sorted(self.cached)}"
            )
        object.__setattr__(self, "body", _frozen(self.body))
        object.__setattr__(self, "cached", _frozen(self.cached))
        object.__setattr__(self, "ranks", tuple(sorted(self.ranks, reverse=True)))

    def cached_body(self) -> dict[str, Any]:
        """The request body of the cached job."""
        return {**self.body, **self.cached}


def _frozen(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class FamilySpec:
    """One model family: its pipeline adapters and what generic code needs to know of it."""

    name: str
    """The family's folder under `families/` (e.g. "hunyuan_video15")."""
    adapters: tuple[Family, ...]
    """Its pipeline adapters (`families.base.Family`), one per task or variant, in the order
    `family_for` tries them."""
    transformer_classes: tuple[str, ...]
    """The diffusers DiT classes its pipelines hold."""
    cp_plans: Mapping[str, Callable[[Any], dict[str, Any]]] = field(default_factory=dict)
    """DiT class -> a function that prepares that transformer for sequence parallelism and
    returns its context-parallel plan, for the classes diffusers declares no (usable) plan
    for; empty when diffusers' own `_cp_plan` serves."""
    attention_dispatch: Mapping[str, Callable[[Any], None]] = field(default_factory=dict)
    """DiT class -> a function that swaps its processors that call torch's SDPA themselves for
    ones that go through diffusers' `dispatch_attention_fn`, computing the same (CogVideoX's):
    what attention kernels other than SDPA, and sequence parallelism, reach."""
    block_layouts: Mapping[str, BlockLayout] = field(default_factory=dict)
    """Transformer block class -> its layout, for the blocks diffusers' step-cache registry
    lacks (their transformers get the cache too)."""
    vae_tiling: Mapping[str, Callable[[Any, int, int], None]] = field(default_factory=dict)
    """VAE class -> a function that turns its tiling on with tiles of `(height, width)` sample
    pixels (ValueError for sizes it cannot take), for the VAEs whose default tiling does not
    take a tile size as given (`families.enable_tiles`)."""
    vae_split: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """VAE class -> class names of its decoder's modules that must see the whole frame (the
    mid-block's spatial attention; none for a decoder without one), for the VAEs whose decode
    splits exactly into row bands over the ranks (`parallel/vae_bands.py`; the family's tests
    show the split equals the whole decode). `--vae-tiling auto` decodes other VAEs whole."""
    dit_forward: Callable[[Any, Any, int], Any] | None = None
    """The memory plan's dry run (`memory.py` beside the spec): `(sizes, shape,
    sequence_degree)` -> one forward of the meta DiT of `sizes` (`memory.sizes.ModelSizes`)
    at one rank's share of the job `shape`'s tokens (`sizes.share(shape, sequence_degree)`;
    `sizes.peak_bytes(run)` measures a side run: the folder imports nothing of memory/);
    None: the plan estimates activations by a rule of thumb."""
    dry_run_one_block: bool = False
    """The DiT's blocks of one list all peak alike, so its dry run keeps the first block of
    each list: 15-30x faster, the same peak to the byte (checked against the whole forward
    for Wan 2.1/2.2, FLUX.1-dev, FLUX.2-dev and -klein, CogVideoX 5B and 1.5 at 832x480 and
    1024x768, with and without sequence parallel; tests/memory/test_memory_plan.py checks it on the
    tiny presets). Not Qwen-Image and Z-Image, whose whole forward peaks 0.1-0.3% above one
    block's."""
    gathered: Callable[[Any, Any, int], Any] | None = None
    """What a rank holds of the whole video beyond its share of the tokens under a split
    sequence, `(sizes, shape, sequence_degree)` -> an object with `total` and `reason`
    (LTX-2); None when the plan splits every activation that grows with the video."""
    vae_decoder: Callable[[Any], Any] | None = None
    """The memory plan's view of a pipeline's `vae` that decodes with a decoder of its own
    in place of its config's (LTX-2.5's diffusion decoder, `memory.py` beside the spec):
    `vae` -> None (its own decode: the plan's dry run) or an object with `module` (the
    decoder, counted in the VAE's weights in place of `vae.decoder`), `name`, `peak(latent,
    dtype)` (a whole decode's bytes for latents (F, H, W)), `output(latent, dtype)` (its
    decoded pixels' bytes), `tiles(latent, decode_tiles)` (each tile's latents under a job's
    `decode_tiles`) and `suggest(latent)` (`decode_tiles` a job may ask for, most faithful
    first); None: no family VAE decodes so."""
    held_across_steps: Mapping[str, Callable[[Any, Any, int], int]] = field(default_factory=dict)
    """Pipeline class -> the bytes one rank keeps from the first step's forward to the last,
    beside a forward's activations, `(sizes, shape, sequence_degree, branches)` -> bytes,
    `branches` the CFG branches the rank runs in turn (FLUX.2 [klein] KV's cached
    references' keys and values: `flux2_klein/memory.py`; Qwen-Image 2.1's cached prompt
    prefix, one per branch: `qwen_image21/memory.py`), for the
    pipelines that keep something the DiT's dry run does not hold; the memory plan adds it
    to the steps' peak (`held_across_steps`)."""
    vae_frame_axis: bool = False
    """An image model whose VAE's latents keep a frame axis of one frame (Qwen-Image's
    Wan-style 3D VAE)."""
    vae_dry_frames: int = 0
    """The fewest latent frames the VAE decodes (MiniMax H3's decodes chunks of latent
    frames and yields nothing under 3): the plan's decode dry run covers at least these;
    0: the plan's own counts (`memory.sizes.FRAMES_DRY`)."""
    files: FileSpec | None = None
    """How the family's single files are recognised, mapped, checked and built
    (`file_spec.FileSpec`, from `single_file.py` beside the spec); None for a family with no
    single-file format (CogVideoX)."""
    lora_full_diffs: bool = False
    """ComfyUI's LoRAs of the family may carry full-weight `<layer>.diff` keys, which diffusers'
    LoRA converter drops; `lora/parse.py` renames them by that converter (Wan's)."""
    lora_misfit_hint: str = ""
    """Said after the refusal of a LoRA layer whose shape is not the DiT's, where the family
    has layouts a LoRA can be trained on that differ in shape (MiniMax H3's pruned-AdaLN
    DiT); "" for none."""
    tiny_presets: Mapping[str, tuple[str, Mapping[str, Callable[[], Any]]]] = field(
        default_factory=dict
    )
    """Its tiny presets (`tiny.py` beside the spec): preset name -> (diffusers pipeline class,
    component name -> a function that builds it with its own seed). `presets.py` builds them;
    their names are listed, torch-free, in `preset_names.PRESET_NAMES`."""
    tiny_pipeline_config: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """A tiny preset's pipeline settings, as the real repo's model_index.json has them
    (Wan 2.2's `boundary_ratio`, Klein's `is_distilled`)."""
    tiny_jobs: tuple[TinyJob, ...] = ()
    """The family's jobs on its tiny presets (`tiny_job.py` beside the spec), the smallest
    first (`tiny_job`), then what the family adds, each named once: what the family contract
    suite runs; every registered family has one at least."""
    folder_skip: frozenset[str] = frozenset()
    """Components of the family's diffusers folders that paradit leaves unloaded (MiniMax H3's
    `transformer_ref`: the ref2va partition, whose jobs it refuses)."""
    specialize: Callable[[Family, Any], Family] | None = None
    """A loaded pipeline -> a more specific adapter when its settings say more than its class
    (Wan 2.2's TI2V-5B and I2V-A14B); None: the class says all."""

    def __post_init__(self) -> None:
        if not self.name or not self.adapters or not self.transformer_classes:
            raise ValueError(
                f"a family spec names its folder, at least one adapter and one DiT class, "
                f"got {self.name!r} with {len(self.adapters)} adapters and "
                f"{len(self.transformer_classes)} DiT classes"
            )
        for job in self.tiny_jobs:
            if job.preset not in self.tiny_presets:
                raise ValueError(
                    f"{self.name}: its tiny job {job.name!r} runs on {job.preset!r}, not one of "
                    f"its tiny presets {sorted(self.tiny_presets)}"
                )
        names = [job.name for job in self.tiny_jobs]
        if len(set(names)) != len(names) or (self.tiny_jobs and self.tiny_jobs[0].direct is None):
            raise ValueError(
                f"{self.name}: its tiny jobs have a name each and the smallest, the first, "
                f"has diffusers' call, got {names}"
            )
        outside = sorted(set(self.cp_plans) - set(self.transformer_classes))
        if outside:
            raise ValueError(f"{self.name}: cp_plans for DiT classes it does not hold: {outside}")
        object.__setattr__(self, "cp_plans", _frozen(self.cp_plans))
        object.__setattr__(self, "block_layouts", _frozen(self.block_layouts))
        object.__setattr__(self, "attention_dispatch", _frozen(self.attention_dispatch))
        object.__setattr__(self, "tiny_presets", _frozen(self.tiny_presets))
        object.__setattr__(self, "vae_tiling", _frozen(self.vae_tiling))
        object.__setattr__(self, "vae_split", _frozen(self.vae_split))
        object.__setattr__(self, "tiny_pipeline_config", _frozen(self.tiny_pipeline_config))
        object.__setattr__(self, "tiny_jobs", tuple(self.tiny_jobs))

    @property
    def tiny_job(self) -> TinyJob | None:
        """The family's smallest job (its first), or None before it declares one."""
        return self.tiny_jobs[0] if self.tiny_jobs else None
