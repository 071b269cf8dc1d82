"""Every family is one folder with one complete spec, registered by one line.

The registration list (`families.SPECS`) holds every folder under `backend/models/families/`
and nothing else; each spec names its folder, its adapters (whose every hook is the family's
own) and its DiT classes, each of which has a context-parallel plan (diffusers' `_cp_plan` or
the spec's) and a memory dry run; each folder holds its adapter and a NOTES.md; no adapter
name or pipeline class is claimed twice; the generic lookups find what the specs declare; the
presets are the families'; no file outside the family folders names a family (the rule is
`test_no_file_outside_the_family_folders_names_a_family`'s); a licence a family's NOTES.md
names is in its row of docs/models.md's table.

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import ast
import json
import re
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
from paradit.backend.models.preset_names import PRESET_NAMES, RANDOM_PRESETS
from paradit.backend.models.single_file.file_presets import PRESETS
from paradit.backend.sampling.recipes import RECIPES, load_recipes

pytestmark = pytest.mark.fast

FOLDER = Path(__file__).resolve().parents[2] / "backend" / "models" / "families"
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
        # a DiT class diffusers lacks (MiniMax H3's pruned one) is the family's, named by its
        # file spec (`FileSpec.model_classes`)
        ours = spec.files.model_classes.get(name) if spec.files is not None else None
        model = ours() if ours is not None else getattr(diffusers, name)
        own = getattr(model, "_cp_plan", None)
        assert own is not None or name in spec.cp_plans, f"{name}: no context-parallel plan"
        if name in spec.cp_plans:
            assert cp_plan_for(name) is spec.cp_plans[name]
    for name, install in spec.attention_dispatch.items():
        assert name in spec.transformer_classes and attention_dispatch_for(name) is install
    assert spec.dit_forward is not None, "no memory dry run (FamilySpec.dit_forward)"
    assert spec.tiny_job is not None, "no tiny job for the family contract (FamilySpec.tiny_job)"
    for block, layout in spec.block_layouts.items():
        assert isinstance(layout, BlockLayout) and block_layout_for(block) is layout


NO_SINGLE_FILE = {
    "cogvideox",
}
"""Families with no single-file format (CogVideoX: no ComfyUI file, no diffusers loader), or
whose files are not read yet. MiniMax H3's DiT files are recognised (its pipeline is not built
from files yet)."""


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.name)
def test_every_dit_is_recognised_and_mapped_in_single_files(spec: FamilySpec):
    """A DiT class some family reads from single files has a recognition (in its own key
    names) and the family name the recognition gives; its key mapping to diffusers' is the
    spec's (None: the files use diffusers' names, Qwen-Image's)."""
    readers = [
        other
        for other in SPECS
        if other.files is not None
        and other.files.detect_dit is not None
        and set(other.transformer_classes) & set(spec.transformer_classes)
    ]
    if spec.name in NO_SINGLE_FILE:
        assert not readers and spec.files is None
        return
    assert readers, f"no spec recognises {spec.transformer_classes} in a single file"
    for reader in readers:
        assert reader.files.family, reader.name
    orders = [o.files.detection_order for o in SPECS if o.files and o.files.detect_dit is not None]
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
    # a block layout: two streams at two indices, or the hidden states alone (second None)
    assert BlockLayout(second=None).second is None
    with pytest.raises(ValueError, match="at two indices >= 0"):
        BlockLayout(first=1, second=1)
    with pytest.raises(ValueError, match="returns it alone"):
        BlockLayout(first=1, second=None)


def test_the_presets_are_the_families():
    """Every tiny preset is one family's (`FamilySpec.tiny_presets`, its `tiny.py`) and the
    torch-free name table lists exactly those; every `random:` preset is a JSON file in a family
    folder's `configs/`; every single-file preset is one family's (`file_presets`)."""
    tiny = [name for spec in SPECS for name in spec.tiny_presets]
    assert len(tiny) == len(set(tiny)) and set(tiny) == set(PRESET_NAMES)
    configs = {f"random:{p.stem}": p for p in FOLDER.glob("*/configs/*.json")}
    assert configs == RANDOM_PRESETS and len(configs) >= len(SPECS)
    variants = [variant for spec in SPECS if spec.files for variant in spec.files.presets]
    assert len(variants) == len(set(variants)) and set(variants) == set(PRESETS)
    orders = [order for spec in SPECS if spec.files for order, _ in spec.files.detect_parts]
    assert len(orders) == len(set(orders)), "two part recognitions share an order"


NAMES_ALLOWED: dict[str, str] = {}
"""Files outside the family folders that may still name a family, and why."""


FOLDERS = {spec.name for spec in SPECS}


def _family_names() -> set[str]:
    names = {spec.name for spec in SPECS} | {spec.files.family for spec in SPECS if spec.files}
    return {n.lower() for n in names if n} | {n.replace("_", "-") for n in names if n}


def _named_families(path: Path, names: set[str]) -> list[str]:
    """The string constants (docstrings aside) of `path` equal to a family name, any case,
    and its imports of a family folder."""
    text = path.read_text()
    quoted = re.compile("|".join(rf"[\"']{re.escape(n)}[\"']" for n in names), re.IGNORECASE)
    if not quoted.search(text) and "families" not in text:
        return []  # neither a quoted family name nor a family folder: nothing to parse
    tree = ast.parse(text)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docstrings and node.value.lower() in names:
                found.append(f"{node.lineno}: {node.value!r}")
        elif isinstance(node, ast.ImportFrom):
            parts = (node.module or "").split(".")
            folder = parts[parts.index("families") + 1 :] if "families" in parts else None
            if folder == [] and any(alias.name in FOLDERS for alias in node.names):
                folder = [next(a.name for a in node.names if a.name in FOLDERS)]
            if folder and folder[0] in FOLDERS:  # `families.<family>` or `families import <f>`
                found.append(f"{node.lineno}: from {node.module} import ...")
    return found


def test_no_file_outside_the_family_folders_names_a_family():
    """The rule: no Python file of the package (`backend/`, `nodes/`, `web/`) outside
    `backend/models/families/` holds a string constant (docstrings aside) equal, in any case,
    to a family's name (a spec's `name`, with "_" or "-") or to the name its single files go by
    (`file_family`), nor imports from a family's folder (`families.<family>`; `families.SPECS`
    and the generic lookups of `families/__init__.py` are the registration list's);
    `NAMES_ALLOWED` lists the files still excepted and why. So `family == "ltx2"` branches and
    tables keyed by a family live in its folder, registered through its spec."""
    root = FOLDER.parents[2]
    names = _family_names()
    offenders = {}
    for path in sorted(
        p for folder in ("backend", "nodes", "web") for p in (root / folder).rglob("*.py")
    ):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("backend/models/families/") or rel in NAMES_ALLOWED:
            continue
        if found := _named_families(path, names):
            offenders[rel] = found
    assert not offenders, offenders
    for rel in NAMES_ALLOWED:  # an exception that no longer names a family goes from the list
        assert _named_families(root / rel, names), f"{rel} names no family: drop it"


def test_recipes_are_data_in_the_family_folders(tmp_path):
    """`--recipe`'s names come from the families' folders (`<family>/recipes.json`, read as
    data so the frontends stay torch-free); a name two families give is refused."""
    assert {p.parent.name for p in FOLDER.glob("*/recipes.json")} <= FOLDERS
    assert load_recipes(FOLDER) == RECIPES
    assert {"wan2.2-a14b-4step", "qwen-image", "z-image-turbo"} <= {r.name for r in RECIPES}
    for family in ("one", "two"):
        (tmp_path / family).mkdir()
        entry = {"name": "same", "models": "m", "source": "s", "fields": {"shift": 3.0}}
        (tmp_path / family / "recipes.json").write_text(json.dumps([entry]))
    with pytest.raises(ValueError, match="unique across the families"):
        load_recipes(tmp_path)


LICENCE = re.compile(r"Licence: (the .+? Licence(?: \([^)]*\))?)[.;]")


def test_a_licence_a_familys_notes_name_is_in_its_row_of_the_models_table():
    """Where a family's NOTES.md says "Licence: the ... Licence" (Krea 2's, Qwen-Image 2.1's),
    docs/models.md's table row of the family (its first cell the NOTES.md title) says
    "licence: " and the same words."""
    table = (FOLDER.parents[2] / "docs" / "models.md").read_text()
    rows = {row.split("|")[1].strip(): row for row in table.splitlines() if row.startswith("| ")}
    stated = {}
    for notes in sorted(FOLDER.glob("*/NOTES.md")):
        title, text = notes.read_text().splitlines()[0].removeprefix("# "), notes.read_text()
        if found := LICENCE.search(" ".join(text.split())):
            stated[title] = found.group(1)
    assert {"Krea 2", "Qwen-Image 2.1"} <= set(stated), stated
    for title, licence in stated.items():
        assert title in rows, f"docs/models.md's table has no row {title!r}"
        assert f"licence: {licence}" in rows[title], (title, licence)
