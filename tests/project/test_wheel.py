"""The package installs as a wheel: built offline from the source, installed into a fresh
virtual environment, it imports from there and makes a video.

Cost: about 9 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from paradit.backend.sampling.recipes import recipe_names

ROOT = Path(__file__).resolve().parents[2]
DATA_DIRS = ("workflows", "example_workflows", "nodes/js")
DATA_GLOBS = (
    "backend/models/families/*/configs/*.json",
    "backend/models/families/*/recipes.json",
    "backend/models/families/*/comfyui.json",
)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, set[str]]:
    """(the wheel, the package's files in the source it was built from)."""
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"
    ignore = shutil.ignore_patterns(
        ".git", "build", "dist", "*.egg-info", "__pycache__", ".venv", ".*_cache", "outputs"
    )
    shutil.copytree(ROOT, src, ignore=ignore)
    files = _source_files(src)  # before the build writes into the copy
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index"]
        + ["--wheel-dir", str(work / "dist"), str(src)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (wheel,) = (work / "dist").glob("paradit-*.whl")
    return wheel, files


def _source_files(src: Path) -> set[str]:
    """The package's files in the source copy, as the wheel names them (`paradit/...`)."""
    files = set()
    for path in src.rglob("*"):
        rel = path.relative_to(src)
        if rel.parts[0] in ("tests", "docs") or rel == Path("setup.py") or not path.is_file():
            continue
        data = any(rel.is_relative_to(d) for d in DATA_DIRS) or any(
            len(rel.parts) == len(Path(g).parts) and rel.match(g) for g in DATA_GLOBS
        )
        if path.suffix == ".py" or data:
            files.add(f"paradit/{rel.as_posix()}")
    return files


def test_the_wheel_holds_the_package_and_nothing_else(built):
    wheel, expected = built
    names = set(zipfile.ZipFile(wheel).namelist())
    top = {name.split("/")[0] for name in names}
    (dist_info,) = top - {"paradit"}
    assert re.fullmatch(r"paradit-[\w.]+\.dist-info", dist_info), top
    shipped = {name for name in names if name.startswith("paradit/")}
    # every module of every subpackage (backend/memory included) and every data file the
    # code reads at run time; nothing else (no setup.py, no tests)
    assert shipped == expected, {"missing": expected - shipped, "extra": shipped - expected}
    py_dirs = {str(Path(name).parent) for name in expected if name.endswith(".py")}
    assert {"paradit/backend/memory", "paradit/nodes", "paradit/web"} <= py_dirs
    assert all(f"{d}/__init__.py" in shipped for d in py_dirs), py_dirs


def _see_the_running_environment(venv: Path) -> None:
    """torch, diffusers, ... are not reinstalled: the new venv sees the site-packages of the
    environment running the tests (a user's venv, or the interpreter's own), not those of the
    base interpreter behind it (`--system-site-packages` would give those, where a venv user has
    no torch). A `.pth` line adds each folder as a plain path after the venv's own
    site-packages, so the wheel installed there comes first and the folders' own `.pth` files
    (the editable install's finder of the source tree) are not run."""
    ours = {sysconfig.get_paths()[key] for key in ("purelib", "platlib")}
    (purelib,) = {
        Path(p)
        for p in (venv / "lib").glob("python*/site-packages")  # the new venv's only one
    }
    (purelib / "running-environment.pth").write_text("".join(f"{p}\n" for p in sorted(ours)))


def test_installed_from_the_wheel_it_imports_and_generates(built, tmp_path):
    wheel, _ = built
    venv = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    _see_the_running_environment(venv)
    python, script = venv / "bin" / "python", venv / "bin" / "paradit"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["OMP_NUM_THREADS"] = "1"

    def run(*argv: str | Path, timeout: float = 120) -> subprocess.CompletedProcess:
        result = subprocess.run(
            [str(a) for a in argv],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        return result

    run(python, "-m", "pip", "install", "--no-deps", "--no-index", "--ignore-installed", wheel)
    # Without torch (seconds of CPU): where the planner (backend/memory) would be imported
    # from is found, not imported; the generate run below imports it, with the same
    # interpreter and search path, in the backend it starts.
    probe = (
        "import importlib.util, json, sys, paradit, "
        "paradit.backend.tools.cli as c, paradit.backend.models.preset_names as r, "
        "paradit.backend.sampling.recipes as s; "
        "p = importlib.util.find_spec('paradit.backend.memory.planner').origin; "
        "print(json.dumps({'files': [paradit.__file__, p, c.__file__], "
        "'configs': sorted(f.name for f in r.RANDOM_PRESETS.values() if f.is_file()), "
        "'recipes': s.recipe_names(), "
        "'path': sys.path}))"
    )
    seen = json.loads(run(python, "-c", probe).stdout)
    site = venv.resolve() / "lib"
    for file in seen["files"]:
        assert Path(file).resolve().is_relative_to(site), seen["files"]
    assert seen["files"][1].endswith("paradit/backend/memory/planner.py"), seen["files"]
    assert "wan2.1-t2v-1.3b.json" in seen["configs"]
    assert seen["recipes"] == list(recipe_names())  # the families' recipes.json are package data
    for entry in seen["path"]:
        where = Path(entry or tmp_path).resolve()
        assert where != ROOT and (where / "paradit").resolve() != ROOT, seen["path"]

    assert "generate" in run(script, "--help").stdout
    out = tmp_path / "out"
    run(
        script, "generate", "a fox", "--model", "tiny-wan", "--world-size", "1", "--device", "cpu",
        "--width", "32", "--height", "32", "--frames", "5", "--steps", "2", "--out", out,
        timeout=300,
    )  # fmt: skip
    for name in ("video.mp4", "frames/000000.png", "job.json"):
        assert (out / name).is_file(), name
    record = json.loads((out / "job.json").read_text())
    assert (record["model"], record["num_frames"]) == ("tiny-wan", 5)
