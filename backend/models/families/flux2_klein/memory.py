"""FLUX.2 [klein] KV in the memory plan: its cached references (the DiT's dry run is
Flux.2's, `../flux2/memory.py`)."""

from __future__ import annotations

import math
from typing import Any

import torch


def cached_references(sizes: Any, shape: Any, sequence_degree: int, branches: int = 1) -> int:
    """The bytes of the references' keys and values `Flux2KleinKVPipeline` keeps on one rank
    from the first step to the last (diffusers' `Flux2KVCache`: a key and a value of the
    reference tokens per double- and single-stream block, in the compute dtype): 2 x blocks
    x batch x reference tokens x heads x head dims x the dtype's bytes. Under Ulysses every
    rank holds the whole reference sequence for its share of the heads (`parallel.py`; the
    heads padded up to a multiple of the rank count), so the heads are divided, not the
    tokens. 0 without references (a text-to-image job caches nothing).
    `branches` (CFG's branches a rank runs in turn) does not apply: the KV model is distilled,
    one branch a step."""
    tokens = sum(rows * cols for rows, cols in sizes.reference_grids(shape))
    if not tokens:
        return 0
    config = sizes.dit.config
    blocks = config["num_layers"] + config["num_single_layers"]
    heads = math.ceil(config["num_attention_heads"] / max(1, sequence_degree))
    width = heads * config["attention_head_dim"]
    element = torch.tensor([], dtype=sizes.dtype).element_size()
    return 2 * blocks * shape.batch * tokens * width * element
