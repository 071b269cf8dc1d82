"""MiniMax H3's graph nodes (ComfyUI's `video_minimax_h3_t2v` / `_i2v` templates), as read in
ComfyUI's comfy_extras/nodes_minimax_h3.py, reduced to what paradit's H3 job runs. Torch-free.

- `MiniMaxH3ImageToVideo`: its prompt, its width x height (multiples of 32, H3's canvas) and
  its length snapped up to the 17k+5 grid (`frames`) make one AV latent (the video and its
  stereo audio, round(frames / 24 x 40) audio latents: paradit's count too); its positive
  conditioning carries the latent. `first_frame` is stretched onto the canvas with PIL's
  Lanczos on the 8-bit image (ComfyUI's common_upscale lanczos round-trips an 8-bit image
  exactly) as diffusers' resize step does: the request's `image`, with `image_prep` comfyui
  (families/minimax_h3/comfyui_prep.py: ComfyUI's vision input to Qwen3-VL, the keyframe's
  posterior mean, its noise from a CPU generator at the seed). `last_frame` is refused:
  ComfyUI centre-crops the image to the canvas's aspect and then scales it, diffusers scales
  it to cover the canvas and then crops, other pixels.
- `EmptyMiniMaxH3LatentAV`: the same latent without conditioning (a CLIPTextEncode prompt).
- `MiniMaxH3SigmaShift`: the video shift is the job's `shift`; paradit derives the audio
  levels with the model's own shifts (12 and 3, `families/minimax_h3/sampling.py`), so other
  values are refused.
- `VAEDecodeAudio`: the AV latent's audio through the audio VAE (`--vae`, the second file),
  `audio.wav` and the track of `video.mp4`.

The handlers take the `handlers.Mapper` as `m` (not imported: it imports this module).
"""

from __future__ import annotations

from typing import Any

from .graph import Node, WorkflowError
from .values import (
    AudioVae,
    Clip,
    Conditioning,
    DecodedAudio,
    Image,
    Latent,
    Model,
    Sampled,
    SampledAudio,
    Vae,
)

H3_FPS = 24.0
"""The frame rate of H3's video and audio (families/minimax_h3's FPS; tests check they
agree): ComfyUI's `FPS` in its H3 nodes."""
H3_SHIFTS = (12.0, 3.0)
"""H3's video and audio flow shifts (families/minimax_h3/sampling.py's; ComfyUI's
`MiniMaxH3` sampling_settings)."""
H3_CANVAS = 32
"""H3's sizes are multiples of 32 (paradit's limits; ComfyUI's nodes step by 32)."""
LAST_FRAME = (
    "a last_frame: ComfyUI centre-crops it to the canvas's aspect and then scales it with "
    "Lanczos, paradit's H3 (diffusers' resize step) scales it to cover the canvas and then "
    "crops: other pixels, so the job cannot be ComfyUI's; leave last_frame unconnected (the "
    "templates do) or send it with `paradit generate --last-image`"
)


def h3_frames(length: int) -> int:
    """ComfyUI's frame count for a `length`: at least 5, snapped up to 17k+5."""
    frames = max(5, length)
    return frames + (5 - frames % 17) % 17


def _av_latent(m: Any, node: Node, **more: Any) -> Latent:
    width, height = m.widget(node, "width", int), m.widget(node, "height", int)
    length = m.widget(node, "length", int)
    if width % H3_CANVAS or height % H3_CANVAS or width < H3_CANVAS or height < H3_CANVAS:
        raise WorkflowError(
            node,
            f"{width}x{height}: paradit runs MiniMax H3 at multiples of {H3_CANVAS} (its canvas; "
            "ComfyUI's latent would take multiples of 16); give multiples of 32",
        )
    frames = h3_frames(length)
    latent = Latent(node, width, height, frames, joint_audio=True, **more)
    snapped = f"length {length} snapped up to 17k+5: " if frames != length else ""
    image = f"; first_frame {latent.image.file.name} -> image" if latent.image else ""
    m.say(
        node,
        f"{snapped}{width}x{height}, {frames} frames with their audio -> width, height, "
        f"num_frames{image}",
    )
    return latent


def image_to_video(m: Any, node: Node) -> tuple[Any, ...]:
    clip = m.input(node, "clip", Clip)
    vae = m.input(node, "vae", Vae)
    text = m.widget(node, "prompt", str)
    if node.inputs.get("last_frame") is not None:
        raise WorkflowError(node, LAST_FRAME)
    image = m.optional(node, "first_frame", Image)
    if image is not None and image.scale is not None:
        raise WorkflowError(
            node,
            f"first_frame comes scaled from node {image.loader.id}: paradit sends the loaded "
            "image, which the node stretches onto its canvas itself; connect the LoadImage",
        )
    prep = "comfyui" if image is not None else None
    latent = _av_latent(m, node, image=image, vae=vae, in_conditioning=True, image_prep=prep)
    if image is not None:
        m.say(
            node,
            "first_frame presented to Qwen3-VL, encoded (the posterior's mean) and noised as "
            "ComfyUI does -> image_prep comfyui",
        )
    return (Conditioning(text, clip, start=latent), latent)


def empty_latent_av(m: Any, node: Node) -> tuple[Any, ...]:
    return (_av_latent(m, node),)


def sigma_shift(m: Any, node: Node) -> tuple[Any, ...]:
    model = m.input(node, "model", Model)
    video, audio = m.widget(node, "shift_video", float), m.widget(node, "shift_audio", float)
    if (video, audio) != H3_SHIFTS:
        raise WorkflowError(
            node,
            f"shift_video {video:g}, shift_audio {audio:g}: ComfyUI's H3 then derives the "
            "audio levels from the video levels with these shifts, paradit's with the model's "
            f"own ({H3_SHIFTS[0]:g} and {H3_SHIFTS[1]:g}); set those",
        )
    shifted = model.shifted(video, node)
    m.say(node, f"shift_video {video:g}, shift_audio {audio:g} (the model's own) -> shift")
    return (shifted,)


def decode_audio(m: Any, node: Node) -> tuple[Any, ...]:
    sampled = m.input(node, "samples", Sampled)
    vae = m.input(node, "vae", Vae)
    if not sampled.latent.joint_audio:
        raise WorkflowError(
            node,
            f"samples from a latent of node {sampled.latent.node.id} "
            f"({sampled.latent.node.type}) that holds no audio: paradit decodes MiniMax H3's AV "
            "latent's audio here (LTX-2's with LTXVAudioVAEDecode)",
        )
    if vae.file is None:
        raise WorkflowError(node, "its VAE is a checkpoint's: H3's audio VAE is its own file")
    m.say(node, f"{m.relative(vae.file)} -> --vae (the audio VAE): audio.wav, video.mp4's track")
    return (DecodedAudio(SampledAudio(sampled, node), AudioVae(vae.file, vae.loader), node),)
