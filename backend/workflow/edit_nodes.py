"""Qwen-Image-Edit's nodes (ComfyUI's edit templates): the Kontext-scaled input image, its
VAEEncode (the output's size), TextEncodeQwenImageEditPlus and the first model's
TextEncodeQwenImageEdit (prompt and reference images, which paradit prepares ComfyUI's way:
request `image_prep` comfyui) and
FluxKontextMultiReferenceLatentMethod (`reference_method`). Torch-free.

FluxKontextImageScale's image is made when the job is sent (images.py): the request names
the loaded file and the plan its Kontext size.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from . import qwen21_nodes
from .graph import Node, WorkflowError
from .images import kontext_size
from .values import Clip, Conditioning, Edit, Image, Latent, Scale, Vae

METHODS = ("index", "index_timestep_zero")
"""FluxKontextMultiReferenceLatentMethod's methods paradit runs (`reference_method`)."""


def image_size(image: Image) -> tuple[int, int]:
    """The image's (width, height) as the next node gets it (Kontext-scaled or as loaded)."""
    return image.size()


def image_scale(m: Any, node: Node) -> tuple[Any, ...]:
    """FluxKontextImageScale."""
    image = m.input(node, "image", Image)
    if image.scale is not None:
        raise WorkflowError(node, "an image scaled twice: paradit scales the loaded image once")
    width, height = kontext_size(*image_size(image))
    m.say(
        node,
        f"{image.file.name} to {width}x{height} (the Kontext size of its aspect; centre crop, "
        "Lanczos) -> the image sent",
    )
    return (dataclasses.replace(image, scale=Scale(width, height)),)


def vae_encode(m: Any, node: Node) -> tuple[Any, ...]:
    """VAEEncode of the edit's image: the sampler starts from noise at denoise 1, so only the
    latent's size counts (the output's width and height)."""
    image = m.input(node, "pixels", Image)
    vae = m.input(node, "vae", Vae)
    width, height = image_size(image)
    if width % 16 or height % 16:
        raise WorkflowError(
            node,
            f"a {width}x{height} image: paradit's edit outputs have sides of 16 (scale the "
            "image with FluxKontextImageScale, as the templates do)",
        )
    m.say(node, f"{width}x{height} -> width, height (at denoise 1 only its size counts)")
    return (Latent(node, width, height, 1, vae=vae),)


def text_encode_edit_plus(m: Any, node: Node) -> tuple[Any, ...]:
    """TextEncodeQwenImageEditPlus: the prompt with image1..3 (references encoded by its vae)."""
    clip = m.input(node, "clip", Clip)
    text = m.widget(node, "prompt", str)
    vae = m.optional(node, "vae", Vae)
    images = tuple(
        image
        for name in ("image1", "image2", "image3")
        if (image := m.optional(node, name, Image)) is not None
    )
    if not images:
        raise WorkflowError(node, "no image1..3: paradit's edit models edit an input image")
    if vae is None:
        raise WorkflowError(
            node,
            "no vae: ComfyUI then gives the DiT no reference latents, which paradit's edit "
            "pipelines always give; connect the VAE",
        )
    names = ", ".join(image.file.name for image in images)
    m.say(node, f"{text!r} with {names} (ComfyUI's image preparation) -> image_prep comfyui")
    return (Conditioning(text, clip, edit=Edit(images, vae, None, node)),)


def text_encode_edit(m: Any, node: Node) -> tuple[Any, ...]:
    """TextEncodeQwenImageEdit (the first model): the prompt with its one image."""
    clip = m.input(node, "clip", Clip)
    text = m.widget(node, "prompt", str)
    vae = m.optional(node, "vae", Vae)
    image = m.optional(node, "image", Image)
    if image is None:
        raise WorkflowError(node, "no image: paradit's edit models edit an input image")
    if vae is None:
        raise WorkflowError(
            node,
            "no vae: ComfyUI then gives the DiT no reference latents, which paradit's edit "
            "pipelines always give; connect the VAE",
        )
    m.say(node, f"{text!r} with {image.file.name} (ComfyUI's image preparation) -> image_prep")
    return (Conditioning(text, clip, edit=Edit((image,), vae, None, node)),)


def reference_method(m: Any, node: Node) -> tuple[Any, ...]:
    """FluxKontextMultiReferenceLatentMethod on an edit's conditioning."""
    cond = m.input(node, "conditioning", Conditioning)
    method = m.widget(node, "reference_latents_method", str)
    if method not in METHODS:
        raise WorkflowError(
            node,
            f"reference_latents_method {method}: paradit's Qwen-Image-Edit runs "
            f"{' and '.join(METHODS)} (each reference at its own frame index)",
        )
    if cond.edit is None:
        raise WorkflowError(node, "a reference method on a conditioning without references")
    m.say(node, f"{method} -> reference_method")
    return (dataclasses.replace(cond, edit=dataclasses.replace(cond.edit, method=method)),)


def edit_request(
    positive: Conditioning, negative: Conditioning, sampler: Node, size: tuple[int, int]
) -> dict:
    """The request fields of an edit's conditionings: the images (the first as `image`), the
    preparation, the reference method. The negative prompt reads the same images (paradit
    encodes both with them), by the same method. `size`: the output's (width, height)."""
    edit = positive.edit
    if edit is None:
        if negative.edit is not None:
            raise WorkflowError(sampler, "reference images on the negative prompt only")
        return {}
    other = negative.edit
    if negative.clip is not None and (other is None or other.images != edit.images):
        raise WorkflowError(
            sampler,
            "its negative prompt is encoded with other images than the positive: paradit "
            "encodes both with the positive's (give both TextEncodeQwenImageEditPlus the same)",
        )
    if other is not None and (other.method != edit.method or other.vae != edit.vae):
        raise WorkflowError(
            sampler, "other reference settings on the negative prompt than on the positive"
        )
    if edit.resolution is not None:  # TextEncodeQwenImage21's references
        qwen21_nodes.check_reference_sizes(edit, *size)
    fields: dict[str, Any] = {"image": str(edit.images[0].file)}
    if edit.image_prep is not None:
        fields["image_prep"] = edit.image_prep
    if len(edit.images) > 1:
        fields["images"] = [str(image.file) for image in edit.images[1:]]
    if edit.method is not None:
        fields["reference_method"] = edit.method
    sizes: dict[str, Scale | None] = {}
    for image in edit.images:
        if sizes.setdefault(str(image.file), image.scale) != image.scale:
            raise WorkflowError(
                sampler, f"{image.file.name} both scaled and as loaded: give two files"
            )
    return {"fields": fields, "images": sizes}
