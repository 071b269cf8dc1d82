"""Every family is one folder with one complete spec, registered by one line.

The registration list (`families.SPECS`) holds every folder under `backend/models/families/`
and nothing else; each spec names its folder, its adapters (whose every hook is the family's
own) and its DiT classes, each of which has a context-parallel plan (diffusers' `_cp_plan` or
the spec's) and a memory dry run; each folder holds its adapter and a NOTES.md; no adapter
name or pipeline class is claimed twice; the generic lookups find what the specs declare.

Cost: about 3 s (in the suite's two-worker run on 2 cores).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from paradit.backend.models.families import (
    FAMILIES,
    SPECS,
    Family,
    attention_dispatch_for,
    block_layout_for,
    cp_plan_for,
    family_for,
    spec_of,
)
from paradit.backend.models.family_spec import BlockLayout, FamilySpec

pytestmark = pytest.mark.fast

FOLDER = Path(__file__).resolve().parents[1] / "backend" / "models" / "families"
HOOKS = (
    "model_limits",
    "encode",
    "prepare",
    "tiled_decode",
    "latent_channels",
    "preview_grid",
    "decode_for_fit",
)
"""The adapter methods `Family` leaves to each family (its own raise NotImplementedError)."""


def _folders() -> set[str]:
    return {p.name for p in FOLDER.iterdir() if (p / "__init__.py").is_file()}


def test_every_folder_is_registered_once_and_every_spec_is_a_folder():
    names = [spec.name for spec in SPECS]
    assert len(names) == len(set(names)), names
    assert set(names) == _folders()


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.name)
def test_every_spec_is_complete(spec: FamilySpec):
    folder = FOLDER / spec.name
    assert (folder / "adapter.py").is_file() and (folder / "NOTES.md").is_file()
    assert (folder / "NOTES.md").read_text().startswith("# "), "NOTES.md starts with a title"
    assert spec.adapters and spec.transformer_classes
    for adapter in spec.adapters:
        assert isinstance(adapter, Family) and family_for(adapter.pipeline_classes[0]) is adapter
        assert spec_of(adapter) is spec
        missing = [hook for hook in HOOKS if getattr(type(adapter), hook) is getattr(Family, hook)]
        assert not missing, f"{adapter.name} leaves {missing} to Family"
    import diffusers

    for name in spec.transformer_classes:
        own = getattr(getattr(diffusers, name), "_cp_plan", None)
        assert own is not None or name in spec.cp_plans, f"{name}: no context-parallel plan"
        if name in spec.cp_plans:
            assert cp_plan_for(name) is spec.cp_plans[name]
    for name, install in spec.attention_dispatch.items():
        assert name in spec.transformer_classes and attention_dispatch_for(name) is install
    assert spec.dit_forward is not None, "no memory dry run (FamilySpec.dit_forward)"
    for block, layout in spec.block_layouts.items():
        assert isinstance(layout, BlockLayout) and block_layout_for(block) is layout


NO_SINGLE_FILE = {"cogvideox"}
"""Families with no single-file format (CogVideoX: no ComfyUI file, no diffusers loader)."""


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.name)
def test_every_dit_is_recognised_and_mapped_in_single_files(spec: FamilySpec):
    """A DiT class some family reads from single files has a recognition (in its own key
    names) and the family name the recognition gives; its key mapping to diffusers' is the
    spec's (None: the files use diffusers' names, Qwen-Image's)."""
    readers = [
        other
        for other in SPECS
        if other.detect_dit is not None
        and set(other.transformer_classes) & set(spec.transformer_classes)
    ]
    if spec.name in NO_SINGLE_FILE:
        assert not readers and spec.file_family == ""
        return
    assert readers, f"no spec recognises {spec.transformer_classes} in a single file"
    for reader in readers:
        assert reader.file_family, reader.name
    orders = [other.detection_order for other in SPECS if other.detect_dit is not None]
    assert len(orders) == len(set(orders)), "two recognitions share a detection_order"


def test_no_adapter_name_or_pipeline_class_is_claimed_twice():
    names = [family.name for family in FAMILIES]
    classes = [c for family in FAMILIES for c in family.pipeline_classes]
    assert len(names) == len(set(names)) and len(classes) == len(set(classes))
    assert cp_plan_for("NoSuchTransformer") is None and block_layout_for("NoSuchBlock") is None


def test_a_spec_states_its_rule():
    (adapter,) = SPECS[1].adapters
    with pytest.raises(ValueError, match="names its folder, at least one adapter"):
        FamilySpec("empty", adapters=(), transformer_classes=("X",))
    with pytest.raises(ValueError, match="cp_plans for DiT classes it does not hold"):
        FamilySpec("x", (adapter,), ("A",), cp_plans={"B": lambda transformer: {}})
