"""Seeded weights and a byte-level tokenizer, shared by the tiny and the random presets.

`seed_weights` sets every parameter from a seed, independent of the library's own init code
(which changes between versions): matrices get N(0, 1/fan_in), biases N(0, 0.02^2), norm gains
1 + N(0, 0.02^2), drawn in float32 on the CPU one parameter at a time (in name order) and cast,
so the same seed gives the same weights on every machine, in any dtype, on any device.
"""

from __future__ import annotations

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


def byte_tokenizer(max_length: int):
    """Byte-level tokenizer: specials <pad>=0 </s>=1 <unk>=2, then one token per byte."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {token: index for index, token in enumerate(SPECIAL_TOKENS)}
    for symbol in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab[symbol] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
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
