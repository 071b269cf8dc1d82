"""LTX-2.3 and 2.5's graph nodes that reduce to what paradit already runs (ComfyUI's LTX-2.3
and 2.5 templates). Torch-free.

- `LTXVImgToVideoInplace` with `bypass` on (the 2.3 text-to-video template wires one
  PrimitiveBoolean to both of its copies): ComfyUI returns the latent as it came, so the node
  is its latent. With bypass off it writes the image into the latent: refused (`IN_PLACE`,
  docs/workflows.md says what was compared).
- `LTXVDualCFGGuider` (2.5's templates): ComfyUI guides the video part of the joined latent at
  `video_cfg` and the audio part at `audio_cfg` (each uncond + scale x (cond - uncond)); with
  the two equal (`math.isclose`) its guider falls back to the single CFG at that scale, which
  is `CFGGuider`'s job. Unequal scales are LTX2Pipeline's per-stream CFG: `guidance_scale`
  the video's, `guidance_terms.audio_guidance_scale` the audio's (diffusers writes each as
  cond + (scale - 1) x (cond - uncond) on the x0 predictions: the same combination, as the
  single CFG's mapping already takes it). In a two-stage job's second stage they are refused
  (`upscale` has one scale).

The handlers take the `handlers.Mapper` as `m` (not imported: it imports this module).
"""

from __future__ import annotations

import math
from typing import Any

from .graph import Node, WorkflowError
from .values import Conditioning, Guider, Model

IN_PLACE = (
    "LTX-2 image to video by writing the image into the latent (its frames kept by a noise "
    "mask of 1 - strength; at strength 1 the sampling is diffusers' image to video, the first "
    "latent frame clean at timestep 0, and paradit's two-stage job writes the image into the "
    "upscaled latent likewise), but another start image reaches the VAE: ComfyUI's templates "
    "compress the image as one H.264 frame at LTXVPreprocess's img_compression (CRF 33 in the "
    "LTX-2 templates, 18 in the 2.3 and 2.5 ones) at the size ResizeImageMaskNode gave it "
    "(longer side 1536; by area in video_ltx2_i2v and 2.3's: a float image LTXVPreprocess "
    "truncates to 8 bits, x 255 not rounded), then scale the decoded frame in float with "
    "torch's bilinear, centre-cropped, to each stage's latent size; paradit (as diffusers) "
    "re-compresses the 8-bit image at each stage's own size (image_crf) after PIL's resize. "
    "2.3's and 2.5's templates also write it at strength 0.7 in one stage (diffusers' "
    "image to video keeps the frame whole, strength 1)"
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
    model = m.input(node, "model", Model)
    positive = m.input(node, "positive", Conditioning)
    negative = m.input(node, "negative", Conditioning)
    if math.isclose(video, audio):
        m.say(node, f"video_cfg = audio_cfg = {video:g}: CFG at {video:g} -> guidance_scale")
        return (Guider(model, positive, negative, video, node),)
    m.say(
        node,
        f"video_cfg {video:g}, audio_cfg {audio:g} -> guidance_scale {video:g}, "
        f"guidance_terms.audio_guidance_scale {audio:g}",
    )
    return (Guider(model, positive, negative, video, node, audio_cfg=audio),)
