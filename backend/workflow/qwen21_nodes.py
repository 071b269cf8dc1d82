"""Qwen-Image 2.1's nodes (ComfyUI's `comfy_extras/nodes_qwen.py`): TextEncodeQwenImage21 (the
prompt, the negative prompt and the reference images, with the latent of the first
reference's size) and QwenImage21Cache (where the prompt prefix's keys and values are kept).
Torch-free.

What ComfyUI does there (read from `comfy_extras/nodes_qwen.py` and
`comfy/text_encoders/qwen_image21.py`) and why paradit's job is the same:

- The prompt goes through the same chat template as diffusers' `QwenImage21Pipeline`: the
  system turn "Comprehend and analyze the provided prompt.", the user turn (each reference
  as `<imageN>` and one vision block, joined by spaces, before the text), the assistant's
  turn opened with no think block; the system turn is dropped from the hidden states, the
  last layer is read before the final norm, and an empty prompt is read as one space. The
  negative prompt is encoded with the same images.
- Each reference is resized, its aspect kept, to about `resolution` squared pixels (at 0, the
  templates' value, its own size), each side rounded to a multiple of 32 (at least 32), with
  PIL's Lanczos on the 8-bit image (an image already that size is not resized; ComfyUI's
  float image turns back into the same 8-bit values, `images.py`); the same image goes to
  the vision tower and, as LoadImage's RGB, to the VAE, whose latents fill the prompt's
  vision slots. At resolution 0 the job's `image_prep` is comfyui (families/qwen_image21/
  comfyui_prep.py): every reference at its own size whatever the output's, and the vision
  tower's pixel values ComfyUI's (`process_qwen2vl_images`' bounds, 3136 to 12845056 pixels,
  not Qwen3-VL's published 65536 least). At another resolution the pipeline resizes at its
  `output_resolution`, which paradit sets to the side of a square of the output's area: the
  job is ComfyUI's where every reference comes to the same size at both (checked per image;
  refused naming the sizes where not); its `image_prep` comfyui-vision hands the pipeline's
  processor ComfyUI's pixel bounds, and refuses, when the job runs, a reference outside them
  (families/qwen_image21/comfyui_prep.py).
- The latent output is the first reference's size (without references, resolution squared).
- QwenImage21Cache stores the prefix's keys and values where `device` says (auto, gpu, cpu;
  off recomputes them every step): the same computation as the pipeline's `use_kv_cache`,
  passed over. Its `dtype` int8 or int4 stores them quantized, which changes the result: refused.
"""

from __future__ import annotations

import math
from typing import Any

from .graph import Node, WorkflowError
from .images import file_size
from .values import Clip, Conditioning, Edit, Image, Latent, Model, Vae

REFERENCE_SLOTS = 16
"""TextEncodeQwenImage21's autogrow inputs: images.image_1 .. images.image_16."""
SIDE = 32
"""A reference's sides are multiples of this (one vision slot: 2x2 latents of 16 pixels)."""
CACHE_DTYPES = ("default",)
"""QwenImage21Cache's dtypes that keep the cache lossless (int8, int4 quantize it)."""


def comfy_reference_size(width: int, height: int, resolution: int) -> tuple[int, int]:
    """A reference's (width, height) after TextEncodeQwenImage21: at `resolution` above 0 its
    aspect at resolution squared pixels, at 0 its own size; each side rounded to a multiple
    of 32, at least 32."""
    if resolution > 0:
        ratio = width / height
        new_w = round(math.sqrt(resolution * resolution * ratio) / SIDE) * SIDE
        new_h = round(math.sqrt(resolution * resolution / ratio) / SIDE) * SIDE
    else:
        new_w, new_h = round(width / SIDE) * SIDE, round(height / SIDE) * SIDE
    return max(SIDE, new_w), max(SIDE, new_h)


def pipeline_reference_size(width: int, height: int, resolution: int) -> tuple[int, int]:
    """A reference's (width, height) as `QwenImage21Pipeline` resizes it at its
    `output_resolution` (`calculate_dimensions`: the width from the area and aspect, the
    height the width over the aspect, each rounded to a multiple of 32)."""
    ratio = width / height
    new_w = math.sqrt(resolution * resolution * ratio)
    new_h = new_w / ratio
    return round(new_w / SIDE) * SIDE, round(new_h / SIDE) * SIDE


def paradit_resolution(width: int, height: int) -> int:
    """The `output_resolution` paradit's Qwen-Image 2.1 edit passes for an output of this
    size (families/qwen_image21/adapter.py's `output_resolution`)."""
    return round(math.sqrt(width * height))


def text_encode(m: Any, node: Node) -> tuple[Any, ...]:
    """TextEncodeQwenImage21: (positive, negative, latent)."""
    clip = m.input(node, "clip", Clip)
    prompt = m.widget(node, "prompt", str)
    negative = m.widget(node, "negative_prompt", str)
    resolution = m.widget(node, "resolution", int)
    vae = m.optional(node, "vae", Vae)
    images = tuple(
        image
        for i in range(1, REFERENCE_SLOTS + 1)
        if (image := m.optional(node, f"images.image_{i}", Image)) is not None
    )
    side = resolution or 1024
    if not images:
        m.say(node, f"prompt and negative prompt (no reference images); latent {side}x{side}")
        latent = Latent(node, side, side, 1)
        return Conditioning(prompt, clip), Conditioning(negative, clip), latent
    if vae is None:
        raise WorkflowError(
            node,
            "reference images without a vae: ComfyUI then conditions on them through the text "
            "encoder alone (their vision tokens kept, no reference latents), which "
            "QwenImage21Pipeline does not do; connect the VAE",
        )
    sizes = [comfy_reference_size(*file_size(image.file), resolution) for image in images]
    if any(image.scale is not None for image in images):
        raise WorkflowError(
            node, "a scaled reference image: TextEncodeQwenImage21 reads the image as loaded"
        )
    width, height = sizes[0]
    names = ", ".join(f"{i.file.name} ({w}x{h})" for i, (w, h) in zip(images, sizes, strict=True))
    at = f"resolution {resolution}" if resolution > 0 else "their own sizes (resolution 0)"
    # at 0 each reference keeps its own size: ComfyUI's preparation; else the pipeline's, at
    # the output's area (check_reference_sizes), with ComfyUI's vision input
    prep = "comfyui" if resolution == 0 else "comfyui-vision"
    m.say(
        node,
        f"prompt and negative prompt with {names} at {at} -> image, "
        f"images, image_prep {prep}; latent {width}x{height} "
        "(the first reference's size)",
    )
    edit = Edit(images, vae, None, node, image_prep=prep, resolution=resolution)
    return (
        Conditioning(prompt, clip, edit=edit),
        Conditioning(negative, clip, edit=edit),
        Latent(node, width, height, 1),
    )


def check_reference_sizes(edit: Edit, width: int, height: int) -> None:
    """WorkflowError naming the encoder node where paradit's pipeline, resizing every
    reference at the output's area, would make one another size than ComfyUI's
    TextEncodeQwenImage21 at its resolution (at resolution 0 the job keeps each at its own
    size, `image_prep` comfyui: nothing to check)."""
    if edit.image_prep == "comfyui":
        return
    resolution = paradit_resolution(width, height)
    for image in edit.images:
        loaded = file_size(image.file)
        theirs = comfy_reference_size(*loaded, edit.resolution)
        ours = pipeline_reference_size(*loaded, resolution)
        if theirs != ours:
            raise WorkflowError(
                edit.node,
                f"{image.file.name} ({loaded[0]}x{loaded[1]}) comes to {theirs[0]}x{theirs[1]} "
                f"in ComfyUI (resolution {edit.resolution}), where paradit's pipeline resizes the "
                f"references to the {width}x{height} output's area (output_resolution "
                f"{resolution}): {ours[0]}x{ours[1]}; give the output the first reference's "
                "size (the node's latent) or a resolution that gives the same sizes",
            )


def cache(m: Any, node: Node) -> tuple[Any, ...]:
    """QwenImage21Cache: the model, where the cache is lossless."""
    model = m.input(node, "model", Model)
    device = m.widget(node, "device", str)
    dtype = m.widget(node, "dtype", str)
    if dtype not in CACHE_DTYPES:
        raise WorkflowError(
            node,
            f"dtype {dtype}: ComfyUI then stores the prompt prefix's cached keys and values "
            "quantized, which changes every step after the first (the node's own tooltip: "
            "int4 roughly doubles the per-step error); paradit caches them at full precision "
            "(the pipeline's use_kv_cache); set dtype to default",
        )
    m.say(
        node,
        f"device {device}, dtype {dtype}: where ComfyUI keeps the prompt prefix's keys and "
        "values (off recomputes them), the same computation; paradit caches them on every "
        "rank (the pipeline's use_kv_cache) -> nothing",
    )
    return (model,)
