"""Tokenizers for single-file text encoders that do not carry their own, found offline.

ComfyUI's UMT5 file carries its SentencePiece model (components.spiece_tokenizer); T5-XXL, CLIP-L,
Qwen3, Qwen2.5-VL and ByT5 files (Flux's `t5xxl_fp16`, `clip_l`; Z-Image's `qwen_3_4b`;
HunyuanVideo 1.5's `qwen_2.5_vl_7b` and `byt5_small_glyphxl`; FLUX.2-dev's
`mistral_3_small_flux2`) carry none (nor does a Gemma 3 file other than ComfyUI's). Without a
download,
the tokenizer comes from:

1. A ComfyUI install, which ships them: `comfy/text_encoders/t5_tokenizer` (T5),
   `comfy/sd1_tokenizer` (CLIP), `comfy/text_encoders/qwen25_tokenizer` (Qwen2.5's BPE, which
   Qwen3 shares; ComfyUI's Z-Image encoder reads it) and `comfy/text_encoders/byt5_tokenizer`
   (ByT5). It is found above the encoder file
   (`ComfyUI/models/text_encoders/t5xxl_fp16.safetensors`) or above paradit itself when it runs
   as a node pack (`ComfyUI/custom_nodes/paradit`).
2. The local Hugging Face hub cache, offline: the tokenizer folders of FLUX.1-dev or -schnell,
   or `google/t5-v1_1-xxl` and `openai/clip-vit-large-patch14`; of Z-Image-Turbo or
   `Qwen/Qwen3-4B` for Qwen3; for Qwen2.5-VL and ByT5 the HunyuanVideo 1.5 diffusers repos'
   `tokenizer`/`tokenizer_2`, Qwen-Image's or Qwen-Image-Edit's `tokenizer` or
   `Qwen/Qwen2.5-VL-7B-Instruct`; for Mistral 3 (no ComfyUI folder is read) FLUX.2-dev's
   `tokenizer` (Pixtral's processor, as Flux2Pipeline takes it) or
   `mistralai/Mistral-Small-3.1-24B-Instruct-2503`; for Gemma 3 (none either)
   `Lightricks/LTX-2`'s `tokenizer` or `google/gemma-3-12b-it`.

Each encoder kind's record (`encoders/`) says where its tokenizer is looked for, with which
class, and the chat template it gets (`EncoderKind.chat_template`): a Qwen3 tokenizer gets
Qwen3's, whatever its folder carries (ComfyUI's folder is Qwen2.5's, whose template adds a
default system message); a Qwen2.5-VL tokenizer without a chat template gets Qwen's.

Anything else is a ValueError that names both places.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ..encoders import KINDS, encoder_kind

log = logging.getLogger(__name__)

COMFY_FOLDERS = {k.name: k.comfy_tokenizer for k in KINDS if k.comfy_tokenizer is not None}
"""Encoder kind -> where a ComfyUI install ships its tokenizer (`EncoderKind.comfy_tokenizer`)."""
HUB_FOLDERS = {k.name: k.hub_tokenizers for k in KINDS if k.hub_tokenizers}
"""Encoder kind -> (repo id, subfolder) of the hub cache's folders, in the order tried."""
_CLASSES = {k.name: k.tokenizer_class for k in KINDS if k.tokenizer_class}
_FILES = {k.name: k.tokenizer_files for k in KINDS if k.tokenizer_files}
"""A folder holds a tokenizer when it has every file of one of these sets. It must be checked:
transformers 5 builds an empty tokenizer, without an error, from a folder that lacks them."""
_LEVELS = 4  # ComfyUI/models/text_encoders/sub/file: the install is at most this far up


def holds_tokenizer(folder: Path, kind: str) -> bool:
    return any(all((folder / name).is_file() for name in names) for names in _FILES[kind])


def comfy_candidates(kind: str, encoder_file: Path, package_dir: Path) -> list[Path]:
    """Where a ComfyUI install's tokenizer folder of `kind` may be, nearest first (none for
    Mistral 3: paradit reads no ComfyUI folder for it)."""
    folders: list[Path] = []
    if kind not in COMFY_FOLDERS:
        return folders
    for start in (encoder_file.resolve().parent, package_dir.resolve()):
        for root in [start, *start.parents][: _LEVELS + 1]:
            folder = root / COMFY_FOLDERS[kind]
            if folder not in folders:
                folders.append(folder)
    return folders


def find_tokenizer(kind: str, encoder_file: Path, vocab_size: int) -> Any:
    """The tokenizer of a T5 ("t5"), CLIP ("clip"), Qwen3 ("qwen3"), Qwen2.5-VL ("qwen2.5-vl")
    or ByT5 ("byt5") encoder file; ValueError
    if none is found offline or the one found has more tokens than the encoder has embeddings."""
    import transformers

    if kind not in HUB_FOLDERS:
        raise ValueError(f"no tokenizer lookup for {kind!r} encoders; known: {list(HUB_FOLDERS)}")
    tokenizer_class = getattr(transformers, _CLASSES[kind])
    package_dir = Path(__file__).resolve().parents[3]  # the paradit package (the repo's root)
    folder = next(
        (f for f in comfy_candidates(kind, encoder_file, package_dir) if holds_tokenizer(f, kind)),
        None,
    )
    source = str(folder) if folder else ""
    if folder is None:
        folder, source = _hub_cache_folder(kind)
    tokenizer = tokenizer_class.from_pretrained(str(folder)) if folder else None
    if tokenizer is None:
        comfy = (
            f"put the file inside a ComfyUI install (its {COMFY_FOLDERS[kind]} is used), or "
            if kind in COMFY_FOLDERS
            else ""
        )
        raise ValueError(
            f"--text-encoder {encoder_file.name}: a {kind.upper()} file carries no tokenizer, "
            f"and none was found offline: {comfy}have one of "
            f"{', '.join(repo for repo, _ in HUB_FOLDERS[kind])} in the Hugging Face cache"
        )
    tokens = len(getattr(tokenizer, "tokenizer", tokenizer))  # a processor holds its tokenizer
    if tokens > vocab_size:
        raise ValueError(
            f"--text-encoder {encoder_file.name}: the tokenizer from {source} has "
            f"{tokens} tokens, more than the encoder's {vocab_size} embeddings"
        )
    template = encoder_kind(kind).chat_template
    if template is not None:  # Qwen3's; Qwen's where a Qwen2.5-VL folder carries none
        template(tokenizer)
    log.info("tokenizer of %s: %s", encoder_file.name, source)
    return tokenizer


def _hub_cache_folder(kind: str) -> tuple[Path | None, str]:
    """The first tokenizer folder of `HUB_FOLDERS` the local hub cache holds (no download)."""
    from huggingface_hub import try_to_load_from_cache

    for repo, subfolder in HUB_FOLDERS[kind]:
        for names in _FILES[kind]:
            cached = try_to_load_from_cache(repo, f"{subfolder}/{names[0]}".lstrip("/"))
            if isinstance(cached, str) and holds_tokenizer(Path(cached).parent, kind):
                where = f"{repo}/{subfolder}" if subfolder else repo
                return Path(cached).parent, f"the hub cache's {where}"
    return None, ""


VISION_TOKEN_IDS = (
    "vision_start_token_id",
    "vision_end_token_id",
    "image_token_id",
    "video_token_id",
)
"""The Qwen-VL configs' names of the ids of `qwen_vl.VISION_SPECIALS`, in that order."""


def vision_token_ids(part: Any, text_tokenizer: Any, markers: str) -> dict[str, int]:
    """The Qwen-VL vision markers' ids in a single-file encoder's tokenizer, by config name;
    ValueError naming the file (`part.header.name`) when the tokenizer lacks one or its id is
    past the encoder's embeddings (`markers`: whose markers they are, for the message)."""
    from ..qwen_vl import VISION_SPECIALS  # transformers' processors: only when one is built

    vocab = part.detection.config["vocab_size"]
    ids = {}
    for name, token in zip(VISION_TOKEN_IDS, VISION_SPECIALS, strict=True):
        found = text_tokenizer.convert_tokens_to_ids(token)
        if found is None or found == text_tokenizer.unk_token_id or not 0 <= found < vocab:
            raise ValueError(
                f"--text-encoder {part.header.name}: its tokenizer has no {token} among the "
                f"encoder's {vocab} tokens ({markers})"
            )
        ids[name] = found
    return ids
