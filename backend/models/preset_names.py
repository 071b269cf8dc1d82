"""The presets' names, torch-free: the frontends list them (the ComfyUI node's model choices)
without importing torch. The tiny presets are built by `presets.py` from the builders their
families declare (`FamilySpec.tiny_presets`, `families/<family>/tiny.py`); this table is the
order users see them in. The `random:<model>` presets (the real architectures, random weights)
are the JSON files in the family folders' `configs/`, built by `random_presets.py`."""

from __future__ import annotations

from pathlib import Path

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
    "tiny-ltx2.3",
    "tiny-ltx2.3-i2v",
    "tiny-ltx2.5",
    "tiny-flux2-klein",
    "tiny-flux2-klein-base",
    "tiny-flux2-klein-kv",
    "tiny-qwen-image-edit",
    "tiny-krea2",
    "tiny-qwen-image2.1",
    "tiny-minimax-h3",
)
"""The tiny presets; `random:<model>` presets are listed in RANDOM_PRESET_NAMES."""

FAMILIES_DIR = Path(__file__).resolve().parent / "families"

RANDOM_PRESETS: dict[str, Path] = {
    f"random:{path.stem}": path for path in sorted(FAMILIES_DIR.glob("*/configs/*.json"))
}
"""Preset name -> its JSON file: every family folder's `configs/<model>.json` is the preset
`random:<model>` (read by `random_presets.py`), in the folders' alphabetical order."""

RANDOM_PRESET_NAMES: tuple[str, ...] = tuple(RANDOM_PRESETS)


def is_random_preset(name: str) -> bool:
    return name in RANDOM_PRESETS


def is_tiny_preset(name: str) -> bool:
    """Tiny presets get tiny default sizes; `random:` presets the real model's."""
    return name in PRESET_NAMES


def is_preset(name: str) -> bool:
    """Whether `name` is one of the built-in presets (tiny or `random:`)."""
    return name in PRESET_NAMES or is_random_preset(name)
