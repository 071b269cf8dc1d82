"""Where a workflow's file names point: ComfyUI's models folder (its subfolders as ComfyUI's
`folder_paths` names them) and its `input` folder (LoadImage's files).

`--comfyui-dir DIR` gives the ComfyUI folder (holding `models/` and `input/`) or its models
folder; without it the first folder above the workflow file that is either is taken.

Confined folders (`POST /v1/workflows`: the workflow comes from a client) resolve names only
inside them: a name with `..`, an absolute path, or a link leading outside is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

KINDS: dict[str, tuple[str, ...]] = {
    "diffusion_models": ("diffusion_models", "unet"),
    "checkpoints": ("checkpoints",),
    "text_encoders": ("text_encoders", "clip"),
    "vae": ("vae",),
    "clip_vision": ("clip_vision",),
    "loras": ("loras",),
    "latent_upscale_models": ("latent_upscale_models",),
}
"""A loader's folder kind -> the subfolders ComfyUI searches for it, in its order
(`unet` and `clip` are the older names of `diffusion_models` and `text_encoders`)."""


SUBFOLDERS = tuple(sub for subs in KINDS.values() for sub in subs)


def _is_models_folder(path: Path) -> bool:
    return any((path / name).is_dir() for name in SUBFOLDERS)


@dataclass(frozen=True)
class ComfyFolders:
    models: Path
    input: Path
    confined: bool = False
    """Refuse names that lead outside the folders (a client's workflow)."""

    def confine(self) -> ComfyFolders:
        return replace(self, confined=True)

    @classmethod
    def at(cls, folder: str | Path) -> ComfyFolders | None:
        """The folders of a ComfyUI folder or of a models folder (None: neither)."""
        folder = Path(folder).expanduser().absolute()
        if _is_models_folder(folder / "models"):
            return cls(folder / "models", folder / "input")
        if _is_models_folder(folder):
            return cls(folder, folder.parent / "input")
        return None

    @classmethod
    def find(cls, comfyui_dir: str | None, workflow: Path) -> ComfyFolders:
        """`--comfyui-dir`, else the first folder above `workflow` that is a ComfyUI folder
        or a models folder; ValueError saying what to give."""
        if comfyui_dir:
            found = cls.at(comfyui_dir)
            if found is None:
                raise ValueError(
                    f"--comfyui-dir {comfyui_dir}: neither a ComfyUI folder (with models/) nor "
                    f"a models folder (with any of {', '.join(SUBFOLDERS)})"
                )
            return found
        for folder in workflow.absolute().parents:
            found = cls.at(folder)
            if found is not None:
                return found
        raise ValueError(
            f"no ComfyUI models folder above {workflow}: give --comfyui-dir DIR (the ComfyUI "
            "folder, or its models folder)"
        )

    def model_file(self, kind: str, name: str) -> Path | None:
        """The file a loader's `name` (relative to the kind's folders) names, None if none;
        ValueError when confined and the name leads outside the models folder."""
        relative = self._inside(name, self.models)
        for sub in KINDS[kind]:
            path = self.models / sub / relative
            if path.is_file():
                return self._kept(name, path, self.models)
        return None

    def where(self, kind: str) -> str:
        """The folders a kind is searched in, for messages."""
        return " or ".join(str(self.models / sub) for sub in KINDS[kind])

    def input_file(self, name: str) -> Path | None:
        """LoadImage's file: in the input folder (`name [input]` as the API format may write
        it), or (not confined) an absolute path."""
        name = name.removesuffix(" [input]")
        path = Path(name)
        if path.is_absolute() and not self.confined:
            return path if path.is_file() else None
        path = self.input / self._inside(name, self.input)
        return self._kept(name, path, self.input) if path.is_file() else None

    def _inside(self, name: str, folder: Path) -> str:
        relative = _relative(name)
        if self.confined and (
            _ABSOLUTE.match(name) or ".." in Path(relative).parts or not relative
        ):
            raise ValueError(
                f"{name!r}: a name outside {folder} (an absolute path or ..); the server reads "
                "files only inside its --comfyui-dir"
            )
        return relative

    def _kept(self, name: str, path: Path, folder: Path) -> Path:
        if self.confined and not path.resolve().is_relative_to(folder.resolve()):
            raise ValueError(
                f"{name!r}: a link leading outside {folder}; the server reads files only inside "
                "its --comfyui-dir"
            )
        return path


_ABSOLUTE = re.compile(r"^([\\/]|[A-Za-z]:)")
"""An absolute name on any OS (`/x`, `\\x`, `C:x`)."""


def _relative(name: str) -> str:
    """ComfyUI lists files in subfolders with the OS's separator (backslashes on Windows)."""
    return name.replace("\\", "/").lstrip("/")
