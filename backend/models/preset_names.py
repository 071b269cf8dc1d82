"""The presets' names, torch-free: the frontends list them (the ComfyUI node's model choices)
without importing torch. The tiny presets are built by `presets.py`, the `random:<model>`
presets (the real architectures, random weights) by `random_presets.py` from their JSON files
in `configs/`."""

from __future__ import annotations

PRESET_NAMES: tuple[str, ...] = (
    "tiny-wan",
    "tiny-wan-i2v",
    "tiny-flux",
    "tiny-cogvideox",
    "tiny-cogvideox-i2v",
    "tiny-wan2.2-ti2v-5b",
    "tiny-wan2.2-i2v-a14b",
    "tiny-qwen-image",
    "tiny-hunyuanvideo1.5",
    "tiny-z-image",
    "tiny-flux2",
    "tiny-hunyuanvideo1.5-i2v",
    "tiny-ltx2",
    "tiny-ltx2-i2v",
    "tiny-flux2-klein",
    "tiny-qwen-image-edit",
)
"""The tiny presets; `random:<model>` presets are listed in RANDOM_PRESET_NAMES."""

RANDOM_PRESETS: dict[str, str] = {
    "random:cogvideox-2b": "cogvideox-2b.json",
    "random:cogvideox-5b": "cogvideox-5b.json",
    "random:cogvideox-5b-i2v": "cogvideox-5b-i2v.json",
    "random:cogvideox1.5-5b": "cogvideox1.5-5b.json",
    "random:wan2.1-t2v-1.3b": "wan2.1-t2v-1.3b.json",
    "random:wan2.1-t2v-14b": "wan2.1-t2v-14b.json",
    "random:wan2.2-t2v-a14b": "wan2.2-t2v-a14b.json",
    "random:wan2.2-ti2v-5b": "wan2.2-ti2v-5b.json",
    "random:wan2.2-i2v-a14b": "wan2.2-i2v-a14b.json",
    "random:flux.1-dev": "flux.1-dev.json",
    "random:qwen-image": "qwen-image.json",
    "random:qwen-image-edit": "qwen-image-edit.json",
    "random:hunyuanvideo1.5-t2v": "hunyuanvideo1.5-t2v.json",
    "random:hunyuanvideo1.5-i2v": "hunyuanvideo1.5-i2v.json",
    "random:z-image-turbo": "z-image-turbo.json",
    "random:flux.2-dev": "flux.2-dev.json",
    "random:ltx-2": "ltx-2.json",
    "random:ltx-2-i2v": "ltx-2-i2v.json",
    "random:ltx-2-distilled": "ltx-2-distilled.json",
    "random:flux.2-klein-4b": "flux.2-klein-4b.json",
    "random:flux.2-klein-base-4b": "flux.2-klein-base-4b.json",
    "random:flux.2-klein-9b": "flux.2-klein-9b.json",
}
"""Preset name -> its file in `configs/`."""

RANDOM_PRESET_NAMES: tuple[str, ...] = tuple(RANDOM_PRESETS)


def is_random_preset(name: str) -> bool:
    return name in RANDOM_PRESETS


def is_tiny_preset(name: str) -> bool:
    """Tiny presets get tiny default sizes; `random:` presets the real model's."""
    return name in PRESET_NAMES


def is_preset(name: str) -> bool:
    """Whether `name` is one of the built-in presets (tiny or `random:`)."""
    return name in PRESET_NAMES or is_random_preset(name)
