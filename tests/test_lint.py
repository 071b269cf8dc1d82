"""The code stays ruff-clean (lint and format, as configured in pyproject.toml).

Cost: about 1 s (in the suite's two-worker run on 2 cores).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff is not installed (test extra)")
@pytest.mark.parametrize("command", [["check"], ["format", "--check"]])
def test_ruff(command):
    result = subprocess.run(
        ["ruff", *command, "."], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
