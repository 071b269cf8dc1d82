"""FLUX.2-dev from the single files ComfyUI users hold: the DiT in Black Forest Labs' names,
the Mistral Small 3.1 text encoder (`mistral_3_small_flux2_bf16`: its language model under
`model.`, in Hugging Face's names, no vision tower) and the Flux.2 VAE.

- From headers alone (one layer of the real widths, header-only files): the Mistral file is
  recognised as a Mistral 3 encoder (no q/k/v biases: not Qwen2.5; no q/k norms: not Qwen3)
  and the three files resolve to the `random:flux.2-dev` settings; a Qwen3 encoder (Klein's)
  is refused naming the rule; with no tokenizer in the (empty) hub cache, the Mistral file's
  tokenizer is refused naming the repos it is looked for in.
- The tiny-flux2 preset saved in those layouts (the DiT in bf16) loads to the weights the
  files hold (the encoder: the preset's language model, which gives the hidden states
  Flux2Pipeline stacks) and makes the image the preset makes with them, byte for byte.

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import pytest
import torch
from comfy_files import (
    WAN_PREFIX,
    assert_files_make_the_presets_image,
    flux2_bfl,
    meta_model,
    meta_shapes,
    mistral3_comfy,
    qwen3_comfy,
    write_header_only,
    write_safetensors,
)
from safetensors.torch import save_file

from paradit.backend.models.loading import ModelSource, load_pipeline
from paradit.backend.models.presets import build_preset
from paradit.backend.models.random_presets import random_preset_spec
from paradit.backend.models.single_file.components import tokenizer as tokenizer_of
from paradit.backend.models.single_file.detect import detect
from paradit.backend.models.single_file.header import read_header
from paradit.backend.models.single_file.load import SingleFiles, resolve

SPEC = random_preset_spec("random:flux.2-dev")["components"]
MISTRAL_SMALL_31 = {  # Mistral-Small-3.1-24B's text widths, 1 layer (40 take long on meta)
    "vocab_size": 131072, "hidden_size": 5120, "intermediate_size": 32768,
    "num_hidden_layers": 1, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
}  # fmt: skip
QWEN3_4B = {
    "vocab_size": 151936, "hidden_size": 2560, "intermediate_size": 9728,
    "num_hidden_layers": 1, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
}  # fmt: skip
CALL = {"height": 32, "width": 32, "num_inference_steps": 2, "output_type": "np"}


@pytest.mark.fast
def test_flux2_dev_with_mistral3_resolves_and_a_qwen3_encoder_is_refused(tmp_path, monkeypatch):
    real = {**SPEC["transformer"]["config"], "num_layers": 1, "num_single_layers": 1}
    dit = meta_model("Flux2Transformer2DModel", real)
    shapes = {
        "flux2_dev_fp8mixed": {
            WAN_PREFIX + k: tuple(v.shape) for k, v in flux2_bfl(dit.state_dict()).items()
        },
        "mistral_3_small_flux2_bf16": {
            "model." + k: v
            for k, v in meta_shapes(meta_model("MistralModel", MISTRAL_SMALL_31)).items()
        },
        "qwen_3_4b": qwen3_comfy(meta_shapes(meta_model("Qwen3Model", QWEN3_4B))),
        "flux2-vae": meta_shapes(meta_model("AutoencoderKLFlux2", SPEC["vae"]["config"])),
    }
    files = {}
    for name, found in shapes.items():
        files[name] = str(tmp_path / f"{name}.safetensors")
        write_header_only(files[name], found)
    mistral = detect(read_header(files["mistral_3_small_flux2_bf16"]))
    assert (mistral.role, mistral.family, mistral.variant) == (
        "text_encoder",
        "mistral3",
        "mistral3 5120",
    )
    assert {k: mistral.config[k] for k in MISTRAL_SMALL_31} == MISTRAL_SMALL_31
    dit_file, vae = (files["flux2_dev_fp8mixed"],), (files["flux2-vae"],)
    resolved = resolve(SingleFiles(dit_file, (files["mistral_3_small_flux2_bf16"],), vae))
    assert (resolved.preset.name, resolved.pipeline_class, resolved.variant) == (
        "random:flux.2-dev", "Flux2Pipeline", "flux.2-dev"
    )  # fmt: skip
    with pytest.raises(
        ValueError, match="qwen_3_4b.safetensors is a qwen3 encoder; flux.2-dev needs mistral3"
    ):
        resolve(SingleFiles(dit_file, (files["qwen_3_4b"],), vae))
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "no-cache"))
    with pytest.raises(ValueError) as missing:
        tokenizer_of(resolved.encoders["text_encoder"], "random:flux.2-dev", "tokenizer")
    assert str(missing.value) == (
        "--text-encoder mistral_3_small_flux2_bf16.safetensors: a MISTRAL3 file carries no "
        "tokenizer, and none was found offline: have one of black-forest-labs/FLUX.2-dev, "
        "mistralai/Mistral-Small-3.1-24B-Instruct-2503 in the Hugging Face cache"
    )


def test_tiny_flux2_files_make_the_image_of_their_weights(tmp_path):
    tiny = build_preset("tiny-flux2")
    tiny.set_progress_bar_config(disable=True)
    dit = tmp_path / "flux2_dev_tiny_bf16.safetensors"
    held = write_safetensors(dit, flux2_bfl(tiny.transformer.state_dict()), "bf16", WAN_PREFIX)
    encoder = tmp_path / "mistral_3_small_flux2_tiny.safetensors"
    vae = tmp_path / "flux2-vae-tiny.safetensors"
    save_file(mistral3_comfy(tiny.text_encoder.state_dict()), str(encoder))
    save_file({k: v.contiguous() for k, v in tiny.vae.state_dict().items()}, str(vae))
    pipe = load_pipeline(ModelSource.parse(str(dit), [str(encoder)], [str(vae)]))
    assert type(pipe).__name__ == "Flux2Pipeline" and held
    rounded = {k: v.to(torch.bfloat16).float() for k, v in tiny.transformer.state_dict().items()}
    assert_files_make_the_presets_image(pipe, tiny, rounded, "a fox [INST] 42", CALL)
