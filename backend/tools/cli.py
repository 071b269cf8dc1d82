"""The `paradit` command line. Errors are one line on stderr and a non-zero exit."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ... import __version__
from ..config import BACKEND, SERVING, ServeConfig, add_flags, read_token
from ..kernels import KERNELS
from ..memory.settings import ENCODER_PLACEMENTS, OFFLOAD_MODES, TILING_MODES, WEIGHTS_MODES
from ..request import RequestField, request_fields

if TYPE_CHECKING:
    from ..client import Client

log = logging.getLogger("paradit")


class UsageError(ValueError):
    """Bad command-line input."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, no usage dump
        raise UsageError(f"{self.prog}: {message} (see --help)")


def _add_backend_flags(p: argparse.ArgumentParser, *, server: bool = True) -> None:
    """The flags of a command that connects to a backend or starts one (config.BACKEND)."""
    if server:
        p.add_argument("--server", help="URL of a running `paradit serve` (else one is started)")
    add_flags(p, BACKEND)


def _add_job_flags(p: argparse.ArgumentParser) -> None:
    """The request's fields, from the request table (the model's defaults where left out)."""
    for f in request_fields():
        if not f.cli:
            continue
        kwargs: dict[str, Any] = {"dest": f"job_{f.name}", "help": _flag_help(f)}
        kwargs["type"] = _cli_type(f)
        kwargs["metavar"] = f.metavar
        if f.cli_repeat or f.cli_rest:
            kwargs["action"] = "append"
        p.add_argument(f.cli, **kwargs)


def _flag_help(f: RequestField) -> str:
    help_text = f.help.replace("%", "%%")
    return help_text + (f" ({f.unsupported})" if f.unsupported else "")


def _cli_type(f: RequestField) -> Any:
    """The flag's text as the field's JSON value; a bad one is a one-line usage error."""
    if f.cli_type is None:
        return {"int": int, "float": float}.get(f.kind, str)
    parse = f.cli_type

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


def build_parser() -> Parser:
    parser = Parser(prog="paradit", description="Multi-GPU generation with diffusion transformers")
    parser.add_argument("--version", action="version", version=f"paradit {__version__}")
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more log lines (-vv: debug)"
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    p = sub.add_parser("serve", help="start a backend and serve the HTTP API")
    add_flags(p, BACKEND, SERVING, model_required=True)
    p.add_argument("--token-file", help="read the token from the first line of this file")

    p = sub.add_parser("generate", help="make one video or image")
    p.add_argument("prompt", help="what to make")
    p.add_argument("--out", required=True, help="output folder")
    _add_backend_flags(p)
    _add_job_flags(p)

    p = sub.add_parser("verify", help="measure how far world size N is from world size 1")
    p.add_argument(
        "--prompt", default="a red fox running through snow", help="the prompt of the test job"
    )
    p.add_argument("--out", help="keep both runs' outputs here (world-size-1/, world-size-N/)")
    p.add_argument("--tolerance", type=_tolerance, default={}, help=TOLERANCE_HELP)
    p.add_argument(
        "--against-kernel",
        choices=tuple(KERNELS),
        help="measure the --attention kernel against this one (e.g. sdpa), both at world "
        "size 1, instead of world size N against 1",
    )
    p.add_argument(
        "--accept-blended-decode",
        action="store_true",
        help="accept a world size N decode blended from tiles (--vae-tiling on): compare it "
        "with world size 1 decoding the same tiles (default: such a plan is different)",
    )
    _add_backend_flags(p, server=False)
    _add_job_flags(p)

    p = sub.add_parser("batch", help="many prompts x seeds into one folder")
    p.add_argument("--prompts", required=True, help="text file, one prompt per line")
    p.add_argument("--seeds", default="0", help="a seed or a range A-B")
    p.add_argument("--out", required=True, help="output folder (one subfolder per item)")
    _add_backend_flags(p)
    _add_job_flags(p)

    p = sub.add_parser("plan", help="the parallel plan and memory per GPU for a job")
    p.add_argument("--model", required=True, help="a preset, a diffusers folder or a hub id")
    p.add_argument("--gpus", type=int, required=True, help="number of GPUs")
    p.add_argument("--gpu-memory", type=float, required=True, help="GiB per GPU")
    p.add_argument("--width", type=int, required=True, help="pixels")
    p.add_argument("--height", type=int, required=True, help="pixels")
    p.add_argument("--frames", type=int, required=True, help="frames")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="device kind")
    p.add_argument("--dp-degree", type=int, default=1, help="data-parallel replicas")
    p.add_argument("--offload", default="auto", choices=OFFLOAD_MODES, help="as serve's")
    p.add_argument("--vae-tiling", default="auto", choices=TILING_MODES, help="as serve's")
    p.add_argument(
        "--encoder-placement", default="auto", choices=ENCODER_PLACEMENTS, help="as serve's"
    )
    p.add_argument(
        "--weights",
        default="auto",
        choices=WEIGHTS_MODES,
        help="as serve's: how the DiT's weights are stored, and so counted (auto: fp8 for "
        "quantized files, else bf16)",
    )
    p.add_argument(
        "--lora-cache-gib",
        type=float,
        help="plan for LoRAs (as serve with --lora-dir): the parsed-LoRA cache's bound in GiB",
    )
    p.add_argument(
        "--images",
        type=int,
        default=0,
        help="plan an image edit with N input images of the output's size (their tokens count)",
    )
    p.add_argument(
        "--fps",
        type=float,
        help="the job's frame rate, as a request's fps (a model with an audio track, LTX-2 "
        "or MiniMax H3, counts the audio's rows for the video's seconds at it; default: the "
        "model's own)",
    )
    p.add_argument(
        "--audio-latent-frames",
        type=int,
        metavar="N",
        help="the job's audio latent frames, as a request's audio_latent_frames (LTX-2)",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")

    p = sub.add_parser("models", help="what single-file models a ComfyUI models folder holds")
    p.add_argument("folder", help="a ComfyUI models folder (or any folder of checkpoints)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")

    _add_workflow_parsers(sub)

    p = sub.add_parser("recipes", help="the named sampling recipes a job may pick (--recipe)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")

    p = sub.add_parser("bench", help="measure scaling, overhead, latency and memory")
    p.add_argument("--quick", action="store_true", help="a small workload (about 90 s)")
    p.add_argument("--json", dest="json_path", help="also write the results as JSON here")
    p.add_argument("--out", default="bench-results", help="folder for the table and plot")
    p.add_argument(
        "--rows",
        default="scaling",
        help="what to measure, comma-separated: scaling (scaling, overhead, latency, memory), "
        "throughput (a batch of 8 on 2 replicas against 1 rank), unguided (a job without "
        "guidance on a 2-rank CFG plan, now and before, against 1 rank), cache (the step "
        "cache against none on 2 ranks), lora (switching LoRAs between jobs against a "
        "reload, ~1 GB DiT), image (a Qwen-Image job at 2048x2048, 16,384 tokens, on 1 rank, "
        "CFG 2 and Ulysses 2: step time, speed-up, fraction of linear; 1024x1024 with "
        "--quick); default scaling",
    )
    p.add_argument(
        "--repeats",
        type=int,
        help="interleaved runs per backend (throughput, image rows: 3; unguided, cache: 5)",
    )

    p = sub.add_parser("ui", help="the web app (Gradio)")
    _add_backend_flags(p)
    p.add_argument("--host", default="127.0.0.1", help="address the web app listens on")
    p.add_argument("--port", type=int, default=7860, help="the web app's port")
    p.add_argument(
        "--auth",
        default=os.environ.get("PARADIT_UI_AUTH"),
        help="user:pass login (default: $PARADIT_UI_AUTH)",
    )
    p.add_argument(
        "--root-path",
        default=os.environ.get("PARADIT_ROOT_PATH", ""),
        help="URL prefix behind a reverse proxy (default: $PARADIT_ROOT_PATH)",
    )
    p.add_argument("--output-dir", default="outputs", help="where the app keeps job outputs")
    p.add_argument(
        "--insecure",
        action="store_true",
        help="serve on a non-loopback address without --auth (anyone who reaches it can "
        "run jobs, with the backend's token if it has one)",
    )
    return parser


def _add_workflow_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("workflow", help="a ComfyUI workflow (API or UI format) as a paradit job")
    actions = p.add_subparsers(
        dest="workflow_command", required=True, parser_class=Parser, help="import or run"
    )
    comfyui = "the ComfyUI folder (or its models folder) the workflow's file names are in "
    comfyui += "(default: the first one above FILE)"
    p = actions.add_parser("import", help="print the request and serve settings it maps to")
    p.add_argument("file", help="the workflow's .json")
    p.add_argument("--comfyui-dir", metavar="DIR", help=comfyui)
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p = actions.add_parser("run", help="run it (job.json names the workflow and its sha256)")
    p.add_argument("file", help="the workflow's .json")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--comfyui-dir", metavar="DIR", help=comfyui)
    _add_backend_flags(p)


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
    """The request from the job flags (those given; the backend fills in the rest)."""
    body: dict[str, Any] = {"prompt": prompt}
    for f in request_fields():
        value = getattr(args, f"job_{f.name}", None)
        if value is None:
            continue
        if f.cli_rest:  # the first value is this field, the later ones the other field
            value, rest = value[0], value[1:]
            if rest:
                body[f.cli_rest] = rest
        body[f.name] = value
    return body


def backend_config(args: argparse.Namespace, **overrides: Any) -> ServeConfig | None:
    """The backend a command starts when it has no --server (None when it has one)."""
    from ..models.loading import ModelSource

    if getattr(args, "server", None):
        return None
    if not args.model:
        raise UsageError("give --server URL or --model M")
    # a bad model (or a bad single file) fails here, in one line
    files = (args.text_encoders, args.vaes, getattr(args, "image_encoders", None))
    ModelSource.parse(args.model, *(tuple(paths or ()) for paths in files))
    return ServeConfig.from_args(args, **overrides)


@contextmanager
def backend_client(args: argparse.Namespace, **overrides: Any) -> Iterator[Client]:
    """A client for --server, or for a backend started for this command (then stopped)."""
    from ..client.connect import connect

    with connect(getattr(args, "server", None), backend_config(args, **overrides)) as conn:
        yield conn.client


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
    from ..runtime.launch_env import LaunchEnv

    # Under torchrun / srun / mpirun the launcher's world size counts (--dp-degree divides
    # it); a launch that cannot work fails here, before torch is imported.
    env = LaunchEnv.from_environ()
    if os.environ.get("PARADIT_DIE_WITH_PARENT") == "1":
        _die_with_parent()
    if args.token:
        log.warning("--token is visible in the process list: prefer --token-file or PARADIT_TOKEN")
    token = args.token or read_token(args.token_file)
    launched = {} if env is None else {"world_size": env.world_size}
    config = ServeConfig.from_args(args, BACKEND, SERVING, token=token, **launched)
    from ..models.loading import ModelSource

    # bad files: one line
    ModelSource.parse(config.model, config.text_encoders, config.vaes, config.image_encoders)
    from ..serving.launch import serve  # once the command line holds: the group's imports

    def ready(url: str, world_size: int) -> None:
        print(f"paradit ready at {url} (model {config.model}, world size {world_size})", flush=True)

    from ..processes.child import exit_now

    exit_now(serve(config, ready))  # it served: the process ends here


def cmd_generate(args: argparse.Namespace) -> int:
    body = job_body(args, args.prompt)
    with backend_client(args) as client:
        job = client.generate(body, args.out, on_progress=ProgressLog())
    log.info("wrote %s (%d frames)", args.out, job["num_frames"])
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from .verify import verify

    report = verify(args, job_body(args, args.prompt))
    print(json.dumps(report, indent=2, allow_nan=False))
    return 1 if report["verdict"] == "different" else 0


def cmd_batch(args: argparse.Namespace) -> int:
    from .batch import items, run_batch

    path = Path(args.prompts)
    if not path.is_file():
        raise UsageError(f"--prompts {args.prompts}: no such file")
    prompts = [ln.strip() for ln in path.read_text().splitlines() if ln.strip()]
    if not prompts:
        raise UsageError(f"--prompts {args.prompts}: no prompts in the file")
    work = items(prompts, parse_seeds(args.seeds))
    base = job_body(args, prompts[0])
    with backend_client(args) as client:
        failed = run_batch(client, base, work, Path(args.out))
    return 1 if failed else 0


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
    from .plan import estimate, render

    report = estimate(
        args.model,
        args.gpus,
        args.gpu_memory,
        args.width,
        args.height,
        args.frames,
        device=args.device,
        dp_degree=args.dp_degree,
        offload=args.offload,
        vae_tiling=args.vae_tiling,
        weights=args.weights,
        lora_cache_gib=args.lora_cache_gib,
        images=args.images,
        encoder_placement=args.encoder_placement,
        fps=args.fps,
        audio_latent_frames=args.audio_latent_frames,
    )
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0 if report["fits"] else 3


def cmd_models(args: argparse.Namespace) -> int:
    from ..models.single_file.listing import list_models, render

    entries = list_models(args.folder)
    if args.json:
        print(json.dumps([e.to_dict() for e in entries], indent=2))
    else:
        print(render(entries))
    return 0


def cmd_workflow(args: argparse.Namespace) -> int:
    from . import workflow

    plan, variant = workflow.plan_of(args.file, args.comfyui_dir)
    if args.workflow_command == "import":
        samplers = workflow.model_samplers(plan)
        workflow.check_sampler(plan, samplers, variant)  # as run refuses it
        if args.json:
            shown = {**plan.to_dict(), "variant": variant, "samplers": list(samplers)}
            print(json.dumps(shown, indent=2))
        else:
            print(workflow.render(plan, variant, samplers))
        return 0
    for node_id, kind, text in plan.lines:
        log.info("node %s %s: %s", node_id, kind, text)
    workflow.run_overrides(args, plan)
    if not args.server:  # before a backend starts for it
        workflow.check_runnable(plan, variant, None, None)
    with backend_client(args) as client:
        if args.server:
            info = client.info()
            workflow.check_server(info, plan, args.server)
            workflow.check_runnable(plan, variant, args.server, info)
        job = client.generate(plan.body(), args.out, on_progress=ProgressLog())
    workflow.name_the_workflow(args.out, plan, variant)
    log.info("wrote %s (%d frames) from %s", args.out, job["num_frames"], args.file)
    return 0


def cmd_recipes(args: argparse.Namespace) -> int:
    from ..sampling.recipes import RECIPES, recipes_table

    if args.json:
        print(json.dumps([r.to_dict() for r in RECIPES], indent=2))
    else:
        print(recipes_table())
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from .bench.run import run_bench

    rows = tuple(r.strip() for r in args.rows.split(",") if r.strip())
    if args.repeats is not None and args.repeats < 1:
        raise UsageError("--repeats must be >= 1")
    return run_bench(
        quick=args.quick,
        json_path=args.json_path,
        out_dir=args.out,
        rows=rows,
        repeats=args.repeats,
    )


def cmd_ui(args: argparse.Namespace) -> int:
    from ...web.app import run_ui

    return run_ui(args, backend_config(args))


COMMANDS = {
    "serve": cmd_serve,
    "generate": cmd_generate,
    "verify": cmd_verify,
    "batch": cmd_batch,
    "plan": cmd_plan,
    "models": cmd_models,
    "workflow": cmd_workflow,
    "recipes": cmd_recipes,
    "bench": cmd_bench,
    "ui": cmd_ui,
}


def _die_with_parent() -> None:
    import signal

    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def main(argv: list[str] | None = None) -> int:
    from ..client.http import BackendError

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
