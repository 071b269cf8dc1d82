"""The `paradit` command line. Errors are one line on stderr and a non-zero exit."""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
from collections import deque
from pathlib import Path
from typing import Any

from .. import __version__

log = logging.getLogger("paradit")

JOB_FLAGS = {
    "negative": "negative_prompt",
    "width": "width",
    "height": "height",
    "frames": "num_frames",
    "steps": "num_inference_steps",
    "guidance": "guidance_scale",
    "seed": "seed",
}


class UsageError(ValueError):
    """Bad command-line input."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, no usage dump
        raise UsageError(f"{self.prog}: {message} (see --help)")


def _add_backend_flags(p: argparse.ArgumentParser, *, server: bool = True) -> None:
    if server:
        p.add_argument("--server", help="URL of a running `paradit serve`")
    p.add_argument("--model", help="preset (tiny-wan, tiny-wan-i2v, tiny-flux), folder or hub id")
    p.add_argument("--world-size", type=int, default=1, help="ranks to start (default 1)")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--threads", type=int, help="CPU threads per rank")
    p.add_argument("--timeout", type=float, default=600.0, help="collective timeout, seconds")


def _add_plan_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cfg-degree", type=int)
    p.add_argument("--ulysses-degree", type=int)
    p.add_argument("--ring-degree", type=int)
    p.add_argument("--no-shard", action="store_true", help="keep full DiT weights on every rank")


def plan_flags(args: argparse.Namespace) -> tuple[str, ...]:
    """The plan flags given on the command line, as `serve` arguments."""
    flags: list[str] = []
    for name in ("cfg_degree", "ulysses_degree", "ring_degree"):
        value = getattr(args, name, None)
        if value is not None:
            flags += [f"--{name.replace('_', '-')}", str(value)]
    if getattr(args, "no_shard", False):
        flags.append("--no-shard")
    return tuple(flags)


def _add_job_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--negative", help="negative prompt")
    p.add_argument("--width", type=int)
    p.add_argument("--height", type=int)
    p.add_argument("--frames", type=int)
    p.add_argument("--steps", type=int)
    p.add_argument("--guidance", type=float)
    p.add_argument("--seed", type=int)
    p.add_argument("--image", help="start image (PNG/JPEG) for image-to-video")


def build_parser() -> Parser:
    parser = Parser(prog="paradit", description="Multi-GPU generation with diffusion transformers")
    parser.add_argument("--version", action="version", version=f"paradit {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    p = sub.add_parser("serve", help="start a backend and serve the HTTP API")
    p.add_argument("--model", required=True)
    p.add_argument("--world-size", type=int, default=1)
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=7870)
    p.add_argument("--output-dir", default="outputs")
    p.add_argument("--timeout", type=float, default=600.0, help="collective timeout, seconds")
    p.add_argument(
        "--token",
        default=os.environ.get("PARADIT_TOKEN"),
        help="require 'Authorization: Bearer TOKEN' (or set PARADIT_TOKEN)",
    )
    _add_plan_flags(p)
    p.add_argument("--threads", type=int, help="CPU threads per rank")
    p.add_argument("--max-queue", type=int, default=64)
    p.add_argument(
        "--save-latents",
        action="store_true",
        help="write each job's final latents as latents.npy (GET /v1/jobs/{id}/latents)",
    )

    p = sub.add_parser("generate", help="make one video or image")
    p.add_argument("prompt")
    p.add_argument("--out", required=True, help="output folder")
    _add_backend_flags(p)
    _add_job_flags(p)

    p = sub.add_parser("verify", help="measure how far world size N is from world size 1")
    p.add_argument("--prompt", default="a red fox running through snow")
    p.add_argument("--out", help="keep both runs' outputs here (world-size-1/, world-size-N/)")
    p.add_argument("--tolerance", type=_tolerance, default={}, help=TOLERANCE_HELP)
    _add_backend_flags(p, server=False)
    _add_plan_flags(p)  # for the world-size-N run; world size 1 is the reference
    _add_job_flags(p)

    p = sub.add_parser("batch", help="many prompts x seeds into one folder")
    p.add_argument("--prompts", required=True, help="text file, one prompt per line")
    p.add_argument("--seeds", default="0", help="a seed or a range A-B")
    p.add_argument("--out", required=True)
    _add_backend_flags(p)
    _add_job_flags(p)

    p = sub.add_parser("plan", help="the parallel plan and memory per GPU for a job")
    p.add_argument("--model", required=True)
    p.add_argument("--gpus", type=int, required=True)
    p.add_argument("--gpu-memory", type=float, required=True, help="GiB per GPU")
    p.add_argument("--width", type=int, required=True)
    p.add_argument("--height", type=int, required=True)
    p.add_argument("--frames", type=int, required=True)
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("bench", help="measure scaling, overhead, latency and memory")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", dest="json_path")
    p.add_argument("--out", default="bench-results", help="folder for the table and plot")

    p = sub.add_parser("ui", help="the web app (Gradio)")
    _add_backend_flags(p)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=7860)
    p.add_argument("--auth", default=os.environ.get("PARADIT_UI_AUTH"), help="user:pass")
    p.add_argument("--root-path", default=os.environ.get("PARADIT_ROOT_PATH", ""))
    p.add_argument("--output-dir", default="outputs")
    return parser


# -- helpers ----------------------------------------------------------------------------------

TOLERANCE_HELP = (
    "thresholds for 'equal within rounding': max_abs (0..255), min_psnr (dB), latent_rel_l2, "
    "e.g. latent_rel_l2=1e-3,min_psnr=40,max_abs=16 (default: calibrated for the dtype)"
)


def _tolerance(text: str) -> dict[str, float]:
    from .equivalence import parse_tolerance

    try:
        return parse_tolerance(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def job_body(args: argparse.Namespace, prompt: str) -> dict[str, Any]:
    from .client import encode_image

    body: dict[str, Any] = {"prompt": prompt}
    for flag, field in JOB_FLAGS.items():
        value = getattr(args, flag)
        if value is not None:
            body[field] = value
    if args.image:
        path = Path(args.image)
        if not path.is_file():
            raise UsageError(f"--image {args.image}: no such file")
        body["image"] = encode_image(path)
    return body


def local_spec(
    args: argparse.Namespace,
    world_size: int | None = None,
    output_dir: str = "",
    extra_args: tuple[str, ...] = (),
):
    from .loading import ModelSource
    from .local import LocalSpec

    if not args.model:
        raise UsageError("give --server URL or --model M")
    ModelSource.parse(args.model)  # a bad model fails here, in one line
    return LocalSpec(
        model=args.model,
        world_size=world_size or args.world_size,
        device=args.device,
        output_dir=output_dir or tempfile.mkdtemp(prefix="paradit-"),  # removed by BackendSession
        timeout_s=args.timeout,
        threads_per_rank=args.threads,
        extra_args=extra_args,
    )


class BackendSession:
    """A client for --server, or a backend started for this command."""

    def __init__(
        self,
        args: argparse.Namespace,
        world_size: int | None = None,
        extra_args: tuple[str, ...] = (),
    ):
        from .client import Client
        from .local import LocalBackend

        self.local = None
        if getattr(args, "server", None):
            self.client = Client(args.server, token=os.environ.get("PARADIT_TOKEN"))
        else:
            log.info(
                "starting a backend for %s on %s rank(s)", args.model, world_size or args.world_size
            )
            self.local = LocalBackend(local_spec(args, world_size, extra_args=extra_args))
            self.client = self.local.client

    def __enter__(self):
        return self.client

    def __exit__(self, *_exc) -> None:
        if self.local is not None:
            self.local.stop()
            shutil.rmtree(self.local.spec.output_dir, ignore_errors=True)  # copied to --out


class ProgressLog:
    """Logs queue position and each new step once (the job is polled more often)."""

    def __init__(self) -> None:
        self.last: tuple = ()

    def __call__(self, job: dict[str, Any]) -> None:
        progress = job.get("progress") or {}
        now = (job["status"], progress.get("step"), job.get("queue_position"))
        if now == self.last:
            return
        self.last = now
        if job["status"] == "queued" and job.get("queue_position"):
            log.info("queued behind %d job(s)", job["queue_position"])
        elif job["status"] == "running" and progress.get("step"):
            log.info("step %d/%d", progress["step"], progress["total"])


# -- commands ---------------------------------------------------------------------------------


def cmd_serve(args: argparse.Namespace) -> int:
    from .config import ServeConfig
    from .launch import serve

    if os.environ.get("PARADIT_DIE_WITH_PARENT") == "1":
        _die_with_parent()
    config = ServeConfig(
        model=args.model,
        world_size=args.world_size,
        device=args.device,
        host=args.host,
        port=args.port,
        output_dir=args.output_dir,
        timeout_s=args.timeout,
        token=args.token,
        cfg_degree=args.cfg_degree,
        ulysses_degree=args.ulysses_degree,
        ring_degree=args.ring_degree,
        shard_weights=not args.no_shard,
        threads_per_rank=args.threads,
        max_queue=args.max_queue,
        save_latents=args.save_latents,
    )

    def ready(url: str, world_size: int) -> None:
        print(f"paradit ready at {url} (model {config.model}, world size {world_size})", flush=True)

    return serve(config, ready)


def cmd_generate(args: argparse.Namespace) -> int:
    body = job_body(args, args.prompt)
    with BackendSession(args) as client:
        job = client.generate(body, args.out, on_progress=ProgressLog())
    log.info("wrote %s (%d frames)", args.out, job["num_frames"])
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from .verify import verify

    report = verify(args, job_body(args, args.prompt))
    print(json.dumps(report, indent=2, allow_nan=False))
    return 1 if report["verdict"] == "different" else 0


def cmd_batch(args: argparse.Namespace) -> int:
    path = Path(args.prompts)
    if not path.is_file():
        raise UsageError(f"--prompts {args.prompts}: no such file")
    prompts = [ln.strip() for ln in path.read_text().splitlines() if ln.strip()]
    if not prompts:
        raise UsageError(f"--prompts {args.prompts}: no prompts in the file")
    work = [(i, p, seed) for i, p in enumerate(prompts) for seed in parse_seeds(args.seeds)]
    failed = 0
    with BackendSession(args) as client:
        pending: deque[tuple[Path, str]] = deque()
        for index, prompt, seed in work:
            if len(pending) >= BATCH_WINDOW:  # keep the backend's queue short
                failed += _finish_one(client, *pending.popleft())
            out = Path(args.out) / f"{index:04d}-seed{seed}"
            pending.append((out, client.submit({**job_body(args, prompt), "seed": seed})))
        while pending:
            failed += _finish_one(client, *pending.popleft())
    return 1 if failed else 0


BATCH_WINDOW = 8


def _finish_one(client, out: Path, job_id: str) -> int:
    """Wait for one batch job and download it; 1 if it failed (the batch goes on)."""
    from .client import BackendError

    try:
        client.download(client.wait(job_id), out)
        log.info("wrote %s", out)
        return 0
    except BackendError as exc:
        log.error("%s: %s", out, exc)
        return 1


def parse_seeds(text: str) -> list[int]:
    try:
        if "-" in text:
            low, high = (int(x) for x in text.split("-", 1))
            if low > high or high - low > 10000:
                raise ValueError
            return list(range(low, high + 1))
        return [int(text)]
    except ValueError:
        raise UsageError(f"--seeds must be N or A-B with A <= B, got {text!r}") from None


def cmd_plan(args: argparse.Namespace) -> int:
    from .memplan import estimate, render

    report = estimate(args.model, args.gpus, args.gpu_memory, args.width, args.height, args.frames)
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0 if report["fits"] else 3


def cmd_bench(args: argparse.Namespace) -> int:
    from .bench import run_bench

    return run_bench(quick=args.quick, json_path=args.json_path, out_dir=args.out)


def cmd_ui(args: argparse.Namespace) -> int:
    from ..web.app import run_ui

    return run_ui(args)


COMMANDS = {
    "serve": cmd_serve,
    "generate": cmd_generate,
    "verify": cmd_verify,
    "batch": cmd_batch,
    "plan": cmd_plan,
    "bench": cmd_bench,
    "ui": cmd_ui,
}


def _die_with_parent() -> None:
    import signal

    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def main(argv: list[str] | None = None) -> int:
    from .client import BackendError

    try:
        args = build_parser().parse_args(argv)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    level = logging.DEBUG if args.verbose > 1 else logging.INFO
    logging.basicConfig(
        level=os.environ.get("PARADIT_LOG", logging.getLevelName(level)).upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        return COMMANDS[args.command](args)
    except (UsageError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BackendError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (OSError, RuntimeError) as exc:  # files, network, a lost rank: one line (-v: more)
        if args.verbose:
            log.exception("%s failed", args.command)
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
