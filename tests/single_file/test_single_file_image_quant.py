"""Quantized DiT files of Z-Image and Flux.2 Klein, as ComfyUI users hold them: fp8_scaled in
ComfyUI's older layout (`scale_weight`, the `scaled_fp8` marker) and in its current one
(`weight_scale` and a `comfy_quant` JSON per fp8 layer), and GGUF Q8_0 (the GGUF node pack's,
no key prefix), each in the family's original key names (Z-Image's fused `attention.qkv`,
Black Forest Labs' Flux.2 names).

- Load level (no process): the tiny presets' DiTs written in each format are recognised as
  their family and format and read, through the quantized-row reader every rank uses, to
  exactly the values the file holds, which are the preset's weights within the format's
  rounding (fp8 e4m3: a value moves by at most 1/16 of itself, or 1/1024 of its tensor's
  scale below fp8's normal range; Q8_0: half a step of its 32-value block's scale, kept as
  fp16).
- ComfyUI's int8 tensorwise layers are read as value x scale; files with its other quantized
  layers (block-scaled fp8, mxfp8, nvfp4) are refused naming the tensor and the reason,
  instead of running on wrong values.
- One job per family from single files (the quantized DiT, the Qwen3 encoder, the VAE): the
  image stays within a measured distance of the float32 preset's image.

Cost: about 2 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from comfy_files import (
    WAN_PREFIX,
    flux2_bfl,
    qwen3_comfy,
    vae_ldm,
    write_gguf,
    write_safetensors,
    z_image_original,
)
from safetensors.torch import save_file

from paradit.backend.models.loading import ModelSource, align_cpu_weights, load_pipeline
from paradit.backend.models.presets import build_preset
from paradit.backend.models.single_file.build import DitWeights, empty_model, fill_whole
from paradit.backend.models.single_file.detect import recognise
from paradit.backend.models.single_file.header import read_header
from paradit.backend.models.single_file.quant import check_readable

LAYOUTS = {"tiny-z-image": z_image_original, "tiny-flux2-klein": flux2_bfl}
FAMILIES = {"tiny-z-image": "z-image", "tiny-flux2-klein": "flux2"}
FORMATS = {"fp8_scaled": "fp8_scaled", "fp8_comfy_quant": "fp8_scaled", "Q8_0": "Q8_0"}
"""The file formats written -> what `paradit models` reports them as."""
ROUNDING = {"fp8_scaled": 1 / 16 + 1 / 448 / 1024, "fp8_comfy_quant": 1 / 16 + 1 / 448 / 1024}
ROUNDING["Q8_0"] = 0.5 / 127 * (1 + 127 * 2**-11)
"""The largest change of a weight the format's rounding allows, per tensor, relative to the
tensor's largest value: fp8 e4m3 keeps 3 mantissa bits (1/16), its subnormals step 2**-9 times
the scale (max / 448); Q8_0 rounds to steps of max / 127 per block, the step itself to fp16.
Measured on these DiTs: 0.036 (fp8) and 0.0040 (Q8_0)."""
CALL = {"height": 32, "width": 32, "num_inference_steps": 2, "output_type": "np"}
IMAGE_BOUNDS = {"tiny-z-image": 0.18, "tiny-flux2-klein": 0.011}
"""The largest difference in [0, 1] pixel values from the float32 preset's image (32x32, 2
steps; docs/single-files.md's table has every format). Measured: Z-Image fp8_scaled 0.089 (its
random tiny DiT is the more sensitive: bf16 0.015 there), Klein Q8_0 0.0054; bounds about twice
that. A scale left out or misapplied makes another image (fp8 values ~448/max|w| too large)."""
JOBS = {"tiny-z-image": "fp8_comfy_quant", "tiny-flux2-klein": "Q8_0"}


@pytest.fixture(scope="module")
def dits() -> dict[str, dict[str, torch.Tensor]]:
    """Each preset's DiT weights in its file's key names (float32)."""
    out = {}
    for preset, layout in LAYOUTS.items():
        dit = build_preset(preset, components=frozenset({"transformer"})).transformer
        out[preset] = layout(dit.state_dict())
    return out


def _write(path_stem, original: dict[str, torch.Tensor], fmt: str):
    """(path, the values the file holds): GGUF without a key prefix (the node pack's), the
    safetensors under ComfyUI's `model.diffusion_model.`."""
    if fmt.startswith("Q"):
        path = path_stem.with_suffix(".gguf")
        return path, write_gguf(path, original, fmt)
    path = path_stem.with_suffix(".safetensors")
    return path, write_safetensors(path, original, fmt, WAN_PREFIX)


@pytest.mark.fast
@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("preset", list(LAYOUTS))
def test_quantized_dit_file_reads_to_the_presets_weights_within_rounding(
    dits, tmp_path, preset, fmt
):
    original = dits[preset]
    path, held = _write(tmp_path / f"{preset}_{fmt}", original, fmt)
    part = recognise(str(path))
    assert (part.detection.role, part.detection.family) == ("transformer", FAMILIES[preset])
    assert part.summary()["format"] == FORMATS[fmt]
    check_readable(part.header)
    model = empty_model(part.detection.config, torch.float32)
    with DitWeights(part) as weights:
        fill_whole(model, weights)
    loaded = LAYOUTS[preset](model.state_dict())  # back in the file's names
    assert set(loaded) == set(held)
    for name, value in loaded.items():
        assert torch.equal(value, held[name]), name  # exactly what the file holds
        change = float((value - original[name]).abs().max())
        largest = float(original[name].abs().max())
        assert change <= ROUNDING[fmt] * largest, (name, change / largest)
    stored = [info.dtype for info in part.header.tensors.values()]
    assert stored.count("Q8_0" if fmt == "Q8_0" else "F8_E4M3") >= 8  # the blocks' linears


@pytest.mark.fast
def test_quantized_layers_of_other_formats_are_refused(tmp_path):
    """fp8 with float block scales, mxfp8 (fp8 with E8M0 block scales: one uint8 exponent per
    32 values) and nvfp4 (`weight_scale_2`) would read as wrong values: refused naming the
    tensor and what is read."""
    weight = "model.diffusion_model.layers.0.attention.qkv.weight"
    fp8 = torch.ones(4, 64).to(torch.float8_e4m3fn)
    cases = {
        "blocks": ({weight: fp8, "s": torch.ones(4, 2)}, r"only fp8 and int8 weights with one"),
        "mxfp8": ({weight: fp8, "s": torch.full((4, 2), 127, dtype=torch.uint8)}, "mxfp8"),
        "nvfp4": (
            {
                weight: torch.ones(4, 32, dtype=torch.uint8),
                "s": torch.ones(4, 4).to(torch.float8_e4m3fn),
                weight + "_scale_2": torch.ones(()),
            },
            "nvfp4",
        ),
    }
    for name, (tensors, reason) in cases.items():
        tensors[weight.replace(".weight", ".weight_scale")] = tensors.pop("s")
        path = tmp_path / f"{name}.safetensors"
        save_file(tensors, str(path))
        with pytest.raises(ValueError, match=rf"qkv\.weight_scale.* .*{reason}"):
            check_readable(read_header(path))
    plain = tmp_path / "plain.safetensors"  # a float weight beside a scale: read as it is
    save_file({weight: torch.ones(4, 64), weight + "_scale": torch.ones(())}, str(plain))
    check_readable(read_header(plain))


@pytest.mark.fast
def test_int8_tensorwise_layers_are_read_times_their_scale(tmp_path):
    """ComfyUI's int8 tensorwise layer (`comfy_quant` {"format": "int8_tensorwise"}): int8
    values and one float32 `weight_scale`; the weight is value x scale (symmetric per-tensor
    int8 quantization, as defined with the format: no zero point)."""
    from paradit.backend.models.single_file.quant import RowReader

    weight = "model.diffusion_model.layers.0.attention.qkv.weight"
    values = torch.arange(-128, 128, dtype=torch.int8).reshape(4, 64)
    description = json.dumps({"format": "int8_tensorwise"}).encode()
    tensors = {
        weight: values,
        weight.replace(".weight", ".weight_scale"): torch.tensor(0.015625),
        weight.replace(".weight", ".comfy_quant"): torch.frombuffer(
            bytearray(description), dtype=torch.uint8
        ).clone(),
    }
    path = tmp_path / "int8.safetensors"
    save_file(tensors, str(path))
    header = read_header(path)
    check_readable(header)
    reader = RowReader(header)
    out = torch.empty(2, 64)
    reader.read_rows(weight, 1, out)
    reader.close()
    assert torch.equal(out, values[1:3].float() * 0.015625)


def _image(pipe) -> np.ndarray:
    align_cpu_weights(pipe)
    out = pipe(prompt="a single file", generator=torch.Generator().manual_seed(5), **CALL)
    return np.asarray(out.images[0])


@pytest.mark.parametrize("preset", list(JOBS))
def test_quantized_single_files_make_the_presets_image_within_a_measured_distance(
    dits, tmp_path, preset
):
    tiny = build_preset(preset)
    tiny.set_progress_bar_config(disable=True)
    path, _ = _write(tmp_path / f"{preset}_{JOBS[preset]}", dits[preset], JOBS[preset])
    encoder, vae = tmp_path / "qwen_3_tiny.safetensors", tmp_path / "vae_tiny.safetensors"
    language = tiny.text_encoder.model if preset == "tiny-flux2-klein" else tiny.text_encoder
    save_file(qwen3_comfy(language.state_dict()), str(encoder))
    save_file(vae_ldm(tiny.vae.state_dict()), str(vae))
    pipe = load_pipeline(ModelSource.parse(str(path), [str(encoder)], [str(vae)]))
    pipe.set_progress_bar_config(disable=True)
    assert type(pipe) is type(tiny)
    distance = float(np.abs(_image(pipe) - _image(tiny)).max())
    assert distance <= IMAGE_BOUNDS[preset], distance
