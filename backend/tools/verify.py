"""`paradit verify`: how far world size N is from world size 1, measured, with a verdict.

Runs the same job on a backend of world size N (with the plan flags given) and one of world
size 1 (the reference, no plan flags, decoding as world size N did: tiled or whole), both with
--save-latents and the same threads per rank, and compares the frames and the final latents
with `equivalence.compare`.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import logging
import os
from pathlib import Path
from typing import Any

import numpy as np

from .equivalence import compare, json_safe, tolerance_for

log = logging.getLogger(__name__)

DTYPE_BY_DEVICE = {"cpu": "float32", "cuda": "bfloat16"}  # what launch.start_rank picks


def decode_png(data: bytes) -> np.ndarray:
    """A PNG frame as uint8 (H, W, 3)."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as img:
        return np.asarray(img.convert("RGB"))


REFERENCE = {"cfg_degree": None, "ulysses_degree": None, "ring_degree": None, "dp_degree": 1}
"""World size 1 is the reference: the plan flags apply to the other run only."""


def _run(
    args: argparse.Namespace, world_size: int, body: dict[str, Any], **pinned: Any
) -> tuple[dict[str, Any], list[bytes], np.ndarray]:
    from ..client.connect import connect
    from ..config import ServeConfig

    plan = REFERENCE if world_size == 1 else {}
    config = ServeConfig.from_args(args, world_size=world_size, save_latents=True, **plan, **pinned)
    with connect(None, config) as conn:
        client = conn.client
        job = client.wait(client.submit(body))
        frames = [client.frame(job["id"], i) for i in range(job["num_frames"])]
        latents = client.latents(job["id"])
        if args.out:
            client.download(job, Path(args.out) / f"world-size-{world_size}")
        info = client.info()
        record = client.record(job["id"])
        memory = record.get("memory") or {}
        run = {
            "vae_tiling": memory.get("vae_tiling", False),
            "decode": memory.get("decode"),
            "world_size": world_size,
            "device": info["device"],
            "plan": info["plan"],
            "mean_step_s": job["timings"].get("mean_step_s"),
            **{key: record[key] for key in ("sequence_layout", "cache") if key in record},
        }
        return run, frames, latents


def _resolve_device(args: argparse.Namespace) -> None:
    """Both runs on the same kind of device with the same threads per rank, or the comparison
    measures those instead of the plan."""
    if args.device == "auto":
        import torch

        enough = torch.cuda.is_available() and torch.cuda.device_count() >= args.world_size
        args.device = "cuda" if enough else "cpu"
    if args.device == "cpu" and not args.threads_per_rank:
        args.threads_per_rank = max(1, (os.cpu_count() or 1) // args.world_size)


def verify(args: argparse.Namespace, body: dict[str, Any]) -> dict[str, Any]:
    """Run `body` at world size 1 and `args.world_size`; the report (see README)."""
    if args.world_size < 2:
        raise ValueError("--world-size must be at least 2 to compare with world size 1")
    _resolve_device(args)
    tolerance = tolerance_for(DTYPE_BY_DEVICE[args.device]).updated(args.tolerance)
    # World size N first: the reference decodes as it did (tiled when its decode was split
    # over ranks or tiled for memory, whole otherwise), so the comparison measures the plan.
    other, other_frames, other_latents = _run(args, args.world_size, body)
    tiling = "on" if other["vae_tiling"] else "off"
    first, first_frames, first_latents = _run(args, 1, body, vae_tiling=tiling)
    comparison = compare(
        np.stack([decode_png(f) for f in first_frames]),
        np.stack([decode_png(f) for f in other_frames]),
        tolerance,
        first_latents,
        other_latents,
    )
    report = {
        **comparison.to_dict(),  # verdict, identical, reasons, distances, thresholds
        "model": args.model,
        "world_size": args.world_size,
        "dtype": DTYPE_BY_DEVICE[args.device],
        "request": {k: v for k, v in body.items() if k not in ("image", "images")},
        "num_frames": len(first_frames),
        "sha256": {
            "world_size_1": hashlib.sha256(b"".join(first_frames)).hexdigest(),
            f"world_size_{args.world_size}": hashlib.sha256(b"".join(other_frames)).hexdigest(),
        },
        "runs": [first, other],
    }
    log.info("verdict: %s", comparison.verdict)
    return json_safe(report)
