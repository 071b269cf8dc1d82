"""Qwen-Image 2.1 from the single files ComfyUI users hold: the DiT (`qwen_image_2.1_int8_convrot`,
and its turbo: diffusers' names under `model.diffusion_model.`, each block's SwiGLU gate and up
projections fused, gate rows first, the blocks' linears int8 ConvRot), the VAE
(`qwen_image_2.1_vae_bf16`: as ComfyUI's `comfy/ldm/wan/vae2_2.py` `WanVAE(temporal_kernel=1)`
holds it, Comfy-Org/ComfyUI 32671a67: the Wan 2.2 VAE's original names, each causal
convolution 3D of time 1, the resamples' and the attention's 2D) and the
Qwen3-VL-8B encoder (`qwen3vl_8b_int8_convrot`: the language model under `model.` beside the
vision tower under `visual.`).

- From headers alone (the real architectures on the meta device, written as header-only
  files): Qwen-Image 2.1's config read off the shapes equals the published one and every
  parameter's rows are found (the fused gate_up split in halves); the VAE and Qwen3-VL-8B
  (with its vision tower's config: 27 blocks, deepstack) are recognised (the DiT and VAE in
  diffusers' own names too), and the three files
  resolve to the `random:qwen-image2.1` settings; an encoder file without the vision tower
  and a missing VAE are refused naming what is needed.
- The real VAE written as ComfyUI's file: the convolutions ds4-dfm-rs counted on the released
  file (62 of kernel 1x3x3, 14 of 1x1x1, each 3D of time 1; its decoder 134 tensors), found
  as Qwen-Image 2.1's and not as a Wan video VAE, every key renamed and squeezed onto the
  diffusers parameter of its shape; a longer temporal kernel is refused.
- The tiny preset's three files in those layouts (the DiT int8_convrot at the tiny widths'
  groups of 64) make a QwenImage21Pipeline holding the weights the files hold (the DiT's as
  the row reader reads them, equal to the int8 definition's within float32's rounding), which
  makes the image the preset makes with them, byte for byte, its VAE encoding and decoding as
  the preset's does.

Cost: about 2 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from comfy_files import (
    WAN_PREFIX,
    meta_model,
    qwen_image21_vae_comfy,
    read_whole_dit,
    write_header_only,
)
from quant_files import write_int8
from safetensors.torch import save_file

from paradit.backend.models.loading import ModelSource, align_cpu_weights, load_pipeline
from paradit.backend.models.presets import build_preset
from paradit.backend.models.random_presets import random_dit_config, random_preset_spec
from paradit.backend.models.single_file.convert import dit_row_map, unused_keys
from paradit.backend.models.single_file.detect import detect
from paradit.backend.models.single_file.header import read_header
from paradit.backend.models.single_file.load import SingleFiles, resolve

QWEN_IMAGE21 = random_dit_config("random:qwen-image2.1", "transformer")
QWEN3_VL_8B_TEXT = {  # Qwen/Qwen3-VL-8B-Instruct's text_config (the shapes that matter)
    "vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 12288,
    "num_hidden_layers": 2, "num_attention_heads": 32, "num_key_value_heads": 8,
    "head_dim": 128,
}  # fmt: skip
QWEN3_VL_8B_VISION = {  # its vision_config
    "depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "num_heads": 16,
    "in_channels": 3, "patch_size": 16, "temporal_patch_size": 2, "spatial_merge_size": 2,
    "out_hidden_size": 4096, "num_position_embeddings": 2304,
    "deepstack_visual_indexes": [8, 16, 24],
}  # fmt: skip


def comfy_dit(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """diffusers' QwenImage21Transformer2DModel -> ComfyUI's file: each block's gate and up
    projections fused into `img_mlp.gate_up`, gate rows first."""
    out = {}
    for name, value in state.items():
        if name.endswith("img_mlp.gate_layer.weight"):
            up = state[name.replace("gate_layer", "proj")]
            out[name.replace("gate_layer", "gate_up")] = torch.cat([value, up])
        elif not name.endswith("img_mlp.proj.weight"):
            out[name] = value
    return out


def split_dit(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """ComfyUI's names -> diffusers', split by hand."""
    out = {}
    for name, value in state.items():
        if name.endswith("img_mlp.gate_up.weight"):
            gate, up = value.chunk(2)
            out[name.replace("gate_up", "gate_layer")] = gate
            out[name.replace("gate_up", "proj")] = up
        else:
            out[name] = value
    return out


def comfy_encoder(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Qwen3-VL as ComfyUI's files hold Qwen-VL: the language model under `model.`, the tower
    under `visual.`, no `lm_head` (tied)."""
    return {
        k.replace("model.language_model.", "model.").replace("model.visual.", "visual."): v
        for k, v in state.items()
        if k != "lm_head.weight"
    }


def _shapes(state) -> dict[str, tuple[int, ...]]:
    return {k: tuple(v.shape) for k, v in state.items()}


@pytest.fixture(scope="module")
def headers(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("qwen-image21-headers")
    dit = meta_model("QwenImage21Transformer2DModel", QWEN_IMAGE21)
    vae_config = dict(random_preset_spec("random:qwen-image2.1")["components"]["vae"]["config"])
    vae = meta_model(vae_config.pop("_class_name"), vae_config)
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    with torch.device("meta"):
        config = Qwen3VLConfig(text_config=QWEN3_VL_8B_TEXT, vision_config=QWEN3_VL_8B_VISION)
        encoder = Qwen3VLForConditionalGeneration(config).state_dict()
    shapes = {
        "qwen_image_2.1_int8_convrot": {
            WAN_PREFIX + k: s for k, s in _shapes(comfy_dit(dit.state_dict())).items()
        },
        "qwen_image_2.1_vae_bf16": _shapes(qwen_image21_vae_comfy(vae.state_dict())),
        "qwen_image_2.1_vae_diffusers": _shapes(vae.state_dict()),
        "qwen_image_2.1_diffusers": _shapes(dit.state_dict()),
        "qwen3vl_8b_int8_convrot": _shapes(comfy_encoder(encoder)),
        "qwen3vl_8b_text_only": {
            k: s for k, s in _shapes(encoder).items() if not k.startswith("model.visual.")
        },
    }
    files = {}
    for name, found in shapes.items():
        files[name] = str(root / f"{name}.safetensors")
        write_header_only(root / f"{name}.safetensors", found)
    return {"files": files, "dit": dit, "vae": vae}


@pytest.mark.fast
def test_qwen_image21_files_from_their_headers(headers):
    files, dit = headers["files"], headers["dit"]
    header = read_header(files["qwen_image_2.1_int8_convrot"])
    found = detect(header)
    assert (found.role, found.family, found.variant, found.layout, found.prefix) == (
        "transformer", "qwen-image2.1", "qwen-image2.1", "comfy", WAN_PREFIX
    )  # fmt: skip
    assert found.config == QWEN_IMAGE21  # every entry: read off the shapes or published
    row_map = dit_row_map(header, found)
    assert set(row_map) == set(dit.state_dict()) and not unused_keys(header, found, row_map)
    gate, up = (row_map[f"transformer_blocks.5.img_mlp.{n}.weight"] for n in ("gate_layer", "proj"))
    fused = WAN_PREFIX + "transformer_blocks.5.img_mlp.gate_up.weight"
    assert [(s.key, s.start, s.rows) for s in gate + up] == [
        (fused, 0, 12288),
        (fused, 12288, 12288),
    ]
    vae = detect(read_header(files["qwen_image_2.1_vae_bf16"]))
    assert (vae.role, vae.family, vae.layout, vae.config["z_dim"]) == (
        "vae", "qwen-image2.1", "wan", 64
    )  # fmt: skip
    for name, role in (("qwen_image_2.1_vae_diffusers", "vae"), ("qwen_image_2.1_diffusers",
                                                                   "transformer")):  # fmt: skip
        other = detect(read_header(files[name]))  # diffusers' own names: as they are
        assert (other.role, other.family, other.layout) == (role, "qwen-image2.1", "diffusers")
    assert detect(read_header(files["qwen_image_2.1_diffusers"])).config == QWEN_IMAGE21
    encoder = detect(read_header(files["qwen3vl_8b_int8_convrot"]))
    assert (encoder.family, encoder.variant, encoder.prefix) == (
        "qwen3-vl",
        "qwen3-vl 4096",
        "model.",
    )
    assert {k: encoder.config[k] for k in QWEN3_VL_8B_TEXT} == QWEN3_VL_8B_TEXT
    from paradit.backend.models.encoders.qwen3_vl import qwen3_vl_vision

    vision, _ = qwen3_vl_vision(read_header(files["qwen3vl_8b_int8_convrot"]))
    assert vision == QWEN3_VL_8B_VISION
    dit_file = (files["qwen_image_2.1_int8_convrot"],)
    given = SingleFiles(dit_file, (files["qwen3vl_8b_int8_convrot"],),
                        (files["qwen_image_2.1_vae_bf16"],))  # fmt: skip
    resolved = resolve(given)
    assert (resolved.preset.name, resolved.pipeline_class) == (
        "random:qwen-image2.1", "QwenImage21Pipeline"
    )  # fmt: skip
    with pytest.raises(ValueError, match=r"needs the Qwen-Image 2\.1 VAE"):
        resolve(SingleFiles(dit_file, (files["qwen3vl_8b_int8_convrot"],)))
    text_only = SingleFiles(dit_file, (files["qwen3vl_8b_text_only"],),
                            (files["qwen_image_2.1_vae_bf16"],))  # fmt: skip
    with pytest.raises(ValueError, match="takes Qwen3-VL whole, with its vision tower"):
        resolve(text_only)


@pytest.mark.fast
def test_qwen_image21_vae_file_in_comfyuis_layout(headers):
    """ComfyUI's qwen_image_2.1_vae_bf16 at the real shapes: the convolutions counted on the
    released file, recognised as Qwen-Image 2.1's (not a Wan video VAE), read onto diffusers'
    parameters; a temporal kernel of 3 refused."""
    from paradit.backend.models.families.qwen_image21.single_file import vae_key_names
    from paradit.backend.models.families.wan.single_file import detect_vae as wan_vae

    header = read_header(headers["files"]["qwen_image_2.1_vae_bf16"])
    shapes = {k: tuple(v.shape) for k, v in header.tensors.items()}
    kernels = [s[2:] for k, s in shapes.items() if k.endswith(".weight") and len(s) == 5]
    assert (kernels.count((1, 3, 3)), kernels.count((1, 1, 1)), len(kernels)) == (62, 14, 76)
    flat = sorted(k for k, s in shapes.items() if k.endswith(".weight") and len(s) == 4)
    assert len(flat) == 12 and all(".resample.1." in k or ".middle.1." in k for k in flat)
    assert shapes["encoder.conv1.weight"] == (96, 4, 1, 3, 3)
    assert shapes["decoder.upsamples.0.upsamples.3.time_conv.weight"] == (2304, 1152, 1, 1, 1)
    assert (shapes["decoder.head.0.gamma"], shapes["decoder.middle.1.norm.gamma"]) == (
        (144, 1, 1, 1), (1152, 1, 1)
    )  # fmt: skip
    decoder = [k for k in shapes if k.startswith(("decoder.", "conv2."))]
    assert len(decoder) == 134  # ds4-dfm-rs's decode-only artifact of the file
    found = detect(header)
    assert (found.family, found.layout, found.config) == (
        "qwen-image2.1", "wan", {"base_dim": 96, "z_dim": 64, "in_channels": 4}
    )  # fmt: skip
    assert wan_vae(header) is None
    state = {k: torch.empty(s, device="meta") for k, s in shapes.items()}
    read = {k: tuple(v.shape) for k, v in vae_key_names(state, found).items()}
    assert read == _shapes(headers["vae"].state_dict())
    state["encoder.conv1.weight"] = torch.empty(96, 4, 3, 3, 3, device="meta")
    with pytest.raises(ValueError, match="temporal kernel of 1"):
        vae_key_names(state, found)


def test_tiny_qwen_image21_files_make_the_presets_image(tmp_path):
    """The tiny preset's DiT as an int8_convrot file, its VAE in the original names and its
    Qwen3-VL in ComfyUI's: a QwenImage21Pipeline of the weights the files hold, its image."""
    tiny = build_preset("tiny-qwen-image2.1")
    tiny.set_progress_bar_config(disable=True)
    dit = tmp_path / "qwen_image_2.1_tiny_int8_convrot.safetensors"

    def quantizable(name: str, tensor: torch.Tensor) -> bool:
        return tensor.dim() == 2 and name.startswith("transformer_blocks.")

    held = write_int8(dit, comfy_dit(tiny.transformer.state_dict()), quantizable, WAN_PREFIX, 64)
    vae = tmp_path / "qwen_image_2.1_vae_tiny.safetensors"
    save_file(qwen_image21_vae_comfy(tiny.vae.state_dict()), str(vae))
    encoder = tmp_path / "qwen3vl_tiny.safetensors"
    save_file(comfy_encoder(tiny.text_encoder.state_dict()), str(encoder))
    pipe = load_pipeline(ModelSource.parse(str(dit), [str(encoder)], [str(vae)]))
    assert type(pipe).__name__ == "QwenImage21Pipeline"
    part, read = read_whole_dit(dit)  # the row reader's values: the file's, as ranks read it
    assert part.detection.variant == "tiny-qwen-image2.1"
    for name, value in split_dit(held).items():  # the definition's, within float32's rounding
        scale = 1e-6 * float(value.abs().max())
        assert torch.allclose(read.state_dict()[name], value, rtol=0, atol=scale), name
    reference = copy.copy(tiny)
    reference.register_modules(transformer=read)
    for component in ("transformer", "text_encoder", "vae"):
        ours = getattr(pipe, component).state_dict()
        theirs = getattr(reference, component).state_dict()
        assert set(ours) == set(theirs), component
        assert all(torch.equal(ours[k], theirs[k]) for k in theirs), component
    pixels = torch.rand(
        1, tiny.vae.config.in_channels, 1, 64, 96, generator=torch.Generator().manual_seed(3)
    )
    with torch.no_grad():
        latents = [v.encode(pixels * 2 - 1).latent_dist.mode() for v in (pipe.vae, tiny.vae)]
        decoded = [v.decode(latents[1]).sample for v in (pipe.vae, tiny.vae)]
    assert torch.equal(*latents) and torch.equal(*decoded) and decoded[0].std() > 0
    call = {"height": 96, "width": 128, "num_inference_steps": 2, "output_type": "np"}
    images = []
    for each in (pipe, reference):
        align_cpu_weights(each)
        out = each(prompt="a single file", generator=torch.Generator().manual_seed(5), **call)
        images.append(np.asarray(out.images[0]))
    assert np.array_equal(*images) and images[0].std() > 0
