"""The start image re-compressed as one H.264 frame before it conditions LTX-2 (`image_crf`),
as the model was trained (Lightricks' `media_io.preprocess`; diffusers' LTX-2 pipelines'
`apply_image_conditioning_crf`, whose default CRF is 33 through LTX-2.3 and 18 for LTX-2.5).

The procedure is diffusers' byte for byte: the 8-bit RGB image cropped to even sides, turned
to yuv420p by libswscale, encoded by libx264 (one frame at rate 1, `crf`, preset veryfast)
into an mp4 in memory, its first frame decoded back to 8-bit RGB. One thing is fixed that
diffusers leaves to the machine: x264's thread count. Left to itself x264 takes as many
threads as the process may use CPUs, and the frame it encodes depends on that count (a
768x512 frame at CRF 33 comes out differently on 1, 2, 3, 4, 6 and 8 threads): the same job
would condition on another image on another machine, and ranks that see different CPU counts
(another node, another CPU binding) would each write another first latent frame into one
job. paradit encodes on `THREADS` threads, always: diffusers' own function gives the same
bytes in a process that may use one CPU (tests/families/test_ltx2_image_crf.py).

PyAV (the `av` package, its own libx264 and ffmpeg inside) is imported when a job needs it.
"""

from __future__ import annotations

import io
from typing import Any

THREADS = 1
"""x264's threads: one, the encoder's single-threaded reference, which every machine gives."""
MAX_CRF = 51
"""x264's highest CRF for 8-bit video; it takes a higher one as 51 (ComfyUI's LTXVPreprocess
offers up to 100: the same frame as 51)."""


def default_crf(pipe: Any) -> int:
    """The CRF the loaded LTX-2 model was trained with, as diffusers resolves it from the text
    encoder (Gemma 4, LTX-2.5: 18; Gemma 3, LTX-2.0 and 2.3: 33)."""
    from diffusers.pipelines.ltx2.utils import resolve_default_image_crf

    return int(resolve_default_image_crf(getattr(pipe, "text_encoder", None)))


def round_trip(image: Any, crf: int) -> Any:
    """`image` (an RGB PIL image) through one H.264 frame at `crf` (0: as it is), as a PIL
    image; odd sides lose their last row or column, as diffusers crops them."""
    import numpy as np
    from PIL import Image

    if crf < 0:
        raise ValueError(f"image_crf must be at least 0, got {crf}")
    if crf == 0:
        return image
    pixels = np.asarray(image.convert("RGB"))
    return Image.fromarray(round_trip_array(pixels, crf))


def round_trip_array(pixels: Any, crf: int, threads: int = THREADS) -> Any:
    """An 8-bit RGB array (height, width, 3) through one H.264 frame at `crf` > 0, encoded on
    `threads` x264 threads (0: x264's choice, from the CPUs the process may use)."""
    import av
    import numpy as np

    if pixels.dtype != np.uint8 or pixels.ndim != 3 or pixels.shape[2] != 3:
        shape = f"{pixels.dtype} {tuple(pixels.shape)}"
        raise ValueError(f"H.264 takes an 8-bit RGB image (height, width, 3), got {shape}")
    height, width = pixels.shape[0] // 2 * 2, pixels.shape[1] // 2 * 2
    if height == 0 or width == 0:
        raise ValueError(f"an image of at least 2x2 pixels for H.264, got {pixels.shape[1::-1]}")
    options = {"crf": str(crf), "preset": "veryfast", "threads": str(threads)}
    with io.BytesIO() as mp4:
        container = av.open(mp4, "w", format="mp4")
        try:
            stream = container.add_stream("libx264", rate=1, options=options)
            stream.height, stream.width = height, width
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(pixels[:height, :width]))
            container.mux(stream.encode(frame.reformat(format="yuv420p")))
            container.mux(stream.encode())
        finally:
            container.close()
        encoded = mp4.getvalue()
    with io.BytesIO(encoded) as mp4, av.open(mp4) as container:
        video = next(s for s in container.streams if s.type == "video")
        return next(container.decode(video)).to_ndarray(format="rgb24")
