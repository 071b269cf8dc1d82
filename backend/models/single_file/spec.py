"""The family spec that reads a recognised single file (`FamilySpec.file_family`): the
single-file code's one way to a family's own rules."""

from __future__ import annotations

from typing import Any

from ..families import SPECS


def file_spec(family: str) -> Any:
    """The family spec whose single files `Detection.family` names; None when none does (an
    encoder's or a VAE's own family, e.g. "t5")."""
    return next((spec for spec in SPECS if spec.file_family == family), None)


def spec_for_file(family: str) -> Any:
    """`file_spec`, or ValueError for a family no spec reads."""
    spec = file_spec(family)
    if spec is None:
        raise ValueError(f"no model family reads {family!r} single files")
    return spec
