"""What a model family declares about its single files (`FileSpec`, the `files` of its
`FamilySpec`); torch-free.

The single-file drivers (`single_file/`) read it: which DiT a header holds and in what order
the families' recognitions are tried, the key mapping to diffusers' names, the checks between
the files given, the presets a header cannot hold, and a family's parts besides the DiT (LTX-2's
connectors, audio VAE, vocoder). A hook that needs the drivers' functions gets them as an
argument (`single_file.vocabulary.FileTools`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any


def _text_widths(config: Any) -> tuple[tuple[str, int, str], ...]:
    """One text encoder whose width is the DiT's text input's."""
    width = (
        config.get("text_dim") or config.get("joint_attention_dim") or config.get("cap_feat_dim")
    )
    return (("text_encoder", width, "text embeddings"),)


def _vae_latent_channels(config: Any) -> int:
    """The DiT's output channels, or a quarter of its input's (2x2 patches)."""
    return config.get("out_channels") or config["in_channels"] // 4


@dataclass(frozen=True)
class FileSpec:
    """A family's single files: recognised, mapped, checked and built."""

    detect_dit: Callable[[Any, str], Any] | None = None
    """`(header, prefix)` -> the `Detection` of this family's DiT when the file
    holds one in the family's own key names under `prefix`, else None (`single_file.py` beside
    the spec); None when another family's spec recognises the DiT (Klein's is Flux.2's)."""
    detect_diffusers_dit: Callable[[Any], Any] | None = None
    """`header` -> the `Detection` of this family's DiT in diffusers' key names,
    else None; None when the family has no such format."""
    detect_parts: tuple[tuple[int, Callable[[Any], Any]], ...] = ()
    """The recognitions of the family's files that are no DiT (its VAE, the
    text and image encoders it brought: `header` -> a `Detection`, else None), each with its
    place among every spec's and the generic ones (`single_file.detect`: T5 10, CLIP text 30,
    CLIP vision 120), tried lowest first: where two could match the same file, the stricter
    goes first (Gemma 3 before Qwen3: both have per-head q/k norms; Flux.2's VAE before the
    plain KL autoencoder)."""
    detection_order: int = 0
    """The specs' DiT recognitions are tried in this order, lowest first (for
    every key prefix in turn, then the diffusers layouts): a family whose keys are a superset
    of another's goes first (Flux.2 before Flux.1: the same double blocks)."""
    all_in_one: bool = False
    """The family's DiT may come in an all-in-one checkpoint (ComfyUI's
    `models/checkpoints`) whose encoders and VAE sit beside it under their own prefixes."""
    family: str = ""
    """The family as the recognition names it (`Detection.family`, e.g.
    "hunyuanvideo1.5"); "" when another spec reads the family's files."""
    dit_row_map: Callable[[Any, Any], Any] | None = None
    """`(keys, config)` -> the row map (`single_file.rows.RowMap`) from the
    file's own key names (the prefix stripped) to diffusers'; None when the family's files use
    diffusers' names (Qwen-Image's); diffusers' layout maps as it is."""
    dit_shapes: Callable[[Any], Mapping[str, tuple[int, ...]]] | None = None
    """`keys` (the file's shapes, the prefix stripped) -> the shape each tensor stored in
    another shape than the DiT takes it is read in (the same elements: Krea 2's block
    modulation, stored flat, read as six rows); None: as stored."""
    dit_keys: Callable[[Any], Any] | None = None
    """The DiT's keys among a file's, where the file holds more (LTX-2's text
    connectors beside it); None: all of them."""
    dropped_keys: tuple[str, ...] = ()
    """DiT weights diffusers' model has no place for (Z-Image's `norm_final`)."""
    text_widths: Callable[[Any], tuple[tuple[str, int, str], ...]] = _text_widths
    """The DiT's config -> (encoder slot, width, what it takes) for each text
    encoder file the DiT reads, checked against the encoder files' widths (Flux.1 also its
    CLIP's pooled width; Flux.2 three hidden states stacked; HunyuanVideo 1.5 two encoders)."""
    vae_latent_channels: Callable[[Any], int] = _vae_latent_channels
    """The DiT's config -> the latent channels of the VAE file it takes."""
    vae_family: str = ""
    """The family as the recognition names its VAE files, when not its own
    (Z-Image takes Flux's VAE, Qwen-Image Wan's)."""
    image_encoder_kind: str = "clip"
    """The vision tower its image encoder file is ("clip"; "siglip")."""
    vae_key_names: Callable[[Any, Any], Any] | None = None
    """`(state dict, the VAE's detection)` -> the state in diffusers' names, for
    a VAE file of the family's (its own key names); None when the VAE's layout says how (the
    LDM one)."""
    scheduler: Callable[[Any, Any], Any] | None = None
    """`(preset's scheduler, DiT detection)` -> the scheduler the file's model
    runs (HunyuanVideo 1.5: the 720p models' shift); None: the preset's."""
    presets: Mapping[str, Any] = field(default_factory=dict)
    """Recognised variant (`Detection.variant`) -> the `single_file.vocabulary.
    Preset` its files run on: what a header cannot hold (`single_file.py` beside the spec)."""
    runs_all_in_one: bool = False
    """An all-in-one checkpoint of the family runs (Flux.1's; LTX-2's as
    Lightricks ships it); others are refused, naming the files to give instead."""
    parts: Callable[[Any, Any, Any], tuple[Any, dict[str, Any]]] | None = None
    """`(DiT part, files given, tools)` -> (the files left for the text encoder and VAE
    checks, the family's parts besides the DiT by name, "vae" among them when a file holds
    the VAE), found in whichever files hold them (LTX-2's connectors, audio VAE, vocoder);
    None: the DiT's all-in-one bundle, if any."""
    extras: Callable[[dict[str, Any], Any], dict[str, Any]] | None = None
    """`(those parts, text encoder part)` -> the parts the extra components
    are built from, checked against the encoder (LTX-2's text projection reads Gemma's
    hidden states)."""
    extra_components: tuple[str, ...] = ()
    """The pipeline components built from `extras`' parts."""
    build_extra: Callable[[str, Any, str, Any, Any], Any] | None = None
    """`(component, parts, preset name, dtype, tools)` -> that component's model (`tools`:
    `single_file.vocabulary.FileTools`, what the hook calls of the drivers)."""
    model_classes: Mapping[str, Callable[[], Any]] = field(default_factory=dict)
    """A DiT class name (a detection config's `_class_name`) diffusers lacks -> the class,
    imported when called (MiniMax H3's pruned-AdaLN DiT, `families/minimax_h3/pruned.py`)."""
    build_vae: Callable[[Any, str, Any, Any], Any] | None = None
    """`(VAE part, preset name, dtype, tools)` -> the VAE model, where a file holds more of
    its config than the preset's (MiniMax H3's latent statistics); None: the preset's config
    with the file's weights (`components.vae_model`)."""
    describe_parts: Callable[[Any], tuple[str, str] | None] | None = None
    """A header no recognition knows -> (variant, why) when it holds some of
    the family's parts by their key names (`paradit models` lists it), else None."""

    def __post_init__(self) -> None:
        recognises = self.detect_dit is not None or self.detect_diffusers_dit is not None
        if (recognises or self.dit_row_map is not None) and not self.family:
            raise ValueError(
                "a file spec that recognises or maps a DiT names the family its detections "
                "carry (`family`)"
            )
        if bool(self.extra_components) != (self.build_extra is not None):
            raise ValueError(
                f"a file spec's extra components {list(self.extra_components)} come with the "
                "`build_extra` that builds them, and a `build_extra` with its components"
            )
        if self.extras is not None and self.parts is None:
            raise ValueError("a file spec's `extras` are taken from its `parts`: give `parts`")
        object.__setattr__(self, "presets", MappingProxyType(dict(self.presets)))
        object.__setattr__(self, "model_classes", MappingProxyType(dict(self.model_classes)))
