"""Krea 2's DiT from the single file ComfyUI users hold (`krea2_turbo_fp8_scaled`: the original
key names under `model.diffusion_model.`, each block's six modulation vectors stored as one
flat vector, the blocks' linears in fp8 with ComfyUI's scales).

- From a header alone (the real architecture on the meta device, written as a header-only
  file): Krea 2 Turbo's config read off the shapes equals the published one and every
  parameter's rows are found, the flat modulation read as six rows.
- The tiny preset's DiT saved in that layout (bf16, and fp8_scaled as ComfyUI writes it)
  loads to the weights the file holds, and `paradit models` names it.

Not done yet: the Qwen3-VL text encoder file (`qwen3vl_4b_fp8_scaled`: an encoder kind of its
own), hence no pipeline of these files (`paradit serve`).

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import pytest
import torch
from comfy_files import (
    WAN_PREFIX,
    krea2_original,
    meta_model,
    read_whole_dit,
    write_header_only,
    write_safetensors,
)

from paradit.backend.models.presets import build_preset
from paradit.backend.models.random_presets import random_dit_config
from paradit.backend.models.single_file.build import DitWeights
from paradit.backend.models.single_file.convert import dit_part, dit_row_map, unused_keys
from paradit.backend.models.single_file.detect import detect, recognise
from paradit.backend.models.single_file.header import read_header
from paradit.backend.models.single_file.listing import list_models, render

KREA2_TURBO = random_dit_config("random:krea2", "transformer")


@pytest.mark.fast
def test_krea2_turbo_from_its_header(tmp_path):
    """The real DiT's config off the shapes; every diffusers parameter's rows found, the
    blocks' flat modulation (6 x 6144,) read as (6, 6144)."""
    dit = meta_model("Krea2Transformer2DModel", KREA2_TURBO)
    path = tmp_path / "krea2_turbo_fp8_scaled.safetensors"
    shapes = {WAN_PREFIX + k: tuple(v.shape) for k, v in krea2_original(dit.state_dict()).items()}
    assert shapes[WAN_PREFIX + "blocks.0.mod.lin"] == (6 * 6144,)
    write_header_only(path, shapes)
    part = recognise(str(path))
    found = part.detection
    assert (found.role, found.family, found.variant, found.layout, found.prefix) == (
        "transformer", "krea2", "krea2", "comfy", WAN_PREFIX
    )  # fmt: skip
    assert found == detect(read_header(path))
    assert found.config == KREA2_TURBO  # every entry: read off the shapes or published
    read = dit_part(part)  # the shapes the DiT reads
    assert read.header.shape(WAN_PREFIX + "blocks.27.mod.lin") == (6, 6144)
    row_map = dit_row_map(read.header, found)
    assert set(row_map) == set(dit.state_dict())
    assert not unused_keys(read.header, found, row_map)
    for name, param in dit.state_dict().items():
        assert sum(s.rows for s in row_map[name]) == (param.shape[0] if param.dim() else 1)
    with DitWeights(part) as weights:
        weights.check(dit)  # every parameter's rows fit (as stored, the modulation would not)
    with pytest.raises(ValueError, match=r"mod\.lin has shape \[36864\], which does not fit"):
        _unreshaped_check(part, dit)


def _unreshaped_check(part, dit) -> None:
    """The row check on the file as stored (no `dit_shapes`): refused."""
    weights = DitWeights.__new__(DitWeights)
    weights.part = part
    weights.row_map = dit_row_map(part.header, part.detection)
    weights.check(dit)


@pytest.mark.parametrize("fmt", ["bf16", "fp8_scaled"])
def test_tiny_krea2_file_loads_the_weights_it_holds(tmp_path, fmt):
    """The tiny preset's DiT in the original names (bf16; fp8_scaled: the blocks' linears in
    fp8 with a scale each, ComfyUI's marker) is recognised as tiny-krea2 and read whole to
    the values the file holds (each block's modulation back in its six rows)."""
    tiny = build_preset("tiny-krea2").transformer
    path = tmp_path / f"krea2_tiny_{fmt}.safetensors"
    held = write_safetensors(path, krea2_original(tiny.state_dict()), fmt, WAN_PREFIX)
    part, model = read_whole_dit(path)
    assert (part.detection.family, part.detection.variant) == ("krea2", "tiny-krea2")
    assert part.detection.config["axes_dims_rope"] == list(tiny.config.axes_dims_rope)
    ours = model.state_dict()
    assert set(ours) == set(tiny.state_dict())
    expected = {
        name: held[original].reshape(tiny.state_dict()[name].shape)
        for name, original in zip(tiny.state_dict(), krea2_original(tiny.state_dict()), strict=True)
    }
    assert all(torch.equal(ours[k], v) for k, v in expected.items())
    (entry,) = list_models(tmp_path)  # `paradit models` names it
    assert "tiny-krea2" in render([entry]) and "Krea 2 DiT keys" in render([entry])
    if fmt == "fp8_scaled":  # the blocks' linears were rounded to fp8
        name = "transformer_blocks.0.attn.to_q.weight"
        assert not torch.equal(ours[name], tiny.state_dict()[name])
