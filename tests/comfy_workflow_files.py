"""A ComfyUI folder holding the files the workflow fixtures (tests/comfy_workflows/) name:
the tiny presets' weights as ComfyUI's single files (tests/comfy_files.py's layouts: Wan
2.1/2.2, Qwen-Image, Z-Image, HunyuanVideo 1.5, LTX-2's checkpoint and Gemma file), the
lightx2v-style LoRAs of the Wan 2.2 4-step graph, a start image in `input/`, Flux.1 dev's
real architecture as headers only (dev and schnell), a tiny Flux.1 dev (tiny-flux with a
guidance embedding: no tiny preset embeds Flux's guidance) and a tiny schnell (tiny-flux's
own DiT), and FLUX.2-dev's and FLUX.2-klein-4B's and -9B's files as headers at their real widths."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from comfy_files import (
    ALL_IN_ONE_PREFIXES,
    WAN_PREFIX,
    flux2_bfl,
    flux_bfl,
    hunyuan15_original,
    hunyuan15_vae_original,
    ltx2_checkpoint,
    meta_model,
    meta_shapes,
    plain_config,
    qwen3_comfy,
    vae_ldm,
    wan22_vae_original,
    wan_original,
    write_header_only,
    write_safetensors,
    z_image_original,
)
from diffusers import FluxTransformer2DModel
from lora_files import comfy_wan_lora
from PIL import Image
from safetensors.torch import save_file

from paradit.backend.models.presets import build_preset
from paradit.backend.models.random_presets import random_preset_spec

FLUX_DEV = random_preset_spec("random:flux.1-dev")["components"]["transformer"]["config"]
CLIP_L = {
    "vocab_size": 49408, "hidden_size": 768, "intermediate_size": 3072,
    "num_hidden_layers": 12, "num_attention_heads": 12, "max_position_embeddings": 77,
}  # fmt: skip
T5_XXL = {
    "vocab_size": 32128, "d_model": 4096, "d_kv": 64, "d_ff": 10240, "num_layers": 24,
    "num_heads": 64, "feed_forward_proj": "gated-gelu",
}  # fmt: skip
FLUX_VAE = {  # the keys that identify Flux's ae, with their real shapes
    "encoder.conv_in.weight": (128, 3, 3, 3),
    "encoder.down.0.block.0.conv1.weight": (128, 128, 3, 3),
    "encoder.conv_out.weight": (32, 512, 3, 3),
}
TINY_FLUX_DEV = "flux1-dev_tiny_fp32.safetensors"
"""tiny-flux's DiT with a guidance embedding (as Flux.1 dev has), in BFL's names, with
tiny-flux's CLIP-L, T5 and VAE beside it (`clip_l_tiny`, `t5xxl_tiny`, `flux_ae_tiny`)."""
TINY_FLUX_SCHNELL = "flux1-schnell_tiny_fp32.safetensors"
"""tiny-flux's own DiT (no guidance embedding, as Flux.1 schnell), in BFL's names."""
START_IMAGE = "fox.png"
WIDE_IMAGE = "fox_24x32.png"


def _put(root: Path, relative: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _wan_dit(root: Path, name: str, transformer) -> None:
    write_safetensors(
        _put(root, f"diffusion_models/{name}"),
        wan_original(transformer.state_dict()),
        "fp32",
        WAN_PREFIX,
    )


def _qwen25_comfy(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Qwen2.5-VL as ComfyUI's qwen_2.5_vl_7b holds it: the language model under `model.`."""
    return {
        k.replace("model.language_model.", "model.").replace("model.visual.", "visual."): v
        for k, v in state.items()
    }


MISTRAL_SMALL_31 = {  # Mistral-Small-3.1-24B's text widths, 1 layer (40 take long on meta)
    "vocab_size": 131072, "hidden_size": 5120, "intermediate_size": 32768,
    "num_hidden_layers": 1, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
}  # fmt: skip
QWEN3_4B = {  # Qwen3-4B's widths, 1 layer
    "vocab_size": 151936, "hidden_size": 2560, "intermediate_size": 9728,
    "num_hidden_layers": 1, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
}  # fmt: skip
QWEN3_8B = {**QWEN3_4B, "hidden_size": 4096, "intermediate_size": 12288}  # Qwen3-8B's widths


def _schnell_all_in_one() -> dict[str, tuple[int, ...]]:
    """flux1-schnell-fp8's layout (ComfyUI's all-in-one checkpoint) as a header at the real
    shapes: the schnell DiT in BFL names under ComfyUI's prefix, CLIP-L, T5-XXL and the Flux
    VAE in ldm names under theirs."""
    dit = meta_model("FluxTransformer2DModel", {**FLUX_DEV, "guidance_embeds": False})
    shapes = {
        WAN_PREFIX + k: tuple(v.shape) for k, v in flux_bfl(dit.state_dict(), width=3072).items()
    }
    clip = meta_shapes(meta_model("CLIPTextModel", CLIP_L))
    t5 = meta_shapes(meta_model("T5EncoderModel", T5_XXL))
    t5.pop("encoder.embed_tokens.weight", None)
    vae = random_preset_spec("random:flux.1-dev")["components"]["vae"]["config"]
    vae = vae_ldm(meta_model("AutoencoderKL", vae).state_dict())
    for name, part in (
        ("clip_l", {"text_model." + k: v for k, v in clip.items()}),
        ("t5xxl", t5),
        ("vae", {k: tuple(v.shape) for k, v in vae.items()}),
    ):
        shapes |= {ALL_IN_ONE_PREFIXES[name] + k: v for k, v in part.items()}
    return shapes


def _flux2_headers(models: Path) -> None:
    """FLUX.2-dev's and FLUX.2-klein-4B's and -9B's files as headers at their real widths (one block
    of each kind, one encoder layer: recognition reads widths, not depth): the DiTs in Black
    Forest Labs' names, the Mistral 3 and Qwen3 encoders, the Flux.2 VAE."""
    for name, preset in (("flux2_dev_fp8mixed", "random:flux.2-dev"),
                         ("flux-2-klein-4b", "random:flux.2-klein-4b"),
                         ("flux-2-klein-9b", "random:flux.2-klein-9b")):  # fmt: skip
        config = random_preset_spec(preset)["components"]["transformer"]["config"]
        dit = meta_model("Flux2Transformer2DModel", {**config, "num_layers": 1,
                                                     "num_single_layers": 1})  # fmt: skip
        shapes = {WAN_PREFIX + k: tuple(v.shape) for k, v in flux2_bfl(dit.state_dict()).items()}
        write_header_only(_put(models, f"diffusion_models/{name}.safetensors"), shapes)
    mistral = meta_shapes(meta_model("MistralModel", MISTRAL_SMALL_31))
    path = _put(models, "text_encoders/mistral_3_small_flux2_bf16.safetensors")
    write_header_only(path, {"model." + k: v for k, v in mistral.items()})
    for name, config in (("qwen_3_4b_header", QWEN3_4B), ("qwen_3_8b_header", QWEN3_8B)):
        qwen3 = qwen3_comfy(meta_shapes(meta_model("Qwen3Model", config)))
        write_header_only(_put(models, f"text_encoders/{name}.safetensors"), qwen3)
    vae = random_preset_spec("random:flux.2-dev")["components"]["vae"]["config"]
    vae = meta_shapes(meta_model("AutoencoderKLFlux2", vae))
    write_header_only(_put(models, "vae/flux2-vae.safetensors"), vae)


def write_comfyui(folder: Path) -> Path:
    """`folder`/models/... and `folder`/input/fox.png; returns `folder`."""
    models = folder / "models"
    wan = build_preset("tiny-wan")
    _wan_dit(models, "wan2.1_t2v_tiny_fp32.safetensors", wan.transformer)
    state = wan.text_encoder.state_dict()
    save_file(
        {k: v for k, v in state.items() if "embed_tokens" not in k},
        str(_put(models, "text_encoders/umt5_tiny.safetensors")),
    )
    save_file(wan.vae.state_dict(), str(_put(models, "vae/wan_2.1_vae_tiny.safetensors")))

    i2v = build_preset("tiny-wan-i2v")
    _wan_dit(models, "wan2.1_i2v_480p_tiny_fp32.safetensors", i2v.transformer)
    state = i2v.image_encoder.state_dict()
    save_file(
        {"vision_model." + k: v for k, v in state.items()},
        str(_put(models, "clip_vision/clip_vision_tiny.safetensors")),
    )

    a14b = build_preset("tiny-wan2.2-i2v-a14b")
    for expert, dit in (("high", a14b.transformer), ("low", a14b.transformer_2)):
        _wan_dit(models, f"wan2.2_i2v_{expert}_noise_14B_tiny_fp32.safetensors", dit)
        lora = _put(models, f"loras/lightx2v_i2v_4steps_{expert}_noise_tiny.safetensors")
        comfy_wan_lora(lora, dit, seed=11 if expert == "high" else 12)

    ti2v = build_preset("tiny-wan2.2-ti2v-5b")
    _wan_dit(models, "wan2.2_ti2v_5B_tiny_fp32.safetensors", ti2v.transformer)
    save_file(
        wan22_vae_original(ti2v.vae.state_dict()),
        str(_put(models, "vae/wan2.2_vae_tiny.safetensors")),
    )

    qwen = build_preset("tiny-qwen-image")
    path = _put(models, "diffusion_models/qwen_image_tiny_bf16.safetensors")
    write_safetensors(path, qwen.transformer.state_dict(), "bf16")
    save_file(
        _qwen25_comfy(qwen.text_encoder.state_dict()),
        str(_put(models, "text_encoders/qwen_2.5_vl_tiny.safetensors")),
    )
    save_file(qwen.vae.state_dict(), str(_put(models, "vae/qwen_image_vae_tiny.safetensors")))

    z_image = build_preset("tiny-z-image")
    path = _put(models, "diffusion_models/z_image_turbo_tiny_bf16.safetensors")
    write_safetensors(path, z_image_original(z_image.transformer.state_dict()), "bf16", WAN_PREFIX)
    save_file(
        qwen3_comfy(z_image.text_encoder.state_dict()),
        str(_put(models, "text_encoders/qwen_3_tiny.safetensors")),
    )
    save_file(vae_ldm(z_image.vae.state_dict()), str(_put(models, "vae/ae_tiny.safetensors")))

    flux = build_preset("tiny-flux")  # its DiT with a guidance embedding: a tiny Flux.1 dev
    config = {**plain_config(flux.transformer.config), "guidance_embeds": True}
    torch.manual_seed(13)
    guided = FluxTransformer2DModel(**config)
    path = _put(models, f"diffusion_models/{TINY_FLUX_DEV}")
    write_safetensors(path, flux_bfl(guided.state_dict(), width=64), "fp32", WAN_PREFIX)
    clip = {"text_model." + k: v for k, v in flux.text_encoder.state_dict().items()}
    save_file(clip, str(_put(models, "text_encoders/clip_l_tiny.safetensors")))
    t5 = {k: v for k, v in flux.text_encoder_2.state_dict().items() if "embed_tokens" not in k}
    save_file(t5, str(_put(models, "text_encoders/t5xxl_tiny.safetensors")))
    save_file(flux.vae.state_dict(), str(_put(models, "vae/flux_ae_tiny.safetensors")))

    dit = meta_model("FluxTransformer2DModel", {**FLUX_DEV, "guidance_embeds": True})
    bfl = flux_bfl(dit.state_dict(), width=3072)
    shapes = {WAN_PREFIX + k: tuple(v.shape) for k, v in bfl.items()}
    write_header_only(_put(models, "diffusion_models/flux1-dev.safetensors"), shapes)
    dit = meta_model("FluxTransformer2DModel", {**FLUX_DEV, "guidance_embeds": False})
    bfl = flux_bfl(dit.state_dict(), width=3072)
    shapes = {WAN_PREFIX + k: tuple(v.shape) for k, v in bfl.items()}
    write_header_only(_put(models, "diffusion_models/flux1-schnell.safetensors"), shapes)
    _put(models, "checkpoints/flux1-schnell-fp8.safetensors")
    write_header_only(models / "checkpoints/flux1-schnell-fp8.safetensors", _schnell_all_in_one())
    path = _put(models, f"diffusion_models/{TINY_FLUX_SCHNELL}")
    write_safetensors(path, flux_bfl(flux.transformer.state_dict(), width=64), "fp32", WAN_PREFIX)
    clip = meta_shapes(meta_model("CLIPTextModel", CLIP_L))
    clip = {k if k.startswith("text_model.") else "text_model." + k: v for k, v in clip.items()}
    write_header_only(_put(models, "text_encoders/clip_l.safetensors"), clip)
    t5 = meta_shapes(meta_model("T5EncoderModel", T5_XXL))
    t5.pop("encoder.embed_tokens.weight", None)
    write_header_only(_put(models, "text_encoders/t5xxl_fp16.safetensors"), t5)
    write_header_only(_put(models, "vae/ae.safetensors"), FLUX_VAE)

    _flux2_headers(models)

    hunyuan = build_preset("tiny-hunyuanvideo1.5")
    path = _put(models, "diffusion_models/hunyuanvideo1.5_480p_t2v_fp32.safetensors")
    write_safetensors(path, hunyuan15_original(hunyuan.transformer.state_dict()), "fp32")
    path = _put(models, "vae/hunyuanvideo15_vae_tiny.safetensors")
    write_safetensors(path, hunyuan15_vae_original(hunyuan.vae.state_dict()), "fp32")
    state = hunyuan.text_encoder.state_dict()
    path = _put(models, "text_encoders/qwen_2.5_vl_hunyuan15_tiny.safetensors")
    save_file({"model." + k: v for k, v in state.items()}, str(path))
    state = hunyuan.text_encoder_2.state_dict()
    path = _put(models, "text_encoders/byt5_small_glyphxl_tiny.safetensors")
    save_file({k: v for k, v in state.items() if k != "encoder.embed_tokens.weight"}, str(path))

    ltx2 = build_preset("tiny-ltx2")
    path = _put(models, "checkpoints/ltx-2-19b-dev_tiny.safetensors")
    save_file(ltx2_checkpoint(ltx2), str(path))
    state = ltx2.text_encoder.state_dict()
    path = _put(models, "text_encoders/gemma_3_tiny.safetensors")
    save_file({"model." + k: v for k, v in state.items()}, str(path))

    pixels = (np.arange(32 * 32 * 3) % 251).astype(np.uint8).reshape(32, 32, 3)
    Image.fromarray(pixels).save(_put(folder, f"input/{START_IMAGE}"))
    Image.fromarray(pixels[:, :24]).save(_put(folder, f"input/{WIDE_IMAGE}"))
    return folder
