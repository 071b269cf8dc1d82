"""LTX-2's start image prepared as ComfyUI's image-to-video templates prepare it (`image_prep`
comfyui, `ltx2/comfyui_image.py`), checked against values worked by hand from the procedure
read in ComfyUI's `comfy_extras/nodes_lt.py` (`preprocess`, `LTXVImgToVideoInplace`) and
`comfy/utils.py` (`common_upscale`): the float image truncated (x 255, not rounded) to 8 bits
before its one H.264 frame, the centre cut's offsets, torch's bilinear without antialiasing,
a frame at the latent's size taken as it is; the request field declared by LTX-2; the adapter
hands the pipeline those float pixels with `image_crf` 0. The whole job (both stages) against
diffusers given the prepared pixels, and 2 ranks against 1, is the family contract's job
"comfyui i2v" (`ltx2/tiny_job.py`).

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
import torch
from PIL import Image

from paradit.backend.contract import IMAGE_TO_VIDEO, Limits
from paradit.backend.models.families.ltx2 import adapter, comfyui_image
from paradit.backend.models.families.ltx2.image_crf import round_trip_array
from paradit.backend.request import JobRequest


def _bytes(height: int, width: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)


@pytest.mark.fast
def test_the_float_image_is_truncated_to_8_bits_before_its_h264_frame():
    # 0.5 x 255 = 127.5: truncated 127 (rounding would give 128); k / 255 gives k back. At
    # CRF 1 the frame keeps the difference (at 33 both may land on one level)
    values = _bytes(16, 24).astype(np.float32) / 255.0
    values[:8] = (np.arange(24, dtype=np.float32)[None, :, None] * 10 + 0.5) / 255.0
    values[0, 0] = 0.5
    frame = comfyui_image.compressed_frame(torch.from_numpy(values), 1)
    truncated = np.floor(values * 255.0).astype(np.uint8)
    assert truncated[0, 0, 0] == 127
    expected = round_trip_array(truncated, 1).astype(np.float32) / 255.0
    assert frame.dtype == torch.float32 and np.array_equal(frame.numpy(), expected)
    rounded = np.round(values * 255.0).astype(np.uint8)
    assert not np.array_equal(round_trip_array(rounded, 1).astype(np.float32) / 255.0, expected)
    assert torch.equal(
        comfyui_image.compressed_frame(torch.from_numpy(values), 33),
        torch.from_numpy(round_trip_array(truncated, 33).astype(np.float32) / 255.0),
    )
    # odd sides lose their last row and column; CRF 0 is the image as it is
    odd = torch.from_numpy(_bytes(15, 21).astype(np.float32) / 255.0)
    assert comfyui_image.compressed_frame(odd, 18).shape == (14, 20, 3)
    assert comfyui_image.compressed_frame(odd, 0) is odd
    # above x264's 51 (ComfyUI's widget goes to 100): 51
    assert torch.equal(
        comfyui_image.compressed_frame(odd, 100), comfyui_image.compressed_frame(odd, 51)
    )


@pytest.mark.fast
def test_the_centre_cut_takes_comfyuis_offsets():
    # the templates' 1536x864 frame to 640x352 (and 1280x704): aspect 1.7778 < 1.8182, so
    # rows: round((864 - 864 x 1.7778 / 1.8182) / 2) = round(9.6) = 10 off top and bottom
    assert comfyui_image.centre_offsets((1536, 864), (640, 352)) == (0, 10)
    assert comfyui_image.centre_offsets((1536, 864), (1280, 704)) == (0, 10)
    # wider than the target: columns; (1000 - 1000 x 1 / 1.25) / 2 = 100
    assert comfyui_image.centre_offsets((1000, 800), (640, 640)) == (100, 0)
    assert comfyui_image.centre_offsets((640, 320), (64, 32)) == (0, 0)


@pytest.mark.fast
def test_the_scale_is_torchs_bilinear_without_antialiasing():
    # one row 0 0 8 0 0 0 0 0 to width 2: align_corners false reads x = (i + 0.5) x 4 - 0.5,
    # 1.5 and 5.5: (0 + 8) / 2 = 4 and 0 (an antialiased filter would spread the 8 wider)
    row = torch.tensor([0.0, 0, 8, 0, 0, 0, 0, 0])
    frame = row[None, :, None].expand(4, 8, 3)  # (height 4, width 8, 3): 2x1 has its aspect
    out = comfyui_image.scaled(frame, 2, 1)
    assert out.shape == (1, 3, 1, 2)
    assert torch.equal(out[0, 0], torch.tensor([[4.0, 0.0]]))
    # the centre cut before: 10 columns wide to 4x2 -> aspect 2 < 5, columns off each side
    # round((10 - 10 x 2 / 5) / 2) = 3: columns 3..6, then 4 -> 4 is the identity
    wide = torch.arange(10.0)[None, :, None].expand(2, 10, 3)
    assert torch.equal(comfyui_image.scaled(wide, 4, 2)[0, 0, 0], torch.tensor([3.0, 4, 5, 6]))
    # a frame at the size is taken as it is
    same = torch.rand(6, 4, 3)
    assert torch.equal(comfyui_image.scaled(same, 4, 6)[0], same.movedim(-1, 0))


def _png(pixels: np.ndarray) -> str:
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return base64.b64encode(out.getvalue()).decode()


LTX2 = Limits(
    IMAGE_TO_VIDEO, 32, 64, 2048, 8, 481, default_frames=9, needs_image=True, image_crf=33,
    image_preps=("comfyui",),
)  # fmt: skip
OTHER = Limits(IMAGE_TO_VIDEO, 16, 16, 2048, 4, 81, needs_image=True)


class _Pipe:
    text_encoder = None


@pytest.mark.fast
def test_the_adapter_hands_the_pipeline_comfyuis_float_pixels():
    sent = _bytes(54, 96, seed=2)  # the image as sent: 96x54, the job 64x64
    body = {"prompt": "p", "image": _png(sent), "image_prep": "comfyui", "width": 64}
    request = JobRequest.from_body({**body, "height": 64}, LTX2)
    given = adapter.image_kwargs(_Pipe(), request)
    assert given["image_crf"] == 0
    # by hand: compressed once at 96x54 (even: as it is), then cut to the square's aspect:
    # columns round((96 - 96 x 1 / 1.7778) / 2) = 21 off each side, 54x54 -> bilinear 64x64
    frame = round_trip_array(sent, 33).astype(np.float32) / 255.0
    cut = torch.from_numpy(frame[:, 21:75]).movedim(-1, 0)[None]
    expected = torch.nn.functional.interpolate(cut, size=(64, 64), mode="bilinear")
    assert torch.equal(given["image"], expected)
    # the pipeline's way: PIL's resize of the 8-bit image to the job's size, then H.264
    plain = adapter.image_kwargs(_Pipe(), JobRequest.from_body({**body, "height": 64,
                                 "image_prep": "pipeline"}, LTX2))  # fmt: skip
    assert isinstance(plain["image"], Image.Image)
    with pytest.raises(ValueError, match="prepares its input images only as its pipeline"):
        JobRequest.from_body({**body, "height": 64}, OTHER)
