"""The start-up jobs that compile the DiT's blocks (`--compile blocks`) for the size the
server expects, so that the first real job of that size compiles nothing."""

from __future__ import annotations

import base64
import io
import json
import logging
import time
from typing import Any

import torch

from ..contract import Limits
from ..memory.settings import JobShape
from ..parallel.sequence import SPREAD
from ..request import JobRequest
from .compiled import compile_counter
from .group import Group
from .job import JobHooks, RankModel, encode, run_on_rank, tensor_meta
from .messages import RunJob

log = logging.getLogger(__name__)

WARM_UP_PROMPT = "compile warm-up"


def warm_up_requests(shape: JobShape, limits: Limits, spread: bool) -> list[JobRequest]:
    """The jobs that compile the blocks for `shape`: one with the model's default guidance and,
    when an unguided job runs other shapes on a rank (`spread`: the plan spreads it over the
    replica, or pairs a guided job's branches into a batch of 2), one without guidance. One
    step each."""
    body: dict[str, Any] = {
        "prompt": WARM_UP_PROMPT,
        "width": shape.width,
        "height": shape.height,
        "num_inference_steps": 1,
        "seed": 0,
    }
    if limits.frame_multiple:
        body["num_frames"] = shape.frames
    if limits.needs_image:
        body["image"] = _gray_png(shape.width, shape.height)
    requests = [JobRequest.from_body(body, limits)]
    if spread:
        requests.append(JobRequest.from_body({**body, "guidance_scale": 1.0}, limits))
    return requests


def _gray_png(width: int, height: int) -> str:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (128, 128, 128)).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def warm_up(model: RankModel, group: Group, shape: JobShape) -> float:
    """Run the warm-up jobs on every rank together (a start-up step, before the rank says it
    is ready), so that the first real job of `shape` compiles nothing; returns the seconds.

    Rank 0 encodes each request (it alone holds the encoders) and publishes the shapes of its
    outputs in the store; a replica leader other than rank 0 runs on zeros of those shapes
    (the values do not change what compiles). The results are dropped."""
    started = time.perf_counter()
    parallel = model.parallel
    spread = bool(parallel.paired) or any(SPREAD in layouts.states for layouts in parallel.layouts)
    for index, request in enumerate(warm_up_requests(shape, model.limits, spread)):
        key = f"compile/warm-up/{index}"
        tensors = None
        if group.is_rank0:
            tensors = encode(model, request)
            group.store.set(key, json.dumps(tensor_meta(tensors)))
        group.barrier(f"compile-warm-up-{index}")
        meta = json.loads(group.store.get(key))
        if tensors is None and model.is_leader:
            tensors = {n: torch.zeros(s, dtype=getattr(torch, d)) for n, s, d in meta}
        message = RunJob(f"warm-up-{index}", request.to_dict(), meta, vae_tiling=model.layout.tiles)
        run_on_rank(model, message, JobHooks(tensors if model.is_leader else None))
    seconds = time.perf_counter() - started
    log.info(
        "rank %d: compiled blocks warmed for %dx%dx%d in %.1fs (%d compilations)",
        group.rank,
        shape.width,
        shape.height,
        shape.frames,
        seconds,
        compile_counter().count,
    )
    return seconds
