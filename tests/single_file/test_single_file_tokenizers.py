"""Tokenizers for T5 and CLIP single files (Flux's `t5xxl_fp16`, `clip_l`) and HunyuanVideo
1.5's Qwen2.5-VL and ByT5 files, which carry none:
taken from the ComfyUI install the file sits in, or from the local hub cache, offline.

The ComfyUI tree and the hub cache are built here with tokenizers of our own (a small byte-level
BPE for CLIP, a small Unigram for T5), in the layouts ComfyUI and huggingface_hub use; the
encoder files are real safetensors headers of T5 and CLIP text models (no data).

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from comfy_files import meta_model, meta_shapes, write_header_only

from paradit.backend.models.single_file.components import tokenizer as tokenizer_of
from paradit.backend.models.single_file.detect import Part, detect
from paradit.backend.models.single_file.header import read_header

pytestmark = pytest.mark.fast

WORDS = ["a", "cat", "on", "the", "mat", "dog"]


def _clip_tokenizer_files(folder: Path) -> int:
    """vocab.json and merges.txt of a byte-level BPE as CLIPTokenizer reads them."""
    from tokenizers.pre_tokenizers import ByteLevel

    chars = sorted(ByteLevel.alphabet())  # GPT-2's 256 byte characters, as CLIP uses
    vocab = chars + [c + "</w>" for c in chars]
    merges = ["c a", "ca t</w>", "m a", "ma t</w>", "o n</w>", "t h", "th e</w>"]
    vocab += ["ca", "cat</w>", "ma", "mat</w>", "on</w>", "th", "the</w>"]
    vocab += ["<|startoftext|>", "<|endoftext|>"]
    folder.mkdir(parents=True)
    (folder / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(vocab)}))
    (folder / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")
    return len(vocab)


def _t5_tokenizer_files(folder: Path) -> int:
    """tokenizer.json of a Unigram model with T5's special tokens (ids 0, 1, 2)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    pieces = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
    pieces += [("▁" + w, -1.0) for w in WORDS] + [(c, -5.0) for c in "abcdefghijklmnopqrstuvwxyz"]
    tokenizer = Tokenizer(models.Unigram(pieces, unk_id=2))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    folder.mkdir(parents=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    config = {"eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>", "extra_ids": 0}
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return len(pieces)


def _encoder_file(path: Path, kind: str, vocab: int) -> Part:
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "t5":
        config = {"vocab_size": vocab, "d_model": 32, "d_kv": 8, "d_ff": 64, "num_layers": 1}
        model = meta_model("T5EncoderModel", {**config, "num_heads": 4})
    else:
        config = {"vocab_size": vocab, "hidden_size": 32, "intermediate_size": 64}
        model = meta_model(
            "CLIPTextModel", {**config, "num_hidden_layers": 1, "num_attention_heads": 4}
        )
    write_header_only(path, meta_shapes(model))
    header = read_header(path)
    return Part(header, detect(header))


def _slot(kind: str) -> str:
    return {"clip": "tokenizer", "t5": "tokenizer_2"}[kind]


def test_flux_encoders_take_the_tokenizers_of_the_comfyui_install_they_sit_in(
    tmp_path, no_hub_cache
):
    comfy = tmp_path / "ComfyUI"
    clip_size = _clip_tokenizer_files(comfy / "comfy" / "sd1_tokenizer")
    t5_size = _t5_tokenizer_files(comfy / "comfy" / "text_encoders" / "t5_tokenizer")
    folder = comfy / "models" / "text_encoders"
    clip = _encoder_file(folder / "clip_l.safetensors", "clip", clip_size)
    t5 = _encoder_file(folder / "flux" / "t5xxl_fp16.safetensors", "t5", t5_size + 28)
    assert (clip.detection.family, t5.detection.family) == ("clip", "t5")

    clip_tokenizer = tokenizer_of(clip, None, _slot("clip"))
    assert type(clip_tokenizer).__name__ == "CLIPTokenizer"
    assert len(clip_tokenizer) == clip_size
    ids = clip_tokenizer("a cat on the mat")["input_ids"]
    vocab = json.loads((comfy / "comfy" / "sd1_tokenizer" / "vocab.json").read_text())
    expected = ["<|startoftext|>", "a</w>", "cat</w>", "on</w>", "the</w>", "mat</w>"]
    assert ids == [vocab[t] for t in [*expected, "<|endoftext|>"]]

    t5_tokenizer = tokenizer_of(t5, None, _slot("t5"))
    assert len(t5_tokenizer) == t5_size
    assert t5_tokenizer("a cat on the mat")["input_ids"] == [3, 4, 5, 6, 7, 1]  # words, </s>


def test_without_comfyui_the_hub_cache_is_used_offline(tmp_path, no_hub_cache):
    revision = "0123456789abcdef0123456789abcdef01234567"
    repo = no_hub_cache / "models--openai--clip-vit-large-patch14"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision)
    size = _clip_tokenizer_files(repo / "snapshots" / revision)
    clip = _encoder_file(tmp_path / "elsewhere" / "clip_l.safetensors", "clip", size)
    tokenizer = tokenizer_of(clip, None, _slot("clip"))
    assert len(tokenizer) == size
    assert tokenizer("a dog")["input_ids"][1] == tokenizer.convert_tokens_to_ids("a</w>")


def test_no_tokenizer_offline_or_one_too_big_is_a_clear_error(tmp_path, no_hub_cache):
    t5 = _encoder_file(tmp_path / "elsewhere" / "t5xxl_fp16.safetensors", "t5", 64)
    with pytest.raises(ValueError) as missing:
        tokenizer_of(t5, None, _slot("t5"))
    message = str(missing.value)
    assert "t5xxl_fp16.safetensors" in message and "carries no tokenizer" in message
    assert "comfy/text_encoders/t5_tokenizer" in message and "FLUX.1-dev" in message

    comfy = tmp_path / "ComfyUI"
    size = _t5_tokenizer_files(comfy / "comfy" / "text_encoders" / "t5_tokenizer")
    small = _encoder_file(comfy / "models" / "clip" / "t5_small.safetensors", "t5", size - 1)
    with pytest.raises(ValueError, match=f"has {size} tokens, more than the encoder's {size - 1}"):
        tokenizer_of(small, None, _slot("t5"))


def test_hunyuan15_encoders_take_the_comfyui_qwen25_and_byt5_tokenizers(tmp_path, no_hub_cache):
    """ComfyUI's qwen_2.5_vl_7b and byt5_small_glyphxl carry no tokenizer: ComfyUI's
    qwen25_tokenizer (a byte-level BPE, given Qwen2.5-VL's chat template when it has none) and
    byt5_tokenizer folders are used."""
    import transformers

    comfy = tmp_path / "ComfyUI"
    size = _clip_tokenizer_files(comfy / "comfy" / "text_encoders" / "qwen25_tokenizer")
    transformers.ByT5Tokenizer().save_pretrained(
        comfy / "comfy" / "text_encoders" / "byt5_tokenizer"
    )
    folder = comfy / "models" / "text_encoders"
    folder.mkdir(parents=True)
    qwen_config = {
        "vocab_size": size, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
        "num_attention_heads": 4, "num_key_value_heads": 2,
        "rope_scaling": {"type": "mrope", "mrope_section": [2, 1, 1]},
    }  # fmt: skip
    shapes = meta_shapes(meta_model("Qwen2_5_VLTextModel", qwen_config))
    write_header_only(
        folder / "qwen_2.5_vl_7b.safetensors", {"model." + k: v for k, v in shapes.items()}
    )
    header = read_header(folder / "qwen_2.5_vl_7b.safetensors")
    qwen = Part(header, detect(header))
    assert qwen.detection.family == "qwen2.5-vl"
    preset = "random:hunyuanvideo1.5-t2v"
    tokenizer = tokenizer_of(qwen, preset, "tokenizer")
    assert type(tokenizer).__name__ == "Qwen2Tokenizer" and len(tokenizer) == size
    chat = tokenizer.apply_chat_template([{"role": "user", "content": "a cat"}], tokenize=False)
    assert chat == "<|im_start|>user\na cat<|im_end|>\n"
    byt5 = _encoder_file(folder / "byt5_small_glyphxl.safetensors", "t5", 384)
    byte_tokenizer = tokenizer_of(byt5, preset, "tokenizer_2")
    assert type(byte_tokenizer).__name__ == "ByT5Tokenizer"
    assert byte_tokenizer("ab")["input_ids"] == [ord("a") + 3, ord("b") + 3, 1]  # bytes, </s>
    with pytest.raises(ValueError, match="t5_tokenizer"):  # for any other model: a T5 file
        tokenizer_of(byt5, None, "tokenizer_2")
