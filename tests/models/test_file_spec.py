"""A family's single-file declarations (`FileSpec`, `FamilySpec.files`) state their rules, and
every single-file reader of the registry reads them there.

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import pytest

from paradit.backend.models.families import SPECS
from paradit.backend.models.file_spec import FileSpec
from paradit.backend.models.single_file.file_presets import PRESETS
from paradit.backend.models.single_file.spec import FILES, file_spec, spec_for_file


@pytest.mark.fast
def test_a_file_spec_states_its_rules():
    with pytest.raises(ValueError, match="names the family its detections carry"):
        FileSpec(detect_dit=lambda header, prefix: None)
    with pytest.raises(ValueError, match="come with the `build_extra` that builds them"):
        FileSpec(extra_components=("connectors",))
    with pytest.raises(ValueError, match="come with the `build_extra` that builds them"):
        FileSpec(build_extra=lambda *args: None)
    with pytest.raises(ValueError, match="are taken from its `parts`"):
        FileSpec(extras=lambda parts, encoder: {})
    held = {"x": object()}
    files = FileSpec(family="x", presets=held)
    held["y"] = object()
    assert list(files.presets) == ["x"]  # a copy, read-only
    with pytest.raises(TypeError):
        files.presets["z"] = object()  # type: ignore[index]


@pytest.mark.fast
def test_the_file_specs_are_the_families():
    """`FILES` is the registered specs' `files`, in order; a recognised family's spec is
    found by the name its detections carry; the presets are theirs."""
    assert tuple(spec.files for spec in SPECS if spec.files is not None) == FILES
    for files in FILES:
        if files.family:
            assert file_spec(files.family) is files and spec_for_file(files.family) is files
    assert file_spec("t5") is None
    with pytest.raises(ValueError, match="no model family reads 'nope' single files"):
        spec_for_file("nope")
    assert set(PRESETS) == {variant for files in FILES for variant in files.presets}
