"""The LoRAs a backend may use: the files under its `--lora-dir` folders, by name, parsed once.

A name is a path relative to one of the folders, with `/` between folders, as `GET /v1/loras`
lists it (e.g. `wan/lightx2v_4step.safetensors`; the `.safetensors` may be left out). Nothing
outside the folders is read: absolute names, `..` and symbolic links that lead out are refused.
Parsed LoRAs are kept in a least-recently-used cache bounded in bytes (`cache_bytes`), keyed by
the file's path, size and modification time, so an edited file is read again.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import logging
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import torch

from .parse import LayerDelta, LoraError, parse_lora

log = logging.getLogger(__name__)

SUFFIX = ".safetensors"
DEFAULT_CACHE_BYTES = 2 * 2**30


@dataclass(frozen=True)
class Lora:
    """One parsed LoRA file."""

    name: str
    sha256: str
    layers: dict[str, LayerDelta]
    """Module name (e.g. `blocks.0.attn1.to_q`) -> its change."""

    @property
    def nbytes(self) -> int:
        return sum(layer.nbytes for layer in self.layers.values())


class LoraLibrary:
    """The `--lora-dir` folders and the cache of parsed LoRAs (thread-safe)."""

    def __init__(self, folders: tuple[str, ...], cache_bytes: int = DEFAULT_CACHE_BYTES):
        self.folders = tuple(Path(f).expanduser().absolute() for f in folders)
        self.cache_bytes = cache_bytes
        self._cache: OrderedDict[tuple, Lora] = OrderedDict()
        self._lock = threading.Lock()

    def names(self) -> list[str]:
        """Every LoRA file under the folders (sorted; a name in two folders: the first's)."""
        found: dict[str, None] = {}
        for folder in self.folders:
            if not folder.is_dir():
                continue
            root = folder.resolve()
            for dirpath, dirnames, filenames in os.walk(folder):
                dirnames.sort()
                for filename in sorted(filenames):
                    path = Path(dirpath) / filename
                    if filename.endswith(SUFFIX) and path.resolve().is_relative_to(root):
                        found.setdefault(path.relative_to(folder).as_posix(), None)
        return sorted(found)

    def resolve(self, name: str) -> Path:
        """The file of LoRA `name`; LoraError naming it and why not."""
        if not self.folders:
            raise LoraError(
                f"LoRA {name!r}: this backend has no LoRA folder (start it with --lora-dir)"
            )
        parts = PurePosixPath(name).parts
        if not parts or name.startswith(("/", "\\")) or "\\" in name or ".." in parts:
            raise LoraError(
                f"LoRA {name!r}: a name is a path inside the LoRA folders (no absolute path, "
                "no '..')"
            )
        _check_name_parts(name, parts)
        candidates = [name] if name.endswith(SUFFIX) else [name, name + SUFFIX]
        for folder in self.folders:
            root = folder.resolve()
            for candidate in candidates:
                try:
                    path = (folder / candidate).resolve()
                    found = path.is_file()
                except OSError as exc:  # a path the file system refuses to look up
                    raise LoraError(f"LoRA {_short(name)}: cannot be looked up: {exc}") from None
                if not path.is_relative_to(root):
                    raise LoraError(f"LoRA {name!r}: it leads outside the LoRA folders")
                if found and path.name.endswith(SUFFIX):
                    return path
        stems = {n.removesuffix(SUFFIX): n for n in self.names()}
        wanted = name.removesuffix(SUFFIX)
        close = [stems[s] for s in difflib.get_close_matches(wanted, stems, n=3, cutoff=0.5)]
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise LoraError(f"LoRA {name!r}: no such LoRA (GET /v1/loras lists them){hint}")

    def load(self, name: str, pipeline: type) -> Lora:
        """LoRA `name` parsed for diffusers pipeline class `pipeline` (from the cache when the
        file has not changed); LoraError naming it and why it cannot be used."""
        path = self.resolve(name)
        stat = path.stat()
        key = (str(path), stat.st_size, stat.st_mtime_ns, pipeline.__name__)
        with self._lock:
            lora = self._cache.get(key)
            if lora is not None:
                self._cache.move_to_end(key)
                return lora
            lora = _read(name, path, pipeline)
            self._keep(key, lora)
        return lora

    def _keep(self, key: tuple, lora: Lora) -> None:
        if lora.nbytes > self.cache_bytes:
            return
        self._cache[key] = lora
        while sum(entry.nbytes for entry in self._cache.values()) > self.cache_bytes:
            self._cache.popitem(last=False)

    def cached_bytes(self) -> int:
        with self._lock:
            return sum(entry.nbytes for entry in self._cache.values())

    def to_dict(self) -> dict[str, object]:
        """What `GET /v1/info` shows of the LoRAs: folders and the cache's use and bound."""
        return {
            "folders": [str(f) for f in self.folders],
            "cache_bytes": self.cached_bytes(),
            "cache_limit_bytes": self.cache_bytes,
        }


MAX_NAME_PART_BYTES = 255
"""The longest folder or file name, in UTF-8 bytes: a file name's limit (255 bytes on Linux,
macOS and Windows' file systems). A last part without `.safetensors` has that much less."""


def _short(name: str) -> str:
    return repr(name if len(name) <= 60 else name[:57] + "...")


def _check_name_parts(name: str, parts: tuple[str, ...]) -> None:
    """LoraError for a name no file can have: a NUL, or a folder or file name over
    MAX_NAME_PART_BYTES (the file system's refusal would be an error of the server's)."""
    if "\0" in name:
        raise LoraError(f"LoRA {_short(name)}: a name holds no NUL character")
    for index, part in enumerate(parts):
        size = len(part.encode("utf-8", "surrogatepass"))
        if index == len(parts) - 1 and not part.endswith(SUFFIX):
            size += len(SUFFIX)  # looked up as part + .safetensors
        if size > MAX_NAME_PART_BYTES:
            raise LoraError(
                f"LoRA {_short(name)}: each folder or file name in it (with .safetensors) must "
                f"be at most {MAX_NAME_PART_BYTES} bytes (UTF-8), got {size} in {_short(part)}"
            )


def _read(name: str, path: Path, pipeline: type) -> Lora:
    from safetensors import SafetensorError
    from safetensors.torch import load

    data = path.read_bytes()
    try:
        tensors = load(data)
        metadata = _metadata(data)
    except (SafetensorError, ValueError, OSError) as exc:
        raise LoraError(f"LoRA {name!r}: not a readable safetensors file ({exc})") from None
    if not tensors:
        raise LoraError(f"LoRA {name!r}: the file holds no tensors")
    layers = parse_lora(name, tensors, metadata, pipeline)
    for module, layer in layers.items():
        for tensor in (layer.a, layer.b, layer.diff, layer.bias):
            if tensor is not None and not torch.isfinite(tensor).all():
                raise LoraError(f"LoRA {name!r}: layer {module} holds NaN or infinite values")
    lora = Lora(name, hashlib.sha256(data).hexdigest(), layers)
    log.info("LoRA %r: %d layers, %.1f MiB", name, len(layers), lora.nbytes / 2**20)
    return lora


def _metadata(data: bytes) -> dict[str, str]:
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + size])
    return header.get("__metadata__") or {}
