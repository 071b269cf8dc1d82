"""The private diffusers names paradit patches and calls: present, with the parameters used.

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import re
from pathlib import Path

import diffusers
import pytest
from diffusers.hooks import context_parallel
from diffusers.models import attention_dispatch

from paradit.backend.diffusers_internals import DIFFUSERS_RANGE, INTERNALS, require
from paradit.backend.parallel import patches

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.fast
def test_every_internal_is_in_the_installed_diffusers():
    problems = {key: internal.problem() for key, internal in INTERNALS.items()}
    assert problems == dict.fromkeys(INTERNALS)
    found = require("test", *INTERNALS)
    assert found[0] is attention_dispatch._maybe_pad_qkv_head  # the real objects, in order
    assert len(found) == len(INTERNALS)


@pytest.mark.fast
def test_the_range_is_the_one_the_package_pins():
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert f'"diffusers{DIFFUSERS_RANGE}",' in pyproject
    requirements = (ROOT / "requirements.txt").read_text().split()
    assert f"diffusers{DIFFUSERS_RANGE}" in requirements


@pytest.mark.fast
def test_a_missing_name_fails_with_the_version_and_range(monkeypatch):
    monkeypatch.setattr(diffusers, "__version__", "0.44.0")
    monkeypatch.delattr(attention_dispatch, "_maybe_pad_qkv_head")
    message = (
        "paradit's Ulysses patch needs diffusers >=0.42.1,<0.43 (found 0.44.0): "
        "attention_dispatch._maybe_pad_qkv_head is missing"
    )
    with pytest.raises(RuntimeError, match=re.escape(message)):
        patches.install_any_head_count()
    # nothing was half-installed
    assert attention_dispatch._maybe_unpad_qkv_head is not patches._keep_qkv_heads


@pytest.mark.fast
def test_a_changed_signature_fails_and_names_both(monkeypatch):
    def renamed(tensor, dim, group, async_op):  # diffusers grew a parameter
        raise AssertionError("must not be called")

    monkeypatch.setattr(context_parallel, "_all_gather_anything", renamed)
    with pytest.raises(RuntimeError) as err:
        patches.install_uneven_gather()
    assert str(err.value) == (
        f"paradit's uneven-gather patch needs diffusers {DIFFUSERS_RANGE} "
        f"(found {diffusers.__version__}): context_parallel._all_gather_anything takes "
        "(tensor, dim, group, async_op), expected (tensor, dim, group)"
    )
    assert context_parallel._all_gather_anything is renamed


@pytest.mark.fast
def test_a_called_name_may_grow_parameters_but_not_lose_them(monkeypatch):
    from diffusers.models import _modeling_parallel

    def setup(self, rank, world_size, device, *, mesh=None, extra=None):
        pass

    monkeypatch.setattr(_modeling_parallel.ParallelConfig, "setup", setup)
    assert INTERNALS["_modeling_parallel.ParallelConfig.setup"].problem() is None

    def setup_without_mesh(self, rank, world_size, device):
        pass

    monkeypatch.setattr(_modeling_parallel.ParallelConfig, "setup", setup_without_mesh)
    assert INTERNALS["_modeling_parallel.ParallelConfig.setup"].problem() == (
        "_modeling_parallel.ParallelConfig.setup takes (rank, world_size, device), "
        "expected (rank, world_size, device, mesh)"
    )


@pytest.mark.fast
def test_patches_install_once_and_refuse_someone_elses(monkeypatch):
    for name in ("_maybe_pad_qkv_head", "_maybe_unpad_qkv_head", "_maybe_pad_o_head"):
        monkeypatch.setattr(attention_dispatch, name, getattr(attention_dispatch, name))
    patches.install_any_head_count()
    assert attention_dispatch._maybe_pad_qkv_head is patches._pad_qkv_heads
    assert attention_dispatch._maybe_pad_o_head is patches._output_head_padding
    patches.install_any_head_count()  # idempotent
    assert attention_dispatch._maybe_unpad_qkv_head is patches._keep_qkv_heads

    def theirs(tensor, dim, group):
        return tensor

    monkeypatch.setattr(context_parallel, "_all_gather_anything", theirs)
    with pytest.raises(RuntimeError, match="already replaced by someone else"):
        patches.install_uneven_gather()
