"""Each rank's rows of a text or image encoder, read from its files (the sharded encoder).

With the encoder sharded over the ranks (`--encoder-placement sharded`) a rank needs only its
FSDP2 shard of it. Loading it whole and then sharding it would put a whole host copy on every
rank at start-up (MiniMax H3's 32B Qwen3-VL in bf16: 62 GiB a rank). Here, as for the DiT
(`sharded_load.py`), the encoder is built on the meta device from its config (a diffusers
folder's component folder, or a single file's header), sharded by `parallelize`, and
`fill_shards` reads this rank's rows of every weight through `EncoderWeights`: the model's
parameter names mapped to the file's keys (the spellings `single_file.components.encoder_model`
accepts: ComfyUI's prefixes, T5's and a causal LM's tied embeddings).

Loaded whole as before (they are small or have no files to read rows from): the encoders of
the presets (built in the process), of a hub id not in the local cache, Qwen-Image-Edit's
single-file text side (built with its processor by its preset's `text_parts`), and those
whose files do not hold every parameter under a name mapped here, in its shape (logged).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .loading import ModelSource, load_pipeline, pipeline_index, set_components
from .sharded_load import FolderWeights, WeightSource, checkpoint_files, fill_shards
from .single_file.header import read_header

log = logging.getLogger(__name__)


class NotCovered(Exception):
    """An encoder's files hold no weights for some of its parameters under any name mapped
    here, or hold them in a shape read otherwise: it is loaded whole, as before, by the
    loader that says what is wrong."""


TIED_SPELLINGS: dict[str, tuple[str, ...]] = {
    "shared.weight": ("encoder.embed_tokens.weight",),
    "encoder.embed_tokens.weight": ("shared.weight",),
    "lm_head.weight": ("model.embed_tokens.weight", "model.language_model.embed_tokens.weight"),
}
"""Other names a parameter's values may be saved under: T5's input embeddings saved once, a
causal LM's output projection tied to (or, unused for text features, taken as) its input
embeddings."""


def _spellings(name: str) -> tuple[str, ...]:
    """The keys a file may hold parameter `name` under: transformers' name, ComfyUI's CLIP
    files' former `text_model.`/`vision_model.` prefixes, a causal LM's body without `model.`."""
    names = [name, f"text_model.{name}", f"vision_model.{name}"]
    if name.startswith("model."):
        names.append(name.removeprefix("model."))
    return tuple(names)


def key_map(
    model: torch.nn.Module, keys: Iterable[str], prefix: str = ""
) -> tuple[dict[str, str], list[str]]:
    """(parameter name -> the file key holding its values, the parameters no key holds) for
    `model`'s parameters (each shared parameter once, under its first name) among `keys`."""
    present = set(keys)
    aliases: dict[int, list[str]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        aliases.setdefault(id(param), []).append(name)
    found: dict[str, str] = {}
    missing: list[str] = []
    for name, param in model.named_parameters():
        names = [*aliases[id(param)]]
        names += [tied for own in list(names) for tied in TIED_SPELLINGS.get(own, ())]
        key = next(
            (
                prefix + spelling
                for alias in names
                for spelling in _spellings(alias)
                if prefix + spelling in present
            ),
            None,
        )
        if key is None:
            missing.append(name)
        else:
            found[name] = key
    return found, missing


def check_shapes(model: torch.nn.Module, keys: dict[str, str], shapes: dict[str, Any]) -> None:
    """NotCovered naming the key when a file tensor's rows do not fit its parameter (the
    whole load then reads it its own way, or says what is wrong)."""
    for name, param in model.named_parameters():
        shape = tuple(shapes[keys[name]])
        if math.prod(shape) != param.numel() or (shape[:1] or (1,)) != (
            tuple(param.shape[:1]) or (1,)
        ):
            raise NotCovered(
                f"{keys[name]} has shape {list(shape)}, which does not fit {name} of shape "
                f"{list(param.shape)}"
            )


class EncoderWeights:
    """An encoder's weights by its parameter names (`WeightSource` for `fill_shards`): rows
    read from the file key each maps to (`key_map`), through `reader` (a folder's
    `FolderWeights`, or a single file's dequantizing `RowReader`)."""

    def __init__(self, reader: Any, keys: dict[str, str], where: str):
        self.reader = reader
        self.keys = keys
        self.where = where

    def __str__(self) -> str:
        return self.where

    def names(self) -> set[str]:
        return set(self.keys)

    def read_rows(self, name: str, start: int, out: torch.Tensor) -> int:
        return self.reader.read_rows(self.keys[name], start, out)

    def close(self) -> None:
        self.reader.close()


@dataclass(frozen=True)
class EmptyEncoder:
    """An encoder built on the meta device, and where its rows are read from."""

    module: torch.nn.Module
    weights: Callable[[], WeightSource]
    """Opens the encoder's files (when its shards are filled)."""


def _folder_encoder(folder: str, name: str, class_name: str, dtype: torch.dtype) -> EmptyEncoder:
    """A diffusers folder's transformers encoder `name` on meta (its dtypes as
    `from_pretrained(dtype=...)` gives them: `cast_model`), and its files."""
    import transformers
    from accelerate import init_empty_weights

    path = Path(folder) / name
    model_class = getattr(transformers, class_name)
    config = model_class.config_class.from_pretrained(path)
    with init_empty_weights(include_buffers=False):  # buffers (rotary tables) for real
        model = model_class._from_config(config, dtype=dtype)
    model.tie_weights()  # as from_pretrained ties them: one parameter (T5's embeddings)
    model.eval()
    try:
        files = checkpoint_files(path)
    except ValueError as exc:  # no safetensors (a .bin checkpoint): from_pretrained reads it
        if list(path.glob("*.safetensors")):
            raise
        raise NotCovered(str(exc)) from None
    keys, missing = key_map(model, files)
    if missing:
        raise NotCovered(f"{path} holds no weights for {missing[:3]} ({len(missing)} in all)")
    shapes: dict[str, Any] = {}
    for file in sorted(set(files.values())):
        shapes.update({k: v.shape for k, v in read_header(file).tensors.items()})
    check_shapes(model, keys, shapes)
    return EmptyEncoder(model, lambda: EncoderWeights(FolderWeights(path), keys, str(path)))


def _file_encoder(part: Any, dtype: torch.dtype, model_class: str | None) -> EmptyEncoder:
    """A single file's encoder on meta (as `encoder_model` builds it), and its file."""
    from .single_file.components import empty_encoder
    from .single_file.quant import RowReader

    model = empty_encoder(part, dtype, model_class)
    header = part.header
    keys, missing = key_map(model, header.tensors, part.detection.prefix)
    if missing:
        raise NotCovered(
            f"{header.name} holds no weights for {missing[:3]} ({len(missing)} in all)"
        )
    check_shapes(model, keys, {k: v.shape for k, v in header.tensors.items()})
    return EmptyEncoder(model, lambda: EncoderWeights(RowReader(header), keys, header.name))


def _build_empty(source: ModelSource, name: str, dtype: torch.dtype) -> EmptyEncoder | None:
    """Encoder component `name` of `source` on meta, or None where it is loaded whole."""
    if source.kind == "file":
        from .single_file.file_presets import ENCODER_CLASSES

        resolved = source.resolved_files()
        if resolved.preset.text_parts is not None:  # Qwen-Image-Edit's text side
            return None
        if name == "image_encoder":
            part = resolved.image_encoder
            model_class = None
        else:
            part = resolved.encoders.get(name)
            classes = ENCODER_CLASSES.get(resolved.preset.pipeline, {})
            model_class = (
                None if part is None else classes.get(part.detection.config.get("_class_name", ""))
            )
        return None if part is None else _file_encoder(part, dtype, model_class)
    folder = source.local_folder()
    index = None if folder is None else pipeline_index(folder)
    entry = None if index is None else index.get(name)
    if not (isinstance(entry, list) and entry[0] == "transformers" and entry[1]):
        return None
    import transformers

    model_class = getattr(transformers, entry[1], None)
    if not (isinstance(model_class, type) and issubclass(model_class, torch.nn.Module)):
        return None  # a tokenizer or a processor
    return _folder_encoder(folder, name, entry[1], dtype)


def empty_encoders(
    source: ModelSource, names: Iterable[str], dtype: torch.dtype
) -> dict[str, EmptyEncoder]:
    """The encoder components among `names` that this rank builds empty and fills with its
    rows (`fill_encoder`); the others are loaded whole (the module docstring says which)."""
    if source.kind == "preset":
        return {}
    built: dict[str, EmptyEncoder] = {}
    for name in sorted(names):
        try:
            encoder = _build_empty(source, name, dtype)
        except NotCovered as exc:
            log.warning("%s is loaded whole on this rank: %s", name, exc)
            continue
        if encoder is not None:
            built[name] = encoder
    return built


def load_encoders_to_shard(
    pipe: Any,
    source: ModelSource,
    names: frozenset[str],
    dtype: torch.dtype,
    weights: str,
) -> dict[str, EmptyEncoder]:
    """Put encoder components `names` (with their tokenizers and processors) into `pipe`, on
    a rank that shards them but did not load them: those that can be built empty and
    filled by rows so (returned: `fill_encoder` each after sharding), the others whole."""
    empty = empty_encoders(source, names, dtype)
    others = frozenset(pipe.components) - names
    loaded = load_pipeline(source, skip=others | frozenset(empty), dtype=dtype, weights=weights)
    parts = {name: getattr(loaded, name) for name in sorted(names) if hasattr(loaded, name)}
    parts.update({name: encoder.module for name, encoder in empty.items()})
    set_components(pipe, **parts)
    log.info(
        "encoders built empty, to be filled with this rank's rows: %s; loaded whole: %s",
        ", ".join(sorted(empty)) or "none",
        ", ".join(
            sorted(n for n in parts if n not in empty and isinstance(parts[n], torch.nn.Module))
        )
        or "none",
    )
    return empty


def fill_encoder(encoder: EmptyEncoder, device: torch.device) -> int:
    """Read this rank's rows of a sharded empty encoder into memory on `device`; the bytes
    read."""
    return fill_shards(encoder.module, encoder.weights(), device)
