"""Single-file models load to exactly the weights they hold, and make the frames of the same
weights loaded as a diffusers pipeline: tiny Wan, Wan 2.2 pair and Flux checkpoints written in
ComfyUI's key layouts (Wan's original names under `model.diffusion_model.`, Black Forest Labs'
Flux names) in every format: fp32, bf16, fp8_e4m3fn, fp8_scaled, GGUF Q8_0 and Q4_K.

"The same weights" is what the file holds (bf16/fp8 values, fp8 times its scale, GGUF blocks
dequantized as gguf-py defines them), so every format is compared byte for byte; the distance
of each lossy format's frames to the original float32 model's is measured and bounded too.
A Flux all-in-one checkpoint (DiT, CLIP-L, T5, VAE in ldm names: ComfyUI's
models/checkpoints layout) alone makes its preset's frames byte for byte.
Wan 2.2 TI2V-5B with the Wan 2.2 VAE under its original names and the Wan 2.2 I2V-A14B pair
make their presets' frames byte for byte; Wan 2.1 image-to-video with its CLIP vision file
loads to its preset's weights (its frames: test_single_file_serve.py).
In-process at world size 1 (32x32, 5 frames, 2 steps); the 2-rank sharded path is in
test_single_file_serve.py.

Cost: about 4 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import collections
import copy

import numpy as np
import pytest
import torch
from comfy_files import (
    WAN_PREFIX,
    flux_bfl,
    wan22_vae_original,
    wan_original,
    wan_original_name,
    write_all_in_one,
    write_gguf,
    write_safetensors,
)
from safetensors.torch import save_file

from paradit.backend.models.loading import ModelSource, align_cpu_weights, load_pipeline
from paradit.backend.models.presets import build_preset
from paradit.backend.models.single_file.convert import dit_row_map
from paradit.backend.models.single_file.detect import detect
from paradit.backend.models.single_file.header import read_header

CALL = {"height": 32, "width": 32, "num_inference_steps": 2, "output_type": "np"}
WAN_CALL = {**CALL, "num_frames": 5, "guidance_scale": 3.0}
# The largest difference in [0, 1] pixel values from the float32 model's frames, measured on
# this tiny model (2 steps, 32x32, 5 frames): bf16 0.0103, fp16 0.0018, fp8_e4m3fn 0.052,
# fp8_scaled 0.036 (a scale per row: 0.050), Q8_0 0.026. Bounds: about twice that.
LOSSY_BOUNDS = {
    "bf16": 0.02,
    "fp16": 0.004,
    "fp8_e4m3fn": 0.1,
    "fp8_scaled": 0.08,
    "fp8_scaled_rows": 0.1,
    "Q8_0": 0.05,
}


def _frames(pipe, prompt: str = "a single file", **call) -> np.ndarray:
    align_cpu_weights(pipe)
    out = pipe(prompt, generator=torch.Generator().manual_seed(5), **call)
    return np.asarray(out.frames[0] if hasattr(out, "frames") else out.images[0])


def _with_dit(pipe, state: dict[str, torch.Tensor], component: str = "transformer"):
    pipe = copy.copy(pipe)
    module = copy.deepcopy(getattr(pipe, component))
    module.load_state_dict(state, strict=True)
    pipe.register_modules(**{component: module})
    return pipe


@pytest.fixture(scope="module")
def wan(tmp_path_factory):
    root = tmp_path_factory.mktemp("wan-files")
    tiny = build_preset("tiny-wan")
    encoder = {k: v for k, v in tiny.text_encoder.state_dict().items() if "embed_tokens" not in k}
    save_file(encoder, str(root / "umt5_tiny.safetensors"))  # ComfyUI keeps `shared` only
    save_file(tiny.vae.state_dict(), str(root / "wan_vae_tiny.safetensors"))
    return {
        "root": root,
        "pipe": tiny,
        "flags": ([str(root / "umt5_tiny.safetensors")], [str(root / "wan_vae_tiny.safetensors")]),
        "frames": _frames(tiny, **WAN_CALL),
    }


def _write(root, original: dict[str, torch.Tensor], fmt: str, stem: str) -> tuple:
    """fmt: a `write_safetensors` or `write_gguf` format; `fp8_scaled_rows`: fp8_scaled with
    a scale per row."""
    if fmt.startswith("Q"):
        path = root / f"{stem}_{fmt}.gguf"
        return path, write_gguf(path, original, fmt)
    path = root / f"{stem}_{fmt}.safetensors"
    per_row = fmt.endswith("_rows")
    held = write_safetensors(path, original, fmt.removesuffix("_rows"), WAN_PREFIX, per_row=per_row)
    return path, held


def test_start_up_resolves_the_files_once_and_reads_each_header_once(wan, monkeypatch):
    """What rank 0's start-up asks of single files (the source, its pipeline class, its tiny
    flag, the pipeline, its files' summary, the DiT's config for an empty build) is resolved
    once, by `ModelSource.parse`, and each file's header is read once in the process: parsing
    the same files again reads none."""
    from paradit.backend.models import loading
    from paradit.backend.models.single_file import header
    from paradit.backend.runtime.engine import pipeline_class_name

    path, _ = _write(
        wan["root"], wan_original(wan["pipe"].transformer.state_dict()), "fp32", "once"
    )
    resolves, reads = [], collections.Counter()
    resolve, read = loading.resolve, header._safetensors_header
    monkeypatch.setattr(loading, "resolve", lambda files: resolves.append(1) or resolve(files))
    monkeypatch.setattr(
        header, "_safetensors_header", lambda p, check: reads.update([p.name]) or read(p, check)
    )
    header._read_header.cache_clear()
    source = ModelSource.parse(str(path), *wan["flags"])
    assert pipeline_class_name(source) == "WanPipeline" and source.tiny
    assert source.resolved_files().dits["transformer"].detection.config
    assert source.resolved.summary()["variant"]
    load_pipeline(source)
    assert len(resolves) == 1
    ModelSource.parse(str(path), *wan["flags"])  # a second parse checks again, reading nothing
    files = {path.name, "umt5_tiny.safetensors", "wan_vae_tiny.safetensors"}
    assert reads == dict.fromkeys(files, 1), reads


@pytest.mark.parametrize(
    "fmt", ["fp32", "bf16", "fp8_e4m3fn", "fp8_scaled", "fp8_scaled_rows", "Q8_0", "Q4_K"]
)
def test_wan_file_makes_the_frames_of_its_weights(wan, fmt):
    tiny = wan["pipe"]
    path, held = _write(wan["root"], wan_original(tiny.transformer.state_dict()), fmt, "wan")
    pipe = load_pipeline(ModelSource.parse(str(path), *wan["flags"]))
    loaded = pipe.transformer.state_dict()
    assert set(loaded) == set(tiny.transformer.state_dict())
    for name, value in loaded.items():  # exactly what the file holds, under diffusers' names
        assert torch.equal(value, held[wan_original_name(name)]), name
    reference = _with_dit(tiny, {k: held[wan_original_name(k)] for k in loaded})
    frames = _frames(pipe, **WAN_CALL)
    assert np.array_equal(frames, _frames(reference, **WAN_CALL))
    distance = float(np.abs(frames - wan["frames"]).max())
    if fmt == "fp32":
        assert distance == 0.0  # the preset itself
        for component in ("text_encoder", "vae"):
            ours, theirs = getattr(pipe, component).state_dict(), getattr(tiny, component)
            assert all(torch.equal(ours[k], v) for k, v in theirs.state_dict().items())
    elif fmt in LOSSY_BOUNDS:
        assert 0.0 < distance <= LOSSY_BOUNDS[fmt], distance
    else:  # Q4_K: random valid blocks (gguf-py cannot quantize K-quants), not the preset's
        assert distance > 0.0


def test_fp8_scaled_applies_the_scale(wan):
    """diffusers' own loader takes fp8_scaled's raw fp8 values (about 1800x too large for the
    real files); the loaded weights must be the fp8 values times their `scale_weight`."""
    tiny = wan["pipe"]
    path, _ = _write(wan["root"], wan_original(tiny.transformer.state_dict()), "fp8_scaled", "s")
    header = read_header(path)
    name = "blocks.0.attn1.to_q.weight"
    key = WAN_PREFIX + wan_original_name(name)
    scale = header.tensors[key[: -len("weight")] + "scale_weight"]
    assert header.tensors[key].dtype == "F8_E4M3" and scale.dtype == "F32"
    loaded = load_pipeline(ModelSource.parse(str(path), *wan["flags"])).transformer
    original = tiny.transformer.state_dict()[name]
    ratio = float(loaded.state_dict()[name].abs().max() / original.abs().max())
    assert 0.95 < ratio < 1.05, ratio  # the raw fp8 values would be ~448 / max|w| larger
    raw_ratio = 448.0 / float(original.abs().max())
    assert raw_ratio > 100


def test_row_maps_agree_with_the_inverse_layout(wan):
    """The test files' independent inverse naming and diffusers' converter agree: each
    diffusers weight is read whole from the Wan-named tensor the inverse gave it."""
    path = wan["root"] / "wan_fp32.safetensors"
    if not path.exists():
        _write(wan["root"], wan_original(wan["pipe"].transformer.state_dict()), "fp32", "wan")
    header = read_header(path)
    row_map = dit_row_map(header, detect(header))
    for name, value in wan["pipe"].transformer.state_dict().items():
        (segment,) = row_map[name]
        assert segment.key == WAN_PREFIX + wan_original_name(name)
        assert (segment.start, segment.rows) == (0, value.shape[0] if value.dim() else 1)


def test_wan22_pair_high_then_low(wan, tmp_path):
    tiny = wan["pipe"]
    low = copy.deepcopy(tiny.transformer)
    generator = torch.Generator().manual_seed(22)
    with torch.no_grad():
        for param in low.parameters():
            param.add_(0.05 * torch.randn(param.shape, generator=generator))
    high_path = tmp_path / "wan2.2_t2v_high_noise_tiny_bf16.safetensors"
    low_path = tmp_path / "wan2.2_t2v_low_noise_tiny_bf16.safetensors"
    high_held = write_safetensors(high_path, wan_original(tiny.transformer.state_dict()), "bf16")
    low_held = write_safetensors(low_path, wan_original(low.state_dict()), "bf16")
    pipe = load_pipeline(ModelSource.parse(f"{high_path},{low_path}", *wan["flags"]))
    assert pipe.transformer_2 is not None and pipe.config.boundary_ratio == 0.875
    from diffusers import WanPipeline

    names = list(tiny.transformer.state_dict())
    high_ref = _with_dit(tiny, {k: high_held[wan_original_name(k)] for k in names}).transformer
    low_ref = copy.deepcopy(high_ref)
    low_ref.load_state_dict({k: low_held[wan_original_name(k)] for k in names})
    reference = WanPipeline(
        tokenizer=tiny.tokenizer,
        text_encoder=tiny.text_encoder,
        vae=tiny.vae,
        scheduler=tiny.scheduler,
        transformer=high_ref,
        transformer_2=low_ref,
        boundary_ratio=0.875,
    )
    frames = _frames(pipe, **WAN_CALL)
    assert np.array_equal(frames, _frames(reference, **WAN_CALL))
    one_expert = _frames(_with_dit(tiny, high_ref.state_dict()), **WAN_CALL)
    assert not np.array_equal(frames, one_expert)  # the low-noise expert really ran


@pytest.fixture(scope="module")
def flux(tmp_path_factory):
    root = tmp_path_factory.mktemp("flux-files")
    tiny = build_preset("tiny-flux")
    clip = {"text_model." + k: v for k, v in tiny.text_encoder.state_dict().items()}
    save_file(clip, str(root / "clip_l_tiny.safetensors"))
    t5 = {k: v for k, v in tiny.text_encoder_2.state_dict().items() if "embed_tokens" not in k}
    save_file(t5, str(root / "t5xxl_tiny.safetensors"))
    save_file(tiny.vae.state_dict(), str(root / "ae_tiny.safetensors"))
    encoders = [str(root / "clip_l_tiny.safetensors"), str(root / "t5xxl_tiny.safetensors")]
    return {"root": root, "pipe": tiny, "flags": (encoders, [str(root / "ae_tiny.safetensors")])}


@pytest.mark.parametrize("fmt", ["Q8_0"])  # bf16 is lossless as for Wan; Q8_0 splits blocks
def test_flux_bfl_file_makes_the_frames_of_its_weights(flux, fmt):
    from gguf import GGMLQuantizationType, quants

    tiny = flux["pipe"]
    state = tiny.transformer.state_dict()
    bfl = flux_bfl(state, width=64)
    if fmt == "bf16":
        path = flux["root"] / "flux1_tiny_bf16.safetensors"
        write_safetensors(path, bfl, "bf16", WAN_PREFIX)
        held = {k: v.to(torch.bfloat16).float() for k, v in state.items()}
    else:  # Q8_0 blocks run along rows, so fused q/k/v quantize as their parts do
        path = flux["root"] / "flux1_tiny_Q8_0.gguf"
        write_gguf(path, bfl, "Q8_0")
        q8 = GGMLQuantizationType.Q8_0

        def held_value(value: torch.Tensor) -> torch.Tensor:
            if value.dim() == 2 and value.shape[-1] % 32 == 0:
                return torch.from_numpy(quants.dequantize(quants.quantize(value.numpy(), q8), q8))
            return value

        held = {k: held_value(v) for k, v in state.items()}
    pipe = load_pipeline(ModelSource.parse(str(path), *flux["flags"]))
    for name, value in pipe.transformer.state_dict().items():
        assert torch.equal(value, held[name]), name
    assert np.array_equal(_frames(pipe, **CALL), _frames(_with_dit(tiny, held), **CALL))
    for component in ("text_encoder", "text_encoder_2", "vae"):
        ours, theirs = getattr(pipe, component).state_dict(), getattr(tiny, component).state_dict()
        assert all(torch.equal(ours[k], theirs[k]) for k in theirs), component


def test_flux_all_in_one_file_makes_the_frames_of_its_preset(flux):
    """ComfyUI's all-in-one layout (models/checkpoints): `--model FILE` alone reads the DiT
    (BFL names under model.diffusion_model.), CLIP-L, T5 and the VAE (ldm names) from the one
    file, to the preset's weights and frames byte for byte."""
    tiny = flux["pipe"]
    path = flux["root"] / "flux1-tiny-all-in-one.safetensors"
    write_all_in_one(path, tiny)
    source = ModelSource.parse(str(path))
    assert (source.kind, source.text_encoders, source.vaes) == ("file", (), ())
    pipe = load_pipeline(source)
    for component in ("transformer", "text_encoder", "text_encoder_2", "vae"):
        ours, theirs = getattr(pipe, component).state_dict(), getattr(tiny, component).state_dict()
        assert set(ours) == set(theirs), component
        assert all(torch.equal(ours[k], theirs[k]) for k in theirs), component
    assert np.array_equal(_frames(pipe, **CALL), _frames(tiny, **CALL))


@pytest.mark.parametrize("fmt", ["fp8_scaled", "fp8_scaled_rows", "Q4_K"])
def test_any_row_block_reads_as_the_whole_tensor_does(wan, flux, fmt):
    """What an FSDP2 shard reads (rows a..b of a parameter, across fused tensors' segments
    and quantization blocks) equals those rows of the whole parameter."""
    from paradit.backend.models.single_file.build import DitWeights
    from paradit.backend.models.single_file.detect import recognise

    cases = [(wan["pipe"].transformer, wan_original, "wan_rows")]
    cases.append((flux["pipe"].transformer, lambda s: flux_bfl(s, width=64), "flux_rows"))
    for model, layout, stem in cases:
        path, _ = _write(wan["root"], layout(model.state_dict()), fmt, stem)
        with DitWeights(recognise(str(path))) as weights:
            for name, param in model.state_dict().items():
                whole = torch.empty(param.shape)
                weights.read_rows(name, 0, whole)
                rows = param.shape[0] if param.dim() else 1
                for start, stop in ((0, rows // 3), (rows // 3, rows - 1), (rows - 1, rows)):
                    part = torch.empty((stop - start, *param.shape[1:]))
                    weights.read_rows(name, start, part)
                    assert torch.equal(part, whole[start:stop]), (stem, name, start)


# -- Wan 2.2 TI2V-5B with the Wan 2.2 VAE, and the Wan 2.2 I2V-A14B pair ----------------------


def _encoder_file(pipe, path) -> str:
    state = pipe.text_encoder.state_dict()
    save_file({k: v for k, v in state.items() if "embed_tokens" not in k}, str(path))
    return str(path)


def test_ti2v_5b_files_make_the_frames_of_their_preset(tmp_path):
    """TI2V-5B's DiT in ComfyUI's layout with the Wan 2.2 VAE under its original names (as
    ComfyUI's wan2.2_vae holds them): every weight lands on diffusers' own name, the pipeline
    has TI2V's expand_timesteps, and the frames are the preset's, byte for byte."""
    from paradit.backend.models.families import family_of

    tiny = build_preset("tiny-wan2.2-ti2v-5b")
    model = tmp_path / "wan2.2_ti2v_5B_tiny_fp32.safetensors"
    write_safetensors(model, wan_original(tiny.transformer.state_dict()), "fp32", WAN_PREFIX)
    vae = tmp_path / "wan2.2_vae_tiny.safetensors"
    save_file(wan22_vae_original(tiny.vae.state_dict()), str(vae))
    encoder = _encoder_file(tiny, tmp_path / "umt5_tiny.safetensors")
    pipe = load_pipeline(ModelSource.parse(str(model), [encoder], [str(vae)]))
    assert (type(pipe).__name__, pipe.config.expand_timesteps) == ("WanPipeline", True)
    assert family_of(pipe).name == "wan2.2-ti2v"
    for component in ("transformer", "vae", "text_encoder"):
        ours, theirs = getattr(pipe, component).state_dict(), getattr(tiny, component).state_dict()
        assert set(ours) == set(theirs), component
        assert all(torch.equal(ours[k], v) for k, v in theirs.items()), component
    assert np.array_equal(_frames(pipe, **WAN_CALL), _frames(tiny, **WAN_CALL))


def test_wan22_i2v_pair_makes_the_frames_of_its_preset(tmp_path):
    """Wan 2.2 I2V-A14B's two experts as two ComfyUI files (high noise first) make the
    image-to-video pipeline of the preset (boundary 0.9, no CLIP encoder), frame for frame."""
    from PIL import Image

    tiny = build_preset("tiny-wan2.2-i2v-a14b")
    high = tmp_path / "wan2.2_i2v_high_noise_14B_tiny_fp32.safetensors"
    low = tmp_path / "wan2.2_i2v_low_noise_14B_tiny_fp32.safetensors"
    write_safetensors(high, wan_original(tiny.transformer.state_dict()), "fp32", WAN_PREFIX)
    write_safetensors(low, wan_original(tiny.transformer_2.state_dict()), "fp32", WAN_PREFIX)
    vae = tmp_path / "wan_2.1_vae_tiny.safetensors"
    save_file(tiny.vae.state_dict(), str(vae))
    encoder = _encoder_file(tiny, tmp_path / "umt5_tiny.safetensors")
    pipe = load_pipeline(ModelSource.parse(f"{high},{low}", [encoder], [str(vae)]))
    assert type(pipe).__name__ == "WanImageToVideoPipeline"
    assert (pipe.config.boundary_ratio, pipe.image_encoder) == (0.9, None)
    for component in ("transformer", "transformer_2"):
        ours, theirs = getattr(pipe, component).state_dict(), getattr(tiny, component).state_dict()
        assert all(torch.equal(ours[k], v) for k, v in theirs.items()), component
    image = Image.fromarray(np.arange(32 * 32 * 3, dtype=np.uint8).reshape(32, 32, 3))
    assert np.array_equal(_i2v_frames(pipe, image), _i2v_frames(tiny, image))


def _i2v_frames(pipe, image) -> np.ndarray:
    align_cpu_weights(pipe)
    out = pipe(
        image=image, prompt="from an image", generator=torch.Generator().manual_seed(5), **WAN_CALL
    )
    return np.asarray(out.frames[0])


def test_wan21_i2v_files_with_their_clip_vision_file(tmp_path):
    """Wan 2.1 image-to-video from files: the DiT (with its image embedding) in ComfyUI's
    layout and the CLIP vision tower under ComfyUI's `vision_model.` names (`--image-encoder`)
    load to the preset's weights, configs and image processor (its frames, served on 2 ranks:
    test_single_file_serve.py)."""
    tiny = build_preset("tiny-wan-i2v")
    model = tmp_path / "wan2.1_i2v_480p_tiny_fp32.safetensors"
    write_safetensors(model, wan_original(tiny.transformer.state_dict()), "fp32", WAN_PREFIX)
    clip = tmp_path / "clip_vision_tiny.safetensors"
    state = tiny.image_encoder.state_dict()
    save_file({"vision_model." + k: v for k, v in state.items()}, str(clip))
    vae = tmp_path / "wan_2.1_vae_tiny.safetensors"
    save_file(tiny.vae.state_dict(), str(vae))
    encoder = _encoder_file(tiny, tmp_path / "umt5_tiny.safetensors")
    pipe = load_pipeline(ModelSource.parse(str(model), [encoder], [str(vae)], [str(clip)]))
    assert pipe.image_encoder.config == tiny.image_encoder.config
    ours = pipe.image_encoder.state_dict()
    assert set(ours) == set(state) and all(torch.equal(ours[k], v) for k, v in state.items())
    assert pipe.image_processor.to_dict() == tiny.image_processor.to_dict()
    for component in ("transformer", "vae", "text_encoder"):
        ours, theirs = getattr(pipe, component).state_dict(), getattr(tiny, component).state_dict()
        assert set(ours) == set(theirs), component
        assert all(torch.equal(ours[k], v) for k, v in theirs.items()), component
