"""Qwen-Image 2.1's prompt rewriter (`qwen3.5_9b_qwen_image_2.1_pe_t2i.int8_convrot`, and
`_pe_i2i`): a Qwen3.5-9B language model that ComfyUI's Turbo templates run through
`TextGenerate` to write a longer prompt. paradit generates no text, so the file is recognised
(its gated delta-net layers, in transformers' names and ComfyUI's) only to be refused with the
reason wherever it is given: as the text encoder (alone, or beside Qwen3-VL-8B), or as the
model. Headers only: Qwen3.5 at the 9B's widths (4 of its 32 layers: three linear-attention
layers and one full-attention layer, as every four of the real model's) on the meta device,
written as header-only files. `paradit models DIR` marks the file refused, with the reason in
its JSON form.

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import os
import re

import pytest
import torch
from comfy_files import meta_model, write_header_only

from paradit.backend.models.random_presets import random_dit_config
from paradit.backend.models.single_file.detect import detect
from paradit.backend.models.single_file.header import read_header
from paradit.backend.models.single_file.listing import list_models, render
from paradit.backend.models.single_file.load import SingleFiles, resolve

PE_T2I = "qwen3.5_9b_qwen_image_2.1_pe_t2i.int8_convrot"
QWEN35_9B_TEXT = {  # comfy/text_encoders/qwen35.py's qwen35_9b (Comfy-Org/ComfyUI 61b2fd47)
    "vocab_size": 248320, "hidden_size": 4096, "intermediate_size": 12288,
    "num_hidden_layers": 4, "num_attention_heads": 16, "num_key_value_heads": 4,
    "head_dim": 256, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
    "linear_key_head_dim": 128, "linear_value_head_dim": 128, "tie_word_embeddings": False,
}  # fmt: skip
QWEN35_9B_VISION = {"depth": 2, "hidden_size": 1152, "intermediate_size": 4304,
                    "num_heads": 16, "out_hidden_size": 4096}  # fmt: skip
REFUSAL = "a language model that writes text and encodes none.*paradit generates no text"


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration

    root = tmp_path_factory.mktemp("qwen35-headers")
    with torch.device("meta"):
        config = Qwen3_5Config(text_config=QWEN35_9B_TEXT, vision_config=QWEN35_9B_VISION)
        state = Qwen3_5ForConditionalGeneration(config).state_dict()
    shapes = {k: tuple(v.shape) for k, v in state.items()}
    comfy = {  # ComfyUI's names: the language model under `model.`, the tower under `visual.`
        k.replace("model.language_model.", "model.").replace("model.visual.", "visual."): s
        for k, s in shapes.items()
    }
    dit = meta_model(
        "QwenImage21Transformer2DModel", random_dit_config("random:qwen-image2.1", "transformer")
    )
    encoder = {  # a Qwen3-VL-8B language model beside its tower (a 2-block stand-in)
        "model.embed_tokens.weight": (151936, 4096),
        "model.layers.0.self_attn.q_norm.weight": (128,),
        "model.layers.0.self_attn.q_proj.weight": (4096, 4096),
        "model.layers.0.self_attn.k_proj.weight": (1024, 4096),
        "model.layers.0.mlp.gate_proj.weight": (12288, 4096),
        "visual.patch_embed.proj.weight": (1152, 3, 2, 16, 16),
    }
    written = {
        "hf": shapes,
        PE_T2I: comfy,
        "qwen_image_2.1_diffusers": {k: tuple(v.shape) for k, v in dit.state_dict().items()},
        "qwen3vl_8b": encoder,
    }
    for name, found in written.items():
        write_header_only(root / f"{name}.safetensors", found)
    return {name: str(root / f"{name}.safetensors") for name in written}


@pytest.mark.fast
def test_prompt_rewriter_recognised_in_both_names(files):
    """transformers' names and ComfyUI's: a Qwen3.5 language model (its width, its layers),
    not a Qwen3-VL encoder nor a CLIP vision tower (what its `visual.` keys were taken for)."""
    for name, prefix in (("hf", "model.language_model."), (PE_T2I, "model.")):
        found = detect(read_header(files[name]))
        assert (found.role, found.family, found.variant, found.prefix) == (
            "text_encoder", "qwen3.5", "qwen3.5 4096", prefix
        )  # fmt: skip
        assert "4 layers (3 of them linear attention)" in found.reasons[1], found.reasons
    assert detect(read_header(files["qwen3vl_8b"])).family == "qwen3-vl"


@pytest.mark.fast
def test_prompt_rewriter_refused_wherever_it_is_given(files):
    """As the text encoder (alone, or beside Qwen3-VL-8B: the reason, not a count of files)
    and as the model: a ValueError naming the file and the rule, with what to give instead."""
    dit, pe = files["qwen_image_2.1_diffusers"], files[PE_T2I]
    name = f"{PE_T2I}.safetensors"
    for encoders in ((pe,), (files["qwen3vl_8b"], pe)):
        with pytest.raises(ValueError, match=REFUSAL) as refused:
            resolve(SingleFiles((dit,), encoders))
        assert f"--text-encoder {name} is Qwen3.5" in str(refused.value)
        assert "--text-encoder (Qwen-Image 2.1: qwen3vl_8b_int8_convrot)" in str(refused.value)
    with pytest.raises(ValueError, match=f"--model {name} is Qwen3.5 .*{REFUSAL}"):
        resolve(SingleFiles((pe,), (files["qwen3vl_8b"],)))


@pytest.mark.fast
def test_models_listing_marks_the_prompt_rewriter_refused(files):
    """`paradit models DIR`: the rewriter in both names is a Qwen3.5 text encoder marked
    "refused" in the table, the reason in the JSON form; the files paradit reads are not."""
    root = os.path.dirname(files["hf"])
    entries = {e.path: e for e in list_models(root)}
    assert len(entries) == 4, sorted(entries)
    for name in ("hf", PE_T2I):
        entry = entries[f"{name}.safetensors"]
        assert (entry.role, entry.variant) == ("text_encoder", "qwen3.5 4096")
        assert re.match(REFUSAL, entry.to_dict()["refused"]), entry.to_dict()
        row = render([entry]).splitlines()[0]
        assert row.split()[1:3] == ["text_encoder", "qwen3.5"] and row.endswith("  refused")
    for name in ("qwen_image_2.1_diffusers", "qwen3vl_8b"):
        entry = entries[f"{name}.safetensors"]
        assert entry.to_dict()["refused"] == "" and "refused" not in render([entry]), entry
