"""LTX-2.3 and 2.5's graph nodes that reduce to what paradit already runs (ComfyUI's LTX-2.3
and 2.5 templates). Torch-free.

- `LTXVImgToVideoInplace` with `bypass` on (the 2.3 text-to-video template wires one
  PrimitiveBoolean to both of its copies): ComfyUI returns the latent as it came, so the node
  is its latent. With bypass off at strength 1 it writes the image into the latent's first
  frame and keeps it clean: diffusers' image to video (timestep 0 on those tokens, never
  stepped), and after the upscaler paradit's two-stage job's stage 2 (the image written into
  the upscaled latent); the image must come through `LTXVPreprocess` (its CRF: `image_crf`),
  and the job prepares it as ComfyUI does (`image_prep` comfyui: one H.264 frame at the
  size sent, scaled in float to each stage's size; the family's `comfyui_image.py`). At a
  strength below 1 on the first stage's latent (the LTX-2.3 and 2.5 templates' 0.7) ComfyUI
  samples the image's frame under a noise mask of 1 - strength: the request's
  `image_strength`, which the family samples as ComfyUI does (`ltx2/strength.py`); after the
  upscaler a strength below 1 is refused (`STAGE_2_STRENGTH`).
- `LTXVPreprocess`: the image's `image_crf`; the image as `ResizeImageMaskNode` made it
  (`resize.py`) is sent in the 8 bits this node's truncation gives.
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

import dataclasses
import math
from typing import Any

from .graph import Node, WorkflowError
from .values import Conditioning, Guider, Image, Latent, Model, Upscaled

MAX_CRF = 51
"""x264's highest CRF for 8-bit video (LTXVPreprocess offers up to 100: the same frame as 51);
the request's `image_crf` goes to 51."""
STAGE_2_STRENGTH = (
    "paradit's two-stage job writes the start image into stage 2's first latent frame at "
    "strength 1 (its image_strength is stage 1's): set strength 1"
)
"""Why `LTXVImgToVideoInplace` after the upscaler at a strength below 1 is refused."""
DECODE_TILE_WIDGETS = ("tile_size", "overlap", "temporal_size", "temporal_overlap")
"""VAEDecodeTiled's widgets, in `DecodeTiles`' order."""


def preprocess(m: Any, node: Node) -> tuple[Any, ...]:
    image = m.input(node, "image", Image)
    crf = m.widget(node, "img_compression", int)
    if crf < 0:
        raise WorkflowError(node, f"img_compression {crf}: 0 or more")
    if image.crf is not None or image.scale is not None:
        raise WorkflowError(node, "an image already compressed or scaled: compress the loaded one")
    floats = [r for r in image.resizes if r.method != "lanczos"]
    if crf == 0 and floats:
        raise WorkflowError(
            node,
            f"img_compression 0 after node {floats[-1].node.id}'s {floats[-1].method} resize: "
            "ComfyUI then hands on the float image itself, which paradit sends in 8 bits",
        )
    job = min(crf, MAX_CRF)
    above = f" (x264 takes {crf} as {MAX_CRF})" if crf > MAX_CRF else ""
    m.say(node, f"one H.264 frame at CRF {crf}{above} -> image_crf {job}, image_prep comfyui")
    return (dataclasses.replace(image, crf=job, crf_node=node),)


def img_to_video_inplace(m: Any, node: Node) -> tuple[Any, ...]:
    latent = m.input(node, "latent", (Latent, Upscaled))
    if m.widget(node, "bypass", bool):
        m.say(node, "bypass on: its latent as it came (no image written)")
        return (latent,)
    strength = m.widget(node, "strength", float)
    if not 0.0 <= strength <= 1.0:
        raise WorkflowError(node, f"strength {strength:g}: between 0 and 1")
    if strength != 1.0 and isinstance(latent, Upscaled):
        raise WorkflowError(node, f"strength {strength:g}: {STAGE_2_STRENGTH}")
    image = m.input(node, "image", Image)
    if image.crf is None:
        raise WorkflowError(
            node,
            "its image does not come through LTXVPreprocess: paradit prepares LTX-2's start "
            "image as ComfyUI's templates do (image_prep comfyui: one H.264 frame, then "
            "scaled in float to the latent's size), which starts at LTXVPreprocess",
        )
    if isinstance(latent, Upscaled):
        if latent.image is not None:
            raise WorkflowError(node, "a second image into the upscaled latent")
        m.say(node, "the start image written into the upscaled latent (stage 2's first frame)")
        return (dataclasses.replace(latent, image=image),)
    if not latent.ltxv or latent.audio is not None or latent.image is not None:
        raise WorkflowError(
            node,
            f"latent from node {latent.node.id} ({latent.node.type}): paradit writes the "
            "image into an EmptyLTXVLatentVideo's latent (or the upscaled one)",
        )
    if strength != 1.0:  # ComfyUI's noise mask 1 - strength on the image's frame
        m.say(node, f"{image.file.name} -> image, strength {strength:g} -> image_strength")
        return (dataclasses.replace(latent, image=image, image_strength=strength),)
    m.say(node, f"{image.file.name} -> image (the first latent frame, strength 1)")
    return (dataclasses.replace(latent, image=image),)


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


def diffusion_decoder_tiles(
    m: Any, node: Node, latent: Latent, factor: int, vae: Any
) -> tuple[str, dict[str, int]] | None:
    """`VAEDecodeTiled` on LTX-2.5's diffusion video VAE (`decoder.conv_in_x_t`): ComfyUI
    (nodes.py VAEDecodeTiled -> comfy/sd.py `decode_tiled_3d` -> comfy/utils.py
    `tiled_scale_multidim`) decodes latents that fit one tile (tile_size / 32 latent pixels a
    side, max(2, temporal_size / 8) latent frames) whole; beyond one tile each tile draws its
    own seed-0 pixel noise (`CausalDiffusionVAE.decode`) and the tiles are feathered
    together, which one whole decode does not equal: the node's four widgets become the
    request's `decode_tiles`, which paradit decodes as ComfyUI does (`backend/decode_tiles.py`,
    the family's `diffusion_tiles.py`). `factor`: the upscaler's (1: one stage). Returns the
    import's words for the decode and the request's `decode_tiles` on that file, else None."""
    from ..decode_tiles import DecodeTiles, one_tile
    from ..models.single_file.header import read_header

    if vae is None or vae.file is None or not str(vae.file).endswith(".safetensors"):
        return None
    if "decoder.conv_in_x_t.weight" not in read_header(vae.file).tensors:
        return None
    try:
        tiles = DecodeTiles(*(m.widget(node, name, int) for name in DECODE_TILE_WIDGETS))
    except ValueError as error:
        raise WorkflowError(node, str(error)) from None
    grid = ((latent.frames - 1) // 8 + 1, latent.height * factor // 32, latent.width * factor // 32)
    tile, overlap = tiles.latent(8, 32)
    if one_tile(grid, tile):
        words = " (one of ComfyUI's tiles: the diffusion decoder's whole decode, seed-0 noise)"
    else:
        words = (
            f" (ComfyUI's tiles of {tile[0]} x {tile[1]} x {tile[2]} latents sharing "
            f"{overlap[0]} x {overlap[1]} x {overlap[2]}, each with its own seed-0 noise, "
            "feathered -> decode_tiles)"
        )
    return words, tiles.to_json()
