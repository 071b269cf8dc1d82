"""Qwen-Image and Qwen-Image-Edit from the single files ComfyUI users hold: the DiT in
diffusers' names (`qwen_image_bf16`, `qwen_image_edit_2509_bf16`), the Qwen2.5-VL text encoder
(`qwen_2.5_vl_7b`: the language model under `model.`, the vision tower under `visual.`,
`lm_head`) and the Qwen-Image VAE (`qwen_image_vae`: the Wan 2.1 VAE's key names).

- From headers alone (the real architectures on the meta device, one block of each,
  written as header-only files): the Qwen-Image VAE holds exactly the Wan 2.1 VAE's names
  and shapes, so it is read as one; the three files resolve to the `random:qwen-image`
  settings; a text encoder of another width and a Wan 2.2 VAE are refused naming the file
  and what was expected. The same DiT in a file named `qwen_image_edit_2509_bf16` is
  Qwen-Image-Edit-2509 (by the name alone: Edit-Plus), in `qwen_image_edit_bf16` the first
  Qwen-Image-Edit; the vision tower's config read off the encoder's header is Qwen2.5-VL-7B's;
  a text encoder file without the vision tower is refused for an edit DiT, naming what is
  missing.
- The tiny presets saved in those layouts (the DiT in bf16, as the real file) load to the
  weights the files hold and make the image the preset makes with them, byte for byte:
  Qwen-Image from a prompt, Qwen-Image-Edit-2509 from a prompt and an input image (its text
  encoder whole: the vision tower and head included). An edit text encoder of another
  vocabulary and without `lm_head` takes the tokenizer of the ComfyUI install it sits in and a
  processor with Qwen2.5-VL's published settings, and encodes prompt and image as the preset.

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from accelerate import init_empty_weights
from comfy_files import (
    assert_files_make_the_presets_image,
    meta_model,
    meta_shapes,
    write_header_only,
    write_safetensors,
)
from safetensors.torch import save_file
from transformers import Qwen2_5_VLForConditionalGeneration

from paradit.backend.models.encoders.qwen25_vl import qwen25_vl_vision
from paradit.backend.models.families.qwen_image_edit.single_file import (
    edit_text_parts,
    qwen25_vl_config,
    transformers_names,
)
from paradit.backend.models.loading import ModelSource, load_pipeline
from paradit.backend.models.presets import build_preset
from paradit.backend.models.random_presets import random_preset_spec
from paradit.backend.models.single_file.components import FILE_TOOLS
from paradit.backend.models.single_file.detect import Part, detect, recognise
from paradit.backend.models.single_file.header import read_header
from paradit.backend.models.single_file.load import SingleFiles, resolve
from paradit.backend.models.single_file.tokenizers import VISION_TOKEN_IDS

SPEC = random_preset_spec("random:qwen-image")["components"]
QWEN25_VL_7B = {  # Qwen/Qwen2.5-VL-7B-Instruct's text config (the shapes that matter), 1 layer
    "vocab_size": 152064, "hidden_size": 3584, "intermediate_size": 18944,
    "num_hidden_layers": 1, "num_attention_heads": 28, "num_key_value_heads": 4,
}  # fmt: skip
CALL = {"height": 32, "width": 32, "num_inference_steps": 2, "output_type": "np"}


def _qwen25_comfy(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A Qwen2_5_VLForConditionalGeneration state dict as ComfyUI's qwen_2.5_vl_7b holds it:
    the language model under `model.`, the vision tower under `visual.`, `lm_head`."""
    out = {}
    for name, value in state.items():
        name = name.replace("model.language_model.", "model.").replace("model.visual.", "visual.")
        out[name] = value
    return out


QWEN25_VL_7B_VISION = {  # its vision tower's published config (the shapes that matter), 1 block
    "depth": 1, "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16,
    "out_hidden_size": 3584, "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2,
}  # fmt: skip


def _qwen25_header(text: dict, vision: bool = True) -> dict[str, tuple[int, ...]]:
    """A Qwen2.5-VL file's shapes as ComfyUI writes it, with or without the vision tower."""
    vision_config = {**QWEN25_VL_7B_VISION, "out_hidden_size": text["hidden_size"]}
    config = {"text_config": text, "vision_config": vision_config}
    shapes = _qwen25_comfy(meta_shapes(meta_model("Qwen2_5_VLForConditionalGeneration", config)))
    return {k: v for k, v in shapes.items() if vision or not k.startswith("visual.")}


@pytest.mark.fast
def test_qwen_image_qwen25_vl_and_its_vae_from_their_headers(tmp_path):
    real_widths = {**SPEC["transformer"]["config"], "num_layers": 1}  # 60 take seconds on meta
    dit = meta_model("QwenImageTransformer2DModel", real_widths)
    qwen_vae = meta_shapes(meta_model("AutoencoderKLQwenImage", SPEC["vae"]["config"]))
    wan_vae = meta_shapes(meta_model("AutoencoderKLWan", {}))
    assert qwen_vae == wan_vae  # the Wan 2.1 VAE's names and shapes: read as one
    wan22 = meta_model("AutoencoderKLWan", random_preset_spec("random:wan2.2-ti2v-5b")[
        "components"]["vae"]["config"])  # fmt: skip
    shapes = {
        "qwen_image_bf16": meta_shapes(dit),
        "qwen_2.5_vl_7b": _qwen25_header(QWEN25_VL_7B),
        "qwen_2.5_vl_3b": _qwen25_header(  # Qwen2.5-VL-3B's widths
            {
                **QWEN25_VL_7B,
                "hidden_size": 2048,
                "num_attention_heads": 16,
                "num_key_value_heads": 2,
            }
        ),
        "qwen_image_vae": qwen_vae,
        "wan2.2_vae": meta_shapes(wan22),
    }
    files = {}
    for name, found in shapes.items():
        files[name] = str(tmp_path / f"{name}.safetensors")
        write_header_only(files[name], found)
    assert detect(read_header(files["qwen_image_vae"])).variant == "wan2.1 vae"
    resolved = resolve(
        SingleFiles(
            (files["qwen_image_bf16"],), (files["qwen_2.5_vl_7b"],), (files["qwen_image_vae"],)
        )
    )
    assert (resolved.preset.name, resolved.pipeline_class, resolved.variant) == (
        "random:qwen-image", "QwenImagePipeline", "qwen-image"
    )  # fmt: skip
    dit_file = (files["qwen_image_bf16"],)
    with pytest.raises(ValueError, match="qwen_2.5_vl_3b.safetensors has width 2048; qwen-image "
                       "takes text embeddings of width 3584"):  # fmt: skip
        resolve(SingleFiles(dit_file, (files["qwen_2.5_vl_3b"],), (files["qwen_image_vae"],)))
    with pytest.raises(ValueError, match=r"wan2.2_vae.safetensors is a wan2.2 vae with 48 latent "
                       r"channels; qwen-image needs the Qwen-Image VAE"):  # fmt: skip
        resolve(SingleFiles(dit_file, (files["qwen_2.5_vl_7b"],), (files["wan2.2_vae"],)))
    encoder, vision = read_header(files["qwen_2.5_vl_7b"]), QWEN25_VL_7B_VISION
    assert qwen25_vl_vision(encoder)[0] == {
        **vision, "in_channels": 3, "fullatt_block_indexes": [7, 15, 23, 31],
        "tokens_per_second": 2,
    }  # fmt: skip
    assert "a vision tower under 'visual.': 1 blocks of width 1280" in detect(encoder).describe()
    ids = dict(zip(VISION_TOKEN_IDS, (151652, 151653, 151655, 151656), strict=True))  # Qwen2.5-VL's
    with init_empty_weights(include_buffers=True):
        built = Qwen2_5_VLForConditionalGeneration(
            qwen25_vl_config(Part(encoder, detect(encoder)), ids)
        )
    held = {k: tuple(v.shape) for k, v in encoder.tensors.items()}
    assert meta_shapes(built) == transformers_names(held, "model.")  # every weight, its shape
    text_only = str(tmp_path / "qwen_2.5_vl_7b_text.safetensors")
    write_header_only(text_only, _qwen25_header(QWEN25_VL_7B, vision=False))
    rest = ((files["qwen_2.5_vl_7b"],), (files["qwen_image_vae"],))
    for name, pipeline, variant, why in (
        ("qwen_image_edit_2509_bf16", "QwenImageEditPlusPipeline", "qwen-image-edit-plus",
         "Qwen-Image-Edit-2509 by its file name ('edit_2509': the Edit-Plus releases"),
        ("qwen_image_edit_bf16", "QwenImageEditPipeline", "qwen-image-edit",
         "the first Qwen-Image-Edit by its file name ('edit' without a release date"),
    ):  # fmt: skip
        edit = str(tmp_path / f"{name}.safetensors")  # the same DiT shapes
        write_header_only(edit, shapes["qwen_image_bf16"])
        assert why in detect(read_header(edit)).describe()
        resolved = resolve(SingleFiles((edit,), *rest))
        assert (resolved.preset.name, resolved.pipeline_class, resolved.variant) == (
            "random:qwen-image-edit", pipeline, variant
        )  # fmt: skip
        with pytest.raises(ValueError, match=rf"--text-encoder qwen_2.5_vl_7b_text.safetensors "
                           rf"holds no vision tower \(no visual. weights\): {variant} reads its "
                           r"input images through Qwen2.5-VL's vision tower"):  # fmt: skip
            resolve(SingleFiles((edit,), (text_only,), rest[1]))


def _tiny_files(folder, preset: str, dit_name: str, encoder_name: str) -> tuple:
    """The preset (progress bar off), its DiT written in bf16 as `dit_name`, its text encoder
    in ComfyUI's names as `encoder_name` and its VAE (the tiny VAE's levels: diffusers' names)
    in `folder`: (the preset, the pipeline those files load as, the DiT's weights as the file
    holds them)."""
    tiny = build_preset(preset)
    tiny.set_progress_bar_config(disable=True)
    dit = folder / dit_name
    held = write_safetensors(dit, tiny.transformer.state_dict(), "bf16")
    encoder = folder / encoder_name
    vae = folder / "qwen_image_vae_tiny.safetensors"
    save_file(_qwen25_comfy(tiny.text_encoder.state_dict()), str(encoder))
    save_file(tiny.vae.state_dict(), str(vae))
    pipe = load_pipeline(ModelSource.parse(str(dit), [str(encoder)], [str(vae)]))
    return tiny, pipe, held


def test_tiny_qwen_image_files_make_the_image_of_their_weights(tmp_path):
    files = ("qwen_image_tiny_bf16.safetensors", "qwen_2.5_vl_tiny.safetensors")
    tiny, pipe, held = _tiny_files(tmp_path, "tiny-qwen-image", *files)
    assert type(pipe).__name__ == "QwenImagePipeline"
    assert_files_make_the_presets_image(pipe, tiny, held, "a fox <|im_start|> 42", CALL)


def test_tiny_qwen_image_edit_files_make_the_edit_of_their_weights(tmp_path, monkeypatch):
    from diffusers.pipelines.qwenimage import pipeline_qwenimage_edit_plus as plus
    from PIL import Image

    # Edit-Plus VAE-encodes its inputs at about 1024x1024 pixels (4096 reference tokens a
    # step); both pipelines here encode them at 64x64 instead, the cost of a tiny test
    monkeypatch.setattr(plus, "VAE_IMAGE_SIZE", 64 * 64)
    files = ("qwen_image_edit_2509_tiny_bf16.safetensors", "qwen_2.5_vl_tiny_vl.safetensors")
    tiny, pipe, held = _tiny_files(tmp_path, "tiny-qwen-image-edit", *files)
    assert type(pipe).__name__ == "QwenImageEditPlusPipeline"
    assert pipe.processor.image_processor.to_dict() == tiny.processor.image_processor.to_dict()
    pixels = (np.random.RandomState(1).rand(48, 64, 3) * 255).astype(np.uint8)
    call = {**CALL, "image": [Image.fromarray(pixels)]}
    assert_files_make_the_presets_image(
        pipe, tiny, held, "a fox <|image_pad|> 42", call, whole_text_encoder=True
    )
    # A Qwen2.5-VL file of a real vocabulary (here 6 tokens past the preset's) and without
    # lm_head (ComfyUI's has none): the tokenizer of the ComfyUI install it sits in (here the
    # preset's, saved there), a processor with Qwen2.5-VL's published pixel bounds, the
    # tokenizer's vision marker ids. It encodes the prompt and image as the preset does.
    comfy = tmp_path / "ComfyUI"
    tiny.tokenizer.save_pretrained(comfy / "comfy" / "text_encoders" / "qwen25_tokenizer")
    state = _qwen25_comfy(tiny.text_encoder.state_dict())
    del state["lm_head.weight"]
    state["model.embed_tokens.weight"] = torch.cat([state["model.embed_tokens.weight"]] * 2)[:320]
    (comfy / "models" / "text_encoders").mkdir(parents=True)
    real = comfy / "models" / "text_encoders" / "qwen_2.5_vl_7b.safetensors"
    save_file(state, str(real))
    parts = edit_text_parts(
        recognise(str(real)), "tiny-qwen-image-edit", torch.float32, frozenset(), FILE_TOOLS
    )
    assert parts["processor"].image_processor.size.longest_edge == 12845056  # the preset's 1003520
    assert parts["processor"].tokenizer is parts["tokenizer"]
    encoder = parts["text_encoder"]
    assert encoder.config.image_token_id == parts["tokenizer"].convert_tokens_to_ids(
        "<|image_pad|>"
    )
    assert torch.equal(encoder.lm_head.weight, state["model.embed_tokens.weight"])
    found = copy.copy(tiny)
    found.register_modules(**parts)
    shown = [pipe.image_processor.resize(call["image"][0], 56, 84)]
    embeds = [
        each.encode_prompt(prompt="make it blue", image=shown, device=torch.device("cpu"))[0]
        for each in (found, tiny)
    ]
    assert torch.equal(*embeds)
    # ComfyUI's qwen_2.5_vl_7b_fp8_scaled: the vision tower's matrices are scaled fp8 too
    scaled = tmp_path / "qwen_2.5_vl_tiny_fp8_scaled.safetensors"
    held = write_safetensors(scaled, _qwen25_comfy(tiny.text_encoder.state_dict()), "fp8_scaled")
    assert "visual.blocks.0.attn.qkv.scale_weight" in read_header(str(scaled)).tensors
    skip = frozenset({"processor"})  # a component skipped is None
    parts = edit_text_parts(
        recognise(str(scaled)), "tiny-qwen-image-edit", torch.float32, skip, FILE_TOOLS
    )
    assert parts["processor"] is None
    ours, theirs = parts["text_encoder"].state_dict(), transformers_names(held, "model.")
    assert set(ours) == set(theirs) and all(torch.equal(ours[k], theirs[k]) for k in theirs)
