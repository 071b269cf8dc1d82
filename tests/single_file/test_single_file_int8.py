"""ComfyUI's int8 layers (issue 52): `int8_tensorwise` with one scale per row, rotated by
ConvRot (the `int8_convrot` files) or not, and their `comfy_quant` records, read off tiny files
written from the published definitions (`tests/quant_files.py`).

- The regular Hadamard matrix of 256 is the Kronecker power of the 4x4 regular one over 16,
  symmetric, its own inverse; a group that is not a power of 4 is refused.
- A file with a ConvRot layer (records at the top level and under `params`) and a plain
  per-row layer (width not a multiple of 256) reads, through the row reader every rank uses,
  to the definition's values (within float32's rounding of a 256-term sum; exactly where not
  rotated), in any block of rows; `paradit models` names it int8_convrot; its layers are
  stored int8 with their groups.
- A record naming a format no reader reads is refused naming the format; a ConvRot group that
  does not divide the width is refused; an int8 text encoder (Qwen3, ComfyUI's key names)
  reads to the definition's values.
- `--int8-compute` is refused on CPU with its reason; its arithmetic (rotated, per-token int8
  activations, int32 products, rescaled) equals a float64 reference of those steps and stays
  within int8's rounding of the float product; a resident int8 layer upcasts as the load
  reads and, with the int8 matmul on, computes `int8_linear` of its rows.
- The `int8` stage of docs/gpu_check.sh runs dry on CPU.

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from quant_files import int8_layer, regular_hadamard, write_int8
from safetensors.torch import save_file

from paradit.backend.config import ServeConfig
from paradit.backend.models import int8
from paradit.backend.models.quantized import Stored, int8_refusal
from paradit.backend.models.single_file.header import read_header
from paradit.backend.models.single_file.quant import (
    RowReader,
    check_readable,
    quantization,
    stored_of,
)

PREFIX = "model.diffusion_model.blocks.0."


@pytest.mark.fast
def test_regular_hadamard_of_256_is_its_own_inverse():
    h = int8.hadamard(256)
    assert torch.equal(h, torch.from_numpy(regular_hadamard(256)).float())
    assert torch.equal(h, h.T)
    assert torch.allclose(h @ h, torch.eye(256), atol=1e-6)
    assert set(torch.unique(h * 16).tolist()) == {-1.0, 1.0}
    for bad in (8, 32, 128, 2):
        with pytest.raises(ValueError, match="power of 4"):
            int8.hadamard(bad)


def _int8_file(tmp_path, layers: dict[str, tuple[torch.Tensor, int, bool]]):
    tensors, held = {}, {}
    for name, (value, group, nested) in layers.items():
        parts, held[name] = int8_layer(value, group, nested=nested)
        tensors |= {f"{PREFIX}{name}.{suffix}": t for suffix, t in parts.items()}
    path = tmp_path / "tiny_int8_convrot.safetensors"
    save_file(tensors, str(path))
    return read_header(path), held


@pytest.mark.fast
def test_convrot_and_per_row_layers_read_to_the_definitions_values(tmp_path):
    generator = torch.Generator().manual_seed(0)
    wide = torch.randn(6, 512, generator=generator) * torch.linspace(0.01, 3, 6)[:, None]
    narrow = torch.randn(5, 96, generator=generator)
    header, held = _int8_file(
        tmp_path,
        {
            "ffn.0": (wide, 256, False),
            "self_attn.q": (wide * 2, 256, True),
            "ffn.2": (narrow, 256, False),
        },
    )
    check_readable(header)
    assert quantization(header) == "int8_convrot"
    records = {k: json.loads(bytes(v.tolist())) for k, v in _records(header).items()}
    assert records[f"{PREFIX}ffn.2."] == {"format": "int8_tensorwise"}  # 96: not rotated
    assert stored_of(header, f"{PREFIX}ffn.0.weight") == Stored("int8", torch.int8, group=256)
    assert stored_of(header, f"{PREFIX}self_attn.q.weight").group == 256  # under "params"
    assert stored_of(header, f"{PREFIX}ffn.2.weight") == Stored("int8", torch.int8)
    reader = RowReader(header)
    try:
        for name, values in held.items():
            rows = values.shape[0]
            for start, count in ((0, rows), (1, 3), (rows - 1, 1)):
                out = torch.empty(count, values.shape[1])
                reader.read_rows(f"{PREFIX}{name}.weight", start, out)
                expect = values[start : start + count]
                if name == "ffn.2":
                    assert torch.equal(out, expect), name
                else:  # a 256-term float32 sum against float64's
                    assert torch.allclose(
                        out, expect, rtol=0, atol=2e-6 * float(expect.abs().max())
                    )
            scales = torch.empty(rows)
            reader.read_scales(f"{PREFIX}{name}.weight", 0, scales)
            key = f"{PREFIX}{name}.weight_scale"
            assert torch.equal(scales, _tensor(header, key).reshape(-1))
    finally:
        reader.close()


def _records(header):
    return {
        k[: -len("comfy_quant")]: _tensor(header, k)
        for k in header.tensors
        if k.endswith(".comfy_quant")
    }


def _tensor(header, key):
    from safetensors.torch import load_file

    return load_file(str(header.path))[key]


@pytest.mark.fast
def test_unread_formats_and_bad_groups_are_refused_by_name(tmp_path):
    record = torch.frombuffer(bytearray(b'{"format": "svdquant_w4a4"}'), dtype=torch.uint8)
    path = tmp_path / "svdquant.safetensors"
    save_file(
        {
            f"{PREFIX}ffn.0.weight": torch.zeros(4, 32, dtype=torch.uint8),
            f"{PREFIX}ffn.0.comfy_quant": record.clone(),
        },
        str(path),
    )
    with pytest.raises(
        ValueError, match=r"ffn\.0 is quantized as svdquant_w4a4, which is not read"
    ):
        check_readable(read_header(path))
    parts, _ = int8_layer(torch.randn(4, 256), 256)
    bad = json.dumps({"format": "int8_tensorwise", "convrot": True, "convrot_groupsize": 64 * 3})
    parts["comfy_quant"] = torch.frombuffer(bytearray(bad.encode()), dtype=torch.uint8).clone()
    path = tmp_path / "bad_group.safetensors"
    save_file({f"{PREFIX}ffn.0.{k}": v for k, v in parts.items()}, str(path))
    with pytest.raises(ValueError, match="power of 4 dividing its 256 input columns"):
        check_readable(read_header(path))


@pytest.mark.fast
def test_int8_compute_is_refused_on_cpu_with_its_reason():
    with pytest.raises(ValueError, match="compute capability 8.0"):
        ServeConfig(model="tiny-wan", device="cpu", int8_compute=True)
    reason = int8_refusal(torch.device("cpu"))
    assert "compute capability 8.0" in reason and "upcast" in reason


@pytest.mark.fast
def test_int8_matmul_is_the_product_of_rotated_per_token_int8_operands():
    """W8A8 as ComfyUI runs it: x rotated by the layer's Hadamard groups, each token quantized
    to int8 with its own scale (largest magnitude / 127), int8 x int8 summed exactly, times the
    token's and the weight row's scales: equal to a float64 reference of those steps, and
    within int8's rounding of the float product."""
    generator = torch.Generator().manual_seed(1)
    weight = torch.randn(24, 512, generator=generator)
    parts, held = int8_layer(weight, 256)
    q, scale = parts["weight"], parts["weight_scale"].reshape(-1)
    x = torch.randn(3, 5, 512, generator=generator)
    bias = torch.randn(24, generator=generator)
    got = int8.int8_linear(x, q, scale, bias, group=256)
    h = regular_hadamard(256)
    xs = x.reshape(-1, 512).double().numpy()
    rotated = (xs.reshape(15, 2, 256) @ h).reshape(15, 512)
    x_scale = np.abs(rotated).max(axis=1, keepdims=True) / 127
    xq = np.clip(np.round(rotated / x_scale), -128, 127)
    ref = (xq @ q.double().numpy().T) * x_scale * scale.double().numpy()[None, :]
    ref = torch.from_numpy(ref + bias.double().numpy()).float().reshape(3, 5, 24)
    assert torch.allclose(got, ref, rtol=1e-5, atol=1e-4)
    exact = x @ held.T + bias
    assert float((got - exact).abs().max()) < 0.02 * float(exact.abs().max())
    plain_parts, _ = int8_layer(weight[:, :96], 0)
    plain = int8.int8_linear(x[..., :96], plain_parts["weight"], plain_parts["weight_scale"])
    assert plain.shape == (3, 5, 24)


@pytest.mark.fast
def test_int8_text_encoder_reads_to_the_definitions_values(tmp_path):
    """A Qwen3 text encoder in ComfyUI's key names, its layers' linears int8_convrot (groups of
    16 at the tiny widths): read whole, dequantized to the compute dtype, to the values the
    file holds, and built into the encoder."""
    from comfy_files import qwen3_comfy

    from paradit.backend.models.presets import build_preset
    from paradit.backend.models.single_file.components import encoder_model, read_whole
    from paradit.backend.models.single_file.detect import recognise

    tiny = build_preset("tiny-z-image", components=frozenset({"text_encoder"}))
    original = qwen3_comfy(tiny.text_encoder.state_dict())
    path = tmp_path / "qwen_3_tiny_int8_convrot.safetensors"
    linear = lambda name, t: t.dim() == 2 and "layers." in name and name.endswith(".weight")  # noqa: E731
    held = write_int8(path, original, linear, group=16)
    part = recognise(str(path))
    assert part.summary()["format"] == "int8_convrot"
    state = read_whole(part, torch.float32, part.detection.prefix)
    rotated = 0
    for key, values in held.items():
        got = state[
            key[len(part.detection.prefix) :] if key.startswith(part.detection.prefix) else key
        ]
        assert torch.allclose(got, values, rtol=0, atol=1e-6 * float(values.abs().max())), key
        rotated += stored_of(part.header, key) is not None and linear(key, values)
    assert rotated >= 7
    model = encoder_model(part, torch.bfloat16)
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}


@pytest.mark.fast
def test_gpu_check_int8_stage_runs_dry(tmp_path, monkeypatch):
    """`GPU_CHECK_DRY=1 python docs/gpu_check.py OUT int8`: tiny shapes on the CPU, the int8
    upcast path (ConvRot groups of 64) timed and measured against bf16's output, int8
    compute refused with its reason."""
    import sys
    from pathlib import Path

    docs = Path(__file__).resolve().parents[2] / "docs"
    monkeypatch.syspath_prepend(str(docs))
    monkeypatch.setenv("GPU_CHECK_DRY", "1")
    monkeypatch.setenv("GPU_CHECK_WORK", str(tmp_path / "work"))
    sys.modules.pop("gpu_check", None)
    import gpu_check

    assert gpu_check.main([str(tmp_path), "int8"]) == 0
    result = json.loads((tmp_path / "int8.json").read_text())
    assert "compute capability 8.0" in result["int8_compute"]
    for name in ("attn", "ffn up"):
        entry = result[name]
        assert entry["upcast_s"] > 0 and entry["bf16_s"] > 0
        assert 0 < entry["upcast_distance"]["mean_abs_relative"] < 0.05  # int8's rounding
        assert "int8_compute_s" not in entry


@pytest.mark.fast
def test_int8_layer_upcasts_as_loaded_and_its_int8_matmul_is_int8_linear():
    """A resident int8 layer (ConvRot groups of 16): its upcast is the load-time
    dequantization rounded once to the compute dtype; with `--int8-compute` on (as the engine
    sets it) its forward is `int8.int8_linear` of its stored rows and scales."""
    from paradit.backend.models.quantized import QuantLinear, set_int8_compute

    generator = torch.Generator().manual_seed(5)
    weight = torch.randn(24, 64, generator=generator)
    layer = QuantLinear(64, 24, True, Stored("int8", torch.int8, group=16), torch.bfloat16)
    parts, held = int8_layer(weight, 16)
    layer.weight.data, layer.weight_scale.data = parts["weight"], parts["weight_scale"].reshape(-1)
    layer.bias.data = torch.randn(24, generator=generator).to(torch.bfloat16)
    expect = int8.dequantize(parts["weight"], parts["weight_scale"], 16).to(torch.bfloat16)
    assert torch.equal(layer.upcast(), expect)
    assert torch.allclose(expect.float(), held, atol=1e-2)
    x = torch.randn(3, 64, generator=generator).to(torch.bfloat16)
    assert torch.equal(layer(x), torch.nn.functional.linear(x, expect, layer.bias))
    assert set_int8_compute([torch.nn.Sequential(layer)]) == 1
    got = layer(x)
    assert torch.equal(got, int8.int8_linear(x, layer.weight, layer.weight_scale, layer.bias, 16))


@pytest.mark.fast
def test_int8_matmul_in_blocks_of_tokens_equals_it_whole(monkeypatch):
    """`int8_linear` bounds its int32 product by going through the tokens in blocks (32 rows
    here, the last one padded): the same result as one block, byte for byte."""
    generator = torch.Generator().manual_seed(6)
    parts, _ = int8_layer(torch.randn(40, 256, generator=generator), 64)
    q, scale = parts["weight"], parts["weight_scale"].reshape(-1)
    x = torch.randn(3, 25, 256, generator=generator)
    whole = int8.int8_linear(x, q, scale, None, 64)
    monkeypatch.setattr(int8, "PRODUCT_BYTES", 1)
    assert torch.equal(int8.int8_linear(x, q, scale, None, 64), whole)
