"""HunyuanVideo 1.5 single files as ComfyUI users hold them: the DiT in Tencent's original key
names (hunyuanvideo1.5_720p_t2v_fp16, ..._480p_i2v_...) and the VAE (hunyuanvideo15_vae_fp16)
in its original names, written from the tiny presets by the independent inverse naming of
comfy_files.py: recognised from their headers (family, task and resolution from the file name,
format) and read to exactly the preset's weights in fp32, bf16, fp8_scaled and GGUF Q8_0; at
real size (meta models, header-only files) the 8.3B DiT's config read off its header is the
real one and every one of its parameters is read from the file; `paradit models DIR` lists them;
a run from these files is refused, naming the text encoders it cannot read yet.

Cost: about 6 s (in the suite's two-worker run on 2 cores).
"""

from __future__ import annotations

import functools

import pytest
import torch
from comfy_files import (
    WAN_PREFIX,
    hunyuan15_original,
    hunyuan15_vae_original,
    meta_model,
    meta_shapes,
    write_gguf,
    write_header_only,
    write_safetensors,
)

from paradit.backend.models.presets import build_preset
from paradit.backend.models.random_presets import random_preset_spec
from paradit.backend.models.single_file.components import vae_model
from paradit.backend.models.single_file.convert import dit_row_map, unused_keys
from paradit.backend.models.single_file.detect import detect, recognise
from paradit.backend.models.single_file.header import read_header
from paradit.backend.models.single_file.listing import list_models
from paradit.backend.models.single_file.load import (
    DitWeights,
    SingleFiles,
    empty_model,
    fill_whole,
    resolve,
)
from paradit.backend.models.single_file.quant import quantization


def _real(component: str, preset: str = "random:hunyuanvideo1.5-t2v") -> dict:
    config = random_preset_spec(preset)["components"][component]["config"]
    return {k: v for k, v in config.items() if not k.startswith("_")}


@pytest.mark.fast
@pytest.mark.parametrize(
    ("name", "dtype", "prefix", "variant", "fmt"),
    [
        ("hunyuanvideo1.5_720p_t2v_fp16.safetensors", "F16", "", "720p-t2v", "f16"),
        (
            "hunyuanvideo1.5_480p_i2v_fp8.safetensors",
            "F8_E4M3",
            WAN_PREFIX,
            "480p-i2v",
            "fp8_e4m3fn",
        ),
    ],
)
def test_real_dit_from_its_header(tmp_path, name, dtype, prefix, variant, fmt):
    real = _real("transformer")
    shapes = hunyuan15_original(meta_state(real_dit()))
    path = tmp_path / name
    write_header_only(path, {prefix + k: tuple(v.shape) for k, v in shapes.items()}, dtype)
    header = read_header(path)
    found = detect(header)
    assert (found.role, found.family, found.variant, found.layout, found.prefix) == (
        "transformer", "hunyuanvideo1.5", f"hunyuanvideo1.5-{variant}", "original", prefix
    )  # fmt: skip
    task = variant.split("-")[1]
    expected = {**real, "task_type": task, "target_size": 960 if "720p" in variant else 640}
    assert {k: v for k, v in found.config.items() if k != "_class_name"} == {
        k: list(v) if isinstance(v, tuple) else v for k, v in expected.items()
    }
    assert quantization(header) == fmt
    row_map = dit_row_map(header, found)
    assert not unused_keys(header, found, row_map)
    with DitWeights(recognise(str(path))) as weights:  # every parameter, rows that fit
        weights.check(real_dit())
    with pytest.raises(ValueError, match=r"text encoders \(Qwen2.5-VL 7B and ByT5"):
        resolve(SingleFiles.parse(str(path)))


@functools.cache
def real_dit() -> torch.nn.Module:
    """The 8.3B DiT on the meta device (task and target size change no parameter)."""
    return meta_model("HunyuanVideo15Transformer3DModel", _real("transformer"))


def meta_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: torch.empty(s, device="meta") for k, s in meta_shapes(model).items()}


@pytest.mark.fast
def test_real_vae_from_its_header(tmp_path):
    state = meta_state(meta_model("AutoencoderKLHunyuanVideo15", _real("vae")))
    path = tmp_path / "hunyuanvideo15_vae_fp16.safetensors"
    write_header_only(path, {k: tuple(v.shape) for k, v in hunyuan15_vae_original(state).items()})
    found = detect(read_header(path))
    assert (found.role, found.family, found.layout) == ("vae", "hunyuanvideo1.5", "original")
    assert found.config == {"latent_channels": 32, "base_width": 128}


FORMAT_NAMES = {"fp32": "f32", "bf16": "bf16", "fp8_scaled": "bf16", "Q8_0": "Q8_0"}
"""How `paradit models DIR` names each format written: the format of most of the weights,
which in the tiny fp8_scaled file are the bf16 ones outside the blocks (ByT5's 2048-wide
projection), in a real one its fp8 blocks (test_single_file_detect)."""
PRESET_FILES = {  # preset -> (DiT file name, format, key prefix)
    "tiny-hunyuanvideo1.5": ("hunyuanvideo1.5_480p_t2v_{}.safetensors", ("fp32", "bf16"), ""),
    "tiny-hunyuanvideo1.5-i2v": (
        "hunyuanvideo1.5_720p_i2v_{}.safetensors",
        ("fp8_scaled", "Q8_0"),
        WAN_PREFIX,
    ),
}


@pytest.mark.parametrize("preset", sorted(PRESET_FILES))
def test_tiny_files_read_to_their_weights_and_are_listed(tmp_path, preset):
    pipe = build_preset(preset, components=frozenset({"transformer", "vae"}))
    original = hunyuan15_original(pipe.transformer.state_dict())
    pattern, formats, prefix = PRESET_FILES[preset]
    folder = tmp_path / "models"
    (folder / "diffusion_models").mkdir(parents=True)
    (folder / "vae").mkdir()
    for fmt in formats:
        if fmt.startswith("Q"):
            path = folder / "diffusion_models" / pattern.replace(".safetensors", ".gguf")
            path = path.with_name(path.name.format(fmt))
            held = write_gguf(path, original, fmt)
        else:
            path = folder / "diffusion_models" / pattern.format(fmt)
            held = write_safetensors(path, original, fmt, prefix)
        part = recognise(str(path))
        assert part.detection.variant == preset
        model = empty_model(part.detection.config, torch.float32)
        with DitWeights(part) as weights:
            fill_whole(model, weights)
        reference = hunyuan15_original(model.state_dict())
        assert set(reference) == set(held)
        for key, value in reference.items():  # exactly what the file holds
            assert torch.equal(value, held[key]), key
        if fmt == "fp32":  # the preset's own weights
            ours, theirs = model.state_dict(), pipe.transformer.state_dict()
            assert all(torch.equal(ours[k], v) for k, v in theirs.items())
        config = {k: v for k, v in part.detection.config.items() if k != "_class_name"}
        assert config == {
            k: list(v) if isinstance(v, tuple) else v
            for k, v in pipe.transformer.config.items()
            if not k.startswith("_")
        }
    vae_path = folder / "vae" / "hunyuanvideo15_vae_fp16.safetensors"
    write_safetensors(vae_path, hunyuan15_vae_original(pipe.vae.state_dict()), "fp32")
    vae = vae_model(recognise(str(vae_path)), preset, torch.float32)
    assert all(torch.equal(vae.state_dict()[k], v) for k, v in pipe.vae.state_dict().items())
    listed = {e.path: (e.role, e.variant, e.format) for e in list_models(folder)}
    dits = {k: v for k, v in listed.items() if k.startswith("diffusion_models")}
    assert {v[:2] for v in dits.values()} == {("transformer", preset)}
    assert sorted(v[2] for v in dits.values()) == sorted(FORMAT_NAMES[f] for f in formats)
    assert listed["vae/hunyuanvideo15_vae_fp16.safetensors"][:2] == ("vae", "hunyuanvideo1.5 vae")
