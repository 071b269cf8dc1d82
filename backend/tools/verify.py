"""`paradit verify`: how far world size N is from world size 1, measured, with a verdict.

Runs the same job on a backend of world size N (with the plan flags given) and one of world
size 1 (the reference, no plan flags, decoding whole), both with --save-latents and the same
threads per rank, and compares the frames and the final latents with `equivalence.compare`; an
audio track (LTX-2) is compared as 16-bit samples (`compare_audio`) and is part of the verdict.

A world size N whose decode was blended from tiles (job.json `decode.exact` false: `--vae-tiling
on`, or tiles the memory plan needed) is `different`: its pixels are not one GPU's. With
`--accept-blended-decode` the reference decodes in the same tiles instead (so the comparison
measures the rest of the plan) and the blend is accepted; so is it, without the flag, where
world size N tiled because the whole decode would not fit (the reference tiles then too).

With `--against-kernel K` it measures an attention kernel instead of a plan: both runs at
world size 1, one with `--attention` as given, the reference with `--attention K`, judged
by the thresholds of the kernel measured (`kernel_tolerance`: a lossy kernel's own).
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

from .equivalence import (
    DIFFERENT,
    IDENTICAL,
    WITHIN_ROUNDING,
    compare,
    json_safe,
    tolerance_for,
)

log = logging.getLogger(__name__)

DTYPE_BY_DEVICE = {"cpu": "float32", "cuda": "bfloat16"}  # what launch.start_rank picks


def decode_png(data: bytes) -> np.ndarray:
    """A PNG frame as uint8 (H, W, 3)."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as img:
        return np.asarray(img.convert("RGB"))


REFERENCE = {"cfg_degree": None, "ulysses_degree": None, "ring_degree": None, "dp_degree": 1}
"""World size 1 is the reference: the plan flags apply to the other run only."""


AUDIO_MIN_SNR_DB = 40.0
"""An audio track (LTX-2) is `different` below this signal-to-difference ratio (16-bit PCM:
rounding moves a sample by one step, ~90 dB below a full-scale signal)."""


def wav_samples(data: bytes) -> np.ndarray:
    """A 16-bit WAV file's samples as int16 (samples, channels)."""
    import wave

    with wave.open(io.BytesIO(data)) as wav:
        raw = wav.readframes(wav.getnframes())
        return np.frombuffer(raw, dtype="<i2").reshape(-1, wav.getnchannels())


def compare_audio(first: bytes | None, other: bytes | None) -> dict[str, Any] | None:
    """The two runs' audio tracks: identical, or how far apart; None when neither has one."""
    if first is None and other is None:
        return None
    if first is None or other is None:
        return {"identical": False, "reason": "only one run has an audio track"}
    a, b = wav_samples(first), wav_samples(other)
    if a.shape != b.shape:
        return {"identical": False, "reason": f"audio shapes differ: {a.shape} vs {b.shape}"}
    diff = a.astype(np.int64) - b.astype(np.int64)
    power = float(np.mean(a.astype(np.float64) ** 2))
    noise = float(np.mean(diff.astype(np.float64) ** 2))
    snr = float("inf") if noise == 0 else 10 * np.log10(max(power, 1.0) / noise)
    return {
        "identical": bool(noise == 0),
        "max_abs": int(np.abs(diff).max()),
        "snr_db": snr,
        "samples": int(a.shape[0]),
        "channels": int(a.shape[1]),
    }


def _run(
    args: argparse.Namespace, world_size: int, body: dict[str, Any], **pinned: Any
) -> tuple[dict[str, Any], list[bytes], np.ndarray, bytes | None]:
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
        audio = client.audio(job["id"]) if "audio.wav" in record.get("files", ()) else None
        memory = record.get("memory") or {}
        run = {
            "vae_tiling": memory.get("vae_tiling", False),
            "tiling_needed": memory.get("tiling_needed", False),
            "decode": record.get("decode"),
            "world_size": world_size,
            "device": info["device"],
            "plan": info["plan"],
            "attention": info.get("attention"),
            "mean_step_s": job["timings"].get("mean_step_s"),
            **{key: record[key] for key in ("sequence_layout", "cache") if key in record},
        }
        return run, frames, latents, audio


def _resolve_device(args: argparse.Namespace) -> None:
    """Both runs on the same kind of device with the same threads per rank, or the comparison
    measures those instead of the plan."""
    if args.device == "auto":
        import torch

        enough = torch.cuda.is_available() and torch.cuda.device_count() >= args.world_size
        args.device = "cuda" if enough else "cpu"
    if args.device == "cpu" and not args.threads_per_rank:
        args.threads_per_rank = max(1, (os.cpu_count() or 1) // args.world_size)


LOSSY_TOLERANCE: dict[str, dict[str, float]] = {
    "sage": {"max_abs": 255.0, "min_psnr": 20.0, "latent_rel_l2": 0.15},
}
"""A lossy kernel's thresholds against `sdpa` (docs/equivalence.md): its int8 Q.K moves every
value a little, so only a gross break fails. Provisional: not yet measured on a GPU."""


def kernel_tolerance(kernel: str, dtype: str) -> Any:
    """The thresholds a kernel's distance from the reference kernel is judged by: the dtype's
    rounding for an exact kernel, the kernel's own for a lossy one."""
    return tolerance_for(dtype).updated(LOSSY_TOLERANCE.get(kernel, {}))


def _runs(args: argparse.Namespace, body: dict[str, Any]) -> tuple[tuple, tuple, list[str]]:
    """The reference run, the run measured, and their labels."""
    if args.against_kernel:
        # Both at world size 1: the distance is the kernel's alone.
        other = _run(args, 1, body)
        tiling = "on" if other[0]["vae_tiling"] else "off"
        first = _run(args, 1, body, attention=args.against_kernel, vae_tiling=tiling)
        return first, other, [f"kernel_{args.against_kernel}", f"kernel_{args.attention}"]
    # World size N first: the reference decodes whole (what one GPU computes), or in the same
    # tiles where world size N blended them and that is accepted (or needed for memory).
    other = _run(args, args.world_size, body)
    blended = _blended(other[0])
    accepted = getattr(args, "accept_blended_decode", False) or other[0]["tiling_needed"]
    tiling = "on" if blended and accepted else "off"
    first = _run(args, 1, body, vae_tiling=tiling)
    return first, other, ["world_size_1", f"world_size_{args.world_size}"]


def _blended(run: dict[str, Any]) -> bool:
    """The run's frames came from blended tiles (job.json `decode.exact` false)."""
    decode = run.get("decode") or {}
    return decode.get("exact") is False


def verify(args: argparse.Namespace, body: dict[str, Any]) -> dict[str, Any]:
    """Run `body` at world size 1 and `args.world_size` (or at world size 1 with two attention
    kernels: `args.against_kernel`); the report (see docs/equivalence.md)."""
    against = getattr(args, "against_kernel", None)
    args.against_kernel = against
    if against:
        if args.world_size != 1:
            raise ValueError("--against-kernel compares kernels at world size 1: no --world-size")
        if args.attention == against:
            raise ValueError(f"--against-kernel {against} needs --attention naming another kernel")
    elif args.world_size < 2:
        raise ValueError("--world-size must be at least 2 to compare with world size 1")
    _resolve_device(args)
    dtype = DTYPE_BY_DEVICE[args.device]
    tolerance = kernel_tolerance(args.attention, dtype) if against else tolerance_for(dtype)
    tolerance = tolerance.updated(args.tolerance)
    first_run, other_run, labels = _runs(args, body)
    first, first_frames, first_latents, first_audio = first_run
    other, other_frames, other_latents, other_audio = other_run
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
            labels[0]: hashlib.sha256(b"".join(first_frames)).hexdigest(),
            labels[1]: hashlib.sha256(b"".join(other_frames)).hexdigest(),
        },
        "runs": [first, other],
        **({"kernel": args.attention, "against_kernel": against} if against else {}),
    }
    audio = compare_audio(first_audio, other_audio)
    if audio is not None:  # LTX-2's track: part of the verdict
        report["audio"] = audio
        report["identical"] = report["identical"] and audio["identical"]
        if not audio["identical"] and not audio.get("snr_db", 0.0) >= AUDIO_MIN_SNR_DB:
            report["verdict"] = DIFFERENT
            report["reasons"] = [
                *report.get("reasons", []),
                audio.get("reason") or f"audio SNR {audio['snr_db']:.1f} dB < {AUDIO_MIN_SNR_DB}",
            ]
        elif not audio["identical"] and report["verdict"] == IDENTICAL:
            report["verdict"] = WITHIN_ROUNDING
    blended = not against and _blended(other)
    if blended and not (getattr(args, "accept_blended_decode", False) or other["tiling_needed"]):
        report["verdict"] = DIFFERENT
        report["reasons"] = [
            *report.get("reasons", []),
            f"world size {args.world_size} blended its decode from {other['decode']['tiles']} "
            "tiles: not the whole decode's pixels (--accept-blended-decode accepts it)",
        ]
    log.info("verdict: %s", report["verdict"])
    return json_safe(report)
