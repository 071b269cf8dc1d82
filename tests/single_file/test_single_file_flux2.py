"""Flux.2 (dev and Klein) and Qwen-Image single files.

- From headers alone (the real architectures on the meta device, written as header-only
  files): FLUX.2-dev and FLUX.2-klein-4B/9B in Black Forest Labs' names (what ComfyUI's
  `diffusion_models` hold) are recognised, their configs read off the shapes equal the
  published ones and every parameter's rows are found (q/k/v a third of the fused rows each,
  the final modulation's halves swapped); Klein 4B resolves with its Qwen3 encoder and the
  Flux.2 VAE to the `random:flux.2-klein-4b` settings. Qwen-Image (diffusers' names under
  ComfyUI's prefix) is recognised with the published config and refuses a Qwen3 encoder
  (it runs with Qwen2.5-VL: test_single_file_qwen_image.py); FLUX.2-dev refuses Klein's Qwen3
  encoder (it runs with Mistral 3: test_single_file_flux2_dev.py).
- Klein's -base models by name (no weight differs): a file whose name has the word `base`
  (`flux-2-klein-base-4b`, `-base-9b-fp8`) is the undistilled variant and resolves to the
  `random:flux.2-klein-base-*` settings; a name that says neither is the step-distilled model,
  logged; one that says both is refused.
- FLUX.2 [klein] 9B KV by name (no weight differs from Klein 9B): a file whose name has the
  word `kv` (`flux-2-klein-9b-kv-fp8`, the KV template's) is the KV model and resolves to the
  `random:flux.2-klein-9b-kv` settings (`Flux2KleinKVPipeline`); kv at Klein 4B's width, or
  with base, is refused.
- The tiny Klein preset saved in those layouts (DiT in bf16) loads to the weights the files
  hold and makes the image the preset makes with them, byte for byte; its VAE in diffusers'
  and in the original (ldm) names loads to the same weights; the DiT named base loads as the
  undistilled pipeline (CFG parallel), named kv as the KV model's pipeline with the same weights.

Cost: about 3 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import copy
import functools

import numpy as np
import pytest
import torch
from comfy_files import (
    WAN_PREFIX,
    flux2_bfl,
    meta_model,
    meta_shapes,
    qwen3_comfy,
    vae_ldm,
    write_header_only,
    write_safetensors,
)
from safetensors.torch import save_file

from paradit.backend.models.families import family_of
from paradit.backend.models.families.flux2.detect import klein_kind
from paradit.backend.models.loading import ModelSource, align_cpu_weights, load_pipeline
from paradit.backend.models.presets import build_preset
from paradit.backend.models.random_presets import random_preset_spec
from paradit.backend.models.single_file.components import vae_model
from paradit.backend.models.single_file.convert import dit_row_map, unused_keys
from paradit.backend.models.single_file.detect import detect, recognise
from paradit.backend.models.single_file.header import read_header
from paradit.backend.models.single_file.load import SingleFiles, resolve


def _dit_config(preset: str) -> dict:
    return random_preset_spec(preset)["components"]["transformer"]["config"]


@functools.cache
def _meta_dit(preset: str):
    """The preset's DiT on the meta device (built once: a 32B one takes a while)."""
    class_name = _dit_config(preset)["_class_name"]
    return meta_model(class_name, _dit_config(preset))


VARIANTS = {  # preset -> the variant its BFL file is recognised as
    "random:flux.2-dev": "flux.2-dev",
    "random:flux.2-klein-4b": "flux.2-klein-4b",
    "random:flux.2-klein-9b": "flux.2-klein-9b",
}
QWEN3_4B = {
    "vocab_size": 151936, "hidden_size": 2560, "intermediate_size": 9728,
    "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
    "head_dim": 128, "tie_word_embeddings": True,
}  # fmt: skip
CALL = {"height": 32, "width": 32, "num_inference_steps": 2, "output_type": "np"}


def _header_file(path, shapes: dict) -> str:
    write_header_only(path, shapes)
    return str(path)


@pytest.mark.fast
@pytest.mark.parametrize("preset", list(VARIANTS))
def test_flux2_dits_from_their_bfl_headers(tmp_path, preset):
    config, model = _dit_config(preset), _meta_dit(preset)
    bfl = flux2_bfl(model.state_dict())
    path = tmp_path / "flux2.safetensors"
    write_header_only(path, {WAN_PREFIX + k: tuple(v.shape) for k, v in bfl.items()})
    header = read_header(path)
    found = detect(header)
    assert (found.role, found.family, found.variant, found.layout) == (
        "transformer", "flux2", VARIANTS[preset], "bfl"
    )  # fmt: skip
    assert found.config == config  # every entry: read off the shapes or published
    row_map = dit_row_map(header, found)
    assert set(row_map) == set(model.state_dict()) and not unused_keys(header, found, row_map)
    for name, param in model.state_dict().items():
        assert sum(s.rows for s in row_map[name]) == param.shape[0], name
    width = config["num_attention_heads"] * config["attention_head_dim"]
    assert row_map["transformer_blocks.1.attn.add_v_proj.weight"][0].start == 2 * width
    final = row_map["norm_out.linear.weight"]  # BFL (shift, scale) -> diffusers (scale, shift)
    assert [(s.start, s.rows) for s in final] == [(width, width), (0, width)]


@pytest.mark.fast
def test_klein_resolves_dev_and_qwen_image_refuse_qwen3(tmp_path):
    klein = _meta_dit("random:flux.2-klein-4b")
    dit = _header_file(
        tmp_path / "flux-2-klein-4b.safetensors",
        {WAN_PREFIX + k: tuple(v.shape) for k, v in flux2_bfl(klein.state_dict()).items()},
    )
    qwen3 = meta_shapes(meta_model("Qwen3ForCausalLM", QWEN3_4B))
    qwen3.pop("lm_head.weight")
    encoder = _header_file(tmp_path / "qwen_3_4b.safetensors", qwen3)
    vae_config = random_preset_spec("random:flux.2-klein-4b")["components"]["vae"]["config"]
    vae = _header_file(
        tmp_path / "flux2-vae.safetensors",
        meta_shapes(meta_model("AutoencoderKLFlux2", vae_config)),
    )
    assert detect(read_header(vae)).variant == "flux.2 vae"
    resolved = resolve(SingleFiles((dit,), (encoder,), (vae,)))
    assert (resolved.preset.name, resolved.pipeline_class) == (
        "random:flux.2-klein-4b", "Flux2KleinPipeline"
    )  # fmt: skip
    dev = _meta_dit("random:flux.2-dev")
    dev_file = _header_file(
        tmp_path / "flux2_dev_fp8mixed.safetensors",
        {WAN_PREFIX + k: tuple(v.shape) for k, v in flux2_bfl(dev.state_dict()).items()},
    )
    with pytest.raises(ValueError, match="qwen_3_4b.safetensors is a qwen3 encoder; flux.2-dev"):
        resolve(SingleFiles((dev_file,), (encoder,), (vae,)))
    qwen_image = _meta_dit("random:qwen-image")
    shapes = {WAN_PREFIX + k: tuple(v.shape) for k, v in qwen_image.state_dict().items()}
    qwen_file = _header_file(tmp_path / "qwen_image_bf16.safetensors", shapes)
    found = detect(read_header(qwen_file))
    assert (found.family, found.variant, found.prefix) == ("qwen-image", "qwen-image", WAN_PREFIX)
    assert found.config == _dit_config("random:qwen-image")
    with pytest.raises(  # runnable now (test_single_file_qwen_image.py): its encoder is checked
        ValueError, match="qwen_3_4b.safetensors is a qwen3 encoder; qwen-image needs qwen2.5-vl"
    ):
        resolve(SingleFiles((qwen_file,), (encoder,), (vae,)))


KLEIN_NAMES = {  # a Klein DiT's file name -> (the preset whose width it has, its variant)
    "flux-2-klein-base-4b.safetensors": ("4b", "flux.2-klein-base-4b"),  # BFL's and ComfyUI's
    "flux-2-klein-base-9b-fp8.safetensors": ("9b", "flux.2-klein-base-9b"),  # the 9B template's
    "Klein_4B_Base_Q8.safetensors": ("4b", "flux.2-klein-base-4b"),  # any case, any separator
    "flux-2-klein-4b.safetensors": ("4b", "flux.2-klein-4b"),  # says neither: distilled
    "flux-2-klein-9b-fp8.safetensors": ("9b", "flux.2-klein-9b"),
    "klein_4b_distilled.safetensors": ("4b", "flux.2-klein-4b"),
    "database-klein-4b.safetensors": ("4b", "flux.2-klein-4b"),  # a word, not a part of one
}


@pytest.mark.fast
def test_a_klein_files_name_says_base_or_distilled(tmp_path, caplog):
    """No weight tells FLUX.2-klein-base from the distilled model: the file's name does (a
    word `base`); a name that says neither runs distilled, and says so (log and reasons); a
    name that says both is refused; a base file resolves to the -base preset's settings."""
    assert [klein_kind(n) for n in ("a-base.gguf", "a_distilled", "base-distilled", "a")] == [
        "base", "distilled", "both", ""
    ]  # fmt: skip
    shapes = {}
    for size in ("4b", "9b"):
        dit = _meta_dit(f"random:flux.2-klein-{size}")
        shapes[size] = {
            WAN_PREFIX + k: tuple(v.shape) for k, v in flux2_bfl(dit.state_dict()).items()
        }
    for name, (size, variant) in KLEIN_NAMES.items():
        caplog.clear()
        with caplog.at_level("INFO", logger="paradit.backend.models.families.flux2.detect"):
            found = detect(read_header(_header_file(tmp_path / name, shapes[size])))
        assert (found.role, found.variant) == ("transformer", variant), name
        said = klein_kind(name)
        assert ("by default" in found.reasons[-1]) == (said == ""), found.reasons
        assert ("says neither" in caplog.text) == (said == ""), (name, caplog.text)
    both = detect(
        read_header(_header_file(tmp_path / "klein-base-distilled.safetensors", shapes["4b"]))
    )
    assert both.role == "unknown" and "says both base and distilled" in both.reasons[0]
    qwen3 = meta_shapes(meta_model("Qwen3ForCausalLM", QWEN3_4B))
    qwen3.pop("lm_head.weight")
    encoder = _header_file(tmp_path / "qwen_3_4b.safetensors", qwen3)
    vae_config = random_preset_spec("random:flux.2-klein-4b")["components"]["vae"]["config"]
    vae = _header_file(
        tmp_path / "flux2-vae.safetensors",
        meta_shapes(meta_model("AutoencoderKLFlux2", vae_config)),
    )
    dit = str(tmp_path / "flux-2-klein-base-4b.safetensors")
    resolved = resolve(SingleFiles((dit,), (encoder,), (vae,)))
    assert resolved.preset.name == "random:flux.2-klein-base-4b"
    assert random_preset_spec(resolved.preset.name)["pipeline_config"] == {"is_distilled": False}


@pytest.mark.fast
def test_a_klein_file_named_kv_is_the_kv_model(tmp_path):
    """The KV template's file (`flux-2-klein-9b-kv-fp8`) runs as FLUX.2-klein-9b-kv, on its
    own pipeline; a 4B-wide file named kv (there is no 4B KV model) and one named base and kv
    are refused."""
    assert [klein_kind(n) for n in ("a-9b-kv.gguf", "kv_base", "kvx", "Klein_KV")] == [
        "kv", "both", "", "kv"
    ]  # fmt: skip
    shapes = {}
    for size in ("4b", "9b"):
        dit = _meta_dit(f"random:flux.2-klein-{size}")
        shapes[size] = {
            WAN_PREFIX + k: tuple(v.shape) for k, v in flux2_bfl(dit.state_dict()).items()
        }
    kv = _header_file(tmp_path / "flux-2-klein-9b-kv-fp8.safetensors", shapes["9b"])
    found = detect(read_header(kv))
    assert (found.role, found.variant) == ("transformer", "flux.2-klein-9b-kv")
    assert "says kv" in found.reasons[-1]
    small = detect(read_header(_header_file(tmp_path / "klein-4b-kv.safetensors", shapes["4b"])))
    assert small.role == "unknown" and "the KV model is FLUX.2-klein-9b-kv" in small.reasons[0]
    both = detect(read_header(_header_file(tmp_path / "klein-base-kv.safetensors", shapes["9b"])))
    assert both.role == "unknown" and "says both base" in both.reasons[0]
    qwen3_8b = random_preset_spec("random:flux.2-klein-9b")["components"]["text_encoder"]
    qwen3 = meta_shapes(meta_model("Qwen3ForCausalLM", qwen3_8b["config"]))
    qwen3.pop("lm_head.weight")
    encoder = _header_file(tmp_path / "qwen_3_8b_fp8mixed.safetensors", qwen3)
    vae_config = random_preset_spec("random:flux.2-klein-9b")["components"]["vae"]["config"]
    vae = _header_file(
        tmp_path / "flux2-vae.safetensors",
        meta_shapes(meta_model("AutoencoderKLFlux2", vae_config)),
    )
    resolved = resolve(SingleFiles((kv,), (encoder,), (vae,)))
    assert resolved.preset.name == "random:flux.2-klein-9b-kv"
    assert resolved.pipeline_class == "Flux2KleinKVPipeline"
    spec = random_preset_spec("random:flux.2-klein-9b-kv")
    assert spec["pipeline"] == "Flux2KleinKVPipeline"
    assert spec["components"] == random_preset_spec("random:flux.2-klein-9b")["components"]


def test_tiny_klein_files_make_the_image_of_their_weights(tmp_path):
    tiny = build_preset("tiny-flux2-klein")
    tiny.set_progress_bar_config(disable=True)
    dit = tmp_path / "flux-2-klein-tiny-bf16.safetensors"
    bfl = flux2_bfl(tiny.transformer.state_dict())
    held = write_safetensors(dit, bfl, "bf16", WAN_PREFIX)
    rounded = {k: v.to(torch.bfloat16).float() for k, v in tiny.transformer.state_dict().items()}
    assert all(torch.equal(held[k], flux2_bfl(rounded)[k]) for k in held)
    encoder, vae = tmp_path / "qwen_3_tiny.safetensors", tmp_path / "flux2-vae-tiny.safetensors"
    save_file(qwen3_comfy(tiny.text_encoder.model.state_dict()), str(encoder))
    save_file({k: v.contiguous() for k, v in tiny.vae.state_dict().items()}, str(vae))
    pipe = load_pipeline(ModelSource.parse(str(dit), [str(encoder)], [str(vae)]))
    assert type(pipe).__name__ == "Flux2KleinPipeline" and pipe.config.is_distilled
    ldm = tmp_path / "flux2-vae-tiny-ldm.safetensors"  # the original names, as Flux's `ae`
    save_file(vae_ldm(tiny.vae.state_dict()), str(ldm))
    from_ldm = vae_model(recognise(str(ldm)), "tiny-flux2-klein", torch.float32)
    assert all(torch.equal(from_ldm.state_dict()[k], v) for k, v in tiny.vae.state_dict().items())
    reference = copy.copy(tiny)
    module = copy.deepcopy(tiny.transformer)
    module.load_state_dict(rounded, strict=True)
    reference.register_modules(transformer=module)
    for component in ("transformer", "text_encoder", "vae"):
        ours = getattr(pipe, component).state_dict()
        theirs = getattr(reference, component).state_dict()
        assert set(ours) == set(theirs), component
        assert all(torch.equal(ours[k], theirs[k]) for k in theirs), component
    images = []
    for each in (pipe, reference):
        align_cpu_weights(each)
        out = each(prompt="a single file", generator=torch.Generator().manual_seed(5), **CALL)
        images.append(np.asarray(out.images[0]))
    assert np.array_equal(*images) and images[0].std() > 0
    base = tmp_path / "flux-2-klein-base-tiny-bf16.safetensors"  # the same file, named base
    base.hardlink_to(dit)
    undistilled = load_pipeline(ModelSource.parse(str(base), [str(encoder)], [str(vae)]))
    assert not undistilled.config.is_distilled and family_of(undistilled).supports_cfg(undistilled)
    kv = tmp_path / "flux-2-klein-tiny-kv-bf16.safetensors"  # the same file, named kv
    kv.hardlink_to(dit)
    cached = load_pipeline(ModelSource.parse(str(kv), [str(encoder)], [str(vae)]))
    assert type(cached).__name__ == "Flux2KleinKVPipeline"
    assert family_of(cached).name == "flux2-klein-kv" and not family_of(cached).supports_cfg(cached)
    assert all(torch.equal(cached.transformer.state_dict()[k], v) for k, v in rounded.items())
