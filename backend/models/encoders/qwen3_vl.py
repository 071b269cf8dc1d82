"""Qwen3-VL: the vision-language encoder Qwen-Image 2.1 reads its prompt (and, editing, its
images) through (`Qwen3VLForConditionalGeneration`, Qwen3-VL-8B; Krea 2 reads only its
language model). Its pipeline takes a processor, not a tokenizer: the presets' is Qwen-VL's
processor on the byte tokenizer with the vision markers (`qwen_vl.py`) carrying Qwen3-VL's
chat template for messages of text parts. Its single file (`qwen3vl_8b_int8_convrot`) is not
recognised yet."""

from __future__ import annotations

from typing import Any

from .kind import EncoderKind

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}{{ part['text'] }}{% endfor %}{% endif %}"
    "<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""Qwen3-VL's chat template for text messages whose content is a string or a list of text
parts: `<|im_start|>role\ncontent<|im_end|>\n` per message (Qwen-Image 2.1's pipeline counts
its system message's tokens with it: the part of the prompt it drops)."""


def qwen3_vl_processor(max_length: int = 1024) -> Any:
    """The presets' Qwen3-VL processor: Qwen-VL's image processor and the byte tokenizer with
    the vision markers (`qwen_vl.qwen_vl_processor`), with `CHAT_TEMPLATE`."""
    from ..qwen_vl import qwen_vl_processor  # transformers' processors: only when built

    processor = qwen_vl_processor(max_length)
    processor.chat_template = CHAT_TEMPLATE
    return processor


QWEN3_VL = EncoderKind(
    "qwen3-vl",
    title="Qwen3-VL",
    tiny_tokenizers={"qwen3_vl_processor_max_length": qwen3_vl_processor},
)
