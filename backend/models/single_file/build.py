"""Single-file models: build the pipeline from checked files, read each rank's rows.

`build_pipeline` assembles the diffusers pipeline of a `load.Resolved`: DiTs are built on the
meta device and filled from their files through `DitWeights` (the same row reads that fill an
FSDP2 shard), encoders and VAEs are read whole (components.py). Configs come from the headers
(detect.py) and, for what a header cannot say (scheduler, VAE settings, pipeline settings),
from the presets the package ships (file_presets.py): the tiny presets for the tiny test
architectures, the `random:` presets' JSON for real ones. Qwen-Image-Edit's text side
(Qwen2.5-VL with its vision tower, its tokenizer and processor) is built by its preset's
`text_parts` (`families/qwen_image_edit/single_file.py`).
`meta_pipeline_of_files` is the same pipeline on the meta device, for planning.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import torch

from ..casting import cast_model
from ..encoders import encoder_kind
from ..image_processors import clip_image_processor
from ..quantized import Stored, logical_parameters, store_layers
from .components import FILE_TOOLS, encoder_model, preset_parts, tokenizer, vae_model
from .convert import RowMap, dit_part, dit_row_map, unused_keys
from .detect import Part, recognise
from .file_presets import (
    CLIP_VISION_H,
    ENCODER_CLASSES,
    PAIR_BOUNDARY,
    PIPELINE_SETTINGS,
    PRESETS,
    TOKENIZER_SLOTS,
)
from .load import Resolved, SingleFiles, expect_role
from .quant import RowReader, is_quantized, stored_of
from .spec import file_spec, spec_for_file

if TYPE_CHECKING:
    from diffusers import DiffusionPipeline

log = logging.getLogger(__name__)

SETTINGS_PARTS = ("scheduler", "guider", "audio_scheduler")
"""The components a file pipeline takes from its preset as they are (no weights): the
scheduler, HunyuanVideo 1.5's guider, MiniMax H3's audio scheduler."""


# -- reading weights --------------------------------------------------------------------------


class DitWeights:
    """A DiT's weights in one single file, by diffusers parameter name, read row block by row
    block (what `models.sharded_load.fill_shards` reads each rank's shard through)."""

    def __init__(self, part: Part):
        self.part = part = dit_part(part)  # its tensors in the shapes the DiT reads
        self.row_map: RowMap = dit_row_map(part.header, part.detection)
        extra = unused_keys(part.header, part.detection, self.row_map)
        if extra:
            raise ValueError(
                f"{part.header.name}: {len(extra)} weight(s) no {part.detection.variant} "
                f"parameter takes, e.g. {extra[:3]} (a different architecture?)"
            )
        self._reader: RowReader | None = None

    def __str__(self) -> str:
        return self.part.header.name

    def __enter__(self) -> DitWeights:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def names(self) -> set[str]:
        return set(self.row_map)

    def check(self, model: torch.nn.Module) -> None:
        """ValueError naming the file when a parameter is missing or its rows do not fit."""
        name = self.part.header.name
        params = dict(logical_parameters(model))  # a stored-quantized layer's weight shape
        missing = [n for n in params if n not in self.row_map]
        if missing:
            raise ValueError(
                f"{name}: no weights for {missing[:3]} ({len(missing)} in all) of "
                f"{self.part.detection.variant}"
            )
        tensors = self.part.header.tensors
        for param_name, logical in params.items():
            param = torch.empty(logical, device="meta")
            rows = sum(s.rows for s in self.row_map[param_name])
            row_items = 1
            for size in param.shape[1:]:
                row_items *= size
            expected = param.shape[0] if param.dim() else 1
            for seg in self.row_map[param_name]:
                shape = tensors[seg.key].shape
                items = 1
                for size in shape[1:]:
                    items *= size
                if items != row_items or seg.start + seg.rows > (shape[0] if shape else 1):
                    raise ValueError(
                        f"{name}: {seg.key} has shape {list(shape)}, which does not fit "
                        f"{param_name} of shape {list(param.shape)}"
                    )
            if rows != expected:
                raise ValueError(f"{name}: {param_name} takes {expected} rows, the file has {rows}")

    def read_rows(self, name: str, start: int, out: torch.Tensor) -> int:
        return self._by_segment("read_rows", name, start, out)

    def stored(self, name: str) -> Stored | None:
        """How parameter `name` can stay as its file holds it (`quant.stored_of`): the same for
        every file tensor it is made of, else None (read as floats)."""
        kinds = {stored_of(self.part.header, seg.key) for seg in self.row_map.get(name, ())}
        return kinds.pop() if len(kinds) == 1 else None

    def read_stored(self, name: str, start: int, out: torch.Tensor) -> int:
        """Rows of `name` as the file holds them (fp8 values or GGUF blocks)."""
        return self._by_segment("read_stored", name, start, out)

    def read_scales(self, name: str, start: int, out: torch.Tensor) -> int:
        """The per-row scales of fp8 weight `name`'s rows (1 where its file has none)."""
        return self._by_segment("read_scales", name, start, out)

    def _by_segment(self, method: str, name: str, start: int, out: torch.Tensor) -> int:
        """Call the reader's `method` for each file segment under rows start..start+len(out)
        of parameter `name`."""
        if self._reader is None:
            self._reader = RowReader(self.part.header)
        read_segment = getattr(self._reader, method)
        flat = out.reshape(1, *out.shape) if out.dim() == 0 else out
        want_end, read, base = start + flat.shape[0], 0, 0
        for seg in self.row_map[name]:
            lo, hi = max(start, base), min(want_end, base + seg.rows)
            if lo < hi:
                read += read_segment(seg.key, seg.start + lo - base, flat[lo - start : hi - start])
            base += seg.rows
        return read

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None


# -- the pipeline -----------------------------------------------------------------------------


def empty_model(config: dict[str, Any], dtype: torch.dtype, family: str = "") -> torch.nn.Module:
    """A diffusers model from its config, parameters on the meta device (as `empty_dit`); a
    class diffusers lacks from the file spec of `family` (`FileSpec.model_classes`: MiniMax
    H3's pruned DiT)."""
    from ..sharded_load import empty_from_config

    spec = file_spec(family) if family else None
    own = spec.model_classes.get(config.get("_class_name", "")) if spec is not None else None
    if own is None:
        return empty_from_config(config, dtype)
    from accelerate import init_empty_weights

    settings = {k: v for k, v in config.items() if not k.startswith("_")}
    with init_empty_weights(include_buffers=False):
        model = own()(
            **settings
        )  # its settings pass on to diffusers' class (`from_config` drops them)
    return cast_model(model, dtype).eval()


def store_file_layers(model: torch.nn.Module, part: Part, weights: str) -> int:
    """`--weights` on a DiT built empty from `part`: its linears stored as the mode asks
    (`models.quantized`), what the file holds read off its header."""
    with DitWeights(part) as source:
        return store_layers(model, weights, is_quantized(part.header), source.stored)


def fill_whole(model: torch.nn.Module, weights: DitWeights) -> None:
    """Read every row of every weight (world size 1, or a DiT that is not sharded)."""
    from ..sharded_load import fill_shards

    weights.check(model)
    fill_shards(model, weights, torch.device("cpu"))


def build_pipeline(
    resolved: Resolved,
    *,
    skip: frozenset[str] = frozenset(),
    dtype: torch.dtype = torch.float32,
    empty: frozenset[str] = frozenset(),
    weights: str = "bf16",
) -> DiffusionPipeline:
    """The pipeline; components in `skip` are None, DiTs in `empty` stay on meta (the caller
    fills their shards with `dit_weights`); `weights`: how the DiTs' linears are stored
    (`--weights`)."""
    from ..random_presets import assemble_pipeline

    preset = resolved.preset
    parts: dict[str, Any] = {}
    for name, part in resolved.dits.items():
        if name in skip:
            parts[name] = None
            continue
        model = empty_model(part.detection.config, dtype, part.detection.family or "")
        store_file_layers(model, part, weights)
        if name not in empty:
            with DitWeights(part) as source:
                fill_whole(model, source)
        parts[name] = model
    for slot, part in resolved.encoders.items():
        if preset.text_parts is not None:  # Qwen-Image-Edit: encoder, tokenizer, processor
            parts.update(preset.text_parts(part, preset.name, dtype, skip, FILE_TOOLS))
            continue
        wanted = slot not in skip
        classes = ENCODER_CLASSES.get(preset.pipeline, {})
        model_class = classes.get(part.detection.config.get("_class_name", ""))
        parts[slot] = encoder_model(part, dtype, model_class=model_class) if wanted else None
        tokenizer_slot = TOKENIZER_SLOTS[slot]
        wanted = tokenizer_slot not in skip  # a rank that shards the encoder builds it empty
        parts[tokenizer_slot] = tokenizer(part, preset.name, tokenizer_slot) if wanted else None
    family = spec_for_file(next(iter(resolved.dits.values())).detection.family or "")
    if "vae" in skip:
        parts["vae"] = None
    elif family.build_vae is not None:  # MiniMax H3: the file's latent statistics
        parts["vae"] = family.build_vae(resolved.vae, preset.name, dtype, FILE_TOOLS)
    else:
        parts["vae"] = vae_model(resolved.vae, preset.name, dtype)
    if resolved.extras:  # LTX-2's connectors, audio VAE and vocoder; MiniMax H3's audio VAE
        for name in family.extra_components:
            if name not in skip:
                parts[name] = family.build_extra(
                    name, resolved.extras, preset.name, dtype, FILE_TOOLS
                )
            else:
                parts[name] = None
    if resolved.image_encoder is not None:  # Wan 2.1 and HunyuanVideo 1.5 image-to-video
        part = resolved.image_encoder
        wanted = "image_encoder" not in skip
        parts["image_encoder"] = encoder_model(part, dtype, "--image-encoder") if wanted else None
        size = part.detection.config["image_size"]
        processor, make = _image_processor(part)
        parts[processor] = make(size) if processor not in skip else None
    # guider: HunyuanVideo 1.5's; audio_scheduler: MiniMax H3's second stream's
    reference = preset_parts(preset.name, set(SETTINGS_PARTS))
    parts["scheduler"] = reference.scheduler
    for name in SETTINGS_PARTS[1:]:
        if getattr(reference, name, None) is not None:
            parts[name] = getattr(reference, name)
    first = next(iter(resolved.dits.values())).detection
    spec = spec_for_file(first.family or "")
    if spec.scheduler is not None:  # HunyuanVideo 1.5: the 720p models' shift
        parts["scheduler"] = spec.scheduler(reference.scheduler, first)
    if preset.scheduler:
        scheduler = reference.scheduler
        parts["scheduler"] = type(scheduler).from_config(scheduler.config, **preset.scheduler)
    # the pipeline's own settings (Wan 2.2: boundary_ratio, expand_timesteps) as its preset's
    held = getattr(reference, "config", None) or {}  # a modular pipeline's blocks hold none
    settings = {k: held[k] for k in PIPELINE_SETTINGS if k in held}
    settings.update(preset.settings)
    if len(resolved.dits) == 2 and preset.name in PAIR_BOUNDARY:
        settings["boundary_ratio"] = PAIR_BOUNDARY[preset.name]
    pipe = assemble_pipeline(preset.pipeline, parts, settings)
    log.info("built %s from single files: %s", resolved.variant, resolved.summary()["files"])
    return pipe


def meta_pipeline_of_files(model: str) -> DiffusionPipeline:
    """A single-file model's pipeline on the meta device for planning: the DiT(s) as their
    headers describe them (in the file's dtype: a quantized file is planned dequantized, as
    it is held), the rest from the preset of the recognised architecture (its reduced text
    encoders: the real ones live on rank 0 only)."""
    from ..presets import build_preset

    files = SingleFiles.parse(model)
    dits = [recognise(p) for p in files.models]
    for part in dits:
        expect_role(part, "transformer", "--model")
    preset = PRESETS.get(dits[0].detection.variant)
    if preset is None:
        raise ValueError(
            f"{dits[0].header.name} is {dits[0].detection.variant}: recognised, but not "
            "runnable from single files yet, so there is nothing to plan"
        )
    name = preset.pair_preset if len(dits) == 2 else preset.name
    if not name:
        raise ValueError(
            f"{dits[0].header.name} is {dits[0].detection.variant}: "
            + ("one expert; it takes two (HIGH,LOW)" if preset.pair_preset else "not a pair")
        )
    pipe = build_preset(name, device="meta")
    for component, part in zip(("transformer", "transformer_2"), dits, strict=False):
        model = empty_model(part.detection.config, torch.float32, part.detection.family or "")
        if hasattr(type(pipe), "register_modules"):
            pipe.register_modules(**{component: model})
        else:  # a modular pipeline (MiniMax H3's)
            pipe.update_components(**{component: model})
    if type(pipe).__name__ != preset.pipeline and not preset.image_encoder:
        import diffusers  # the first Qwen-Image-Edit on the Edit-Plus preset's components

        pipe = getattr(diffusers, preset.pipeline)(**pipe.components)
    elif type(pipe).__name__ != preset.pipeline:  # Wan 2.1 I2V 14B on the T2V 14B's preset
        import diffusers
        from accelerate import init_empty_weights
        from transformers import CLIPVisionConfig, CLIPVisionModel

        with init_empty_weights(include_buffers=True):
            image_encoder = CLIPVisionModel(CLIPVisionConfig(**CLIP_VISION_H))
        pipe = getattr(diffusers, preset.pipeline)(
            **pipe.components,
            image_encoder=image_encoder,
            image_processor=clip_image_processor(CLIP_VISION_H["image_size"]),
        )
    return pipe


def _image_processor(part: Part) -> tuple[str, Any]:
    """(the pipeline slot, `(image size)` -> the processor) of an image encoder file's kind."""
    kind = encoder_kind(part.detection.family or "")
    if kind is None or kind.image_processor is None:
        raise ValueError(
            f"--image-encoder {part.header.name}: no image processor for a "
            f"{part.detection.variant} tower"
        )
    return kind.image_processor
