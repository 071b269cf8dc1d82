"""Qwen2.5-VL's tokenizer and processor for the Qwen-Image-Edit presets, built offline.

The edit pipelines hand the text encoder its images through a `Qwen2VLProcessor`: the images
become patches for the vision tower, and each `<|image_pad|>` in the prompt is widened to the
image's token count. The presets' tokenizer is `seeded.qwen_chat_tokenizer` plus Qwen2.5-VL's
vision markers and the edit template's words, so the template's system part is the 64 tokens
the pipeline drops (`prompt_template_encode_start_idx`), as with the real tokenizer.

transformers' `Qwen2VLProcessor` also wants a video processor, which needs torchvision (not a
dependency); `ImageQwenVLProcessor` is the same processor for images only. Single-file
Qwen-Image-Edit puts it on the real tokenizer with Qwen2.5-VL's published image settings
(`qwen25_vl_processor`).
"""

from __future__ import annotations

from typing import Any

from transformers import Qwen2VLProcessor, Qwen3VLProcessor
from transformers.processing_utils import ProcessorMixin

from .seeded import QWEN_CHAT_SPECIALS, QWEN_CHAT_VOCAB_SIZE, qwen_chat_tokenizer

VISION_SPECIALS = ("<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>")
VISION_START_ID, VISION_END_ID, IMAGE_PAD_ID, VIDEO_PAD_ID = range(
    QWEN_CHAT_VOCAB_SIZE, QWEN_CHAT_VOCAB_SIZE + len(VISION_SPECIALS)
)
"""Their ids: the text encoder's config names them (`image_token_id`, ...)."""

# The edit template's words not already whole tokens of `qwen_chat_tokenizer`, as Qwen2's
# tokenizer cuts them: with them, the system part is 64 tokens.
EDIT_WORDS = (
    *(" key", " features", " input", " (", "color", "),", " then", " explain", " how", " user"),
    *("'s", " instruction", " should", " alter", " or", " modify", " Generate", " a", " new"),
    *(" that", " meets", " requirements", " while", " maintaining", " consistency", " with"),
    *(" original", " where", " appropriate"),
)
QWEN_VL_VOCAB_SIZE = QWEN_CHAT_VOCAB_SIZE + len(VISION_SPECIALS) + len(EDIT_WORDS)


def qwen_vl_tokenizer(max_length: int = 1024) -> Any:
    """`qwen_chat_tokenizer` with the vision markers (special) and the edit template's words."""
    from tokenizers import AddedToken

    tokenizer = qwen_chat_tokenizer(max_length)
    specials = [*QWEN_CHAT_SPECIALS, *VISION_SPECIALS]
    tokenizer.add_special_tokens({"additional_special_tokens": specials})
    tokenizer.add_tokens([AddedToken(word, normalized=False) for word in EDIT_WORDS])
    return tokenizer


class ImageQwenVLProcessor(Qwen2VLProcessor):
    """`Qwen2VLProcessor` without its video processor (which needs torchvision)."""

    def __init__(self, image_processor: Any = None, tokenizer: Any = None, chat_template=None):
        self.image_token, self.video_token = "<|image_pad|>", "<|video_pad|>"
        self.image_token_id = tokenizer.convert_tokens_to_ids(self.image_token)
        self.video_token_id = tokenizer.convert_tokens_to_ids(self.video_token)
        ProcessorMixin.__init__(self, image_processor, tokenizer, chat_template=chat_template)


def qwen_vl_processor(max_length: int = 1024) -> ImageQwenVLProcessor:
    """The processor on `qwen_vl_tokenizer`, with Qwen2.5-VL's image settings (14-pixel
    patches merged 2x2, CLIP's normalisation: the class's defaults)."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil,
    )

    return ImageQwenVLProcessor(Qwen2VLImageProcessorPil(), qwen_vl_tokenizer(max_length))


QWEN25_VL_PIXELS = {"shortest_edge": 56 * 56, "longest_edge": 3584 * 3584}
"""Qwen2.5-VL-7B-Instruct's published image bounds (min_pixels 3136, max_pixels 12845056); the
class's default longest edge (1280 merged tokens) is Qwen2-VL's."""


def qwen25_vl_processor(tokenizer: Any) -> ImageQwenVLProcessor:
    """The processor on a real Qwen2.5-VL tokenizer, with Qwen2.5-VL's published image settings:
    14-pixel patches, 2 frames a temporal patch, merged 2x2, CLIP's mean and std, bicubic,
    3136 to 12845056 pixels."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil,
    )

    return ImageQwenVLProcessor(Qwen2VLImageProcessorPil(size=dict(QWEN25_VL_PIXELS)), tokenizer)


class ImageQwen3VLProcessor(Qwen3VLProcessor):
    """`Qwen3VLProcessor` without its video processor (which needs torchvision): what
    MiniMax H3's text and keyframe requests read (they read no video). It saves as a
    processor of a tokenizer and an image processor, and loads from a Qwen3-VL processor
    folder (`from_folder`), whose video settings it leaves unread."""

    def __init__(self, image_processor: Any = None, tokenizer: Any = None, chat_template=None):
        self.image_token, self.video_token = "<|image_pad|>", "<|video_pad|>"
        self.image_token_id = tokenizer.convert_tokens_to_ids(self.image_token)
        self.video_token_id = tokenizer.convert_tokens_to_ids(self.video_token)
        ProcessorMixin.__init__(self, image_processor, tokenizer, chat_template=chat_template)
        self.vision_start_token, self.vision_end_token = "<|vision_start|>", "<|vision_end|>"
        self.vision_start_token_id = tokenizer.convert_tokens_to_ids(self.vision_start_token)
        self.vision_end_token_id = tokenizer.convert_tokens_to_ids(self.vision_end_token)

    @classmethod
    def from_folder(cls, folder: str) -> ImageQwen3VLProcessor:
        """The processor of a diffusers folder's `processor/` (transformers' files: the
        tokenizer's and `preprocessor_config.json`), read with the PIL image processor."""
        from transformers import AutoTokenizer
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
            Qwen2VLImageProcessorPil,
        )

        images = Qwen2VLImageProcessorPil.from_pretrained(folder)
        tokenizer = AutoTokenizer.from_pretrained(folder)
        return cls(images, tokenizer, chat_template=tokenizer.chat_template)
