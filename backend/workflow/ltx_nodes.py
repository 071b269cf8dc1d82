"""LTX-2.3 and 2.5's graph nodes that reduce to what paradit already runs (ComfyUI's LTX-2.3
and 2.5 templates). Torch-free.

- `LTXVImgToVideoInplace` with `bypass` on (the 2.3 text-to-video template wires one
  PrimitiveBoolean to both of its copies): ComfyUI returns the latent as it came, so the node
  is its latent. With bypass off it writes the image into the latent: refused (`IN_PLACE`).
- `LTXVDualCFGGuider` (2.5's templates): ComfyUI guides the video part of the joined latent at
  `video_cfg` and the audio part at `audio_cfg`; with the two equal (`math.isclose`) its
  guider falls back to the single CFG at that scale, which is `CFGGuider`'s job; unequal
  scales are refused, as paradit guides both streams at one scale.

The handlers take the `handlers.Mapper` as `m` (not imported: it imports this module).
"""

from __future__ import annotations

import math
from typing import Any

from .graph import Node, WorkflowError
from .values import Conditioning, Guider, Model

IN_PLACE = (
    "LTX-2 image to video by writing the image into the latent (its frames kept by a noise "
    "mask of 1 - strength): paradit's workflow import does not map it; ComfyUI's LTX-2 "
    "image-to-video templates also write it into the second stage's upscaled latent, and "
    "compress it first as one H.264 frame at LTXVPreprocess's img_compression (CRF 33 in the "
    "LTX-2 templates, 18 in the 2.3 and 2.5 ones; 0 would leave it as it is), where paradit "
    "hands LTX-2 the image uncompressed (image_crf 0): another start image"
)
"""Why `LTXVImgToVideoInplace` with bypass off is refused."""


def img_to_video_inplace(m: Any, node: Node) -> tuple[Any, ...]:
    if not m.widget(node, "bypass", bool):
        raise WorkflowError(node, IN_PLACE)
    latent = m.input(node, "latent")
    m.say(node, "bypass on: its latent as it came (no image written)")
    return (latent,)


def dual_cfg_guider(m: Any, node: Node) -> tuple[Any, ...]:
    video, audio = m.widget(node, "video_cfg", float), m.widget(node, "audio_cfg", float)
    if not math.isclose(video, audio):
        raise WorkflowError(
            node,
            f"video_cfg {video:g} and audio_cfg {audio:g}: ComfyUI guides the video and the "
            "audio part of the joined latent at two scales, paradit guides LTX-2's streams at "
            "one (guidance_scale); give both the same value",
        )
    model = m.input(node, "model", Model)
    positive = m.input(node, "positive", Conditioning)
    negative = m.input(node, "negative", Conditioning)
    m.say(node, f"video_cfg = audio_cfg = {video:g}: CFG at {video:g} -> guidance_scale")
    return (Guider(model, positive, negative, video, node),)
