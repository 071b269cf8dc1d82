"""One loading path for built-in presets, local diffusers folders and Hugging Face repo ids.

Importing this module imports no torch: `ModelSource.parse` checks a `--model` value where a
command line is read (`paradit generate`, the UI's front process, a client of a running
backend) without torch's seconds of import; reading single files and loading import it."""

from __future__ import annotations

import itertools
import logging
import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

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
    "(one with model_index.json, as save_pretrained writes), or a Hugging Face repo id "
    "of the form owner/name, or a single-file checkpoint (.safetensors or .gguf) with "
    "--text-encoder FILE and --vae FILE (Wan 2.1 image-to-video: and --image-encoder FILE; "
    "an all-in-one Flux checkpoint: alone; an LTX-2 checkpoint: with its Gemma 3 "
    "--text-encoder FILE only)"
)


_COMPONENT_FLAGS = "--text-encoder, --vae and --image-encoder"


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
            if not os.path.isfile(os.path.join(path, "model_index.json")):
                raise ValueError(
                    f"folder {path!r} has no model_index.json, so it is not a diffusers "
                    f"pipeline folder: {_RULE}"
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

    config = DiffusionPipeline.load_config(name)
    class_name = config.get("_class_name", "")
    pipeline_class = getattr(diffusers, class_name, None)
    if not (isinstance(pipeline_class, type) and issubclass(pipeline_class, DiffusionPipeline)):
        pipeline_class = DiffusionPipeline
    # Only components this pipeline has: passing others makes diffusers warn.
    skipped = sorted(c for c in skip if isinstance(config.get(c), (list, tuple)))
    logger.info("loading %s %s (skipped: %s)", class_name or "pipeline", name, _names(skipped))
    return pipeline_class.from_pretrained(name, dtype=dtype, **{c: None for c in skipped})


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
