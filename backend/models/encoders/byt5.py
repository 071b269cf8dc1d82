"""ByT5: HunyuanVideo 1.5's glyph encoder, a T5 file tokenized as bytes (a preset's
`Preset.tokenizer_kinds` names it for the file's "t5")."""

from __future__ import annotations

from pathlib import Path

from .kind import EncoderKind

_HY15_REPOS = tuple(
    "hunyuanvideo-community/HunyuanVideo-1.5-Diffusers-" + v for v in ("480p_t2v", "720p_t2v")
)


BYT5 = EncoderKind(
    "byt5",
    tokenizer_class="ByT5Tokenizer",
    tokenizer_files=(
        ("tokenizer_config.json",),
    ),  # ByT5 reads bytes: the file names the added tokens
    comfy_tokenizer=Path("comfy/text_encoders/byt5_tokenizer"),
    hub_tokenizers=tuple((repo, "tokenizer_2") for repo in _HY15_REPOS),
)
