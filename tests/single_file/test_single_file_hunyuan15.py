"""HunyuanVideo 1.5 single files as ComfyUI users hold them: the DiT in Tencent's original key
names (hunyuanvideo1.5_720p_t2v_fp16, ..._480p_i2v_...) and the VAE (hunyuanvideo15_vae_fp16)
in its original names, written from the tiny presets by the independent inverse naming of
comfy_files.py: recognised from their headers (family, task and resolution from the file name,
format) and read to exactly the preset's weights in fp32, bf16, fp8_scaled and GGUF Q8_0, in any
rank's row block too (the token refiner's split q/k/v, the final modulation's swapped halves); at
real size (meta models, header-only files) the 8.3B DiT's and Qwen2.5-VL 7B's configs read off
their headers are the real ones and every DiT parameter is read from the file; `paradit models
DIR` lists them; the files of text-to-video (DiT, VAE, Qwen2.5-VL and ByT5) and of
image-to-video (and SigLIP) load as the preset's pipeline.

Cost: about 3 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import copy
import functools

import pytest
import torch
from comfy_files import (
    WAN_PREFIX,
    assert_same_weights,
    hunyuan15_original,
    hunyuan15_vae_original,
    meta_model,
    meta_shapes,
    plain_config,
    read_whole_dit,
    write_gguf,
    write_header_only,
    write_safetensors,
)

from paradit.backend.models.presets import build_preset
from paradit.backend.models.random_presets import random_preset_spec
from paradit.backend.models.single_file.build import DitWeights
from paradit.backend.models.single_file.convert import dit_row_map, unused_keys
from paradit.backend.models.single_file.detect import detect, recognise
from paradit.backend.models.single_file.header import read_header
from paradit.backend.models.single_file.listing import list_models
from paradit.backend.models.single_file.load import SingleFiles, resolve
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
    assert {k: v for k, v in found.config.items() if k != "_class_name"} == plain_config(expected)
    assert quantization(header) == fmt
    row_map = dit_row_map(header, found)
    assert not unused_keys(header, found, row_map)
    with DitWeights(recognise(str(path))) as weights:  # every parameter, rows that fit
        weights.check(real_dit())
    encoders = real_encoder_files(tmp_path)
    vae = tmp_path / "hunyuanvideo15_vae_fp16.safetensors"
    write_header_only(vae, real_vae_header())
    files = SingleFiles.parse(str(path), encoders, [str(vae)])
    if task == "i2v":
        with pytest.raises(ValueError, match=r"SigLIP image encoder .*: give --image-encoder"):
            resolve(files)
        siglip = tmp_path / "sigclip_vision_patch14_384.safetensors"
        shapes = meta_shapes(meta_model("SiglipVisionModel", SIGLIP_SO400M))
        write_header_only(siglip, {"vision_model." + k: v for k, v in shapes.items()})
        files = SingleFiles.parse(str(path), encoders, [str(vae)], [str(siglip)])
        resolved = resolve(files)
        assert resolved.pipeline_class == "HunyuanVideo15ImageToVideoPipeline"
        found = resolved.image_encoder.detection
        assert (found.family, found.prefix) == ("siglip", "vision_model.")
        assert {k: v for k, v in found.config.items() if k != "_class_name"} == SIGLIP_SO400M
    else:
        resolved = resolve(files)
        assert resolved.pipeline_class == "HunyuanVideo15Pipeline"
        assert {k: p.detection.variant for k, p in resolved.encoders.items()} == {
            "text_encoder": "qwen2.5-vl 3584",
            "text_encoder_2": "t5 1472",
        }
        narrow = tmp_path / "t5_narrow.safetensors"
        write_header_only(
            narrow, meta_shapes(meta_model("T5EncoderModel", {**BYT5_SMALL, "d_model": 64}))
        )
        with pytest.raises(ValueError, match="has width 64; hunyuanvideo1.5-720p-t2v takes"):
            resolve(SingleFiles.parse(str(path), [encoders[0], str(narrow)], [str(vae)]))


@functools.cache
def real_dit() -> torch.nn.Module:
    """The 8.3B DiT on the meta device (task and target size change no parameter)."""
    return meta_model("HunyuanVideo15Transformer3DModel", _real("transformer"))


def meta_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: torch.empty(s, device="meta") for k, s in meta_shapes(model).items()}


QWEN25_VL_7B = {  # the language model of Qwen2.5-VL 7B Instruct (its config.json)
    "vocab_size": 152064, "hidden_size": 3584, "intermediate_size": 18944,
    "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
    "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
    "bos_token_id": 151643, "eos_token_id": 151645,
}  # fmt: skip
BYT5_SMALL = {  # ByT5-small (Glyph-SDXL's glyph encoder), as the diffusers repos ship it
    "vocab_size": 1510, "d_model": 1472, "d_kv": 64, "d_ff": 3584, "num_layers": 12,
    "num_heads": 6, "feed_forward_proj": "gated-gelu",
}  # fmt: skip


SIGLIP_SO400M = {  # google/siglip-so400m-patch14-384's vision tower (sigclip_vision_patch14_384)
    "hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 27,
    "num_attention_heads": 16, "num_channels": 3, "image_size": 384, "patch_size": 14,
    "vision_use_head": True,
}  # fmt: skip


@functools.cache
def real_vae_header() -> dict[str, tuple[int, ...]]:
    state = meta_state(meta_model("AutoencoderKLHunyuanVideo15", _real("vae")))
    return {k: tuple(v.shape) for k, v in hunyuan15_vae_original(state).items()}


def real_encoder_files(root) -> list[str]:
    """ComfyUI's qwen_2.5_vl_7b (language model under `model.`, a vision tower under
    `visual.`) and byt5_small_glyphxl, header only."""
    qwen = {"model." + k: v for k, v in meta_shapes(real_qwen()).items()}
    qwen["visual.patch_embed.proj.weight"] = (1280, 3, 2, 14, 14)
    qwen["lm_head.weight"] = (152064, 3584)
    byt5 = meta_shapes(meta_model("T5EncoderModel", BYT5_SMALL))
    byt5.pop("encoder.embed_tokens.weight")
    paths = [
        root / "qwen_2.5_vl_7b_fp8_scaled.safetensors",
        root / "byt5_small_glyphxl.safetensors",
    ]
    write_header_only(paths[0], qwen)
    write_header_only(paths[1], byt5)
    return [str(p) for p in paths]


@functools.cache
def real_qwen() -> torch.nn.Module:
    return meta_model("Qwen2_5_VLTextModel", copy.deepcopy(QWEN25_VL_7B))  # it adds to rope_scaling


@pytest.mark.fast
def test_real_qwen25_vl_encoder_and_vae_from_their_headers(tmp_path):
    qwen_path = real_encoder_files(tmp_path)[0]
    found = detect(read_header(qwen_path))
    assert (found.role, found.family, found.prefix) == ("text_encoder", "qwen2.5-vl", "model.")
    assert {k: v for k, v in found.config.items() if k != "_class_name"} == QWEN25_VL_7B
    path = tmp_path / "hunyuanvideo15_vae_fp16.safetensors"
    write_header_only(path, real_vae_header())
    found = detect(read_header(path))
    assert (found.role, found.family, found.layout) == ("vae", "hunyuanvideo1.5", "original")
    assert found.config == {"latent_channels": 32, "base_width": 128}


FORMAT_NAMES = {"fp32": "f32", "bf16": "bf16", "fp8_scaled": "bf16", "Q8_0": "Q8_0"}
"""How `paradit models DIR` names each format written: the format of most of the weights,
which in the tiny fp8_scaled file are the bf16 ones outside the blocks (ByT5's 2048-wide
projection), in a real one its fp8 blocks (test_single_file_detect)."""
PRESET_FILES = {  # preset -> (DiT file name, formats besides fp32, key prefix)
    "tiny-hunyuanvideo1.5": ("hunyuanvideo1.5_480p_t2v_{}.safetensors", ("bf16",), ""),
    "tiny-hunyuanvideo1.5-i2v": (
        "hunyuanvideo1.5_720p_i2v_{}.safetensors",
        ("fp8_scaled", "Q8_0"),
        WAN_PREFIX,
    ),
}


def _write_dit(folder, pattern: str, original: dict, fmt: str, prefix: str):
    if fmt.startswith("Q"):
        path = folder / pattern.replace(".safetensors", ".gguf").format(fmt)
        return path, write_gguf(path, original, fmt)
    path = folder / pattern.format(fmt)
    return path, write_safetensors(path, original, fmt, prefix)


@pytest.mark.parametrize("preset", sorted(PRESET_FILES))
def test_tiny_files_load_as_the_preset_and_are_listed(tmp_path, preset):
    """A folder of ComfyUI's files (DiT, VAE, Qwen2.5-VL under ComfyUI's `model.`, ByT5 and
    for image-to-video SigLIP under `vision_model.`) makes the preset's pipeline: every
    component's weights byte for byte, its tokenizers, scheduler, guider and image processor
    (so its frames: measured equal, 0.0, at 32x32, 5 frames, 2 steps for text-to-video; not
    rerun here, as a step of the tiny model takes seconds on 2 cores). Each other format reads
    to exactly the values the file holds."""
    from safetensors.torch import save_file

    from paradit.backend.models.loading import ModelSource, load_pipeline

    tiny = build_preset(preset)
    original = hunyuan15_original(tiny.transformer.state_dict())
    pattern, formats, prefix = PRESET_FILES[preset]
    folder = tmp_path / "models"
    for sub in ("diffusion_models", "vae", "text_encoders", "clip_vision"):
        (folder / sub).mkdir(parents=True)
    for fmt in formats:
        path, held = _write_dit(folder / "diffusion_models", pattern, original, fmt, prefix)
        part, model = read_whole_dit(path)
        assert part.detection.variant == preset
        reference = hunyuan15_original(model.state_dict())
        assert set(reference) == set(held)
        for key, value in reference.items():  # exactly what the file holds
            assert torch.equal(value, held[key]), key
        with DitWeights(part) as weights:  # any rank's row block (split and swapped rows too)
            for name, value in model.state_dict().items():
                for start in range(0, value.shape[0] if value.dim() else 0, 3):
                    block = torch.empty_like(value[start : start + 3])
                    weights.read_rows(name, start, block)
                    assert torch.equal(block, value[start : start + 3]), (name, start)
    dit, _ = _write_dit(folder / "diffusion_models", pattern, original, "fp32", prefix)
    vae = folder / "vae" / "hunyuanvideo15_vae_fp16.safetensors"
    write_safetensors(vae, hunyuan15_vae_original(tiny.vae.state_dict()), "fp32")
    qwen = folder / "text_encoders" / "qwen_2.5_vl_7b.safetensors"
    save_file({"model." + k: v for k, v in tiny.text_encoder.state_dict().items()}, str(qwen))
    byt5 = folder / "text_encoders" / "byt5_small_glyphxl_fp16.safetensors"
    t5 = tiny.text_encoder_2.state_dict()
    save_file({k: v for k, v in t5.items() if k != "encoder.embed_tokens.weight"}, str(byt5))
    names = ["transformer", "vae", "text_encoder", "text_encoder_2"]
    image_encoders = []
    if preset.endswith("i2v"):
        siglip = folder / "clip_vision" / "sigclip_vision_patch14_384.safetensors"
        state = tiny.image_encoder.state_dict()
        save_file({"vision_model." + k: v for k, v in state.items()}, str(siglip))
        image_encoders, names = [str(siglip)], [*names, "image_encoder"]
    files = ModelSource.parse(str(dit), [str(qwen), str(byt5)], [str(vae)], image_encoders)
    pipe = load_pipeline(files)
    assert type(pipe) is type(tiny)
    assert_same_weights(pipe, tiny, names)
    for name in ("scheduler", "guider", "transformer"):
        ours, theirs = getattr(pipe, name).config, getattr(tiny, name).config
        assert plain_config(ours) == plain_config(theirs), name
    if image_encoders:
        assert pipe.feature_extractor.to_dict() == tiny.feature_extractor.to_dict()
        assert pipe.image_encoder.config.to_diff_dict() == tiny.image_encoder.config.to_diff_dict()
    for name in ("tokenizer", "tokenizer_2"):
        text = "a fox <|im_start|> 42"
        assert getattr(pipe, name)(text).input_ids == getattr(tiny, name)(text).input_ids
    listed = {e.path: (e.role, e.variant, e.format) for e in list_models(folder)}
    dits = {k: v for k, v in listed.items() if k.startswith("diffusion_models")}
    assert {v[:2] for v in dits.values()} == {("transformer", preset)}
    expected = sorted(FORMAT_NAMES[f] for f in ("fp32", *formats))
    assert sorted(v[2] for v in dits.values()) == expected
    assert listed["vae/hunyuanvideo15_vae_fp16.safetensors"][:2] == ("vae", "hunyuanvideo1.5 vae")
    assert listed["text_encoders/qwen_2.5_vl_7b.safetensors"][:2] == (
        "text_encoder", "qwen2.5-vl 32"
    )  # fmt: skip
