"""Seeded weights and a byte-level tokenizer, shared by the tiny and the random presets.

`seed_weights` sets every parameter from a seed, independent of the library's own init code
(which changes between versions): matrices get N(0, 1/fan_in), biases N(0, 0.02^2), norm gains
1 + N(0, 0.02^2), drawn in float32 on the CPU one parameter at a time (in name order) and cast,
so the same seed gives the same weights on every machine, in any dtype, on any device.

`SeededRows` draws the same kinds of values block by block of rows instead, each block of
`ROW_BLOCK` rows from its own generator (seeded from the seed, the parameter's name and the
block's index), so any rows of a weight can be drawn alone: each rank of a sharded `random:`
preset draws only its own shard's rows (a `models.sharded_load.WeightSource`), and every
world size gets the same full weights.
"""

from __future__ import annotations

import hashlib

import torch

# Tokenizer: ids 0..2 are special, then one token per byte.
PAD_ID, EOS_ID = 0, 1
SPECIAL_TOKENS = ("<pad>", "</s>", "<unk>")
VOCAB_SIZE = len(SPECIAL_TOKENS) + 256


def seed_weights(module: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Set every parameter of `module` from `seed`, whatever its device and dtype."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in sorted(module.named_parameters()):
            noise = torch.randn(param.shape, generator=generator, dtype=torch.float32)
            if name.endswith("bias"):
                value = noise * 0.02
            elif _is_gain(name, param):
                value = 1.0 + noise * 0.02
            else:
                fan_in = max(1, param.numel() // param.shape[0])
                value = noise * fan_in**-0.5
            param.copy_(value)
    return module.eval()


def _is_gain(name: str, param: torch.Tensor) -> bool:
    """Norm gains: 1-D weights and the (C, 1, 1[, 1]) `gamma` of Wan's VAE RMS norms."""
    return name.endswith("gamma") or (param.ndim == 1 and name.endswith("weight"))


ROW_BLOCK = 64
"""Rows drawn from one generator by `SeededRows`."""


class SeededRows:
    """Seeded weights by parameter name, any block of rows drawn on its own (a WeightSource)."""

    def __init__(self, shapes: dict[str, tuple[int, ...]], seed: int):
        self.shapes = {name: tuple(shape) for name, shape in shapes.items()}
        self.seed = seed

    @classmethod
    def of(cls, module: torch.nn.Module, seed: int) -> SeededRows:
        """For every parameter of `module` (global shapes: a sharded parameter's whole)."""
        return cls({name: tuple(p.shape) for name, p in module.named_parameters()}, seed)

    def __str__(self) -> str:
        return f"seeded weights (seed {self.seed})"

    def names(self) -> set[str]:
        return set(self.shapes)

    def read_rows(self, name: str, start: int, out: torch.Tensor) -> int:
        """Fill `out` with rows start..start+len(out) of parameter `name`; bytes written."""
        shape = self.shapes[name]
        flat = out.reshape(1, *out.shape) if out.dim() == 0 else out
        rows, row_shape = flat.shape[0], tuple(shape[1:])
        row_items = 1
        for size in row_shape:
            row_items *= size
        scale, offset = _scale(name, shape, row_items)
        first, last = start // ROW_BLOCK, (start + rows - 1) // ROW_BLOCK
        with torch.no_grad():
            for block in range(first, last + 1):
                lo = max(start, block * ROW_BLOCK)
                hi = min(start + rows, (block + 1) * ROW_BLOCK, shape[0] if shape else 1)
                generator = torch.Generator().manual_seed(self._block_seed(name, block))
                count = min(ROW_BLOCK, (shape[0] if shape else 1) - block * ROW_BLOCK)
                values = torch.empty((count, *row_shape)).normal_(
                    offset, scale, generator=generator
                )
                flat[lo - start : hi - start].copy_(
                    values[lo - block * ROW_BLOCK : hi - block * ROW_BLOCK]
                )
        return flat.numel() * flat.element_size()

    def close(self) -> None:
        pass

    def _block_seed(self, name: str, block: int) -> int:
        digest = hashlib.sha256(f"{self.seed}/{name}/{block}".encode()).digest()
        return int.from_bytes(digest[:8], "little") & (2**63 - 1)


def _scale(name: str, shape: tuple[int, ...], row_items: int) -> tuple[float, float]:
    """(scale, offset) of a parameter's values, as `seed_weights` draws them."""
    if name.endswith("bias"):
        return 0.02, 0.0
    if name.endswith("gamma") or (len(shape) == 1 and name.endswith("weight")):
        return 0.02, 1.0
    return max(1, row_items) ** -0.5, 0.0


def seed_rows(module: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Set every parameter of `module` from `SeededRows(seed)`: the same values a sharded
    build draws rank by rank."""
    source = SeededRows.of(module, seed)
    with torch.no_grad():
        for name, param in module.named_parameters():
            source.read_rows(name, 0, param.data)
    return module.eval()


def byte_tokenizer(max_length: int, *, append_eos: bool = True):
    """Byte-level tokenizer: specials <pad>=0 </s>=1 <unk>=2, then one token per byte;
    `append_eos`: </s> ends every text."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {token: index for index, token in enumerate(SPECIAL_TOKENS)}
    for symbol in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab[symbol] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    if append_eos:
        backend.post_processor = processors.TemplateProcessing(
            single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", EOS_ID)]
        )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        eos_token="</s>",
        unk_token="<unk>",
        model_max_length=max_length,
    )


# Qwen-Image's prompt template (`QwenImagePipeline.prompt_template_encode`) and the pieces the
# real Qwen2 tokenizer cuts its system part into: the pipeline drops the first 34 tokens
# (`prompt_template_encode_start_idx`), which must be exactly that part.
QWEN_CHAT_SPECIALS = ("<|im_start|>", "<|im_end|>")
QWEN_CHAT_WORDS = ("system", "user", "assistant", "Describe") + tuple(
    " " + word
    for word in (
        *("the", "image", "by", "detailing", "color", "shape", "size", "texture"),
        *("quantity", "text", "spatial", "relationships", "of", "objects", "and", "background"),
    )
)


def qwen_chat_tokenizer(max_length: int = 1024):
    """The byte-level tokenizer for Qwen2.5-VL's chat template: `<|im_start|>` and
    `<|im_end|>` as special tokens and the template's words as whole tokens, so the template's
    system part is 34 tokens as with the real tokenizer; no end-of-sequence token appended
    (Qwen2's tokenizer appends none). Other text is bytes. It carries Qwen2.5-VL's chat
    template (`QWEN_CHAT_TEMPLATE`) for pipelines that call `apply_chat_template`."""
    from tokenizers import AddedToken

    tokenizer = byte_tokenizer(max_length, append_eos=False)
    tokenizer.add_special_tokens({"additional_special_tokens": list(QWEN_CHAT_SPECIALS)})
    tokenizer.add_tokens([AddedToken(word, normalized=False) for word in QWEN_CHAT_WORDS])
    tokenizer.chat_template = QWEN_CHAT_TEMPLATE
    return tokenizer


QWEN_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""Qwen2.5-VL's chat template for text messages that bring their own system message
(HunyuanVideo 1.5's `apply_chat_template` call): `<|im_start|>role\ncontent<|im_end|>\n`
per message, then `<|im_start|>assistant\n`."""


QWEN_CHAT_VOCAB_SIZE = VOCAB_SIZE + len(QWEN_CHAT_SPECIALS) + len(QWEN_CHAT_WORDS)


# Qwen3's chat template for one conversation, as Z-Image's pipeline applies it
# (`add_generation_prompt=True, enable_thinking=True`): each message as
# `<|im_start|>{role}\n{content}<|im_end|>\n`, then `<|im_start|>assistant\n`; the empty
# think block only when thinking is turned off, as Qwen3's own template does.
QWEN3_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% if enable_thinking is defined and enable_thinking is false %}"
    "{{ '<think>\\n\\n</think>\\n\\n' }}{% endif %}{% endif %}"
)


def qwen3_chat_tokenizer(max_length: int = 512):
    """`qwen_chat_tokenizer` with Qwen3's chat template (`QWEN3_CHAT_TEMPLATE`), for the
    pipelines that call `apply_chat_template` (Z-Image); the same vocabulary."""
    tokenizer = qwen_chat_tokenizer(max_length)
    tokenizer.chat_template = QWEN3_CHAT_TEMPLATE
    return tokenizer


# Mistral's chat markers (Mistral Small 3.1, Flux.2's text encoder) and a chat template for the
# conversations `Flux2Pipeline` builds (a system message, then the user's text, each content a
# list of one text part): `<s>[SYSTEM_PROMPT]...[/SYSTEM_PROMPT][INST]...[/INST]`.
MISTRAL_CHAT_SPECIALS = ("<s>", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[INST]", "[/INST]")
MISTRAL_CHAT_TEMPLATE = (
    "{{ '<s>' }}{% for message in messages %}"
    "{% if message['content'] is string %}{% set text = message['content'] %}"
    "{% else %}{% set text = message['content'][0]['text'] %}{% endif %}"
    "{% if message['role'] == 'system' %}{{ '[SYSTEM_PROMPT]' + text + '[/SYSTEM_PROMPT]' }}"
    "{% elif message['role'] == 'user' %}{{ '[INST]' + text + '[/INST]' }}"
    "{% else %}{{ text }}{% endif %}{% endfor %}"
)


def mistral_chat_tokenizer(max_length: int = 512):
    """The byte-level tokenizer with Mistral's chat markers as special tokens and
    `MISTRAL_CHAT_TEMPLATE`; no end-of-sequence token appended. It stands in for the Pixtral
    processor Flux.2 ships (which needs torchvision), whose `apply_chat_template` is all the
    pipeline calls for text."""
    tokenizer = byte_tokenizer(max_length, append_eos=False)
    tokenizer.add_special_tokens({"additional_special_tokens": list(MISTRAL_CHAT_SPECIALS)})
    tokenizer.chat_template = MISTRAL_CHAT_TEMPLATE
    return tokenizer


MISTRAL_CHAT_VOCAB_SIZE = VOCAB_SIZE + len(MISTRAL_CHAT_SPECIALS)
