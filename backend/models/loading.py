"""One loading path for built-in presets, local diffusers folders and Hugging Face repo ids.

Importing this module imports no torch: `ModelSource.parse` checks a `--model` value where a
command line is read (`paradit generate`, the UI's front process, a client of a running
backend) without torch's seconds of import; reading single files and loading import it."""

from __future__ import annotations

import itertools
import json
import logging
import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .preset_names import PRESET_NAMES, RANDOM_PRESET_NAMES, is_preset, is_tiny_preset
from .single_file.given import SEPARATOR, SingleFiles, is_model_file

if TYPE_CHECKING:  # imported when a pipeline is loaded: torch and diffusers take seconds
    import torch
    from diffusers import DiffusionPipeline

    from .single_file.load import Resolved

logger = logging.getLogger(__name__)

SOURCE_KINDS: tuple[str, ...] = ("preset", "folder", "hub", "file")

_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")
_RULE = (
    f"use a built-in preset ({', '.join(PRESET_NAMES)}), a random-weight preset of a real "
    f"architecture ({', '.join(RANDOM_PRESET_NAMES)}), an existing diffusers folder "
    "(one with model_index.json, or a modular pipeline's modular_model_index.json, as "
    "save_pretrained writes), or a Hugging Face repo id "
    "of the form owner/name, or a single-file checkpoint (.safetensors or .gguf) with "
    "--text-encoder FILE and --vae FILE (Wan 2.1 image-to-video: and --image-encoder FILE; "
    "an all-in-one Flux checkpoint: alone; an LTX-2 checkpoint: with its Gemma 3 "
    "--text-encoder FILE only)"
)


_COMPONENT_FLAGS = "--text-encoder, --vae and --image-encoder"

INDEX_FILES = ("model_index.json", "modular_model_index.json")
"""A diffusers folder's index: a pipeline's, or a modular pipeline's (MiniMax H3's), whose
component entries carry a third item, their loading spec."""


def index_file(folder: str | os.PathLike[str]) -> str | None:
    """The path of `folder`'s index (`INDEX_FILES`, in that order), None without one."""
    for name in INDEX_FILES:
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            return path
    return None


def pipeline_index(folder: str | os.PathLike[str]) -> dict[str, Any] | None:
    """`folder`'s index (`index_file`) with each component's entry as `[library, class]` (a
    modular index's loading spec dropped; `[None, None]` for a component the folder lacks);
    None without one."""
    path = index_file(folder)
    if path is None:
        return None
    with open(path) as f:
        index = json.load(f)
    return {
        name: list(value[:2]) if isinstance(value, list) and len(value) == 3 else value
        for name, value in index.items()
    }


def is_modular_index(index: dict[str, Any]) -> bool:
    """The index names a modular pipeline (`diffusers.ModularPipeline`: its blocks declare the
    components, and `load_components` reads them)."""
    return "_blocks_class_name" in index


def resolve(files: SingleFiles) -> Resolved:
    """Read and check single files (`single_file.load.resolve`, imported here: it needs torch's
    dtypes)."""
    from .single_file.load import resolve as resolve_files

    return resolve_files(files)


@dataclass(frozen=True)
class ModelSource:
    """Where a pipeline comes from."""

    kind: str
    """"preset", "folder", "hub" or "file"."""
    name: str
    """The preset name, the absolute folder path, the repo id, or the checkpoint file(s)
    (absolute, comma-separated: Wan 2.2 A14B's high-noise expert first)."""
    text_encoders: tuple[str, ...] = ()
    """A single-file model's text encoder files (absolute paths)."""
    vaes: tuple[str, ...] = ()
    """A single-file model's VAE file."""
    image_encoders: tuple[str, ...] = ()
    """A single-file Wan 2.1 image-to-video model's CLIP vision file."""
    resolved: Resolved | None = field(default=None, compare=False, repr=False)
    """A single-file model's checked files (`single_file.load.resolve`), resolved once by
    `parse`: every later step of a start-up reads them here."""

    def __post_init__(self) -> None:
        if self.kind not in SOURCE_KINDS:
            raise ValueError(f"kind must be one of {SOURCE_KINDS}, got {self.kind!r}")
        if not self.name:
            raise ValueError("name must not be empty")
        if self.kind != "file" and (self.text_encoders or self.vaes or self.image_encoders):
            raise ValueError(
                f"{_COMPONENT_FLAGS} go with a single-file --model (.safetensors or "
                f".gguf); {self.name} is a {self.kind} that brings its own"
            )

    @classmethod
    def parse(
        cls,
        model: str,
        text_encoders: tuple[str, ...] = (),
        vaes: tuple[str, ...] = (),
        image_encoders: tuple[str, ...] = (),
    ) -> ModelSource:
        """Read a `--model` value: a preset name, checkpoint file(s), an existing folder, then
        owner/name. Single files are recognised and checked here (headers only: fast), so a
        bad file is refused before any rank starts."""
        text = model.strip() if isinstance(model, str) else ""
        if not text:
            raise ValueError(f"the model is empty: {_RULE}")
        if is_model_file(text):
            files = SingleFiles.parse(text, text_encoders, vaes, image_encoders)
            return cls(
                "file",
                SEPARATOR.join(files.models),
                files.text_encoders,
                files.vaes,
                files.image_encoders,
                resolve(files),  # ValueError naming the file and what was expected
            )
        if text_encoders or vaes or image_encoders:
            raise ValueError(
                f"{_COMPONENT_FLAGS} go with a single-file --model (.safetensors or "
                f".gguf); {text} brings its own"
            )
        if is_preset(text):
            return cls("preset", text)
        path = os.path.expanduser(text)
        if os.path.isdir(path):
            if index_file(path) is None:
                raise ValueError(
                    f"folder {path!r} has neither model_index.json nor "
                    f"modular_model_index.json, so it is not a diffusers pipeline folder: {_RULE}"
                )
            return cls("folder", os.path.abspath(path))
        if os.path.exists(path):
            raise ValueError(
                f"{text!r} is a file but not a checkpoint (.safetensors, .sft or .gguf): {_RULE}"
            )
        if _HUB_ID.fullmatch(text) and ".." not in text:
            return cls("hub", text)
        raise ValueError(f"model {text!r} is neither a preset nor an existing folder: {_RULE}")

    def __str__(self) -> str:
        return self.name

    def single_files(self) -> SingleFiles:
        """A single-file source's files (ValueError for other kinds)."""
        if self.kind != "file":
            raise ValueError(f"{self.name} is a {self.kind}, not single files")
        return SingleFiles(
            tuple(self.name.split(SEPARATOR)), self.text_encoders, self.vaes, self.image_encoders
        )

    def resolved_files(self) -> Resolved:
        """A single-file source's checked files: those `parse` resolved, else resolved now
        (ValueError for other kinds)."""
        return self.resolved if self.resolved is not None else resolve(self.single_files())

    def local_folder(self) -> str | None:
        """The diffusers folder on this machine: a folder itself, or a hub id's snapshot in the
        local Hugging Face cache (found without network, so `HF_HUB_OFFLINE=1` works); None
        when a hub id is not cached (then `from_pretrained` downloads it)."""
        if self.kind == "folder":
            return self.name
        if self.kind != "hub":
            return None
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError

        try:
            return snapshot_download(self.name, local_files_only=True)
        except (LocalEntryNotFoundError, OSError, ValueError):
            return None

    @property
    def tiny(self) -> bool:
        """A tiny preset, or files of a tiny preset's architecture: tiny default sizes
        (random presets and real files get the real model's)."""
        if self.kind == "file":
            return is_tiny_preset(self.resolved_files().preset.name)
        return self.kind == "preset" and is_tiny_preset(self.name)


def load_pipeline(
    source: ModelSource,
    *,
    skip: frozenset[str] = frozenset(),
    dtype: torch.dtype | None = None,
    weights: str = "bf16",
) -> DiffusionPipeline:
    """Load the pipeline in `dtype` (None: float32); components named in `skip` are set to None
    (unknown names ignored). `weights` (`--weights`) reaches a single file's DiTs as they are
    built (other sources' DiTs are quantized by the caller: `models.quantized.quantize_loaded`)."""
    import torch

    from .casting import cast_pipeline
    from .presets import build_preset, preset_components
    from .single_file.build import build_pipeline

    dtype = torch.float32 if dtype is None else dtype
    if source.kind == "preset":
        components = preset_components(source.name) - skip
        pipe = build_preset(source.name, components=components, dtype=dtype)
        logger.info("built preset %s (skipped: %s)", source.name, _names(skip))
        if dtype != torch.float32 and is_tiny_preset(source.name):
            cast_pipeline(pipe, dtype)  # tiny presets are built in float32, random ones in `dtype`
        return pipe
    if source.kind == "file":
        return build_pipeline(source.resolved_files(), skip=skip, dtype=dtype, weights=weights)
    # A cached hub id loads from its snapshot folder: the same path as a folder, offline.
    return _load_pretrained(source.local_folder() or source.name, skip, dtype)


def _load_pretrained(name: str, skip: frozenset[str], dtype: torch.dtype) -> DiffusionPipeline:
    """Load a folder or repo id with the pipeline class that model_index.json names.

    `DiffusionPipeline.from_pretrained(image_encoder=None)` loads the component anyway when it
    is one of the pipeline's optional components (diffusers 0.42); the concrete class does not.
    """
    import diffusers
    from diffusers import DiffusionPipeline

    index = pipeline_index(name) if os.path.isdir(name) else None
    if index is not None and is_modular_index(index):
        return _load_modular(name, index, skip, dtype)
    config = DiffusionPipeline.load_config(name)
    class_name = config.get("_class_name", "")
    pipeline_class = getattr(diffusers, class_name, None)
    if not (isinstance(pipeline_class, type) and issubclass(pipeline_class, DiffusionPipeline)):
        pipeline_class = DiffusionPipeline
    # Only components this pipeline has: passing others makes diffusers warn.
    skipped = sorted(c for c in skip if isinstance(config.get(c), (list, tuple)))
    logger.info("loading %s %s (skipped: %s)", class_name or "pipeline", name, _names(skipped))
    return pipeline_class.from_pretrained(name, dtype=dtype, **{c: None for c in skipped})


def _load_modular(
    folder: str, index: dict[str, Any], skip: frozenset[str], dtype: torch.dtype
) -> DiffusionPipeline:
    """A modular pipeline's folder: the pipeline its index names (`ModularPipeline.from_pretrained`,
    its blocks' components), then `load_components` for those the folder holds, but those in
    `skip` and the family's `folder_skip` (left None). A processor an encoder kind reads
    itself (`EncoderKind.folder_processors`) is read so."""
    from diffusers import ModularPipeline

    from .encoders import KINDS
    from .families import family_for, spec_of

    class_name = str(index.get("_class_name", ""))
    unloaded = skip | spec_of(family_for(class_name)).folder_skip
    present = [
        name
        for name, value in index.items()
        if isinstance(value, list) and len(value) == 2 and value[0] and value[1]
    ]
    readers = {
        kind_class: read for kind in KINDS for kind_class, read in kind.folder_processors.items()
    }
    own = {name for name in present if index[name][1] in readers}
    wanted = [name for name in present if name not in unloaded and name not in own]
    logger.info(
        "loading %s %s (skipped: %s)",
        class_name,
        folder,
        _names(sorted(name for name in present if name in unloaded)),
    )
    pipe = ModularPipeline.from_pretrained(folder)
    pipe.load_components(names=wanted, dtype=dtype)
    read = {name: readers[index[name][1]](os.path.join(folder, name)) for name in own - unloaded}
    if read:
        pipe.update_components(**read)
    return pipe


def set_components(pipe: Any, **parts: Any) -> None:
    """Put `parts` in `pipe` by name: `register_modules` for a pipeline, `update_components`
    for a modular one (MiniMax H3's, which has no `register_modules`)."""
    if hasattr(type(pipe), "register_modules"):
        pipe.register_modules(**parts)
    else:
        pipe.update_components(**parts)


def align_cpu_weights(pipe: DiffusionPipeline, alignment: int = 64) -> int:
    """Copy CPU weights that are not `alignment`-byte aligned into fresh memory; return the count.

    Weights loaded from safetensors are views into the file at its (8-byte aligned) offsets, and
    CPU matrix-vector products (batch-1 linears such as time embeddings) round differently on
    misaligned weights. Call this before computing on CPU so results do not depend on the file
    layout. It copies, so call it after sharding and never before moving to an accelerator.
    """
    import torch

    copied = 0
    with torch.no_grad():
        for module in pipe.components.values():
            if not isinstance(module, torch.nn.Module):
                continue
            for tensor in itertools.chain(module.parameters(), module.buffers()):
                if tensor.device.type == "cpu" and tensor.data_ptr() % alignment:
                    tensor.data = tensor.data.clone(memory_format=torch.contiguous_format)
                    copied += 1
    return copied


def _names(components: frozenset[str] | list[str]) -> str:
    return ", ".join(sorted(components)) or "nothing"
