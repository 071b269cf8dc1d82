"""FLUX.2's reference images as ComfyUI's templates give them (`image_flux2.json`): a loaded
image scaled by `ImageScaleToTotalPixels`, encoded by `VAEEncode` and put in the
conditioning by `ReferenceLatent`. Torch-free.

What ComfyUI computes, read from its source (`comfy_extras/nodes_post_processing.py`,
`comfy.utils.lanczos`, `comfy/sd.py` `VAE.encode`, `comfy/ldm/flux/model.py`,
`comfy_extras/nodes_edit_model.py`), and why it is the pipeline's own preparation
(diffusers' `Flux2Pipeline`), so the job sends the scaled image and names no `image_prep`:

- ImageScaleToTotalPixels with `lanczos` resizes the whole image (no crop) with PIL's Lanczos
  on its 8-bit pixels, with `nearest-exact` (the FLUX.2 [klein] edit templates') torch's
  interpolation copies pixels: either result is an 8-bit image, which the job sends as PNG
  (images.py).
- VAEEncode keeps the centre multiple of 16 of each side (offset (side % 16) // 2) and encodes
  pixels x 2 - 1; the Flux.2 VAE takes the mean of its posterior, cuts it into 2x2 patches and
  normalises them by its batch-norm statistics. The pipeline does the same to an image of at
  most 1024x1024 pixels: sides floored to 16, the centre cropped (its `_resize_and_crop`),
  x / 255 x 2 - 1, `sample_mode="argmax"`, `_patchify_latents`, the batch-norm statistics.
  A larger image the pipeline scales down first, ComfyUI does not: refused.
- ReferenceLatent appends the latent to the conditioning's references; FLUX.2's DiT
  (`default_ref_method` index, `ref_index_scale` 10) gives reference i (from 1) the time
  coordinate 10 x i and rows and columns from 0, at the sampled latent's timestep: the
  pipeline's `_prepare_image_ids` (10 + 10 x i from 0) and one timestep for all tokens.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .edit_nodes import image_size
from .graph import Link, Node, WorkflowError
from .images import SCALE_METHODS, total_pixels_size
from .values import Conditioning, Edit, Image, Scale, Vae

METHODS = SCALE_METHODS
"""ImageScaleToTotalPixels' methods whose result is an 8-bit image (PIL's Lanczos, torch's
nearest-exact): what the job sends. The others (torch's bilinear, bicubic, area in float)
give values between 8-bit ones."""

MAX_REFERENCE_PIXELS = 1024 * 1024
"""Above this the Flux.2 pipeline scales a reference down before encoding it."""
MIN_REFERENCE_SIDE = 64
"""The Flux.2 pipeline's image check refuses shorter sides."""
VAE_MULTIPLE = 16
"""VAEEncode keeps the centre multiple of this of each side (the Flux.2 VAE's 8 x 2x2)."""


def image_scale_to_total_pixels(m: Any, node: Node) -> tuple[Any, ...]:
    """ImageScaleToTotalPixels of a loaded image: the image sent, scaled as ComfyUI does."""
    image = m.input(node, "image", Image)
    method = m.widget(node, "upscale_method", str)
    megapixels = m.widget(node, "megapixels", float)
    steps = m.widget(node, "resolution_steps", int) if "resolution_steps" in node.inputs else 1
    if image.scale is not None:
        raise WorkflowError(node, "an image scaled twice: paradit scales the loaded image once")
    if method not in METHODS:
        raise WorkflowError(
            node,
            f"upscale_method {method}: ComfyUI scales with torch's interpolation in float, "
            "giving pixels between 8-bit values, and paradit sends its images as 8-bit PNG; "
            "lanczos (PIL's, on 8-bit pixels) and nearest-exact (copied pixels) are sent "
            "exactly",
        )
    if megapixels <= 0 or steps < 1:
        raise WorkflowError(
            node, f"megapixels {megapixels:g}, resolution_steps {steps}: give positive ones"
        )
    width, height = total_pixels_size(*image_size(image), megapixels, steps)
    if min(width, height) < 1:
        raise WorkflowError(node, f"{megapixels:g} megapixels leave no pixels ({width}x{height})")
    m.say(
        node,
        f"{image.file.name} to {width}x{height} ({megapixels:g} megapixels, {method}, no crop) "
        "-> the image sent",
    )
    return (dataclasses.replace(image, scale=Scale(width, height, crop=False, method=method)),)


def reference_latent(m: Any, node: Node) -> tuple[Any, ...]:
    """ReferenceLatent: the VAEEncode'd image appended to the conditioning's references."""
    cond = m.input(node, "conditioning", Conditioning)
    image, vae = _encoded_image(m, node)
    width, height = image_size(image)
    if width * height > MAX_REFERENCE_PIXELS:
        raise WorkflowError(
            node,
            f"a {width}x{height} reference (over 1024x1024 pixels): ComfyUI encodes it whole, "
            "paradit's FLUX.2 pipeline scales it down first; scale it to at most 1 megapixel "
            "(ImageScaleToTotalPixels)",
        )
    if min(width, height) < MIN_REFERENCE_SIDE:
        raise WorkflowError(
            node,
            f"a {width}x{height} reference: paradit's FLUX.2 pipeline takes sides of at least "
            f"{MIN_REFERENCE_SIDE}",
        )
    if cond.edit is not None and (cond.edit.image_prep is not None or cond.edit.vae != vae):
        raise WorkflowError(node, "references of two kinds or two VAEs on one conditioning")
    images = (cond.edit.images if cond.edit is not None else ()) + (image,)
    first = cond.edit.node if cond.edit is not None else node
    kept = f"{width // VAE_MULTIPLE * VAE_MULTIPLE}x{height // VAE_MULTIPLE * VAE_MULTIPLE}"
    m.say(
        node,
        f"{image.file.name} ({width}x{height}, encoded at its centre {kept}) as reference "
        f"{len(images)} -> {'image' if len(images) == 1 else 'images'}",
    )
    edit = Edit(images, vae, None, first, image_prep=None, reference_latent=True)
    return (dataclasses.replace(cond, edit=edit),)


def _encoded_image(m: Any, node: Node) -> tuple[Image, Vae]:
    """The image and VAE of the VAEEncode that gives ReferenceLatent its latent (its latent
    is that image's, whatever its size: VAEEncode's own handler, which sizes a sampler's
    latent, is not asked)."""
    link = node.inputs.get("latent")
    if not isinstance(link, Link):
        raise WorkflowError(node, "no latent: ComfyUI then adds no reference; connect one")
    source = m.graph.node(link.node, node)
    if source.type != "VAEEncode":
        raise WorkflowError(
            node,
            f"its latent comes from node {source.id} ({source.type}): paradit's references are "
            "images, VAEEncode'd",
        )
    image = m.input(source, "pixels", Image)
    vae = m.input(source, "vae", Vae)
    m.say(source, f"{image.file.name} -> the reference's latent (ReferenceLatent {node.id})")
    return image, vae
