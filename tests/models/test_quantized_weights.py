"""Weights stored quantized (`--weights`, issue 39): fp8 and GGUF layers stay as their file
holds them and are upcast in each layer's forward.

- fp8 rows and their per-row scales: the quantizer's scale is the row's largest magnitude over
  E4M3's largest value, 448 (OCP 8-bit Floating Point Specification, v1.0, table 1); a file's
  per-row scales are read with their rows; `--fp8-compute` is refused on CPU with its reason.
- a tiny Wan fp8_scaled file (a scale per row), a GGUF Q8_0 file, an int8_convrot file (issue
  52; ConvRot groups of 64 at the tiny widths), an fp4_mixed one (nvfp4, nvfp4_awq and fp8
  layers) and a W4A8 one (4- and 6-bit codes), loaded with `--weights file`, compute the same
  DiT output, byte for byte, as the same file dequantized at load, at world sizes 1, 2 and 3
  (FSDP2, uneven rows); the shards hold fp8 rows / int8 rows / GGUF block bytes (fp4_mixed:
  its fp8 layers; nvfp4 and W4A8 are dequantized at load) and each rank's scales are its
  rows' scales.
- served (2 ranks, the fp8 file): frames equal to `--weights bf16`'s; the ranks'
  `dit_param_bytes` count the blocks' linear weights at one byte a value (half of bf16's two)
  plus 4 bytes of scale a row; a LoRA job equals the same LoRA on the dequantized model within
  rounding; the next plain job is byte-identical to the one before it.
- a Comfy-Org `*_fp8mixed` file keeps its fp8 layers (and only those) under `file`/`auto`;
  mxfp8 layers read to value x 2^(e - 127) per block of 32 from cuBLAS's block-scaling layout;
  `--weights fp8` quantizes a float source's rows alike when filled shard by shard and when
  loaded whole, `--weights int8` a loaded model's rows to int8 with a scale each; the fp8
  stage of docs/gpu_check.sh runs dry on CPU.

Cost: about 9 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from comfy_files import WAN_PREFIX, quantizable, wan_original, write_gguf, write_safetensors
from conftest import REFERENCE_FLAGS, run_job, spawn_gloo
from lora_files import peft_lora
from quant_files import write_fp4_mixed, write_int8, write_w4a8
from safetensors.torch import save_file

from paradit.backend.config import ServeConfig
from paradit.backend.models.presets import build_preset
from paradit.backend.models.quantized import (
    QuantLinear,
    Stored,
    fp8_refusal,
    quant_linears,
    quantize_rows,
)
from paradit.backend.tools.equivalence import FLOAT32, IDENTICAL, WITHIN_ROUNDING, compare
from paradit.backend.tools.verify import decode_png

BODY = {"prompt": "kept in fp8", "seed": 4, "width": 32, "height": 32, "num_frames": 5}
BODY |= {"num_inference_steps": 2, "guidance_scale": 3.0}
E4M3_MAX = 448.0  # OCP 8-bit Floating Point Specification v1.0, table 1: E4M3's largest normal


@pytest.mark.fast
def test_rows_quantized_with_a_scale_each():
    values = torch.tensor([[1.0, -3.0, 0.5], [0.0, 0.0, 0.0], [100.0, 2.0, -50.0]])
    quantized, scale = quantize_rows(values, torch.float8_e4m3fn)
    assert quantized.dtype == torch.float8_e4m3fn
    assert torch.equal(scale, torch.tensor([3.0 / E4M3_MAX, 1.0, 100.0 / E4M3_MAX]))
    assert quantized.float().abs().amax(dim=1).tolist() == [E4M3_MAX, 0.0, E4M3_MAX]
    back = quantized.float() * scale[:, None]
    assert torch.allclose(back, values, rtol=2**-3)  # E4M3: 3 mantissa bits


@pytest.mark.fast
def test_a_quantized_linear_computes_with_its_upcast_weight(monkeypatch):
    """The upcast weight, formed in blocks of rows (2 rows a block here), is the fp8 values
    times their rows' scales; a job's LoRA change is added to it as the patcher adds it to a
    dequantized weight's rows: (B @ A) * scale * strength, rounded once to the compute dtype."""
    from paradit.backend.lora.parse import LayerDelta
    from paradit.backend.models import quantized

    monkeypatch.setattr(quantized, "UPCAST_BLOCK", 8)
    layer = QuantLinear(4, 3, True, Stored("fp8", torch.float8_e4m3fn), torch.bfloat16)
    weight = torch.tensor([[1.0, 2.0, -4.0, 0.5]] * 3) * torch.tensor([[1.0], [0.01], [30.0]])
    layer.weight.data, layer.weight_scale.data = quantize_rows(weight, torch.float8_e4m3fn)
    layer.bias.data = torch.tensor([0.1, 0.2, 0.3], dtype=torch.bfloat16)
    x = torch.randn(2, 4).to(torch.bfloat16)
    upcast = (layer.weight.float() * layer.weight_scale[:, None]).to(torch.bfloat16)
    assert torch.equal(layer.upcast(), upcast)
    assert torch.equal(layer(x), torch.nn.functional.linear(x, upcast, layer.bias))
    assert layer.weight.element_size() == 1 and tuple(layer.weight.shape) == (3, 4)
    change = LayerDelta(a=torch.randn(2, 4), b=torch.randn(3, 2), scale=0.5)
    layer.lora_deltas.append((change, 0.8))
    delta = (change.b @ change.a) * (0.5 * 0.8)
    assert torch.equal(layer.upcast(), upcast + delta.to(torch.bfloat16))
    layer.lora_deltas.clear()
    assert torch.equal(layer.upcast(), upcast)


@pytest.mark.fast
def test_fp8_compute_is_refused_on_cpu_with_its_reason():
    with pytest.raises(ValueError, match="compute capability 8.9"):
        ServeConfig(model="tiny-wan", device="cpu", fp8_compute=True)
    reason = fp8_refusal(torch.device("cpu"))
    assert "compute capability 8.9" in reason and "upcast" in reason


def _tiny_wan_files(root: Path) -> dict[str, Path]:
    tiny = build_preset("tiny-wan", components=frozenset({"transformer"}))
    original = wan_original(tiny.transformer.state_dict())
    files = {
        "fp8": root / "wan2.1_t2v_tiny_fp8_scaled.safetensors",
        "Q8_0": root / "wan2.1_t2v_tiny-Q8_0.gguf",
        "int8": root / "wan2.1_t2v_tiny_int8_convrot.safetensors",
    }
    write_safetensors(files["fp8"], original, "fp8_scaled", WAN_PREFIX, per_row=True)
    write_gguf(files["Q8_0"], original, "Q8_0")
    # ConvRot in groups of 64 (the tiny widths are 64 and 128; real files use 256)
    write_int8(files["int8"], original, quantizable, WAN_PREFIX, group=64)
    files["fp4_mixed"] = root / "wan2.1_t2v_tiny_fp4_mixed.safetensors"
    write_fp4_mixed(files["fp4_mixed"], original, quantizable, WAN_PREFIX)
    files["w4a8"] = root / "wan2.1_t2v_tiny_w4a8.safetensors"
    write_w4a8(files["w4a8"], original, quantizable, WAN_PREFIX, convrot=64)
    return files


def _dit_outputs(rank: int, world_size: int, files: dict[str, Path], out: Path) -> None:
    """One rank: each file's DiT loaded dequantized and kept quantized, sharded over the first
    n ranks for n = 3, 2 (and whole on rank 0: world size 1), one forward each; rank 0 saves
    the outputs. Each rank checks its shards hold the stored bytes and its rows' scales."""
    import torch.distributed as dist
    from image_jobs import rank_groups
    from torch.distributed.device_mesh import DeviceMesh

    from paradit.backend.models.sharded_load import fill_shards, shard_rows
    from paradit.backend.models.single_file.build import DitWeights, store_file_layers
    from paradit.backend.models.single_file.detect import recognise
    from paradit.backend.models.single_file.quant import RowReader
    from paradit.backend.parallel.fsdp import shard_weights

    torch.manual_seed(0)
    results: dict[str, torch.Tensor] = {}
    sizes = [(n, g) for n, g in rank_groups(rank, world_size, (3, 2))]
    sizes += [(1, None)] if rank == 0 else []
    for size, group in sizes:
        mesh = None
        if size > 1:
            mesh = DeviceMesh.from_group(group or dist.group.WORLD, "cpu")
        for kind, path in files.items():
            part = recognise(str(path))
            config = part.detection.config
            generator = torch.Generator().manual_seed(3)
            latents = torch.randn(1, config["in_channels"], 2, 8, 8, generator=generator)
            text = torch.randn(1, 8, config["text_dim"], generator=generator)
            for mode in ("bf16", "file"):
                from paradit.backend.models.sharded_load import empty_from_config

                model = empty_from_config(config, torch.float32)
                layers = store_file_layers(model, part, mode)
                kept = {"fp4_mixed": 6, "w4a8": 0}.get(kind, 20)  # fp8 layers; 4-bit dequantized
                assert layers == (0 if mode == "bf16" else kept), (kind, mode, layers)
                if mesh is not None:
                    shard_weights(model, mesh)
                with DitWeights(part) as weights:
                    weights.check(model)
                    fill_shards(model, weights, torch.device("cpu"))
                with torch.no_grad():
                    results[f"{kind}-{mode}-{size}"] = model(latents, torch.tensor([500]), text)[0]
            reader = RowReader(part.header)
            for name, layer in quant_linears(model).items():
                start, rows, local = shard_rows(layer.weight)
                fp8 = torch.float8_e4m3fn
                expect = {"fp8": fp8, "int8": torch.int8, "fp4_mixed": fp8}.get(kind, torch.uint8)
                assert local.dtype == expect, (name, local.dtype)
                assert layer.stored.group == (64 if kind == "int8" else 0), name
                if kind in ("fp8", "int8") and rows:
                    key = WAN_PREFIX + _file_key(name)
                    file_scale = reader._scale(key).reshape(-1)[start : start + rows]
                    assert torch.equal(shard_rows(layer.weight_scale)[2], file_scale), name
                if kind == "Q8_0":  # 34 bytes a block of 32 values
                    assert local.shape[1] == layer.in_features // 32 * 34
            reader.close()
    if rank == 0:
        torch.save(results, out)


def _file_key(name: str) -> str:
    """The original Wan key of a diffusers block linear (for the tiny model's names)."""
    from comfy_files import wan_original_name

    return wan_original_name(f"{name}.weight")


def test_file_weights_equal_dequantized_at_world_sizes_1_2_3(tmp_path):
    files = _tiny_wan_files(tmp_path)
    out = tmp_path / "outputs.pt"
    spawn_gloo(3, _dit_outputs, files, out)
    results = torch.load(out)
    for kind in files:
        reference = results[f"{kind}-bf16-1"]
        for size in (1, 2, 3):
            for mode in ("bf16", "file"):
                got = results[f"{kind}-{mode}-{size}"]
                assert torch.equal(got, reference), (kind, mode, size)


def _served_files(root: Path) -> tuple[Path, Path, Path, dict[str, int]]:
    tiny = build_preset("tiny-wan")
    model = root / "diffusion_models" / "wan2.1_t2v_tiny_fp8_scaled.safetensors"
    encoder = root / "text_encoders" / "umt5_tiny.safetensors"
    vae = root / "vae" / "wan_2.1_vae_tiny.safetensors"
    for path in (model, encoder, vae):
        path.parent.mkdir(parents=True, exist_ok=True)
    write_safetensors(
        model, wan_original(tiny.transformer.state_dict()), "fp8_scaled", WAN_PREFIX, per_row=True
    )
    state = tiny.text_encoder.state_dict()
    save_file({k: v for k, v in state.items() if "embed_tokens" not in k}, str(encoder))
    save_file(tiny.vae.state_dict(), str(vae))
    linears = [
        m for b in tiny.transformer.blocks for m in b.modules() if isinstance(m, torch.nn.Linear)
    ]
    sizes = {
        "values": sum(m.weight.numel() for m in linears),
        "rows": sum(m.out_features for m in linears),
    }
    return model, encoder, vae, sizes


def _frames(pngs: list[bytes]) -> np.ndarray:
    return np.stack([decode_png(p) for p in pngs])


def test_served_fp8_file_stays_fp8_with_loras_exact(tmp_path, backends):
    model, encoder, vae, sizes = _served_files(tmp_path)
    tiny = build_preset("tiny-wan", components=frozenset({"transformer"})).transformer
    peft_lora(
        backends.lora_dir / "fp8_resident.safetensors",
        tiny,
        ("attn1.to_q", "attn2.to_k", "ffn.net.0.proj"),
        seed=11,
    )
    flags = ("--text-encoder", str(encoder), "--vae", str(vae), *REFERENCE_FLAGS)
    resident = backends.get(str(model), 2, *flags, "--weights", "file")
    dequantized = backends.get(str(model), 2, *flags, "--weights", "bf16")
    held, full = resident.info()["ranks"], dequantized.info()["ranks"]
    assert held[0]["weights"] == {
        "mode": "file",
        "stored": {"float8_e4m3fn": 20},
        "fp8_compute": False,
        "int8_compute": False,
    }
    assert full[0]["weights"]["stored"] == {}
    # the blocks' linear weights at 1 byte a value instead of 4 (float32 on CPU; 2 in bf16),
    # plus a float32 scale a row; every other parameter as it was
    saved = sizes["values"] * 3 - sizes["rows"] * 4
    assert (
        sum(r["dit_param_bytes"] for r in held) == sum(r["dit_param_bytes"] for r in full) - saved
    )
    before, before_frames = run_job(resident, BODY)
    _, plain = run_job(dequantized, BODY)
    assert before_frames == plain  # the upcast is the dequantization's arithmetic
    lora = {**BODY, "loras": [{"name": "fp8_resident", "strength": 0.7}]}
    job, frames = run_job(resident, lora)
    ref_job, reference = run_job(dequantized, lora)
    result = compare(
        _frames(reference),
        _frames(frames),
        FLOAT32,
        dequantized.latents(ref_job["id"]),
        resident.latents(job["id"]),
    )
    assert result.verdict in {IDENTICAL, WITHIN_ROUNDING}, result.overall
    assert frames != before_frames  # the LoRA changed the job
    after, after_frames = run_job(resident, BODY)
    assert after_frames == before_frames
    assert np.array_equal(resident.latents(after["id"]), resident.latents(before["id"]))


@pytest.mark.fast
def test_gpu_check_fp8_stage_runs_dry(tmp_path, monkeypatch):
    """`GPU_CHECK_DRY=1 python docs/gpu_check.py OUT fp8`: tiny shapes on the CPU, the upcast
    path timed and measured against bf16's output, fp8 compute refused with its reason."""
    import json
    import sys

    docs = Path(__file__).resolve().parents[2] / "docs"
    monkeypatch.syspath_prepend(str(docs))
    monkeypatch.setenv("GPU_CHECK_DRY", "1")
    monkeypatch.setenv("GPU_CHECK_WORK", str(tmp_path / "work"))
    sys.modules.pop("gpu_check", None)
    import gpu_check

    assert gpu_check.main([str(tmp_path), "fp8"]) == 0
    result = json.loads((tmp_path / "fp8.json").read_text())
    assert "compute capability 8.9" in result["fp8_compute"]
    for name in ("attn", "ffn up"):
        entry = result[name]
        assert entry["upcast_s"] > 0 and entry["bf16_s"] > 0
        assert 0 < entry["upcast_distance"]["mean_abs_relative"] < 0.1  # fp8's rounding
        assert "fp8_compute_s" not in entry


def _blocked_offset(row: int, block: int, blocks: int) -> int:
    """Where cuBLAS's 1D block-scaling layout puts the scale of (row, block): tiles of 128 rows
    x 4 blocks stored row by row, and inside a tile byte (row % 32) * 16 + (row % 128) // 32 *
    4 + block % 4 (NVIDIA cuBLAS documentation, "1D Block Scaling Factors Layout")."""
    tiles_k = -(-blocks // 4)
    tile = (row // 128) * tiles_k + block // 4
    return tile * 512 + (row % 32) * 16 + (row % 128) // 32 * 4 + block % 4


@pytest.mark.fast
def test_mxfp8_layers_read_with_their_block_exponents(tmp_path):
    """ComfyUI's mxfp8 layer (`comfy_quant` {"format": "mxfp8"}): E4M3 values and one E8M0
    exponent e per 32 values of a row, worth 2^(e - 127) (OCP Microscaling Formats (MX)
    Specification v1.0, 5.4.1), stored in cuBLAS's block-scaling layout; read per row block."""
    import json

    from paradit.backend.models.single_file.header import read_header
    from paradit.backend.models.single_file.quant import RowReader, check_readable, stored_of

    rows, cols = 130, 96  # two row tiles, 3 blocks a row (padded to 4)
    generator = torch.Generator().manual_seed(2)
    values = (torch.randn(rows, cols, generator=generator) * 50).to(torch.float8_e4m3fn)
    exponents = torch.randint(117, 137, (rows, cols // 32), generator=generator)
    blocked = torch.zeros(256 * 4, dtype=torch.uint8)
    for r in range(rows):
        for b in range(cols // 32):
            blocked[_blocked_offset(r, b, cols // 32)] = int(exponents[r, b])
    key = "model.diffusion_model.blocks.0.ffn.0.weight"
    layer = key.removesuffix("weight")
    description = json.dumps({"format": "mxfp8"}).encode()
    tensors = {
        key: values,
        layer + "weight_scale": blocked.reshape(256, 4).view(torch.float8_e8m0fnu),
        layer + "comfy_quant": torch.frombuffer(bytearray(description), dtype=torch.uint8),
    }
    path = tmp_path / "mxfp8.safetensors"
    save_file(tensors, str(path))
    header = read_header(path)
    check_readable(header)
    assert stored_of(header, key) is None  # dequantized at load, never kept as rows
    expected = values.float().view(rows, -1, 32) * torch.exp2(exponents.float() - 127)[..., None]
    reader = RowReader(header)
    out = torch.empty(rows - 5, cols)
    reader.read_rows(key, 5, out)  # a row block across the tile boundary
    reader.close()
    assert torch.equal(out, expected.reshape(rows, cols)[5:])


def _fp8mixed(original: dict[str, torch.Tensor], path: Path) -> set[str]:
    """A Comfy-Org `*_fp8mixed` file: every other block linear fp8 with a scale per row and
    its `comfy_quant` description (listed in `_quantization_metadata`), the rest bf16."""
    import json

    tensors, layers, fp8 = {}, {}, set()
    linears = sorted(k for k, v in original.items() if k.startswith("blocks.") and v.dim() == 2)
    description = json.dumps({"format": "float8_e4m3fn"})
    for name, value in original.items():
        if name in linears[::2]:
            stored, scale = quantize_rows(value.float(), torch.float8_e4m3fn)
            layer = WAN_PREFIX + name.removesuffix("weight")
            tensors[layer + "weight_scale"] = scale
            raw = torch.frombuffer(bytearray(description.encode()), dtype=torch.uint8)
            tensors[layer + "comfy_quant"] = raw.clone()
            layers[layer.removesuffix(".")] = json.loads(description)
            fp8.add(name)
        else:
            stored = value.to(torch.bfloat16)
        tensors[WAN_PREFIX + name] = stored.contiguous()
    metadata = {"_quantization_metadata": json.dumps({"format_version": "1.0", "layers": layers})}
    save_file(tensors, str(path), metadata=metadata)
    return fp8


def test_fp8mixed_file_keeps_its_fp8_layers_and_computes_as_dequantized(tmp_path):
    from paradit.backend.models.sharded_load import empty_from_config
    from paradit.backend.models.single_file.build import DitWeights, fill_whole, store_file_layers
    from paradit.backend.models.single_file.detect import recognise

    tiny = build_preset("tiny-wan", components=frozenset({"transformer"}))
    path = tmp_path / "wan2.1_t2v_tiny_fp8mixed.safetensors"
    fp8 = _fp8mixed(wan_original(tiny.transformer.state_dict()), path)
    part = recognise(str(path))
    config = part.detection.config
    generator = torch.Generator().manual_seed(3)
    latents = torch.randn(1, config["in_channels"], 2, 8, 8, generator=generator)
    text = torch.randn(1, 8, config["text_dim"], generator=generator)
    outputs, kept = {}, {}
    for mode in ("bf16", "auto", "file"):
        model = empty_from_config(config, torch.float32)
        store_file_layers(model, part, mode)
        with DitWeights(part) as weights:
            fill_whole(model, weights)
        kept[mode] = set(quant_linears(model))
        with torch.no_grad():
            outputs[mode] = model(latents, torch.tensor([500]), text)[0]
    assert kept["bf16"] == set() and kept["auto"] == kept["file"]
    assert len(kept["file"]) == len(fp8) > 0  # the fp8 layers and only those
    assert torch.equal(outputs["file"], outputs["bf16"])


def test_fp8_mode_quantizes_rows_alike_when_filled_and_when_loaded():
    """`--weights fp8` on a float source: rows read into an empty model's shards and quantized
    (the sharded load) hold the bytes and scales the whole loaded model quantized in place
    holds (world size 1's path), and compute the same output."""
    from paradit.backend.models.quantized import quantize_loaded, store_layers
    from paradit.backend.models.sharded_load import empty_from_config, fill_shards

    tiny = build_preset("tiny-wan", components=frozenset({"transformer"})).transformer
    state = {k: v.clone() for k, v in tiny.state_dict().items()}

    class Rows:  # a float source (a folder, a `random:` preset's draws): rows by name
        def names(self) -> set[str]:
            return set(state)

        def read_rows(self, name: str, start: int, out: torch.Tensor) -> int:
            out.copy_(state[name][start : start + len(out)] if out.dim() else state[name])
            return 0

        def close(self) -> None:
            pass

    filled = empty_from_config({**tiny.config, "_class_name": type(tiny).__name__}, torch.float32)
    assert store_layers(filled, "fp8") == 20
    fill_shards(filled, Rows(), torch.device("cpu"))
    assert quantize_loaded(tiny) == 20
    ours, theirs = dict(filled.named_parameters()), dict(tiny.named_parameters())
    assert ours.keys() == theirs.keys()
    for name, param in ours.items():
        assert param.dtype == theirs[name].dtype and torch.equal(
            param.view(torch.uint8) if param.element_size() == 1 else param,
            theirs[name].view(torch.uint8) if param.element_size() == 1 else theirs[name],
        ), name
    config = tiny.config
    generator = torch.Generator().manual_seed(3)
    latents = torch.randn(1, config["in_channels"], 2, 8, 8, generator=generator)
    text = torch.randn(1, 8, config["text_dim"], generator=generator)
    with torch.no_grad():
        assert torch.equal(
            filled(latents, torch.tensor([500]), text)[0],
            tiny(latents, torch.tensor([500]), text)[0],
        )


@pytest.mark.fast
def test_fp8_matmul_is_the_product_of_the_quantized_operands():
    """`--fp8-compute`'s linear (torch._scaled_mm, which also runs on CPU) equals the float
    product of its fp8 operands times their scales, rounded to bf16: row-wise (sm >= 9.0: a
    scale per input row and per weight row inside the matmul) and tensor-wise (sm 8.9: one
    input scale, the weight rows' scales applied to the float32 product)."""
    from paradit.backend.models.quantized import scaled_mm_linear

    generator = torch.Generator().manual_seed(1)
    weight = torch.randn(32, 64, generator=generator) * torch.logspace(-2, 1, 32)[:, None]
    x = (torch.randn(2, 5, 64, generator=generator) * 3).to(torch.bfloat16)
    bias = torch.randn(32, generator=generator).to(torch.bfloat16)
    q, scale = quantize_rows(weight, torch.float8_e4m3fn)
    w = q.float() * scale[:, None]
    for rowwise, rows in ((True, x.reshape(10, 64)), (False, x.reshape(1, 640))):
        xq, xs = quantize_rows(rows, torch.float8_e4m3fn)
        inputs = (xq.float() * xs[:, None]).reshape(10, 64)
        reference = (inputs @ w.T).to(torch.bfloat16) + bias
        out = scaled_mm_linear(x, q, scale, bias, rowwise=rowwise)
        assert out.shape == (2, 5, 32) and out.dtype == torch.bfloat16
        torch.testing.assert_close(out.reshape(10, 32), reference, rtol=2**-7, atol=2**-7)
        exact = torch.nn.functional.linear(x.float(), w) + bias.float()
        distance = (out.float() - exact).abs().mean() / exact.abs().mean()
        assert 0 < distance < 0.05, (rowwise, distance)  # the input's fp8 rounding


@pytest.mark.fast
def test_int8_mode_quantizes_a_loaded_model_per_row():
    """`--weights int8` on a model loaded whole in floats (a preset or a folder): each block
    linear becomes int8 rows with one scale each (the row's largest magnitude maps to 127),
    not rotated."""
    from paradit.backend.models import int8
    from paradit.backend.models.quantized import candidate_linears, quantize_loaded

    tiny = build_preset("tiny-wan", components=frozenset({"transformer"})).transformer
    weights = {name: m.weight.detach().clone() for name, m in candidate_linears(tiny)}
    assert quantize_loaded(tiny, "int8") == 20
    for name, layer in quant_linears(tiny).items():
        q, scale = int8.quantize_rows(weights[name])
        assert (layer.stored.kind, layer.stored.group, layer.weight.dtype) == (
            "int8",
            0,
            torch.int8,
        )
        assert torch.equal(layer.weight, q) and torch.equal(layer.weight_scale, scale), name
        assert q.abs().amax(dim=1).tolist() == [127] * q.shape[0]
