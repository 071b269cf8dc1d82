"""The model files the ParaDiT Backend node offers, found as ComfyUI's own loaders find them.

ComfyUI's `folder_paths` module knows the user's model folders (models/ and whatever
extra_model_paths.yaml adds): `get_filename_list(name)` lists a folder kind's files,
`get_full_path(name, file)` turns a listed name back into a path, `get_folder_paths(name)` gives
the folders themselves. `ComfyFolders` wraps exactly those three, so the node lists what
UNETLoader, CLIPLoader, VAELoader and CheckpointLoaderSimple list, plus:

- `.gguf` files in diffusion_models/unet and text_encoders/clip, which ComfyUI itself lists
  only once the GGUF node pack registers the extension (found here by walking the folders);
- diffusers folders (with model_index.json, or a modular pipeline's modular_model_index.json)
  under models/diffusers and models/CogVideo (the folder kijai's CogVideoX nodes use; ComfyUI
  has no kind of its own for it).

No ComfyUI import here: the module is handed in (tests hand in a stand-in).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .params import BACKEND_PARAMS
from .pool import find_diffusers_folders

FILE_KINDS: dict[str, tuple[str, ...]] = {p.name: p.folders for p in BACKEND_PARAMS if p.folders}
"""Each file widget of the backend node -> the ComfyUI folder kinds it lists, in order
(diffusion_models includes models/unet, text_encoders models/clip)."""
GGUF_KINDS = ("diffusion_models", "text_encoders")
FOLDER_KINDS = ("diffusers", "CogVideo")
"""Folder kinds whose diffusers folders the `model` widget lists."""


@dataclass(frozen=True)
class ComfyFolders:
    """The user's model files and folders, through ComfyUI's `folder_paths` module."""

    folder_paths: Any

    def files(self, widget: str) -> list[str]:
        """The names a file widget offers: what ComfyUI lists for its folder kinds, then the
        .gguf files, without repeats (a name found in two kinds is the first kind's)."""
        names: list[str] = []
        for kind in FILE_KINDS[widget]:
            names += self._listed(kind)
            if kind in GGUF_KINDS:
                names += self._gguf(kind)
        return list(dict.fromkeys(names))

    def full_path(self, widget: str, name: str) -> str:
        """The file a widget's value names (`get_full_path`, as ComfyUI's loaders do);
        ValueError naming the folders searched when none holds it."""
        for kind in FILE_KINDS[widget]:
            path = self.folder_paths.get_full_path(kind, name)
            if path is not None:
                return str(path)
        kinds = " or ".join(FILE_KINDS[widget])
        raise ValueError(f"{widget}: {name!r} is in none of ComfyUI's {kinds} folders")

    def local_folders(self) -> dict[str, str]:
        """Diffusers folders under models/diffusers and models/CogVideo: {label: path}."""
        found: dict[str, str] = {}
        for kind in FOLDER_KINDS:
            for label, path in find_diffusers_folders(self._folders(kind)).items():
                found.setdefault(label, path)
        return found

    def _listed(self, kind: str) -> list[str]:
        try:
            return list(self.folder_paths.get_filename_list(kind))
        except KeyError:  # a kind this ComfyUI does not know
            return []

    def _folders(self, kind: str) -> list[str]:
        try:
            return list(self.folder_paths.get_folder_paths(kind))
        except KeyError:  # CogVideo: not a kind of ComfyUI's own; its usual place
            models_dir = getattr(self.folder_paths, "models_dir", None)
            return [os.path.join(models_dir, kind)] if models_dir else []

    def _gguf(self, kind: str) -> list[str]:
        """.gguf files under the kind's folders, named relative to their folder as
        `get_filename_list` names files."""
        found: list[str] = []
        for root in self._folders(kind):
            base = Path(root)
            if base.is_dir():
                found += [
                    os.path.relpath(path, base)
                    for path in base.rglob("*")
                    if path.suffix.lower() == ".gguf" and path.is_file()
                ]
        return sorted(found)
