"""ComfyUI's 4-bit layers (issue 52): `nvfp4`, `nvfp4_awq`, the `fp4_mixed` files and W4A8
(`asym_w4a8_int8`), read off
tiny files written from the format's definition (`tests/quant_files.py`: E2M1 codes two a
byte, high nibble first; E4M3 block scales per 16 values in cuBLAS's tiled layout; a float32
`weight_scale_2`; AWQ's `pre_quant_scale` per input column), dequantized at load.

- An nvfp4 and an nvfp4_awq layer of 130 rows (two row tiles, the second padded) read to
  exactly the definition's values in any block of rows; the header describes them by the
  values they hold ([out, in]); they are never kept packed (`stored_of` None).
- A Qwen3 text encoder in ComfyUI's key names whose layers' linears take turns as nvfp4,
  nvfp4_awq and fp8 (an fp4_mixed file) is recognised, named by its layers' formats, read
  whole to the definition's values and built.
- Block scales that are not one per 16 values in the tiled layout, and an nvfp4 record over a
  weight that is not packed 4-bit, are refused naming the tensor.
- W4A8 layers (4-bit with a codebook and per-group corrections, uniform 4-bit, uniform 6-bit
  whose width also reads as 4-bit groups of 48: its record decides) read to the definition's
  values; a record whose group size does not fit the layer, or none, is refused.

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import json

import pytest
import torch
from quant_files import nvfp4_layer, w4a8_layer, write_fp4_mixed
from safetensors.torch import save_file

from paradit.backend.models.single_file.header import PACKED_FP4, read_header
from paradit.backend.models.single_file.quant import (
    RowReader,
    check_readable,
    quantization,
    stored_of,
)

PREFIX = "text_encoders.qwen3_4b.transformer.model.layers.0."


@pytest.mark.fast
@pytest.mark.parametrize("awq", [False, True])
def test_nvfp4_layer_reads_to_the_definitions_values(tmp_path, awq):
    generator = torch.Generator().manual_seed(2)
    value = torch.randn(130, 96, generator=generator) * torch.linspace(0.01, 4, 130)[:, None]
    parts, held = nvfp4_layer(value, awq=awq, seed=3)
    path = tmp_path / "nvfp4.safetensors"
    save_file({f"{PREFIX}mlp.up_proj.{k}": v for k, v in parts.items()}, str(path))
    header = read_header(path)
    check_readable(header)
    key = f"{PREFIX}mlp.up_proj.weight"
    assert (header.tensors[key].dtype, header.tensors[key].shape) == (PACKED_FP4, (130, 96))
    assert quantization(header) == ("nvfp4_awq" if awq else "nvfp4")
    assert stored_of(header, key) is None  # dequantized at load
    reader = RowReader(header)
    try:
        for start, count in ((0, 130), (5, 7), (127, 3)):
            out = torch.empty(count, 96)
            reader.read_rows(key, start, out)
            assert torch.equal(out, held[start : start + count]), (start, count)
    finally:
        reader.close()
    assert float(held.abs().max()) > 0 and float((held - value).abs().max()) < 0.5 * float(
        value.abs().max()
    )


@pytest.mark.fast
def test_fp4_mixed_text_encoder_reads_to_the_definitions_values(tmp_path):
    from comfy_files import qwen3_comfy

    from paradit.backend.models.presets import build_preset
    from paradit.backend.models.single_file.components import encoder_model, read_whole
    from paradit.backend.models.single_file.detect import recognise

    tiny = build_preset("tiny-z-image", components=frozenset({"text_encoder"}))
    original = qwen3_comfy(tiny.text_encoder.state_dict())
    path = tmp_path / "qwen_3_tiny_fp4_mixed.safetensors"
    linear = lambda name, t: t.dim() == 2 and "layers." in name and name.endswith(".weight")  # noqa: E731
    held, formats = write_fp4_mixed(path, original, linear)
    assert set(formats.values()) == {"nvfp4", "nvfp4_awq", "fp8"}
    part = recognise(str(path))
    assert part.detection.role == "text_encoder"
    assert part.summary()["format"].startswith("mixed:nvfp4")
    assert "fp8_scaled" in part.summary()["format"]
    state = read_whole(part, torch.float32, part.detection.prefix)
    prefix = part.detection.prefix
    for key, values in held.items():
        assert torch.equal(state[key.removeprefix(prefix)], values), (key, formats.get(key))
    model = encoder_model(part, torch.bfloat16)
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}


@pytest.mark.fast
def test_bad_nvfp4_scales_and_records_are_refused(tmp_path):
    parts, _ = nvfp4_layer(torch.randn(8, 64))
    parts["weight_scale"] = torch.ones(8, 4).to(torch.float8_e4m3fn)  # not padded to tiles
    path = tmp_path / "untiled.safetensors"
    save_file({f"{PREFIX}mlp.up_proj.{k}": v for k, v in parts.items()}, str(path))
    with pytest.raises(ValueError, match=r"up_proj\.weight_scale .*cuBLAS's layout"):
        check_readable(read_header(path))
    record = torch.frombuffer(
        bytearray(json.dumps({"format": "nvfp4"}).encode()), dtype=torch.uint8
    )
    path = tmp_path / "unpacked.safetensors"
    save_file(
        {
            f"{PREFIX}mlp.up_proj.weight": torch.ones(8, 32),
            f"{PREFIX}mlp.up_proj.comfy_quant": record.clone(),
        },
        str(path),
    )
    with pytest.raises(ValueError, match=r"up_proj is nvfp4 but has no U8 weight"):
        check_readable(read_header(path))


@pytest.mark.fast
@pytest.mark.parametrize(
    "layout",
    [
        {"bits": 4, "codebook": True, "correction": True},
        {"bits": 4, "codebook": False},
        {"bits": 6, "codebook": False, "convrot": 256, "group_size": 32},
    ],
    ids=["codebook-asymmetric", "uniform-4", "uniform-6"],
)
def test_w4a8_layer_reads_to_the_definitions_values(tmp_path, layout):
    """ComfyUI's `asym_w4a8_int8` layers (4-bit with a codebook and per-group corrections,
    uniform 4-bit, uniform 6-bit): the header describes them by their values, `paradit
    models` names them w4a8, and any block of rows reads to the definition's values (within
    float32's rounding of the rotation's sums)."""
    layout = {"convrot": 64, **layout}
    generator = torch.Generator().manual_seed(4)
    value = torch.randn(9, 256, generator=generator) * torch.linspace(0.05, 2, 9)[:, None]
    parts, held = w4a8_layer(value, **layout)
    path = tmp_path / "w4a8.safetensors"
    save_file({f"{PREFIX}mlp.down_proj.{k}": v for k, v in parts.items()}, str(path))
    header = read_header(path)
    check_readable(header)
    key = f"{PREFIX}mlp.down_proj.weight"
    assert header.tensors[key].shape == (9, 256)
    assert quantization(header) == "w4a8"
    reader = RowReader(header)
    try:
        for start, count in ((0, 9), (2, 4), (8, 1)):
            out = torch.empty(count, 256)
            reader.read_rows(key, start, out)
            expect = held[start : start + count]
            assert torch.allclose(out, expect, rtol=0, atol=2e-6 * float(held.abs().max()))
    finally:
        reader.close()
    error = float((held - value).abs().max()) / float(value.abs().max())
    assert error < (0.05 if layout["bits"] == 6 else 0.3), error


@pytest.mark.fast
def test_w4a8_layer_whose_record_does_not_fit_is_refused(tmp_path):
    parts, _ = w4a8_layer(torch.randn(4, 64), convrot=64)
    record = {"format": "asym_w4a8_int8", "group_size": 32, "convrot_groupsize": 64}
    parts["comfy_quant"] = torch.frombuffer(
        bytearray(json.dumps(record).encode()), dtype=torch.uint8
    ).clone()
    path = tmp_path / "w4a8_bad.safetensors"
    save_file({f"{PREFIX}mlp.down_proj.{k}": v for k, v in parts.items()}, str(path))
    with pytest.raises(ValueError, match=r"down_proj .*does not fit its record \(group_size 32"):
        check_readable(read_header(path))
    del parts["comfy_quant"]
    path = tmp_path / "w4a8_unrecorded.safetensors"
    save_file({f"{PREFIX}mlp.down_proj.{k}": v for k, v in parts.items()}, str(path))
    with pytest.raises(ValueError, match=r"down_proj\.weight holds packed .* no asym_w4a8_int8"):
        check_readable(read_header(path))
