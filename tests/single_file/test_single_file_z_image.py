"""Z-Image from the single files ComfyUI users hold: the DiT in its original key names
(`z_image_turbo_bf16`: fused `attention.qkv`, under `model.diffusion_model.`), the Qwen3 text
encoder (`qwen_3_4b`: Hugging Face's names under `model.`) and Flux's VAE (`ae`, ldm names).

- From headers alone (the real architectures on the meta device, written as header-only
  files): Z-Image-Turbo's config read off the shapes equals the published one, every
  parameter's rows are found, Qwen3-4B is recognised, and the three files resolve to the
  `random:z-image-turbo` settings; a text encoder of the wrong width and a missing VAE are
  refused naming the file and what was expected.
- The tiny preset saved in those layouts (the DiT in bf16, as the real file) loads to the
  weights the files hold and makes the image the preset makes with them, byte for byte.

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import copy
import re

import numpy as np
import pytest
import torch
from comfy_files import (
    WAN_PREFIX,
    meta_model,
    meta_shapes,
    qwen3_comfy,
    vae_ldm,
    write_header_only,
    write_safetensors,
    z_image_original,
)
from safetensors.torch import save_file

from paradit.backend.models.loading import ModelSource, align_cpu_weights, load_pipeline
from paradit.backend.models.presets import build_preset
from paradit.backend.models.random_presets import random_preset_spec
from paradit.backend.models.single_file.convert import dit_row_map, unused_keys
from paradit.backend.models.single_file.detect import detect
from paradit.backend.models.single_file.header import read_header
from paradit.backend.models.single_file.load import SingleFiles, resolve

SPEC = random_preset_spec("random:z-image-turbo")["components"]
Z_IMAGE_TURBO = SPEC["transformer"]["config"]
QWEN3_4B = {  # Qwen/Qwen3-4B's config.json (the shapes that matter)
    "vocab_size": 151936, "hidden_size": 2560, "intermediate_size": 9728,
    "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
    "head_dim": 128, "tie_word_embeddings": True,
}  # fmt: skip
CALL = {"height": 32, "width": 32, "num_inference_steps": 2, "output_type": "np"}


def _qwen3_header(config: dict) -> dict[str, tuple[int, ...]]:
    shapes = meta_shapes(meta_model("Qwen3ForCausalLM", config))
    shapes.pop("lm_head.weight", None)  # tied: ComfyUI's file holds the embedding once
    return shapes


@pytest.fixture(scope="module")
def headers(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("z-image-headers")
    dit = meta_model("ZImageTransformer2DModel", Z_IMAGE_TURBO)
    vae = meta_model("AutoencoderKL", SPEC["vae"]["config"])
    shapes = {
        "z_image_turbo_bf16": {
            WAN_PREFIX + k: tuple(v.shape) for k, v in z_image_original(dit.state_dict()).items()
        },
        "qwen_3_4b": _qwen3_header(QWEN3_4B),
        "qwen_3_8b": _qwen3_header({**QWEN3_4B, "hidden_size": 4096, "intermediate_size": 12288}),
        "ae": {k: tuple(v.shape) for k, v in vae_ldm(vae.state_dict()).items()},
    }
    files = {}
    for name, found in shapes.items():
        files[name] = root / f"{name}.safetensors"
        write_header_only(files[name], found)
    return {"files": files, "dit": dit}


@pytest.mark.fast
def test_z_image_turbo_qwen3_and_ae_from_their_headers(headers):
    files, dit = headers["files"], headers["dit"]
    header = read_header(files["z_image_turbo_bf16"])
    found = detect(header)
    assert (found.role, found.family, found.variant, found.layout, found.prefix) == (
        "transformer", "z-image", "z-image-turbo", "comfy", WAN_PREFIX
    )  # fmt: skip
    assert found.config == Z_IMAGE_TURBO  # every entry: read off the shapes or published
    row_map = dit_row_map(header, found)
    assert set(row_map) == set(dit.state_dict()) and not unused_keys(header, found, row_map)
    for name, param in dit.state_dict().items():  # q, k and v: a third of qkv's rows each
        assert sum(s.rows for s in row_map[name]) == (param.shape[0] if param.dim() else 1)
    assert row_map["layers.3.attention.to_k.weight"][0].start == 3840
    encoder = detect(read_header(files["qwen_3_4b"]))
    assert (encoder.role, encoder.family, encoder.variant, encoder.prefix) == (
        "text_encoder", "qwen3", "qwen3 2560", "model."
    )  # fmt: skip
    assert {k: encoder.config[k] for k in QWEN3_4B} == QWEN3_4B
    resolved = resolve(
        SingleFiles(
            (str(files["z_image_turbo_bf16"]),), (str(files["qwen_3_4b"]),), (str(files["ae"]),)
        )
    )
    assert (resolved.preset.name, resolved.pipeline_class) == (
        "random:z-image-turbo", "ZImagePipeline"
    )  # fmt: skip
    dit_file = (str(files["z_image_turbo_bf16"]),)
    with pytest.raises(ValueError, match="qwen_3_8b.safetensors has width 4096; z-image-turbo "
                       "takes text embeddings of width 2560"):  # fmt: skip
        resolve(SingleFiles(dit_file, (str(files["qwen_3_8b"]),), (str(files["ae"]),)))
    with pytest.raises(ValueError, match=r"needs the Flux VAE \(ae\): give --vae FILE"):
        resolve(SingleFiles(dit_file, (str(files["qwen_3_4b"]),)))


def test_tiny_z_image_files_make_the_image_of_their_weights(tmp_path):
    tiny = build_preset("tiny-z-image")
    tiny.set_progress_bar_config(disable=True)
    dit = tmp_path / "z_image_tiny_bf16.safetensors"
    held = write_safetensors(
        dit, z_image_original(tiny.transformer.state_dict()), "bf16", WAN_PREFIX
    )
    encoder, ae = tmp_path / "qwen_3_tiny.safetensors", tmp_path / "ae_tiny.safetensors"
    save_file(qwen3_comfy(tiny.text_encoder.state_dict()), str(encoder))
    save_file(vae_ldm(tiny.vae.state_dict()), str(ae))
    pipe = load_pipeline(ModelSource.parse(str(dit), [str(encoder)], [str(ae)]))
    assert type(pipe).__name__ == "ZImagePipeline"
    reference = copy.copy(tiny)
    module = copy.deepcopy(tiny.transformer)
    module.load_state_dict(_diffusers(held), strict=True)
    reference.register_modules(transformer=module)
    for component in ("transformer", "text_encoder", "vae"):
        ours, theirs = (
            getattr(pipe, component).state_dict(),
            getattr(reference, component).state_dict(),
        )
        assert set(ours) == set(theirs), component
        assert all(torch.equal(ours[k], theirs[k]) for k in theirs), component
    images = []
    for each in (pipe, reference):
        align_cpu_weights(each)
        out = each("a single file", generator=torch.Generator().manual_seed(5), **CALL)
        images.append(np.asarray(out.images[0]))
    assert np.array_equal(*images) and images[0].std() > 0


def _diffusers(original: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The held weights (original names, bf16-rounded) in diffusers' names, split by hand."""
    out = {}
    for name, value in original.items():
        if name.endswith(".attention.qkv.weight"):
            base = name.removesuffix(".qkv.weight")
            for x, part in zip("qkv", value.chunk(3), strict=True):
                out[f"{base}.to_{x}.weight"] = part
            continue
        name = re.sub(r"^(x_embedder|final_layer)\.", r"all_\1.2-1.", name)
        for old, new in (
            (".attention.out.", ".attention.to_out.0."),
            (".attention.q_norm.", ".attention.norm_q."),
            (".attention.k_norm.", ".attention.norm_k."),
        ):
            name = name.replace(old, new)
        out[name] = value
    return out


@pytest.mark.fast
def test_qwen3_file_takes_the_tokenizer_of_the_comfyui_install_it_sits_in(tmp_path):
    """ComfyUI's `qwen25_tokenizer` folder (here the tiny preset's tokenizer saved there) for a
    Qwen3 file under `ComfyUI/models/text_encoders/`, with Qwen3's chat template."""
    from paradit.backend.models.seeded import QWEN3_CHAT_TEMPLATE, qwen3_chat_tokenizer
    from paradit.backend.models.single_file.components import tokenizer as tokenizer_of
    from paradit.backend.models.single_file.detect import Part

    comfy = tmp_path / "ComfyUI"
    ours = qwen3_chat_tokenizer()
    ours.chat_template = None  # ComfyUI's folder is Qwen2.5's: not Qwen3's template
    ours.save_pretrained(str(comfy / "comfy" / "text_encoders" / "qwen25_tokenizer"))
    path = comfy / "models" / "text_encoders" / "qwen_3_4b.safetensors"
    path.parent.mkdir(parents=True)
    write_header_only(path, _qwen3_header({**QWEN3_4B, "num_hidden_layers": 1}))
    header = read_header(path)
    found = tokenizer_of(Part(header, detect(header)), "random:z-image-turbo", "tokenizer")
    # transformers 5 names the fast Qwen2 tokenizer Qwen2Tokenizer
    assert type(found).__name__.startswith("Qwen2Tokenizer") and found.is_fast
    assert found.chat_template == QWEN3_CHAT_TEMPLATE
    text = "Ünïcødé 🦊 狐狸"
    assert found(text).input_ids == qwen3_chat_tokenizer()(text).input_ids
    chat = [{"role": "user", "content": text}]
    assert found.apply_chat_template(chat, tokenize=False, add_generation_prompt=True) == (
        f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"
    )
