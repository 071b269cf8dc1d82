"""The tiny presets' shared parts: the text-encoder builders (`tiny_parts.tiny_text_config`,
`encoders/qwen3_vl.py`'s `tiny_qwen3_vl*`), a file of what they build recognised with the
config they built it from (so a preset saved as single files loads as the preset); the
scheduler a random preset ships (`random_presets.shipped_scheduler`), the one its tiny preset
takes.

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import pytest
import torch
from comfy_files import write_header_only

from paradit.backend.models.encoders.qwen3_vl import (
    qwen3_vl_encoder,
    qwen3_vl_vision,
    tiny_qwen3_vl,
    tiny_qwen3_vl_text_model,
)
from paradit.backend.models.families import SPECS
from paradit.backend.models.random_presets import random_preset_spec
from paradit.backend.models.seeded import QWEN_CHAT_VOCAB_SIZE
from paradit.backend.models.single_file.header import read_header
from paradit.backend.models.tiny_parts import TEXT_DIM, TINY_WIDTHS, tiny_text_config


def _header(tmp_path, shapes: dict[str, tuple[int, ...]]):
    path = tmp_path / "encoder.safetensors"
    write_header_only(path, shapes)
    return read_header(path, check_size=False)


@pytest.mark.fast
def test_tiny_text_config_takes_the_shared_widths_and_the_callers_settings():
    config = tiny_text_config(100, 3, head_dim=16, tie_word_embeddings=True)
    assert config == {
        **TINY_WIDTHS,
        "vocab_size": 100,
        "num_hidden_layers": 3,
        "head_dim": 16,
        "tie_word_embeddings": True,
    }
    assert TINY_WIDTHS["hidden_size"] == TEXT_DIM


@pytest.mark.fast
def test_a_tiny_qwen3_vl_language_model_file_is_recognised_with_its_config(tmp_path):
    with torch.device("meta"):
        model = tiny_qwen3_vl_text_model(QWEN_CHAT_VOCAB_SIZE, 3, tie_word_embeddings=True)
    shapes = {f"model.language_model.{k}": tuple(v.shape) for k, v in model.state_dict().items()}
    found = qwen3_vl_encoder(_header(tmp_path, shapes))
    assert found is not None
    built = model.config.to_dict()
    for key, value in found.config.items():
        if key != "_class_name":
            assert built[key] == value, key


@pytest.mark.fast
def test_a_tiny_qwen3_vl_file_with_its_tower_is_recognised_with_the_tower_it_was_given(tmp_path):
    vision = {
        "depth": 2,
        "hidden_size": 64,
        "intermediate_size": 64,
        "num_heads": 4,
        "out_hidden_size": TEXT_DIM,
        "deepstack_visual_indexes": [],
        "num_position_embeddings": 64,
    }
    with torch.device("meta"):
        model = tiny_qwen3_vl(2, vision)
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    header = _header(tmp_path, shapes)
    tower, _ = qwen3_vl_vision(header)
    assert tower is not None and {k: tower[k] for k in vision} == vision
    found = qwen3_vl_encoder(header)
    assert found is not None
    assert found.config["rope_parameters"] == model.config.text_config.rope_parameters
    assert found.config["num_hidden_layers"] == 2


SHIPPED_SCHEDULERS = {
    "tiny-krea2": "random:krea2",
    "tiny-qwen-image2.1": "random:qwen-image2.1",
    "tiny-qwen-image": "random:qwen-image",
    "tiny-flux2": "random:flux.2-dev",
    "tiny-flux2-klein": "random:flux.2-klein-4b",
    "tiny-z-image": "random:z-image-turbo",
}
"""Tiny presets whose scheduler is the real model's, as its random preset ships it."""


@pytest.mark.fast
@pytest.mark.parametrize("tiny", sorted(SHIPPED_SCHEDULERS))
def test_a_tiny_preset_takes_the_scheduler_its_model_ships(tiny):
    _pipeline, builders = next(s.tiny_presets[tiny] for s in SPECS if tiny in s.tiny_presets)
    ours = builders["scheduler"]()
    shipped = random_preset_spec(SHIPPED_SCHEDULERS[tiny])["components"]["scheduler"]["config"]
    assert type(ours).__name__ == shipped["_class_name"]
    settings = {k: v for k, v in shipped.items() if not k.startswith("_")}
    assert {k: ours.config[k] for k in settings} == settings
