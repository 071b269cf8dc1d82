"""Encoder kinds have one home (`backend/models/encoders/`): every module there declares one or
more `EncoderKind`s, each listed once in `KINDS`, and the generic tables (pipeline slots, the
tokenizer lookup, the part recognitions, the tiny presets' tokenizers) are read from the list,
so adding a kind is one module and its line.

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from paradit.backend.models.encoders import KINDS, EncoderKind, encoder_kind, recognitions, slots
from paradit.backend.models.single_file import tokenizers
from paradit.backend.models.single_file.detect import _part_detectors
from paradit.backend.models.single_file.vocabulary import ENCODER_SLOTS

ROOT = Path(__file__).resolve().parents[2]
ENCODERS = ROOT / "backend" / "models" / "encoders"


@pytest.mark.fast
def test_every_kind_module_is_listed_once():
    names = [kind.name for kind in KINDS]
    assert len(names) == len(set(names))
    declared = []
    for path in sorted(ENCODERS.glob("*.py")):
        if path.stem in ("__init__", "kind"):
            continue
        module = importlib.import_module(f"paradit.backend.models.encoders.{path.stem}")
        found = [v for v in vars(module).values() if isinstance(v, EncoderKind)]
        assert found, f"{path.name} declares no EncoderKind"
        declared += found
    assert sorted(k.name for k in declared) == sorted(names)
    assert encoder_kind("qwen3").slot == "text_encoder" and encoder_kind("wan") is None


@pytest.mark.fast
def test_the_generic_tables_are_the_kinds():
    assert slots() == ENCODER_SLOTS == {k.name: k.slot for k in KINDS if k.slot}
    assert set(tokenizers.HUB_FOLDERS) == {k.name for k in KINDS if k.hub_tokenizers}
    orders = [order for order, _ in _part_detectors()]
    assert len(orders) == len(set(orders)), "two part recognitions share an order"
    assert set(recognitions()) <= set(_part_detectors())


FOLDER_NAMES = {"listing.py": {"clip"}}
"""Strings that are no encoder kind: ComfyUI's folder `models/clip`."""


@pytest.mark.fast
def test_no_generic_single_file_module_names_an_encoder_kind():
    """The drivers ask the kind's record, never compare a file's kind by name (docstrings
    aside)."""
    names = "|".join(re.escape(kind.name) for kind in KINDS)
    quoted = re.compile(rf"[\"']({names})[\"']")
    for path in sorted((ROOT / "backend" / "models" / "single_file").glob("*.py")):
        code = re.sub(r'"""[\s\S]*?"""', "", path.read_text())
        found = {m.group(1) for m in quoted.finditer(code)} - FOLDER_NAMES.get(path.name, set())
        assert not found, (path.name, found)


@pytest.mark.fast
def test_an_encoder_kind_states_its_rules():
    with pytest.raises(ValueError, match="has a name"):
        EncoderKind("")
    with pytest.raises(ValueError, match="slot is one of"):
        EncoderKind("x", slot="text_encoder_3")
    with pytest.raises(ValueError, match="has its class and the files"):
        EncoderKind("x", tokenizer_class="AutoTokenizer")
    with pytest.raises(ValueError, match="hub folders of a tokenizer without its class"):
        EncoderKind("x", hub_tokenizers=(("org/repo", ""),))
    with pytest.raises(ValueError, match="a kind paradit refuses fills no slot"):
        EncoderKind("x", slot="text_encoder", refused="it writes text")
