"""The file spec (`FamilySpec.files`) that reads a recognised single file (`FileSpec.family`):
the single-file code's one way to a family's own rules."""

from __future__ import annotations

from ..families import SPECS
from ..file_spec import FileSpec

FILES: tuple[FileSpec, ...] = tuple(spec.files for spec in SPECS if spec.files is not None)
"""Every family's file spec, in the specs' order."""


def file_spec(family: str) -> FileSpec | None:
    """The file spec whose single files `Detection.family` names; None when none does (an
    encoder's or a VAE's own family, e.g. "t5")."""
    return next((files for files in FILES if files.family == family), None)


def spec_for_file(family: str) -> FileSpec:
    """`file_spec`, or ValueError for a family no spec reads."""
    spec = file_spec(family)
    if spec is None:
        raise ValueError(f"no model family reads {family!r} single files")
    return spec
