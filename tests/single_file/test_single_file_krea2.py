"""Krea 2's DiT from the single file ComfyUI users hold (`krea2_turbo_fp8_scaled`: the original
key names under `model.diffusion_model.`, each block's six modulation vectors stored as one
flat vector, the blocks' linears in fp8 with ComfyUI's scales).

- From a header alone (the real architecture on the meta device, written as a header-only
  file): Krea 2 Turbo's config read off the shapes equals the published one and every
  parameter's rows are found, the flat modulation read as six rows.
- The tiny preset's DiT saved in that layout (bf16, and fp8_scaled as ComfyUI writes it)
  loads to the weights the file holds, and `paradit models` names it.
- The Qwen3-VL-4B text encoder file (`qwen3vl_4b_fp8_scaled`: the language model in
  transformers' Qwen3-VL names, `model.language_model.`, or `model.` beside the vision tower;
  its layers' linears in fp8 with ComfyUI's scales) from its header: Qwen3-VL, not Qwen3 (whose
  names and shapes Qwen3-VL-4B's language model shares), at the published config; the three
  files resolve to the `random:krea2` settings.
- The tiny preset's three files (DiT fp8_scaled, encoder fp8_scaled, the Qwen-Image VAE)
  make a Krea 2 pipeline holding the weights the files hold, which makes the image the
  preset makes with them, byte for byte.

Cost: about 2 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import pytest
import torch
from comfy_files import (
    WAN_PREFIX,
    assert_files_make_the_presets_image,
    krea2_original,
    meta_model,
    read_whole_dit,
    write_header_only,
    write_safetensors,
)
from safetensors.torch import save_file

from paradit.backend.models.loading import ModelSource, load_pipeline
from paradit.backend.models.presets import build_preset
from paradit.backend.models.random_presets import random_dit_config, random_preset_spec
from paradit.backend.models.single_file.build import DitWeights
from paradit.backend.models.single_file.convert import dit_part, dit_row_map, unused_keys
from paradit.backend.models.single_file.detect import detect, recognise
from paradit.backend.models.single_file.header import read_header
from paradit.backend.models.single_file.listing import list_models, render
from paradit.backend.models.single_file.load import SingleFiles, resolve

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


QWEN3_VL_4B = {  # Qwen/Qwen3-VL-4B-Instruct's text_config (the shapes that matter)
    "vocab_size": 151936, "hidden_size": 2560, "intermediate_size": 9728,
    "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
    "head_dim": 128, "tie_word_embeddings": True,
}  # fmt: skip
LANGUAGE = "model.language_model."


def _qwen3_vl_header(prefix: str, tower: str = "") -> dict[str, tuple[int, ...]]:
    """Qwen3-VL-4B's language model (a few layers: the names and shapes) under `prefix`, and
    a vision tower's patch embedding under `tower` ("" for none)."""
    config = {**QWEN3_VL_4B, "num_hidden_layers": 2}
    shapes = {prefix + k: tuple(v.shape) for k, v in meta_model("Qwen3VLTextModel", config)
              .state_dict().items()}  # fmt: skip
    if tower:
        shapes[tower + "patch_embed.proj.weight"] = (1024, 3, 2, 16, 16)
    return shapes


@pytest.mark.fast
def test_qwen3_vl_4b_file_from_its_header(tmp_path):
    """Qwen3-VL's language model is told from a Qwen3 file by where it sits (transformers'
    `model.language_model.`, or `model.` beside a vision tower), at Qwen3-VL's rotary; the
    Krea 2 DiT with it and the Qwen-Image VAE resolve to the random:krea2 settings."""
    for prefix, tower in ((LANGUAGE, ""), ("model.", "visual."), ("model.", "model.visual.")):
        path = tmp_path / "qwen3vl_4b_fp8_scaled.safetensors"
        write_header_only(path, _qwen3_vl_header(prefix, tower))
        found = detect(read_header(path))
        assert (found.role, found.family, found.variant, found.prefix) == (
            "text_encoder", "qwen3-vl", "qwen3-vl 2560", prefix
        )  # fmt: skip
        assert found.config["_class_name"] == "Qwen3VLTextModel"
        assert {k: found.config[k] for k in QWEN3_VL_4B} == {**QWEN3_VL_4B, "num_hidden_layers": 2}
        assert found.config["rope_parameters"]["mrope_section"] == [24, 20, 20]
        assert found.config["rope_parameters"]["rope_theta"] == 5000000.0
    plain = tmp_path / "qwen_3_4b.safetensors"  # a Qwen3 file: `model.`, no vision tower
    write_header_only(plain, _qwen3_vl_header("model."))
    assert detect(read_header(plain)).family == "qwen3"
    dit = tmp_path / "krea2_turbo_fp8_scaled.safetensors"
    shapes = krea2_original(meta_model("Krea2Transformer2DModel", KREA2_TURBO).state_dict())
    write_header_only(dit, {WAN_PREFIX + k: tuple(v.shape) for k, v in shapes.items()})
    vae = tmp_path / "qwen_image_vae.safetensors"
    write_header_only(vae, _qwen_image_vae_shapes())
    encoder = tmp_path / "qwen3vl_4b_fp8_scaled.safetensors"
    resolved = resolve(SingleFiles((str(dit),), (str(encoder),), (str(vae),)))
    assert (resolved.preset.name, resolved.pipeline_class) == ("random:krea2", "Krea2Pipeline")
    with pytest.raises(ValueError, match=r"needs the Qwen-Image VAE"):
        resolve(SingleFiles((str(dit),), (str(encoder),)))


def _qwen_image_vae_shapes() -> dict[str, tuple[int, ...]]:
    """The Qwen-Image VAE's (random:krea2's) names and shapes, as diffusers holds it."""
    config = dict(random_preset_spec("random:krea2")["components"]["vae"]["config"])
    vae = meta_model(config.pop("_class_name"), config)
    return {k: tuple(v.shape) for k, v in vae.state_dict().items()}


def test_tiny_krea2_files_make_the_presets_image(tmp_path):
    """The tiny preset's DiT and Qwen3-VL encoder as ComfyUI's fp8_scaled files (the encoder
    under `model.language_model.`) and its Qwen-Image VAE in the Wan names: a Krea2Pipeline
    of the weights the files hold (the tiny encoder's own taps), the preset's image."""
    tiny = build_preset("tiny-krea2")
    tiny.set_progress_bar_config(disable=True)
    dit = tmp_path / "krea2_turbo_tiny_fp8_scaled.safetensors"
    held = write_safetensors(
        dit, krea2_original(tiny.transformer.state_dict()), "fp8_scaled", WAN_PREFIX
    )
    encoder = tmp_path / "qwen3vl_tiny_fp8_scaled.safetensors"
    text = write_safetensors(encoder, tiny.text_encoder.state_dict(), "fp8_scaled", LANGUAGE)
    vae = tmp_path / "qwen_image_vae_tiny.safetensors"

    save_file(tiny.vae.state_dict(), str(vae))
    pipe = load_pipeline(ModelSource.parse(str(dit), [str(encoder)], [str(vae)]))
    assert type(pipe).__name__ == "Krea2Pipeline"
    assert pipe.text_encoder_select_layers == tiny.text_encoder_select_layers
    state = tiny.transformer.state_dict()
    dit_state = {
        name: held[original].reshape(state[name].shape)
        for name, original in zip(state, krea2_original(state), strict=True)
    }
    tiny.text_encoder.load_state_dict(text)  # the encoder's fp8-rounded weights
    call = {"height": 48, "width": 64, "num_inference_steps": 2, "output_type": "np"}
    assert_files_make_the_presets_image(
        pipe, tiny, dit_state, "a fox", call, whole_text_encoder=True
    )
