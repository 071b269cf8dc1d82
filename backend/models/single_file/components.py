"""The parts of a single-file pipeline that are read whole: text encoders and their
tokenizers, CLIP vision towers, VAEs (the DiTs are read row block by
row block: `build.DitWeights`)."""

from __future__ import annotations

from typing import Any

import torch

from ..casting import cast_model
from ..encoders import encoder_kind
from ..presets import build_preset, preset_components
from ..seeded import VOCAB_SIZE
from .detect import detect, recognise
from .file_presets import PRESETS
from .quant import RowReader, is_quantized_weight, is_scale_key
from .spec import file_spec
from .tokenizers import HUB_FOLDERS, find_tokenizer
from .vocabulary import FileTools, Part


def read_whole(part: Part, dtype: torch.dtype, prefix: str = "") -> dict[str, torch.Tensor]:
    """Every weight tensor of a (small) file, dequantized to `dtype`, keys without `prefix`."""
    reader = RowReader(part.header)
    out: dict[str, torch.Tensor] = {}
    try:
        for key, info in part.header.tensors.items():
            if is_scale_key(key):
                continue
            if info.dtype in ("U8", "I8", "I16", "I32", "I64", "BOOL") and not is_quantized_weight(
                part.header, key
            ):
                continue  # e.g. Comfy's UMT5 `spiece_model`: not a weight
            target = torch.empty(info.shape, dtype=dtype)
            reader.read_rows(key, 0, target)
            out[key[len(prefix) :] if key.startswith(prefix) else key] = target
    finally:
        reader.close()
    return out


def empty_encoder(
    part: Part, dtype: torch.dtype, model_class: str | None = None
) -> torch.nn.Module:
    """A text encoder or CLIP vision tower of the config its header gave (`model_class` in
    place of the header's class), its parameters on the meta device in `dtype` (buffers such
    as CLIP's position ids built for real)."""
    import transformers
    from accelerate import init_empty_weights

    config = dict(part.detection.config)
    model_class = getattr(transformers, model_class or config.pop("_class_name"))
    config.pop("_class_name", None)
    with init_empty_weights(include_buffers=False):
        model = model_class(model_class.config_class(**config))
    if hasattr(model, "tie_weights"):
        model.tie_weights()
    return cast_model(model, dtype).eval()


def encoder_model(
    part: Part, dtype: torch.dtype, flag: str = "--text-encoder", model_class: str | None = None
) -> torch.nn.Module:
    """A text encoder or CLIP vision tower, read whole, with the config its header gave (and
    `model_class` in place of the header's class: Flux.2 Klein takes Qwen3 as a causal LM)."""
    model = empty_encoder(part, dtype, model_class)
    state = read_whole(part, dtype, part.detection.prefix)
    for tied in ("shared.weight", "encoder.embed_tokens.weight"):  # T5: one is enough
        other = "encoder.embed_tokens.weight" if tied == "shared.weight" else "shared.weight"
        if tied not in state and other in state:
            state[tied] = state[other]
    expected = set(model.state_dict())
    for key in list(state):  # ComfyUI's CLIP files keep transformers' former prefixes
        bare = key.removeprefix("text_model.").removeprefix("vision_model.")
        if key not in expected and bare in expected:
            state[bare] = state.pop(key)
        elif key not in expected and f"model.{key}" in expected:  # a causal LM's body
            state[f"model.{key}"] = state.pop(key)
    embeddings = state.get("model.embed_tokens.weight")
    if "lm_head.weight" in expected and "lm_head.weight" not in state and embeddings is not None:
        state["lm_head.weight"] = embeddings  # tied, or (Qwen3-8B) unused for text features
    missing = sorted(expected - set(state))
    if missing:
        raise ValueError(
            f"{flag} {part.header.name}: no weights for {missing[:3]} "
            f"({len(missing)} in all) of a {part.detection.variant} encoder"
        )
    state = {k: v for k, v in state.items() if k in expected}
    model.load_state_dict(state, assign=True, strict=True)
    if hasattr(model, "tie_weights"):
        model.tie_weights()
    return cast_model(model, dtype).eval()


def tokenizer(part: Part, preset_name: str, slot: str) -> Any:
    """The tokenizer of a text encoder file: the SentencePiece model it carries, the presets'
    byte tokenizer for their reduced encoders, or for T5/CLIP files one found offline
    (`tokenizers.find_tokenizer`)."""

    kind = encoder_kind(part.detection.family or "")
    if SPIECE_KEY in part.header.tensors and kind is not None and kind.sentencepiece_bpe:
        return gemma_tokenizer(part)  # ComfyUI's Gemma 3 carries its SentencePiece model too
    if SPIECE_KEY in part.header.tensors:  # ComfyUI's UMT5 carries its SentencePiece model
        return spiece_tokenizer(part)
    vocab = part.detection.config.get("vocab_size")
    tiny = kind is not None and kind.tiny_vocab and vocab == kind.tiny_vocab
    if vocab == VOCAB_SIZE or tiny:  # the presets' byte vocabularies
        return getattr(preset_parts(preset_name, {slot}), slot)
    name = _tokenizer_kind(part.detection.family, preset_name)
    if name in HUB_FOLDERS:  # T5-XXL, CLIP-L, Qwen3, Qwen2.5-VL, ByT5, Mistral 3: offline
        return find_tokenizer(name, part.header.path, vocab)
    raise ValueError(
        f"--text-encoder {part.header.name}: its tokenizer ({part.detection.variant}, vocabulary "
        f"{part.detection.config.get('vocab_size')}) is not shipped with paradit yet"
    )


SPIECE_KEY = "spiece_model"


def _sentencepiece(part: Part) -> Any:
    """The SentencePiece model a file carries as a uint8 tensor (`spiece_model`)."""
    import sentencepiece

    info = part.header.tensors[SPIECE_KEY]
    reader = RowReader(part.header)
    try:
        raw = reader._read(info.offset, info.nbytes)  # noqa: SLF001 - the bytes as stored
    finally:
        reader.close()
    try:
        return sentencepiece.SentencePieceProcessor(model_proto=raw.tobytes())
    except (RuntimeError, OSError) as exc:
        raise ValueError(
            f"--text-encoder {part.header.name}: its SentencePiece model ({SPIECE_KEY}) "
            f"cannot be read: {exc}"
        ) from None


def gemma_tokenizer(part: Part) -> Any:
    """Gemma's tokenizer of the SentencePiece model a file carries (BPE with byte fallback):
    its pieces in their order as the vocabulary, the merges in that order (transformers'
    `generate_merges`, as the SentencePiece extractor orders them), the marker pieces
    (`<start_of_turn>`, `<end_of_turn>`, `<image_soft_token>`...: pieces `<...>` that the
    model never merges, score 0) as added tokens, and a `<bos>` before every text, as the
    pipeline's Gemma tokenizer adds it. Reading the model's protobuf directly would need the
    `protobuf` package, which paradit does not depend on."""
    import transformers
    from tokenizers import AddedToken
    from transformers.tokenization_utils_tokenizers import generate_merges

    processor = _sentencepiece(part)
    count = processor.get_piece_size()
    vocab = {processor.id_to_piece(i): i for i in range(count)}
    special = {
        processor.id_to_piece(i)
        for i in range(count)
        if processor.IsControl(i) or processor.IsUnknown(i)
    }
    markers = [
        piece
        for i in range(count)
        if (piece := processor.id_to_piece(i)).startswith("<")
        and piece.endswith(">")
        and piece not in special
        and not processor.IsByte(i)
        and processor.get_score(i) == 0
    ]
    merges = generate_merges(vocab, skip_tokens=special | set(markers))
    tokenizer = transformers.GemmaTokenizer(vocab=vocab, merges=merges, add_bos_token=True)
    tokenizer.add_tokens([AddedToken(p, normalized=False, special=False) for p in markers])
    _check_vocab(part, tokenizer)
    return tokenizer


def _check_vocab(part: Part, tokenizer: Any) -> None:
    vocab = part.detection.config.get("vocab_size", 0)
    if len(tokenizer) > vocab:
        raise ValueError(
            f"--text-encoder {part.header.name}: its tokenizer has {len(tokenizer)} tokens, "
            f"more than the encoder's {vocab} embeddings"
        )


def spiece_tokenizer(part: Part) -> Any:
    """The T5 tokenizer of the SentencePiece model a file carries as a uint8 tensor: its
    pieces and scores as a Unigram model (SentencePiece's precompiled normalisation map is
    not carried over: text is taken as given, which differs only for unusual Unicode)."""
    import transformers

    processor = _sentencepiece(part)
    pieces = [(processor.id_to_piece(i), processor.get_score(i)) for i in range(len(processor))]
    tokenizer = transformers.T5Tokenizer(vocab=pieces, extra_ids=0, model_max_length=512)
    _check_vocab(part, tokenizer)
    return tokenizer


def _tokenizer_kind(kind: str | None, preset_name: str) -> str | None:
    """The tokenizer an encoder kind takes under preset `preset_name` (`Preset.tokenizer_kinds`:
    HunyuanVideo 1.5's T5 is ByT5); the kind itself where no preset says otherwise."""
    for preset in PRESETS.values():
        if preset.name == preset_name and kind in preset.tokenizer_kinds:
            return preset.tokenizer_kinds[kind]
    return kind


def preset_parts(name: str, wanted: set[str]) -> Any:
    """Preset `name`'s pipeline holding the `wanted` components, built with its VAE and DiT
    on the meta device and its processor: HunyuanVideo 1.5's pipelines read their VAE's config
    as they are made, Qwen-Image 2.1's its processor's chat template, FLUX.2 [klein] KV's set
    their DiT's attention processors."""
    available = preset_components(name)
    needed = available & {"vae", "processor", "transformer"}
    return build_preset(name, components=frozenset(wanted & available) | needed, device="meta")


def vae_model(part: Part, preset_name: str, dtype: torch.dtype) -> torch.nn.Module:
    """The VAE of a file, with the config of the preset of its model (a header cannot hold
    latent statistics or scale factors)."""

    reference = preset_parts(preset_name, {"vae"}).vae
    config = {**dict(reference.config), "_class_name": type(reference).__name__}
    from accelerate import init_empty_weights

    with init_empty_weights(include_buffers=False):
        model = type(reference).from_config(config)
    state = read_whole(part, torch.float32)
    spec = file_spec(part.detection.family or "")
    if spec is not None and spec.vae_key_names is not None:  # the family's own VAE names
        state = spec.vae_key_names(state, part.detection)
    elif part.detection.layout == "ldm":
        from diffusers.loaders.single_file_utils import convert_ldm_vae_checkpoint

        statistics = {k: v for k, v in state.items() if k.startswith("bn.")}  # Flux.2's
        state = {**convert_ldm_vae_checkpoint(state, dict(model.config)), **statistics}
    expected = model.state_dict()
    for key in expected:  # a batch norm's step count (Flux.2): an integer, not read
        if key.endswith("num_batches_tracked") and key not in state:
            state[key] = expected[key]
    problems = sorted(set(expected) ^ set(state))
    bad_shapes = [k for k in expected if k in state and state[k].shape != expected[k].shape]
    if problems or bad_shapes:
        raise ValueError(
            f"--vae {part.header.name}: does not fit {part.detection.variant} "
            f"(mismatched keys {(problems + bad_shapes)[:3]})"
        )
    model.load_state_dict(state, assign=True, strict=True)
    return cast_model(model, dtype).eval()


FILE_TOOLS = FileTools(recognise, detect, read_whole, preset_parts, tokenizer)
"""What the drivers hand a family's single-file hooks (`vocabulary.FileTools`)."""
