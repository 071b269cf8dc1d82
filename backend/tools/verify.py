"""`paradit verify`: the same job at world size 1 and N must give the same frames."""

from __future__ import annotations

import argparse
import hashlib
import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def _run(args: argparse.Namespace, world_size: int, body: dict[str, Any]) -> dict[str, Any]:
    from ..client.connect import connect
    from ..config import ServeConfig

    config = ServeConfig.from_args(args, world_size=world_size)
    with connect(None, config) as conn:
        client = conn.client
        job = client.wait(client.submit(body))
        frames = [client.frame(job["id"], i) for i in range(job["num_frames"])]
        if args.out:
            client.download(job, Path(args.out) / f"world-size-{world_size}")
        return {
            "world_size": world_size,
            "plan": client.info()["plan"],
            "mean_step_s": job["timings"].get("mean_step_s"),
            "frames": frames,
        }


def verify(args: argparse.Namespace, body: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """Run `body` at world size 1 and `args.world_size`; compare the PNG bytes frame by frame."""
    if args.world_size < 2:
        raise ValueError("--world-size must be at least 2 to compare with world size 1")
    if args.device == "auto":  # both runs on the same kind of device, or the test is moot
        import torch

        enough = torch.cuda.is_available() and torch.cuda.device_count() >= args.world_size
        args.device = "cuda" if enough else "cpu"
    runs = [_run(args, size, body) for size in (1, args.world_size)]
    first, other = (run.pop("frames") for run in runs)
    mismatched = [i for i, (a, b) in enumerate(zip(first, other, strict=False)) if a != b]
    same = len(first) == len(other) and not mismatched
    report = {
        "identical": same,
        "num_frames": len(first),
        "mismatched_frames": mismatched,
        "sha256": hashlib.sha256(b"".join(first)).hexdigest(),
        "runs": runs,
    }
    return same, report
