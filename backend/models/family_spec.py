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

if TYPE_CHECKING:
    from .families.base import Family


@dataclass(frozen=True)
class BlockLayout:
    """How a transformer block returns its two streams, and the name of the second one's
    input: what diffusers' step-cache hooks need to know of a block class they do not list."""

    first: int = 0
    """Index of the first stream (`hidden_states`: its residual decides) in what it returns."""
    second: int = 1
    """Index of the second stream in what it returns."""
    second_input: str = "encoder_hidden_states"
    """The block's argument that takes the second stream."""

    def __post_init__(self) -> None:
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


def _text_widths(config: Any) -> tuple[tuple[str, int, str], ...]:
    """One text encoder whose width is the DiT's text input's."""
    width = (
        config.get("text_dim") or config.get("joint_attention_dim") or config.get("cap_feat_dim")
    )
    return (("text_encoder", width, "text embeddings"),)


def _vae_latent_channels(config: Any) -> int:
    """The DiT's output channels, or a quarter of its input's (2x2 patches)."""
    return config.get("out_channels") or config["in_channels"] // 4


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
    at one rank's share of the job `shape`'s tokens; None: the plan estimates activations by
    a rule of thumb."""
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
    vae_frame_axis: bool = False
    """An image model whose VAE's latents keep a frame axis of one frame (Qwen-Image's
    Wan-style 3D VAE)."""
    detect_dit: Callable[[Any, str], Any] | None = None
    """Single files: `(header, prefix)` -> the `Detection` of this family's DiT when the file
    holds one in the family's own key names under `prefix`, else None (`single_file.py` beside
    the spec); None when another family's spec recognises the DiT (Klein's is Flux.2's)."""
    detect_diffusers_dit: Callable[[Any], Any] | None = None
    """Single files: `header` -> the `Detection` of this family's DiT in diffusers' key names,
    else None; None when the family has no such format."""
    detect_parts: tuple[tuple[int, Callable[[Any], Any]], ...] = ()
    """Single files: the recognitions of the family's files that are no DiT (its VAE, the
    text and image encoders it brought: `header` -> a `Detection`, else None), each with its
    place among every spec's and the generic ones (`single_file.detect`: T5 10, CLIP text 30,
    CLIP vision 120), tried lowest first: where two could match the same file, the stricter
    goes first (Gemma 3 before Qwen3: both have per-head q/k norms; Flux.2's VAE before the
    plain KL autoencoder)."""
    detection_order: int = 0
    """Single files: the specs' DiT recognitions are tried in this order, lowest first (for
    every key prefix in turn, then the diffusers layouts): a family whose keys are a superset
    of another's goes first (Flux.2 before Flux.1: the same double blocks)."""
    all_in_one: bool = False
    """Single files: the family's DiT may come in an all-in-one checkpoint (ComfyUI's
    `models/checkpoints`) whose encoders and VAE sit beside it under their own prefixes."""
    file_family: str = ""
    """Single files: the family as the recognition names it (`Detection.family`, e.g.
    "hunyuanvideo1.5"); "" when another spec reads the family's files."""
    dit_row_map: Callable[[Any, Any], Any] | None = None
    """Single files: `(keys, config)` -> the row map (`single_file.rows.RowMap`) from the
    file's own key names (the prefix stripped) to diffusers'; None when the family's files use
    diffusers' names (Qwen-Image's); diffusers' layout maps as it is."""
    dit_file_keys: Callable[[Any], Any] | None = None
    """Single files: the DiT's keys among a file's, where the file holds more (LTX-2's text
    connectors beside it); None: all of them."""
    dropped_keys: tuple[str, ...] = ()
    """Single files: DiT weights diffusers' model has no place for (Z-Image's `norm_final`)."""
    text_widths: Callable[[Any], tuple[tuple[str, int, str], ...]] = _text_widths
    """Single files: the DiT's config -> (encoder slot, width, what it takes) for each text
    encoder file the DiT reads, checked against the encoder files' widths (Flux.1 also its
    CLIP's pooled width; Flux.2 three hidden states stacked; HunyuanVideo 1.5 two encoders)."""
    vae_latent_channels: Callable[[Any], int] = _vae_latent_channels
    """Single files: the DiT's config -> the latent channels of the VAE file it takes."""
    file_vae_family: str = ""
    """Single files: the family as the recognition names its VAE files, when not its own
    (Z-Image takes Flux's VAE, Qwen-Image Wan's)."""
    image_encoder_kind: str = "clip"
    """Single files: the vision tower its image encoder file is ("clip"; "siglip")."""
    vae_key_names: Callable[[Any, Any], Any] | None = None
    """Single files: `(state dict, the VAE's detection)` -> the state in diffusers' names, for
    a VAE file of the family's (its own key names); None when the VAE's layout says how (the
    LDM one)."""
    file_scheduler: Callable[[Any, Any], Any] | None = None
    """Single files: `(preset's scheduler, DiT detection)` -> the scheduler the file's model
    runs (HunyuanVideo 1.5: the 720p models' shift); None: the preset's."""
    lora_full_diffs: bool = False
    """ComfyUI's LoRAs of the family may carry full-weight `<layer>.diff` keys, which diffusers'
    LoRA converter drops; `lora/parse.py` renames them by that converter (Wan's)."""
    tiny_presets: Mapping[str, tuple[str, Mapping[str, Callable[[], Any]]]] = field(
        default_factory=dict
    )
    """Its tiny presets (`tiny.py` beside the spec): preset name -> (diffusers pipeline class,
    component name -> a function that builds it with its own seed). `presets.py` builds them;
    their names are listed, torch-free, in `preset_names.PRESET_NAMES`."""
    tiny_pipeline_config: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """A tiny preset's pipeline settings, as the real repo's model_index.json has them
    (Wan 2.2's `boundary_ratio`, Klein's `is_distilled`)."""
    file_presets: Mapping[str, Any] = field(default_factory=dict)
    """Single files: recognised variant (`Detection.variant`) -> the `single_file.file_presets.
    Preset` its files run on: what a header cannot hold (`single_file.py` beside the spec)."""
    runs_all_in_one: bool = False
    """Single files: an all-in-one checkpoint of the family runs (Flux.1's; LTX-2's as
    Lightricks ships it); others are refused, naming the files to give instead."""
    file_parts: Callable[[Any, Any], tuple[Any, dict[str, Any]]] | None = None
    """Single files: `(DiT part, files given)` -> (the files left for the text encoder and VAE
    checks, the family's parts besides the DiT by name, "vae" among them when a file holds
    the VAE), found in whichever files hold them (LTX-2's connectors, audio VAE, vocoder);
    None: the DiT's all-in-one bundle, if any."""
    file_extras: Callable[[dict[str, Any], Any], dict[str, Any]] | None = None
    """Single files: `(those parts, text encoder part)` -> the parts the extra components
    are built from, checked against the encoder (LTX-2's text projection reads Gemma's
    hidden states)."""
    extra_components: tuple[str, ...] = ()
    """Single files: the pipeline components built from `file_extras`' parts."""
    build_extra: Callable[[str, Any, str, Any], Any] | None = None
    """Single files: `(component, parts, preset name, dtype)` -> that component's model."""
    describe_parts: Callable[[Any], tuple[str, str] | None] | None = None
    """Single files: a header no recognition knows -> (variant, why) when it holds some of
    the family's parts by their key names (`paradit models` lists it), else None."""
    tiny_jobs: tuple[TinyJob, ...] = ()
    """The family's jobs on its tiny presets (`tiny_job.py` beside the spec), the smallest
    first (`tiny_job`), then what the family adds, each named once: what the family contract
    suite runs; every registered family has one at least."""
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
        object.__setattr__(self, "file_presets", _frozen(self.file_presets))
        object.__setattr__(self, "tiny_pipeline_config", _frozen(self.tiny_pipeline_config))
        object.__setattr__(self, "tiny_jobs", tuple(self.tiny_jobs))

    @property
    def tiny_job(self) -> TinyJob | None:
        """The family's smallest job (its first), or None before it declares one."""
        return self.tiny_jobs[0] if self.tiny_jobs else None
