"""The dependency ranges hold: every package the code or the tests rely on is capped below the
release that may break it, requirements.txt (what ComfyUI-Manager installs) says the same as
pyproject.toml, and the suite names the versions it ran with.

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import tomllib
from conftest import RECORDED_VERSIONS, installed_versions
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
UNCAPPED = {"setuptools"}
"""Build tooling only: the tests build a wheel with whatever setuptools the environment has."""


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _requirements(project: dict) -> list[Requirement]:
    extras = project["project"]["optional-dependencies"]
    lines = project["project"]["dependencies"] + extras["test"]
    return [Requirement(line) for line in lines]


@pytest.mark.fast
def test_every_dependency_has_an_upper_bound():
    uncapped = [
        str(req)
        for req in _requirements(_pyproject())
        if req.name not in UNCAPPED
        and not any(spec.operator in ("<", "<=", "==") for spec in req.specifier)
    ]
    assert uncapped == []


@pytest.mark.fast
def test_the_installed_versions_are_in_range():
    """What the suite runs with is what the package says it supports (a stale environment with
    an older or newer release than the ranges would test something users cannot install)."""
    versions = installed_versions([req.name for req in _requirements(_pyproject())])
    outside = {
        req.name: versions[req.name]
        for req in _requirements(_pyproject())
        if not req.specifier.contains(versions[req.name].split("+")[0], prereleases=True)
    }
    assert outside == {}


@pytest.mark.fast
def test_requirements_txt_says_what_pyproject_says():
    ranges = {req.name: str(req.specifier) for req in _requirements(_pyproject())}
    listed = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            req = Requirement(line)
            listed[req.name] = str(req.specifier)
    assert listed, "requirements.txt lists nothing"
    assert {name: ranges.get(name) for name in listed} == listed


@pytest.mark.fast
def test_the_suite_header_names_the_versions(pytestconfig):
    header = pytestconfig.hook.pytest_report_header(config=pytestconfig, start_path=ROOT)
    lines = [line for group in header for line in ([group] if isinstance(group, str) else group)]
    (versions,) = [line for line in lines if line.startswith("paradit ran with: ")]
    for name in RECORDED_VERSIONS:
        assert re.search(rf"\b{re.escape(name)}==\S+", versions), (name, versions)
