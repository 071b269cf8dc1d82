"""The tiny Flux.2 Klein presets (FLUX.2-klein-4B-shaped): step-distilled, the same weights as
the undistilled -base model, and as the KV model's pipeline (`Flux2KleinKVPipeline`)."""

from __future__ import annotations

from typing import Any

from ...random_presets import shipped_scheduler
from ...seeded import PAD_ID, QWEN_CHAT_VOCAB_SIZE, qwen3_chat_tokenizer
from ...tiny_parts import Builders, seeded, tiny_text_config
from ..flux2.tiny import _flux2_transformer, _flux2_vae

KLEIN_TEXT_LAYERS = 28  # the pipeline stacks hidden states 9, 18 and 27 (of Qwen3-4B's 36)


def _qwen3_causal_text_encoder():
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(
        **tiny_text_config(QWEN_CHAT_VOCAB_SIZE, KLEIN_TEXT_LAYERS),
        tie_word_embeddings=True,  # as Qwen3-4B
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=PAD_ID,
    )
    return Qwen3ForCausalLM(config)


_KLEIN: Builders = {
    "tokenizer": qwen3_chat_tokenizer,
    "text_encoder": lambda: seeded(701, _qwen3_causal_text_encoder),
    "vae": lambda: seeded(702, _flux2_vae),
    "scheduler": lambda: shipped_scheduler("random:flux.2-klein-4b"),
    "transformer": lambda: seeded(703, lambda: _flux2_transformer(guidance_embeds=False)),
}

PRESETS: dict[str, tuple[str, Builders]] = {
    "tiny-flux2-klein": ("Flux2KleinPipeline", _KLEIN),
    "tiny-flux2-klein-base": ("Flux2KleinPipeline", _KLEIN),  # the same weights
    # FLUX.2-klein-9b-kv's pipeline on the same DiT (the KV model's shapes are Klein 9B's)
    "tiny-flux2-klein-kv": ("Flux2KleinKVPipeline", _KLEIN),
}
PIPELINE_CONFIG: dict[str, dict[str, Any]] = {
    "tiny-flux2-klein": {"is_distilled": True},  # as FLUX.2-klein-4B's model_index.json
    "tiny-flux2-klein-base": {"is_distilled": False},  # as FLUX.2-klein-base-4B's
    "tiny-flux2-klein-kv": {"is_distilled": True},  # the KV pipeline's default
}
