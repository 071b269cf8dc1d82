"""Single-file recognition from headers alone: the real architectures' key names and shapes
(built on the meta device, written as header-only safetensors files: no weights), and the bad
files that must be refused at start with the file's name and what was expected.

Cost: about 3 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest
import torch
from comfy_files import (
    ALL_IN_ONE_PREFIXES,
    WAN_PREFIX,
    flux_bfl,
    meta_model,
    meta_shapes,
    vae_ldm,
    wan22_vae_original,
    wan_original_name,
    write_header_only,
)
from safetensors.torch import save_file

from paradit.backend.models.families.wan.single_file import wan22_vae_name
from paradit.backend.models.random_presets import random_preset_spec
from paradit.backend.models.single_file.convert import dit_row_map, unused_keys
from paradit.backend.models.single_file.detect import detect
from paradit.backend.models.single_file.header import read_header
from paradit.backend.models.single_file.load import SingleFiles, resolve

pytestmark = pytest.mark.fast

# What the configs of the real repos say (the random: presets ship three of them; the others
# as their diffusers repos' transformer/config.json differ from Wan2.1-T2V-14B's).
_WAN14 = random_preset_spec("random:wan2.1-t2v-14b")["components"]["transformer"]["config"]
WAN_CONFIGS = {
    "wan2.1-t2v-1.3b": random_preset_spec("random:wan2.1-t2v-1.3b")["components"]["transformer"][
        "config"
    ],
    "wan-t2v-14b": _WAN14,
    "wan2.1-i2v-14b": {**_WAN14, "in_channels": 36, "image_dim": 1280, "added_kv_proj_dim": 5120},
    "wan2.2-i2v-a14b": {**_WAN14, "in_channels": 36},
    "wan2.2-ti2v-5b": {
        **_WAN14,
        "num_attention_heads": 24,
        "ffn_dim": 14336,
        "num_layers": 30,
        "in_channels": 48,
        "out_channels": 48,
    },
}
FLUX_DEV = random_preset_spec("random:flux.1-dev")["components"]["transformer"]["config"]
UMT5_XXL = {
    "vocab_size": 256384, "d_model": 4096, "d_kv": 64, "d_ff": 10240, "num_layers": 24,
    "num_heads": 64, "feed_forward_proj": "gated-gelu",
}  # fmt: skip
T5_XXL = {**UMT5_XXL, "vocab_size": 32128}
CLIP_L = {
    "vocab_size": 49408, "hidden_size": 768, "intermediate_size": 3072,
    "num_hidden_layers": 12, "num_attention_heads": 12, "max_position_embeddings": 77,
}  # fmt: skip
WAN21_VAE = {  # the keys that identify the original Wan VAE layout, with their real shapes
    "encoder.conv1.weight": (96, 3, 3, 3, 3),
    "decoder.conv1.weight": (384, 16, 3, 3, 3),
    "conv1.weight": (32, 32, 1, 1, 1),
    "conv2.weight": (16, 16, 1, 1, 1),
}
_CACHE: dict[str, dict[str, tuple[int, ...]]] = {}


def wan_header(variant: str, prefix: str = WAN_PREFIX) -> dict[str, tuple[int, ...]]:
    if variant not in _CACHE:
        shapes = meta_shapes(meta_model("WanTransformer3DModel", WAN_CONFIGS[variant]))
        _CACHE[variant] = {wan_original_name(k): v for k, v in shapes.items()}
    return {prefix + k: v for k, v in _CACHE[variant].items()}


def encoder_header(class_name: str, config: dict) -> dict[str, tuple[int, ...]]:
    shapes = meta_shapes(meta_model(class_name, config))
    shapes.pop("encoder.embed_tokens.weight", None)  # ComfyUI's files keep only `shared`
    return shapes


@pytest.fixture(scope="module")
def real_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("headers")
    files = {}
    for name, shapes in {
        "umt5": encoder_header("UMT5EncoderModel", UMT5_XXL),
        "wan_vae": WAN21_VAE,
        "high": wan_header("wan-t2v-14b"),
        "low": wan_header("wan-t2v-14b"),
    }.items():
        files[name] = root / f"{name}.safetensors"
        write_header_only(files[name], shapes)
    return files


@pytest.mark.parametrize(
    ("variant", "prefix"),
    [(v, WAN_PREFIX) for v in sorted(WAN_CONFIGS)] + [("wan-t2v-14b", "")],
)
def test_wan_variants_from_header(tmp_path, variant, prefix):
    path = tmp_path / "wan.safetensors"
    write_header_only(path, wan_header(variant, prefix))
    header = read_header(path)
    found = detect(header)
    assert (found.role, found.family, found.variant, found.prefix) == (
        "transformer", "wan", variant, prefix
    )  # fmt: skip
    expected = WAN_CONFIGS[variant]
    for key, value in found.config.items():
        if key in expected and key != "_class_name":
            assert value == expected[key], key  # the config read off the shapes is the real one
    row_map = dit_row_map(header, found)
    assert not unused_keys(header, found, row_map)
    assert len(row_map) == len(header.tensors)  # every Wan key is one whole parameter


def test_flux_dev_and_schnell_from_bfl_header(tmp_path):
    for guided, variant in ((True, "flux.1-dev"), (False, "flux.1-schnell")):
        model = meta_model("FluxTransformer2DModel", {**FLUX_DEV, "guidance_embeds": guided})
        path = tmp_path / f"{variant}.safetensors"
        bfl = flux_bfl(model.state_dict(), width=3072)
        write_header_only(path, {WAN_PREFIX + k: tuple(v.shape) for k, v in bfl.items()})
        header = read_header(path)
        found = detect(header)
        assert (found.role, found.variant, found.layout) == ("transformer", variant, "bfl")
        for key, value in found.config.items():
            if key in FLUX_DEV and key != "guidance_embeds":
                assert value == FLUX_DEV[key] or list(value) == FLUX_DEV[key], key
        row_map = dit_row_map(header, found)
        assert set(row_map) == set(model.state_dict())
        assert not unused_keys(header, found, row_map)
        for name, param in model.state_dict().items():  # the rows add up to every parameter
            assert sum(s.rows for s in row_map[name]) == param.shape[0], name


@pytest.mark.parametrize(
    ("class_name", "config", "kind"),
    [("UMT5EncoderModel", UMT5_XXL, "umt5"), ("T5EncoderModel", T5_XXL, "t5")],
)
def test_t5_family_encoders(tmp_path, class_name, config, kind):
    path = tmp_path / "enc.safetensors"
    write_header_only(path, encoder_header(class_name, config))
    found = detect(read_header(path))
    assert (found.role, found.family, found.variant) == ("text_encoder", kind, f"{kind} 4096")
    for key in ("vocab_size", "d_model", "d_kv", "d_ff", "num_layers", "num_heads"):
        assert found.config[key] == config[key], key


def test_clip_l_and_vaes(tmp_path):
    path = tmp_path / "clip_l.safetensors"
    shapes = meta_shapes(meta_model("CLIPTextModel", CLIP_L))
    # ComfyUI's clip_l keeps transformers' former `text_model.` prefix
    write_header_only(
        path,
        {k if k.startswith("text_model.") else "text_model." + k: v for k, v in shapes.items()},
    )
    found = detect(read_header(path))
    assert (found.role, found.variant, found.config["num_hidden_layers"]) == (
        "text_encoder", "clip 768", 12
    )  # fmt: skip
    cases = {
        "wan2.1 vae": WAN21_VAE,
        "wan2.2 vae": {
            **WAN21_VAE,
            "encoder.conv1.weight": (160, 12, 3, 3, 3),
            "conv2.weight": (48, 48, 1, 1, 1),
        },
        "flux vae": {
            "encoder.conv_in.weight": (128, 3, 3, 3),
            "encoder.down.0.block.0.conv1.weight": (128, 128, 3, 3),
            "encoder.conv_out.weight": (32, 512, 3, 3),
        },
    }
    for variant, shapes in cases.items():
        write_header_only(path, shapes)
        found = detect(read_header(path))
        assert (found.role, found.variant) == ("vae", variant)


def test_wan22_pair_resolves_to_the_a14b_preset(real_files):
    files = SingleFiles.parse(
        f"{real_files['high']},{real_files['low']}", [real_files["umt5"]], [real_files["wan_vae"]]
    )
    resolved = resolve(files)
    assert resolved.variant == "wan-t2v-14b A14B pair"
    assert resolved.preset.name == "random:wan2.2-t2v-a14b"
    assert set(resolved.dits) == {"transformer", "transformer_2"}
    single = resolve(
        SingleFiles.parse(str(real_files["high"]), [real_files["umt5"]], [real_files["wan_vae"]])
    )
    assert single.preset.name == "random:wan2.1-t2v-14b"


# -- bad files --------------------------------------------------------------------------------


def _refusal(model: str, encoders=(), vaes=()) -> str:
    with pytest.raises(ValueError) as info:
        resolve(SingleFiles.parse(model, list(map(str, encoders)), list(map(str, vaes))))
    return str(info.value)


def test_lora_or_vae_or_encoder_as_model_is_refused(tmp_path, real_files):
    lora = tmp_path / "wan_lora.safetensors"
    write_header_only(
        lora,
        {
            "diffusion_model.blocks.0.self_attn.q.lora_down.weight": (32, 5120),
            "diffusion_model.blocks.0.self_attn.q.lora_up.weight": (5120, 32),
        },
    )
    message = _refusal(str(lora))
    assert "wan_lora.safetensors" in message and "expected a transformer" in message
    assert "lora" in message
    message = _refusal(str(real_files["wan_vae"]))
    assert "wan_vae.safetensors: expected a transformer checkpoint" in message
    assert "wan2.1 vae" in message
    message = _refusal(str(real_files["umt5"]))
    assert "umt5.safetensors: expected a transformer checkpoint, but it is a umt5 4096" in message


def test_unknown_architecture_is_refused(tmp_path):
    path = tmp_path / "mystery.safetensors"
    write_header_only(path, {"layers.0.attention.wq.weight": (4096, 4096)})
    message = _refusal(str(path))
    assert "mystery.safetensors" in message and "no known key layout" in message
    odd = tmp_path / "odd_width.safetensors"
    shapes = wan_header("wan2.1-t2v-1.3b")
    shapes = {k: tuple(1000 if s == 1536 else s for s in v) for k, v in shapes.items()}
    write_header_only(odd, shapes)
    assert "no Wan 2.1/2.2 variant has this width" in _refusal(str(odd))


def test_truncated_files_are_refused(tmp_path):
    path = tmp_path / "wan_cut.safetensors"
    save_file({"blocks.0.self_attn.q.weight": torch.zeros(64, 64)}, str(path))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    message = _refusal(str(path))
    assert "wan_cut.safetensors is truncated" in message
    path.write_bytes(data[:100])  # cut inside the JSON header
    assert "wan_cut.safetensors is truncated" in _refusal(str(path))
    gguf_path = tmp_path / "wan_cut.gguf"
    _write_gguf(gguf_path, "Q8_0")
    data = gguf_path.read_bytes()
    gguf_path.write_bytes(data[: len(data) - 100])
    message = _refusal(str(gguf_path))
    assert "wan_cut.gguf" in message and "truncated" in message


def _raw_safetensors(path, header: dict, data: bytes) -> None:
    import json

    raw = json.dumps(header).encode()
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + data)


def test_a_header_that_does_not_describe_its_data_is_refused(tmp_path):
    """A tensor whose shape needs more (or fewer) bytes than its byte range, or ranges that
    overlap or leave a gap: the safetensors library refuses such files, and so does the
    header reader (each rank's row reads would take another tensor's bytes)."""
    from safetensors import SafetensorError, safe_open

    path = tmp_path / "wan_lies.safetensors"
    q, k = "blocks.0.self_attn.q.weight", "blocks.0.self_attn.k.weight"
    data = np.arange(8, dtype=np.float32).tobytes()  # 32 bytes: two 2x2 tensors
    good = {
        q: {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
        k: {"dtype": "F32", "shape": [2, 2], "data_offsets": [16, 32]},
    }
    _raw_safetensors(path, good, data)
    assert read_header(path).tensors[q].nbytes == 16
    with safe_open(str(path), "pt") as f:  # the library reads the honest file
        assert f.get_tensor(k).tolist() == [[4, 5], [6, 7]]
    cases = [
        # q says 4x2 (32 bytes) over its 16: rows 2-3 would be k's
        ({q: {**good[q], "shape": [4, 2]}}, f"tensor '{q}' \\(F32, shape \\[4, 2\\]\\) needs 32 "
         "bytes but its data_offsets give 16: the header does not match the data", data),
        ({q: {**good[q], "dtype": "BF16"}}, "needs 8 bytes but its data_offsets give 16", data),
        ({k: {**good[k], "data_offsets": [8, 24]}}, "overlapping or missing bytes", data[:24]),
        ({k: {**good[k], "data_offsets": [24, 40]}}, "overlapping or missing bytes",
         data + bytes(8)),  # a gap between q and k
    ]  # fmt: skip
    for change, message, raw in cases:
        _raw_safetensors(path, {**good, **change}, raw)
        with pytest.raises(ValueError, match=message):
            read_header(path)
        with pytest.raises(SafetensorError), safe_open(str(path), "pt") as f:  # the library's
            f.get_tensor(q)
        assert "wan_lies.safetensors" in _refusal(str(path))


def test_text_encoder_of_the_wrong_width_or_kind_and_missing_parts(tmp_path, real_files):
    narrow = tmp_path / "umt5_small.safetensors"
    write_header_only(narrow, encoder_header("UMT5EncoderModel", {**UMT5_XXL, "d_model": 2048}))
    model = str(real_files["high"])
    message = _refusal(model, [narrow], [real_files["wan_vae"]])
    assert "umt5_small.safetensors has width 2048" in message and "width 4096" in message
    t5 = tmp_path / "t5xxl.safetensors"
    write_header_only(t5, encoder_header("T5EncoderModel", T5_XXL))
    assert "t5xxl.safetensors is a t5 encoder; wan-t2v-14b needs umt5" in _refusal(
        model, [t5], [real_files["wan_vae"]]
    )
    assert "needs 1 text encoder file(s) (umt5)" in _refusal(model, [], [real_files["wan_vae"]])
    assert "needs the Wan 2.1 VAE (wan_2.1_vae): give --vae FILE" in _refusal(
        model, [real_files["umt5"]], []
    )
    flux_vae = tmp_path / "ae.safetensors"
    write_header_only(
        flux_vae,
        {"encoder.conv_in.weight": (128, 3, 3, 3), "encoder.conv_out.weight": (32, 512, 3, 3)},
    )
    message = _refusal(model, [real_files["umt5"]], [flux_vae])
    assert "--vae ae.safetensors is a flux vae" in message and "a wan VAE with 16" in message


def test_experts_in_the_wrong_order_or_of_different_models(tmp_path, real_files):
    low = tmp_path / "wan2.2_t2v_low_noise_14B_fp16.safetensors"
    high = tmp_path / "wan2.2_t2v_high_noise_14B_fp16.safetensors"
    low.symlink_to(real_files["low"])
    high.symlink_to(real_files["high"])
    encoders, vaes = [real_files["umt5"]], [real_files["wan_vae"]]
    message = _refusal(f"{low},{high}", encoders, vaes)
    assert "high-noise expert first" in message
    small = tmp_path / "wan_1.3b.safetensors"
    write_header_only(small, wan_header("wan2.1-t2v-1.3b"))
    assert "are not two experts of one model" in _refusal(f"{high},{small}", encoders, vaes)


def wan22_vae_header() -> dict[str, tuple[int, ...]]:
    """ComfyUI's wan2.2_vae: the real Wan 2.2 VAE's shapes under the original Wan names."""
    config = random_preset_spec("random:wan2.2-ti2v-5b")["components"]["vae"]["config"]
    state = meta_model("AutoencoderKLWan", config).state_dict()
    return {k: tuple(v.shape) for k, v in wan22_vae_original(state).items()}


def test_wan22_vae_file_converts_to_diffusers_names(tmp_path):
    """The real Wan 2.2 VAE under its original names (as ComfyUI's wan2.2_vae holds it) is
    recognised, and every key converts to the diffusers parameter of the same shape."""
    shapes = wan22_vae_header()
    assert "decoder.upsamples.0.upsamples.0.residual.2.weight" in shapes  # ComfyUI's own marker
    path = tmp_path / "wan2.2_vae.safetensors"
    write_header_only(path, shapes)
    found = detect(read_header(path))
    assert (found.role, found.variant, found.layout) == ("vae", "wan2.2 vae", "wan")
    assert found.config == {"base_dim": 160, "z_dim": 48, "in_channels": 12}
    config = random_preset_spec("random:wan2.2-ti2v-5b")["components"]["vae"]["config"]
    expected = meta_shapes(meta_model("AutoencoderKLWan", config))
    converted = {wan22_vae_name(k): v for k, v in shapes.items()}
    assert len(converted) == len(shapes) == len(expected) == 196
    assert converted == expected


def test_ti2v_5b_and_i2v_a14b_pair_resolve(tmp_path, real_files):
    ti2v = tmp_path / "wan2.2_ti2v_5B_fp16.safetensors"
    write_header_only(ti2v, wan_header("wan2.2-ti2v-5b"))
    vae22 = tmp_path / "wan2.2_vae.safetensors"
    write_header_only(vae22, wan22_vae_header())
    resolved = resolve(SingleFiles.parse(str(ti2v), [str(real_files["umt5"])], [str(vae22)]))
    assert (resolved.variant, resolved.preset.name) == ("wan2.2-ti2v-5b", "random:wan2.2-ti2v-5b")
    assert (resolved.pipeline_class, set(resolved.dits)) == ("WanPipeline", {"transformer"})
    assert resolved.vae.detection.variant == "wan2.2 vae"
    message = _refusal(str(ti2v), [real_files["umt5"]], [real_files["wan_vae"]])
    assert message == (
        "--vae wan_vae.safetensors is a wan2.1 vae with 16 latent channels; wan2.2-ti2v-5b "
        "needs the Wan 2.2 VAE (wan2.2_vae): a wan VAE with 48"
    )
    assert "wan2.2-ti2v-5b needs the Wan 2.2 VAE (wan2.2_vae): give --vae FILE" in _refusal(
        str(ti2v), [real_files["umt5"]]
    )
    message = _refusal(str(real_files["high"]), [real_files["umt5"]], [vae22])
    assert "is a wan2.2 vae with 48 latent channels; wan-t2v-14b needs the Wan 2.1 VAE" in message
    high = tmp_path / "wan2.2_i2v_high_noise_14B_fp16.safetensors"
    low = tmp_path / "wan2.2_i2v_low_noise_14B_fp16.safetensors"
    write_header_only(high, wan_header("wan2.2-i2v-a14b"))
    low.symlink_to(high)
    encoders, vaes = [str(real_files["umt5"])], [str(real_files["wan_vae"])]
    resolved = resolve(SingleFiles.parse(f"{high},{low}", encoders, vaes))
    assert (resolved.variant, resolved.preset.name) == (
        "wan2.2-i2v-a14b pair", "random:wan2.2-i2v-a14b"
    )  # fmt: skip
    assert resolved.pipeline_class == "WanImageToVideoPipeline"
    assert set(resolved.dits) == {"transformer", "transformer_2"}
    message = _refusal(str(high), encoders, vaes)
    assert message == (
        "wan2.2_i2v_high_noise_14B_fp16.safetensors is one expert of wan2.2-i2v-a14b, which "
        "takes its two experts as two files: give --model HIGH,LOW (the high-noise expert first)"
    )
    assert "not two experts of one model" in _refusal(f"{high},{real_files['low']}", encoders, vaes)


CLIP_VISION_H = {  # laion's CLIP ViT-H/14 vision tower (Wan 2.1 I2V's; ComfyUI's clip_vision_h)
    "hidden_size": 1280, "intermediate_size": 5120, "num_hidden_layers": 32,
    "num_attention_heads": 16, "image_size": 224, "patch_size": 14, "hidden_act": "gelu",
}  # fmt: skip


def clip_vision_header(config: dict) -> dict[str, tuple[int, ...]]:
    """As ComfyUI's clip_vision files hold it: `vision_model.` keys and the projection."""
    shapes = meta_shapes(meta_model("CLIPVisionModel", config))
    hidden = config["hidden_size"]
    return {"vision_model." + k: v for k, v in shapes.items()} | {
        "visual_projection.weight": (1024, hidden)
    }


def test_wan21_i2v_takes_its_clip_vision_file(tmp_path, real_files):
    clip_h = tmp_path / "clip_vision_h.safetensors"
    write_header_only(clip_h, clip_vision_header(CLIP_VISION_H))
    found = detect(read_header(clip_h))
    assert (found.role, found.variant) == ("clip_vision", "clip vision 1280")
    assert {k: found.config[k] for k in CLIP_VISION_H} == CLIP_VISION_H
    path = tmp_path / "wan2.1_i2v_480p_14B_fp16.safetensors"
    write_header_only(path, wan_header("wan2.1-i2v-14b"))
    encoders, vaes = [real_files["umt5"]], [real_files["wan_vae"]]
    files = SingleFiles.parse(str(path), list(map(str, encoders)), list(map(str, vaes)))
    resolved = resolve(dataclasses.replace(files, image_encoders=(str(clip_h),)))
    assert (resolved.variant, resolved.pipeline_class) == (
        "wan2.1-i2v-14b", "WanImageToVideoPipeline"
    )  # fmt: skip
    assert resolved.image_encoder.header.name == "clip_vision_h.safetensors"
    assert "image_encoder" in resolved.summary()["files"]
    assert _refusal(str(path), encoders, vaes) == (
        "wan2.1-i2v-14b needs the CLIP ViT-H/14 image encoder (ComfyUI's clip_vision_h): "
        "give --image-encoder FILE"
    )
    clip_l = tmp_path / "clip_vision_l.safetensors"
    vit_l = {**CLIP_VISION_H, "hidden_size": 1024, "intermediate_size": 4096}
    write_header_only(clip_l, clip_vision_header({**vit_l, "num_hidden_layers": 2}))
    with pytest.raises(ValueError) as info:
        resolve(dataclasses.replace(files, image_encoders=(str(clip_l),)))
    assert str(info.value) == (
        "--image-encoder clip_vision_l.safetensors is a clip vision 1024; wan2.1-i2v-14b needs "
        "the CLIP ViT-H/14 image encoder (ComfyUI's clip_vision_h): a CLIP vision tower of "
        "width 1280"
    )
    with pytest.raises(ValueError, match="--image-encoder umt5.safetensors: expected a clip"):
        resolve(dataclasses.replace(files, image_encoders=(str(real_files["umt5"]),)))
    open_clip = tmp_path / "open_clip_vit_h.safetensors"
    write_header_only(
        open_clip, {"visual.transformer.resblocks.0.attn.in_proj_weight": (3840, 1280)}
    )
    with pytest.raises(
        ValueError, match="open_clip_vit_h.safetensors: has CLIP vision tower keys, not in"
    ):
        resolve(dataclasses.replace(files, image_encoders=(str(open_clip),)))
    t2v = SingleFiles.parse(str(real_files["high"]), files.text_encoders, files.vaes)
    with pytest.raises(ValueError, match="--image-encoder goes with Wan 2.1 image-to-video"):
        resolve(dataclasses.replace(t2v, image_encoders=(str(clip_h),)))
    # `paradit plan --model FILE` (no encoder files there) counts ViT-H/14 on rank 0
    from paradit.backend.memory.sizes import meta_pipeline

    planned = meta_pipeline(str(path))
    assert type(planned).__name__ == "WanImageToVideoPipeline"
    config = planned.image_encoder.config.to_dict()
    assert config | CLIP_VISION_H == config
    assert 0.63e9 < sum(p.numel() for p in planned.image_encoder.parameters()) < 0.64e9


def _write_gguf(path, qtype_name: str) -> None:
    import gguf

    qtype = gguf.GGMLQuantizationType[qtype_name]
    block, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    writer = gguf.GGUFWriter(str(path), "wan")
    raw = np.zeros((64, 256 // block * block_bytes), dtype=np.uint8)
    writer.add_tensor("blocks.0.self_attn.q.weight", raw, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_gguf_quantization_we_cannot_read_is_refused(tmp_path):
    path = tmp_path / "wan_q8k.gguf"
    _write_gguf(path, "Q8_K")
    header = read_header(path)
    assert header.tensors["blocks.0.self_attn.q.weight"].dtype == "Q8_K"
    from paradit.backend.models.single_file.quant import check_readable

    with pytest.raises(
        ValueError,
        match="wan_q8k.gguf: tensor blocks.0.self_attn.q.weight is "
        "quantized as Q8_K, which the gguf package cannot dequantize",
    ):
        check_readable(header)


def test_hub_ids_resolve_to_the_local_cache_offline(tmp_path, monkeypatch):
    """A hub id whose snapshot is in the local cache is read from there (no network), so it
    takes the folder's one-copy sharded loader; an uncached id stays a download."""
    from paradit.backend.models.loading import ModelSource

    snapshot = tmp_path / "models--owner--tiny" / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "model_index.json").write_text('{"_class_name": "WanPipeline"}')
    (tmp_path / "models--owner--tiny" / "refs").mkdir()
    (tmp_path / "models--owner--tiny" / "refs" / "main").write_text("a" * 40)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    source = ModelSource.parse("owner/tiny")
    assert source.kind == "hub" and source.local_folder() == str(snapshot)
    assert ModelSource.parse("owner/not-cached").local_folder() is None


def test_serve_flags_round_trip(tmp_path):
    """--text-encoder repeats, --vae once; paths become absolute (ranks run elsewhere)."""
    from paradit.backend.config import ServeConfig

    argv = ["--model", "w.safetensors", "--text-encoder", "a.safetensors"]
    argv += ["--text-encoder", "b.safetensors", "--vae", "v.safetensors"]
    config = ServeConfig.from_argv(argv)
    assert config.model.endswith("/w.safetensors") and config.model.startswith("/")
    assert [p.rsplit("/", 1)[1] for p in config.text_encoders] == ["a.safetensors", "b.safetensors"]
    assert ServeConfig.from_argv(config.to_argv()) == config
    assert ServeConfig.from_argv(["--model", "tiny-wan"]).to_argv() == ["--model", "tiny-wan"]


def test_umt5_file_carrying_its_sentencepiece_model(tmp_path):
    """ComfyUI's UMT5 file holds its tokenizer as a uint8 `spiece_model` tensor: the tokenizer
    is built from it (and tokenizes as SentencePiece itself does)."""
    import sentencepiece as spm

    from paradit.backend.models.single_file.components import spiece_tokenizer
    from paradit.backend.models.single_file.detect import recognise

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(["a red fox running through snow", "a quick brown dog"] * 40))
    spm.SentencePieceTrainer.train(
        input=str(corpus), model_prefix=str(tmp_path / "sp"), vocab_size=24, pad_id=0,
        eos_id=1, unk_id=2, bos_id=-1, minloglevel=2,
    )  # fmt: skip
    model_bytes = (tmp_path / "sp.model").read_bytes()
    config = {**UMT5_XXL, "vocab_size": 64, "d_model": 32, "d_kv": 8, "d_ff": 64}
    config |= {"num_layers": 2, "num_heads": 4}
    encoder = meta_model("UMT5EncoderModel", config)
    state = {k: torch.zeros(v.shape) for k, v in encoder.state_dict().items()}
    state["spiece_model"] = torch.frombuffer(bytearray(model_bytes), dtype=torch.uint8)
    path = tmp_path / "umt5_with_spiece.safetensors"
    save_file(state, str(path))
    tokenizer = spiece_tokenizer(recognise(str(path)))
    processor = spm.SentencePieceProcessor(model_file=str(tmp_path / "sp.model"))
    text = "a red fox running"
    assert tokenizer(text)["input_ids"] == [*processor.encode(text), 1]  # then </s>


def test_plan_of_a_single_file_counts_its_dit_as_held(tmp_path):
    """`paradit plan --model FILE` plans the DiT read off the header: the shipped 1.3B model,
    counted in the run's dtype (fp8 files are held dequantized), as from its random: preset."""
    from paradit.backend.memory.sizes import meta_pipeline, sizes_of_pipeline
    from paradit.backend.models.families import family_for

    path = tmp_path / "wan2.1_t2v_1.3B_fp8_scaled.safetensors"
    write_header_only(path, wan_header("wan2.1-t2v-1.3b"), dtype="F8_E4M3")
    family = family_for("WanPipeline")
    from_file = sizes_of_pipeline(meta_pipeline(str(path)), family, torch.bfloat16)
    preset = sizes_of_pipeline(meta_pipeline("random:wan2.1-t2v-1.3b"), family, torch.bfloat16)
    assert from_file.weights == preset.weights  # (the meta modules themselves differ by id)
    assert from_file.weights["transformer"] > 2 * 1.4e9  # bf16, not the file's fp8 bytes


# -- all-in-one checkpoints (ComfyUI's models/checkpoints) ------------------------------------

FLUX_VAE = random_preset_spec("random:flux.1-dev")["components"]["vae"]["config"]


@functools.cache
def _flux_all_in_one() -> tuple[frozenset[str], dict[str, tuple[int, ...]]]:
    state = meta_model("FluxTransformer2DModel", FLUX_DEV).state_dict()
    dit = flux_bfl(state, width=3072)
    shapes = {WAN_PREFIX + k: tuple(v.shape) for k, v in dit.items()}
    shapes[WAN_PREFIX + "scaled_fp8"] = (0,)
    clip = meta_shapes(meta_model("CLIPTextModel", CLIP_L))
    vae = vae_ldm(meta_model("AutoencoderKL", FLUX_VAE).state_dict())
    for name, part in (
        ("clip_l", {"text_model." + k: v for k, v in clip.items()}),
        ("t5xxl", encoder_header("T5EncoderModel", T5_XXL)),
        ("vae", {k: tuple(v.shape) for k, v in vae.items()}),
    ):
        shapes |= {ALL_IN_ONE_PREFIXES[name] + k: v for k, v in part.items()}
    shapes["text_encoders.clip_l.logit_scale"] = ()  # ComfyUI keeps it beside the transformer
    return frozenset(state), shapes


def flux_all_in_one_header() -> dict[str, tuple[int, ...]]:
    """flux1-dev-fp8's layout with the real shapes: the DiT in BFL names (with the fp8_scaled
    marker under its prefix, as ComfyUI saves one), CLIP-L, T5-XXL, the Flux VAE in ldm names."""
    return dict(_flux_all_in_one()[1])


def test_flux_all_in_one_checkpoint_from_its_header(tmp_path):
    """flux1-dev-fp8 alone: recognised and named with its parts, each part read as a file of
    its own; the DiT's rows are every DiT parameter (the marker and the other parts unused)."""
    from paradit.backend.client.summary import backend_summary
    from paradit.backend.models.single_file.listing import list_models, render

    path = tmp_path / "checkpoints" / "flux1-dev-fp8.safetensors"
    path.parent.mkdir()
    write_header_only(path, flux_all_in_one_header())
    header = read_header(path)
    found = detect(header)
    label = "all-in-one flux.1-dev (DiT, clip_l, t5xxl, vae)"
    assert (found.role, found.variant, found.label, found.prefix) == (
        "transformer", "flux.1-dev", label, WAN_PREFIX
    )  # fmt: skip
    assert found.bundled == ("clip_l", "t5xxl", "vae")
    row_map = dit_row_map(header, found)
    assert set(row_map) == _flux_all_in_one()[0]
    assert not unused_keys(header, found, row_map)
    resolved = resolve(SingleFiles.parse(str(path)))  # no --text-encoder, no --vae
    assert resolved.variant == label and resolved.preset.name == "random:flux.1-dev"
    parts = {**resolved.dits, **resolved.encoders, "vae": resolved.vae}
    parts = {k: (p.header.name, p.header.prefix, p.detection.variant) for k, p in parts.items()}
    assert parts == {
        "transformer": (path.name, "", "flux.1-dev"),
        "text_encoder": (path.name, "text_encoders.clip_l.transformer.", "clip 768"),
        "text_encoder_2": (path.name, "text_encoders.t5xxl.transformer.", "t5 4096"),
        "vae": (path.name, "vae.", "flux vae"),
    }
    assert resolved.vae.detection.layout == "ldm"
    summary = backend_summary({"model": str(path), "model_files": resolved.summary()})
    assert f"files: {label}: transformer {path.name} (bf16), text_encoder {path.name}" in summary
    (entry,) = list_models(tmp_path)
    assert (entry.path, entry.role, entry.variant) == (
        "checkpoints/flux1-dev-fp8.safetensors", "transformer", label
    )  # fmt: skip
    assert "all-in-one checkpoint: also holds clip_l (text_encoders.clip_l.transformer.)" in (
        render([entry])
    )


def test_all_in_one_parts_given_as_files_win_and_wan_is_refused(tmp_path, real_files):
    path = tmp_path / "flux1-dev-fp8.safetensors"
    shapes = flux_all_in_one_header()
    t5 = tmp_path / "t5xxl_fp16.safetensors"
    t5_prefix = ALL_IN_ONE_PREFIXES["t5xxl"]
    write_header_only(t5, {k[len(t5_prefix) :]: v for k, v in shapes.items() if t5_prefix in k})
    flux_vae = tmp_path / "ae.safetensors"
    write_header_only(flux_vae, {k[4:]: v for k, v in shapes.items() if k.startswith("vae.")})
    write_header_only(path, shapes)
    resolved = resolve(SingleFiles.parse(str(path), [str(t5)], [str(flux_vae)]))
    assert resolved.encoders["text_encoder_2"].header.path == t5  # the files given win
    assert resolved.vae.header.path == flux_vae
    assert resolved.encoders["text_encoder"].header.prefix == "text_encoders.clip_l.transformer."
    # a bundle without a T5: the refusal names what is missing
    write_header_only(path, {k: v for k, v in shapes.items() if not k.startswith(t5_prefix)})
    assert "needs clip and t5 text encoders; t5 is in none of the files" in _refusal(str(path))
    # a bundled part of the wrong width is refused naming the file and the part
    narrow = encoder_header("T5EncoderModel", {**T5_XXL, "d_model": 2048})
    without_t5 = {k: v for k, v in shapes.items() if not k.startswith(t5_prefix)}
    write_header_only(path, without_t5 | {t5_prefix + k: v for k, v in narrow.items()})
    assert f"{path.name} (its {t5_prefix}) has width 2048; flux.1-dev takes text embeddings" in (
        _refusal(str(path))
    )
    wan = tmp_path / "wan2.1_t2v_14B_aio.safetensors"
    umt5 = encoder_header("UMT5EncoderModel", UMT5_XXL)
    write_header_only(
        wan,
        wan_header("wan-t2v-14b")
        | {"text_encoders.umt5xxl.transformer." + k: v for k, v in umt5.items()}
        | {"vae." + k: v for k, v in WAN21_VAE.items()},
    )
    message = _refusal(str(wan), [real_files["umt5"]], [real_files["wan_vae"]])
    assert message.startswith(
        f"{wan.name} is an all-in-one wan-t2v-14b (DiT, umt5xxl, vae) checkpoint: paradit runs "
        "all-in-one checkpoints of Flux.1 and LTX-2 only"
    ), message
