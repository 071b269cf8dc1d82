"""CogVideoX 1.0 and 1.5 (text- and image-to-video)."""

from __future__ import annotations

from ....contract import IMAGE_TO_VIDEO, TEXT_TO_VIDEO
from ...family_spec import FamilySpec
from .adapter import CogVideoX
from .memory import dit_forward
from .parallel import prepare_cogvideox, use_joint_attention
from .tiny import PRESETS as TINY_PRESETS
from .tiny_job import TINY_JOBS

_TEXT = frozenset({"text_encoder", "tokenizer"})
SPEC = FamilySpec(
    "cogvideox",
    adapters=(
        CogVideoX(
            "cogvideox-t2v",
            TEXT_TO_VIDEO,
            ("CogVideoXPipeline",),
            _TEXT,
            batched_cfg=True,
        ),
        CogVideoX(
            "cogvideox-i2v",
            IMAGE_TO_VIDEO,
            ("CogVideoXImageToVideoPipeline",),
            _TEXT,
            batched_cfg=True,
        ),
    ),
    transformer_classes=("CogVideoXTransformer3DModel",),
    dit_forward=dit_forward,
    dry_run_one_block=True,
    cp_plans={"CogVideoXTransformer3DModel": prepare_cogvideox},
    attention_dispatch={"CogVideoXTransformer3DModel": use_joint_attention},
    tiny_presets=TINY_PRESETS,
    # no vae_split: CogVideoXSafeConv3d cuts a large input into time chunks by its size, so
    # bands of unequal rows could make unequal numbers of halo exchanges
    tiny_jobs=TINY_JOBS,
)
