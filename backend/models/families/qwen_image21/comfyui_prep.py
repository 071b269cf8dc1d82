"""Qwen-Image 2.1's edit references as ComfyUI's TextEncodeQwenImage21 presents them at
resolution 0, the edit templates' value (a job's `image_prep` comfyui), in our own words from
Comfy-Org/ComfyUI's `comfy_extras/nodes_qwen.py` (ed26919d), `comfy/text_encoders/qwen3vl.py`
(1ad32705) and `comfy/text_encoders/qwen_vl.py` (`process_qwen2vl_images`, 0f5aa305):

- Each reference keeps its own size, each side rounded to the nearest multiple of 32 (at
  least 32); an image not already that size is resized with Lanczos on its 8-bit values
  (`common_upscale` "lanczos"); an image that is, is taken as loaded. The same image goes to
  the vision tower and to the VAE, whatever the output's size (the pipeline instead resizes
  every reference to the output's area, `output_resolution`).
- The vision tower's input (`Qwen3VL.preprocess_embed`): `process_qwen2vl_images` with
  16-pixel patches, mean and std 0.5 and its own default pixel bounds, 3136 to 12845056 (not
  Qwen3-VL's published 65536 to 16777216, which transformers' processor carries): sides to
  the nearest multiple of 32 (patch x merge; a reference's already are), resized (bilinear,
  in float) only outside those bounds, then (x - 0.5) / 0.5 of the 8-bit values / 255, the
  still image doubled into a temporal patch of 2, cut into transformers' patch layout.
  Transformers' PIL processor given an image it does not resize makes the same float32
  values bit for bit (tests/families/test_qwen_image21_comfyui.py), so paradit hands the
  processor ComfyUI's bounds for the job and keeps its own values.
- Outside those bounds ComfyUI's vision tower reads the reference at another size than its
  latents, and drops the vision tokens for the latents wherever their count; the pipeline puts
  2x2 latent tokens in each vision slot, so the counts must match: refused, naming the sizes.

At a resolution above 0 (`image_prep` comfyui-vision) the pipeline resizes the references at
the output's area (the importer checks ComfyUI's node comes to the same sizes) and its
processor is handed ComfyUI's bounds as at 0, so a reference under Qwen3-VL's published least
(65536 pixels) is read at its size as ComfyUI reads it; one outside ComfyUI's bounds is
refused the same way.
"""

from __future__ import annotations

from typing import Any

# ComfyUI's Qwen3-VL vision sizing, shared with MiniMax H3's prep, under this module's names
from ...encoders.qwen3_vl import COMFYUI_VISION_PIXELS as VISION_PIXELS
from ...encoders.qwen3_vl import comfyui_vision_size as vision_size

SIDE = 32
"""A reference's sides are multiples of this (a vision slot: 2x2 patches of 16 pixels, 2x2
latents of the 16x VAE)."""
PATCH = 16
"""ComfyUI's Qwen3-VL patch side (`preprocess_embed`'s patch_size)."""


def reference_size(width: int, height: int) -> tuple[int, int]:
    """A reference's (width, height) in ComfyUI at resolution 0: each side rounded to the
    nearest multiple of 32 (Python's rounding: halves to even), at least 32."""
    if width < 1 or height < 1:
        raise ValueError(f"an image has sides of at least 1 pixel, got {width}x{height}")
    return max(SIDE, round(width / SIDE) * SIDE), max(SIDE, round(height / SIDE) * SIDE)


def check_vision_size(width: int, height: int, prep: str = "comfyui") -> None:
    """ValueError where ComfyUI's vision tower would read a `width` x `height` reference at
    another size than its latents (outside `VISION_PIXELS`), naming both sizes; `prep`: the
    job's `image_prep`, named in the message."""
    least, most = VISION_PIXELS
    if not least <= width * height <= most:
        seen = "x".join(str(side) for side in vision_size(width, height))
        raise ValueError(
            f"image_prep {prep}: a {width}x{height} reference ({width * height} pixels) lies "
            f"outside the {least} to {most} pixels ComfyUI's Qwen3-VL vision input keeps "
            f"(process_qwen2vl_images), so its vision tower would read it at {seen}, another "
            "size than its latents, where QwenImage21Pipeline puts 2x2 latent tokens in each "
            "vision slot: give a reference of that many pixels"
        )


def reference(image: Any) -> Any:
    """A PIL image as ComfyUI's TextEncodeQwenImage21 (resolution 0) hands it on: RGB at
    `reference_size`, Lanczos on the 8-bit values where the size changes."""
    from PIL import Image

    image = image.convert("RGB")
    size = reference_size(*image.size)
    check_vision_size(*size)
    if size == image.size:
        return image
    return image.resize(size, Image.Resampling.LANCZOS)


class ComfyBounds:
    """The pipeline's processor for one encode: its own call with ComfyUI's pixel bounds, so
    it resizes no reference ComfyUI keeps; refuses a grid that is not the reference's."""

    def __init__(self, own: Any, sizes: list[tuple[int, int]]):
        self.own, self.sizes = own, sizes

    def __call__(self, **kwargs: Any) -> Any:
        least, most = VISION_PIXELS
        inputs = self.own(**kwargs, size={"shortest_edge": least, "longest_edge": most})
        grids = [tuple(int(v) for v in row) for row in inputs["image_grid_thw"]]
        wanted = [(1, h // PATCH, w // PATCH) for w, h in self.sizes]
        if grids != wanted * (len(grids) // max(1, len(wanted))):
            raise ValueError(
                f"image_prep comfyui: the processor's image grids {grids} are not the "
                f"references' {wanted} (it resized them: its patches or bounds are not ComfyUI's)"
            )
        return inputs

    def __getattr__(self, name: str) -> Any:
        return getattr(self.own, name)


class OwnSizes:
    """The pipeline's image processor during a ComfyUI-prepared edit: every reference is
    taken at its own size (the pipeline asks for the output's area)."""

    def __init__(self, own: Any):
        self.own = own

    def resize(self, image: Any, height: int | None = None, width: int | None = None) -> Any:
        return image

    def preprocess(self, image: Any, height: int | None = None, width: int | None = None) -> Any:
        return self.own.preprocess(image, height=image.height, width=image.width)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.own, name)


class ReferenceShapes:
    """A pre-hook on the DiT for one edit: the references' (frames, rows, columns) of latent
    tokens in `img_shapes` are their own sizes' (the pipeline works them out at the output's
    area); the target's, last, stays. `remove()` takes it off."""

    def __init__(self, transformer: Any, sizes: list[tuple[int, int]], scale: int):
        self.shapes = [(1, h // scale, w // scale) for w, h in sizes]
        self.hook = transformer.register_forward_pre_hook(self._shapes, with_kwargs=True)

    def _shapes(self, _module: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        shapes = kwargs.get("img_shapes")
        if shapes is not None:
            kwargs["img_shapes"] = [[*self.shapes, per[-1]] for per in shapes]
        return args, kwargs

    def remove(self) -> None:
        self.hook.remove()
