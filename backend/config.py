"""How a backend is started: one frozen configuration, its command-line flags, written once.

`ServeConfig` is what `paradit serve` runs with, what the frontends start a local backend with
(`client.local.LocalBackend`), and what rank 0 hands its child ranks (as the same flags).
Each field names its flag and help line, so the parsers of `serve`, `generate`, `verify`,
`batch` and `ui` are built from this table and `to_argv` writes a config back as flags.
Torch-free: the frontends import it.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .compile_modes import BLOCKS, COMPILE_MODES, offload_refusal
from .kernels import ATTENTION_CHOICES, KERNELS, device_refusal
from .memory.settings import (
    ENCODER_PLACEMENTS,
    OFFLOAD_MODES,
    TILING_MODES,
    WEIGHTS_MODES,
    MemorySettings,
)

BACKEND = "backend"
"""Flags every command that starts a backend takes (serve, generate, verify, batch, ui)."""
SERVING = "serving"
"""Flags only `serve` takes: where it listens, where it writes, who may use it."""

DEVICES = ("auto", "cpu", "cuda")


def _flag(
    flag: str,
    group: str,
    help: str,
    *,
    frontend: bool = False,
    low: float | None = None,
    high: float | None = None,
    step: float | None = None,
    widget: str = "",
    **argparse_kwargs: Any,
) -> dict[str, Any]:
    """A setting's flag, its help line and, with `frontend`, its place in the ParaDiTBackend
    node and the web app's backend settings (`widget` names it there; default the flag's
    name; bounds and step for its number box)."""
    return {
        "flag": flag,
        "group": group,
        "help": help,
        "argparse": argparse_kwargs,
        "frontend": frontend,
        "widget": widget or flag.removeprefix("--").replace("-", "_"),
        "bounds": (low, high, step),
    }


@dataclass(frozen=True)
class ServeConfig:
    """How a backend is started."""

    model: str = field(
        default="",
        metadata=_flag(
            "--model",
            BACKEND,
            "a preset (tiny-wan, tiny-wan-i2v, tiny-flux), a diffusers folder, a hub id, or a "
            "single-file checkpoint (.safetensors/.gguf; Wan 2.2 A14B: HIGH,LOW; an all-in-one "
            "Flux checkpoint brings its encoders and VAE)",
        ),
    )
    text_encoders: tuple[str, ...] = field(
        default=(),
        metadata=_flag(
            "--text-encoder",
            BACKEND,
            "a text encoder file for a single-file --model (repeat for Flux: CLIP-L and T5; "
            "replaces the one inside an all-in-one checkpoint)",
            action="append",
            metavar="FILE",
        ),
    )
    vaes: tuple[str, ...] = field(
        default=(),
        metadata=_flag(
            "--vae",
            BACKEND,
            "the VAE file for a single-file --model (replaces an all-in-one checkpoint's; LTX-2: "
            "repeat for its video VAE, audio VAE and vocoder files beside a DiT alone)",
            action="append",
            metavar="FILE",
        ),
    )
    image_encoders: tuple[str, ...] = field(
        default=(),
        metadata=_flag(
            "--image-encoder",
            BACKEND,
            "the CLIP vision file (clip_vision_h) for a single-file Wan 2.1 image-to-video --model",
            action="append",
            metavar="FILE",
        ),
    )
    upscaler: str = field(
        default="",
        metadata=_flag(
            "--upscaler",
            BACKEND,
            "the latent upscaler of two-stage jobs (a request's upscale; LTX-2: "
            "ltx-2-spatial-upscaler-x2-1.0.safetensors, or a diffusers folder), on every rank",
            metavar="FILE",
        ),
    )
    lora_dirs: tuple[str, ...] = field(
        default=(),
        metadata=_flag(
            "--lora-dir",
            BACKEND,
            "a folder of LoRA files (.safetensors) that jobs may name (repeat for several; "
            "names are paths inside them, as GET /v1/loras lists them; nothing outside is read)",
            action="append",
            metavar="DIR",
        ),
    )
    lora_cache_gib: float = field(
        default=2.0,
        metadata=_flag(
            "--lora-cache-gib",
            BACKEND,
            "host memory per rank for parsed LoRAs, least recently used dropped first (default 2)",
        ),
    )
    world_size: int = field(
        default=1,
        metadata=_flag(
            "--world-size",
            BACKEND,
            "ranks to start on this machine (default 1)",
            frontend=True,
            widget="gpus",
            low=1,
            high=64,
            step=1,
        ),
    )
    device: str = field(
        default="auto",
        metadata=_flag(
            "--device", BACKEND, "auto: one CUDA device per rank if there are enough, else CPU"
        ),
    )
    threads_per_rank: int | None = field(
        default=None,
        metadata=_flag("--threads", BACKEND, "CPU threads per rank (default: cores / ranks)"),
    )
    timeout_s: float = field(
        default=600.0,
        metadata=_flag(
            "--timeout",
            BACKEND,
            "collective timeout in seconds: how long a rank waits for a lost peer in a job",
        ),
    )
    """Collective timeout of the process group."""
    cfg_degree: int | None = field(
        default=None,
        metadata=_flag(
            "--cfg-degree",
            BACKEND,
            "1 or 2: run the two guidance branches side by side (0 or unset: the plan decides)",
            frontend=True,
            low=0,
            high=2,
            step=1,
        ),
    )
    ulysses_degree: int | None = field(
        default=None,
        metadata=_flag(
            "--ulysses-degree",
            BACKEND,
            "ranks that split the sequence (Ulysses; 0 or unset: the plan decides)",
            frontend=True,
            low=0,
            high=64,
            step=1,
        ),
    )
    ring_degree: int | None = field(
        default=None,
        metadata=_flag(
            "--ring-degree",
            BACKEND,
            "ranks that split the sequence (ring; CUDA; 0 or unset: the plan decides)",
            frontend=True,
            low=0,
            high=64,
            step=1,
        ),
    )
    dp_degree: int = field(
        default=1,
        metadata=_flag(
            "--dp-degree",
            BACKEND,
            "data-parallel replicas: the ranks split into D groups of consecutive ranks, each "
            "running its own jobs (D divides the world size; default 1)",
            frontend=True,
            low=1,
            high=64,
            step=1,
        ),
    )
    shard_weights: bool = field(
        default=True,
        metadata=_flag(
            "--no-shard",
            BACKEND,
            "keep the full DiT weights on every rank (no FSDP2 sharding)",
            frontend=True,
        ),
    )
    gpu_memory_gib: float | None = field(
        default=None,
        metadata=_flag(
            "--gpu-memory",
            BACKEND,
            "GiB per device to plan for (default: the GPU's free memory; on CPU, the host's "
            "available memory shared by its ranks; 0 or unset: that default)",
            frontend=True,
            low=0,
            high=4096,
            step=0.5,
        ),
    )
    offload: str = field(
        default="auto",
        metadata=_flag(
            "--offload",
            BACKEND,
            "where the DiT lives when it does not fit: auto (the memory plan decides), none, "
            "model, experts (two-expert models: one expert on the device at a time, swapped "
            "at the switch step), group or sequential (diffusers' CPU offload)",
            choices=OFFLOAD_MODES,
            frontend=True,
        ),
    )
    vae_tiling: str = field(
        default="auto",
        metadata=_flag(
            "--vae-tiling",
            BACKEND,
            "auto (tiles, blended, only when the whole decode does not fit; splits it exactly "
            "in row bands over a replica's ranks when that is faster), on (blended tiles), "
            "or off (whole, on one rank)",
            choices=TILING_MODES,
            frontend=True,
        ),
    )
    vae_tile: str | None = field(
        default=None,
        metadata=_flag(
            "--vae-tile",
            BACKEND,
            "HxW: the VAE's tile size in pixels when it tiles, e.g. 256x256 (default: the "
            "VAE's own; it changes the output a little: tiles are blended at their seams)",
            frontend=True,
        ),
    )
    plan_for: str | None = field(
        default=None,
        metadata=_flag(
            "--plan-for",
            BACKEND,
            "WxHxF: the job size the memory plan chooses the layout for at start (default: "
            "the model's default size); every job is still checked",
            frontend=True,
        ),
    )
    attention: str = field(
        default="auto",
        metadata=_flag(
            "--attention",
            BACKEND,
            "the DiT's attention kernel: auto (flash4 on sm90+ when installed, cudnn for ring, "
            "else sdpa; never a lossy one), sdpa, math, cudnn, flash, efficient (CUDA), sage "
            "(CUDA, lossy: paradit[sage]) or flash4 (sm90+: paradit[flash4])",
            choices=ATTENTION_CHOICES,
            frontend=True,
        ),
    )
    compile: str = field(
        default="off",
        metadata=_flag(
            "--compile",
            BACKEND,
            "regional compile of the DiT's repeated blocks, warmed at start for the --plan-for "
            "size: off, blocks, or auto (blocks on CUDA with Triton, else off)",
            choices=COMPILE_MODES,
            frontend=True,
        ),
    )
    weights: str = field(
        default="auto",
        metadata=_flag(
            "--weights",
            BACKEND,
            "the DiT's weights in memory: auto (file for quantized files, else bf16), bf16, "
            "fp8 or int8 (quantized at load, a scale per row) or file (each layer keeps its "
            "file's dtype and is upcast in its forward)",
            choices=WEIGHTS_MODES,
            frontend=True,
        ),
    )
    fp8_compute: bool = field(
        default=False,
        metadata=_flag(
            "--fp8-compute",
            BACKEND,
            "fp8 matmuls for the DiT's fp8 linear layers (CUDA sm >= 8.9 only)",
            frontend=True,
        ),
    )
    int8_compute: bool = field(
        default=False,
        metadata=_flag(
            "--int8-compute",
            BACKEND,
            "int8 matmuls (W8A8, activations quantized per token) for the DiT's int8 linear "
            "layers (CUDA sm >= 8.0 only)",
            frontend=True,
        ),
    )
    # After the other frontend settings: the ComfyUI node's widgets are positional in saved
    # workflows, and its list of settings grows at its end (nodes/params.py).
    encoder_placement: str = field(
        default="auto",
        metadata=_flag(
            "--encoder-placement",
            BACKEND,
            "where the text encoder lives: auto (the memory plan decides), device (whole on "
            "rank 0's GPU), sharded (FSDP2 over the replica's ranks, which encode together; "
            "one replica) or cpu (rank 0's host memory)",
            choices=ENCODER_PLACEMENTS,
            frontend=True,
        ),
    )
    host: str = field(
        default="127.0.0.1", metadata=_flag("--host", SERVING, "address to listen on")
    )
    port: int = field(default=7870, metadata=_flag("--port", SERVING, "port (0: any free one)"))
    output_dir: str = field(
        default="outputs",
        metadata=_flag("--output-dir", SERVING, "where every job's folder is written"),
    )
    comfyui_dir: str = field(
        default="",
        metadata=_flag(
            "--comfyui-dir",
            SERVING,
            "the ComfyUI folder (or its models folder) POST /v1/workflows resolves a "
            "workflow's file names in (only inside it; without it the route is refused)",
            metavar="DIR",
        ),
    )
    cors_origins: tuple[str, ...] = field(
        default=(),
        metadata=_flag(
            "--cors-origin",
            SERVING,
            "a web page's origin that may call this server from a browser (ComfyUI's, e.g. "
            'http://127.0.0.1:8188, for its "Queue on paradit" command; repeat for several)',
            action="append",
            metavar="ORIGIN",
        ),
    )
    token: str | None = field(
        default=None,
        metadata=_flag(
            "--token",
            SERVING,
            "require 'Authorization: Bearer TOKEN' on every endpoint but /health; a command "
            "line is visible to every local user: prefer --token-file or $PARADIT_TOKEN",
        ),
    )
    insecure: bool = field(
        default=False,
        metadata=_flag(
            "--insecure",
            SERVING,
            "serve on a non-loopback address without a token (anyone who reaches it can run "
            "jobs and read every output)",
        ),
    )
    save_latents: bool = field(
        default=False,
        metadata=_flag(
            "--save-latents",
            SERVING,
            "rank 0 writes each job's final latents (float32) as latents.npy beside its frames "
            "(what `paradit verify` compares)",
        ),
    )
    cache: str | None = field(
        default=None,
        metadata=_flag(
            "--cache",
            SERVING,
            "the step cache of jobs that ask for none: METHOD[:THRESHOLD], e.g. first-block:0.1 "
            "(default: none; a job's own `cache` wins)",
            metavar="METHOD[:THRESHOLD]",
        ),
    )
    max_queue: int = field(
        default=64, metadata=_flag("--max-queue", SERVING, "queued jobs before 429 (default 64)")
    )
    hang_timeout_s: float = field(
        default=30.0,
        metadata=_flag(
            "--hang-timeout",
            SERVING,
            "seconds after which a rank counts as lost when its heartbeat has stopped (frozen), "
            "or when rank 0 has waited that long at a step boundary for it and it stopped "
            "working (hung) (default 30)",
        ),
    )
    max_rebuilds: int = field(
        default=3,
        metadata=_flag(
            "--max-rebuilds",
            SERVING,
            "times in a row the group is rebuilt after a lost rank before it stays down "
            "(default 3; 0: never)",
        ),
    )
    keep_jobs: int = 100
    """Finished jobs kept in the list."""

    def __post_init__(self) -> None:
        # Files are absolute: the ranks a backend starts run in another folder.
        for name in (
            "text_encoders",
            "vaes",
            "image_encoders",
            "lora_dirs",
        ):  # argparse's append gives a list (or None)
            paths = tuple(_absolute(p) for p in getattr(self, name) or ())
            object.__setattr__(self, name, paths)
        if self.comfyui_dir:
            object.__setattr__(self, "comfyui_dir", _absolute(self.comfyui_dir))
        object.__setattr__(self, "cors_origins", tuple(self.cors_origins or ()))
        for origin in self.cors_origins:
            if not _is_origin(origin):
                raise ValueError(
                    f"--cors-origin {origin!r} must be a page's origin: scheme, host and "
                    "port only, e.g. http://127.0.0.1:8188"
                )
        if self.upscaler:
            object.__setattr__(self, "upscaler", _absolute(self.upscaler))
        if self.model.lower().endswith(CHECKPOINT_SUFFIXES):
            model = ",".join(_absolute(p.strip()) for p in self.model.split(","))
            object.__setattr__(self, "model", model)
        if not self.model:
            raise ValueError("--model is required: a preset, a diffusers folder or a hub id")
        if not 1 <= self.world_size <= 1024:
            raise ValueError(f"--world-size must be between 1 and 1024, got {self.world_size}")
        if self.device not in DEVICES:
            raise ValueError(f"--device must be auto, cpu or cuda, got {self.device!r}")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"--port must be between 0 and 65535, got {self.port}")
        if not 0 < self.timeout_s <= 7 * 86400:
            raise ValueError(
                f"--timeout must be > 0 and at most 7 days (604800 s), got {self.timeout_s}"
            )
        if self.token == "":
            raise ValueError("--token must not be empty (leave it out for no token)")
        if self.token is None and not self.insecure and not is_loopback(self.host):
            raise ValueError(
                f"--host {self.host} is reachable from other machines: give a token "
                "(--token-file FILE or PARADIT_TOKEN), or --insecure if you mean it"
            )
        if self.threads_per_rank is not None and self.threads_per_rank < 1:
            raise ValueError("--threads must be >= 1")
        if not 0 <= self.lora_cache_gib <= 1024:
            raise ValueError(
                f"--lora-cache-gib must be between 0 and 1024, got {self.lora_cache_gib}"
            )
        if self.max_queue < 1:
            raise ValueError("--max-queue must be >= 1")
        if not 1.0 <= self.hang_timeout_s <= 86400:
            raise ValueError(
                f"--hang-timeout must be between 1 and 86400 s, got {self.hang_timeout_s}"
            )
        if not 0 <= self.max_rebuilds <= 100:
            raise ValueError(f"--max-rebuilds must be between 0 and 100, got {self.max_rebuilds}")
        for name in ("cfg_degree", "ulysses_degree", "ring_degree"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {value}")
        if self.attention not in ATTENTION_CHOICES:
            raise ValueError(
                f"--attention must be one of {', '.join(ATTENTION_CHOICES)}, got {self.attention!r}"
            )
        if self.device == "cpu" and self.attention in KERNELS:
            refusal = device_refusal(self.attention, "cpu")
            if refusal is not None:
                raise ValueError(refusal)
        if self.compile not in COMPILE_MODES:
            raise ValueError(
                f"--compile must be one of {', '.join(COMPILE_MODES)}, got {self.compile!r}"
            )
        if self.compile == BLOCKS and offload_refusal(self.offload) is not None:
            raise ValueError(offload_refusal(self.offload))
        if self.fp8_compute and self.device == "cpu":
            raise ValueError(
                "--fp8-compute needs a CUDA GPU of compute capability 8.9 or newer (fp8 "
                "matmuls); on CPU the fp8 weights are upcast in each layer's forward"
            )
        if self.int8_compute and self.device == "cpu":
            raise ValueError(
                "--int8-compute needs a CUDA GPU of compute capability 8.0 or newer (int8 "
                "tensor core matmuls); on CPU the int8 weights are upcast in each layer's "
                "forward"
            )
        self.memory_settings()  # the memory flags, checked there
        self.default_cache()  # --cache, checked there
        if self.dp_degree < 1 or self.world_size % self.dp_degree:
            raise ValueError(
                f"--dp-degree must be >= 1 and divide the world size {self.world_size}, "
                f"got {self.dp_degree}"
            )

    def default_cache(self) -> dict[str, Any] | None:
        """`--cache` as a request's `cache` value (None: no default); ValueError if invalid."""
        if not self.cache:
            return None
        from .cache import CacheSettings
        from .request import parse_cache

        try:
            return CacheSettings.parse(parse_cache(self.cache)).to_dict()
        except ValueError as exc:
            raise ValueError(f"--cache: {exc}") from None

    @property
    def replica_size(self) -> int:
        """Ranks in one data-parallel replica (the world size a job's plan divides)."""
        return self.world_size // self.dp_degree

    # -- flags ----------------------------------------------------------------------------

    @classmethod
    def from_args(cls, args: argparse.Namespace, *groups: str, **overrides: Any) -> ServeConfig:
        """The config from a namespace parsed with `add_flags`: the flags of `groups`
        (default BACKEND: a frontend's own --host or --port are not the backend's)."""
        groups = groups or (BACKEND,)
        values = {}
        for f in _flag_fields():
            if f.metadata["group"] in groups and hasattr(args, f.name):
                values[f.name] = getattr(args, f.name)
        return cls(**{**values, **overrides})

    @classmethod
    def from_argv(cls, argv: list[str], **overrides: Any) -> ServeConfig:
        """Parse `serve`'s flags (tests and launchers hand configs around as flags)."""
        parser = argparse.ArgumentParser(prog="paradit serve", add_help=False)
        add_flags(parser, BACKEND, SERVING)
        return cls.from_args(parser.parse_args(argv), BACKEND, SERVING, **overrides)

    def to_argv(self, *, with_token: bool = False) -> list[str]:
        """The flags that give this config back; the token only when asked (a command line
        is visible to every user of the machine)."""
        argv: list[str] = []
        for f in _flag_fields():
            value = getattr(self, f.name)
            if value == f.default or (f.name == "token" and not with_token):
                continue
            flag = f.metadata["flag"]
            if isinstance(f.default, bool):
                argv.append(flag)  # the only bool is --no-shard, set when False
            elif isinstance(value, tuple):  # a repeatable flag
                for item in value:
                    argv += [flag, str(item)]
            else:
                argv += [flag, str(value)]
        return argv

    def memory_settings(self) -> MemorySettings:
        return MemorySettings(
            self.gpu_memory_gib,
            self.offload,
            self.vae_tiling,
            self.plan_for,
            self.vae_tile,
            self.lora_cache_gib if self.lora_dirs else None,
            self.weights,
            self.encoder_placement,
        )

    def plan_overrides(self) -> dict[str, Any]:
        """The degrees and sharding asked for, as `choose_plan` keywords."""
        return {
            "cfg_degree": self.cfg_degree,
            "ulysses_degree": self.ulysses_degree,
            "ring_degree": self.ring_degree,
            "shard_weights": self.shard_weights,
        }


CHECKPOINT_SUFFIXES = (".safetensors", ".sft", ".gguf")


def _is_origin(text: str) -> bool:
    """`text` is a web origin as browsers send it: http(s)://host[:port], nothing more."""
    scheme, sep, rest = text.partition("://")
    return (
        scheme in ("http", "https")
        and bool(sep)
        and bool(rest)
        and not any(c in rest for c in "/?#@ ")
    )


def _absolute(path: str) -> str:
    return str(Path(path).expanduser().absolute())


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def is_loopback(host: str) -> bool:
    """Whether only this machine can reach `host` (127.0.0.0/8, ::1, localhost)."""
    return host in LOOPBACK or host.startswith("127.")


def read_token(path: str | None, env: dict[str, str] | None = None) -> str | None:
    """The token from `--token-file` (first line), else from PARADIT_TOKEN, else None."""
    import os

    if path:
        try:
            token = Path(path).read_text().strip().splitlines()
        except OSError as exc:
            raise ValueError(f"--token-file {path}: {exc.strerror}") from None
        if not token or not token[0].strip():
            raise ValueError(f"--token-file {path} is empty")
        return token[0].strip()
    return (os.environ if env is None else env).get("PARADIT_TOKEN") or None


def _flag_fields() -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(ServeConfig) if "flag" in f.metadata]


@dataclass(frozen=True)
class FrontendSetting:
    """A serve setting as the ParaDiTBackend node and the web app show it (from ServeConfig's
    field and its `_flag`): a widget whose "unset" value is 0 for numbers and "" for text."""

    name: str
    """The ServeConfig field."""
    widget: str
    kind: str
    """"int", "float", "combo", "boolean" or "string"."""
    default: Any
    help: str
    low: float | None = None
    high: float | None = None
    step: float | None = None
    choices: tuple[str, ...] = ()
    inverted: bool = False
    """A flag that turns a default-on setting off (--no-shard): the widget is the flag."""

    def config_value(self, value: Any) -> Any:
        """The widget's value as ServeConfig's."""
        if self.inverted:
            return not value
        if self.kind in ("int", "float", "string") and value in (0, "", None) and not self.default:
            return None
        return {"int": int, "float": float}.get(self.kind, lambda v: v)(value)

    def widget_value(self, config: ServeConfig) -> Any:
        """What the widget shows for `config`."""
        value = getattr(config, self.name)
        if self.inverted:
            return not value
        return self.default if value is None else value


def frontend_settings() -> tuple[FrontendSetting, ...]:
    """The serve settings a frontend user sets (marked `frontend` in ServeConfig)."""
    settings = []
    for f in _flag_fields():
        meta = f.metadata
        if not meta["frontend"]:
            continue
        low, high, step = meta["bounds"]
        choices = tuple(meta["argparse"].get("choices", ()))
        optional = f.default is None
        kind = {"int": "int", "float": "float"}.get(str(f.type).split(" |")[0], "string")
        if isinstance(f.default, bool):
            kind = "boolean"
        elif choices:
            kind = "combo"
        default: Any = f.default
        if optional:
            default = {"int": 0, "float": 0.0}.get(kind, "")
        inverted = isinstance(f.default, bool) and f.default
        settings.append(
            FrontendSetting(
                f.name,
                meta["widget"],
                kind,
                not f.default if inverted else default,
                meta["help"],
                low,
                high,
                step,
                choices,
                inverted,
            )
        )
    return tuple(settings)


def config_overrides(values: dict[str, Any]) -> dict[str, Any]:
    """ServeConfig keywords from frontend widget values (by widget name; others ignored)."""
    return {
        s.name: s.config_value(values[s.widget]) for s in frontend_settings() if s.widget in values
    }


def add_flags(parser: argparse.ArgumentParser, *groups: str, model_required: bool = False) -> None:
    """Add the flags of `groups` (BACKEND, SERVING) to `parser`, each with its help line."""
    for f in _flag_fields():
        meta = f.metadata
        if meta["group"] not in groups:
            continue
        kwargs: dict[str, Any] = {"dest": f.name, "help": meta["help"], **meta["argparse"]}
        if isinstance(f.default, bool):
            kwargs |= {"action": "store_false" if f.default else "store_true"}
        elif isinstance(f.default, tuple):
            kwargs |= {"default": None}  # append: a fresh list per parse
        else:
            kind = {"int": int, "int | None": int, "float": float, "float | None": float}
            kind = kind.get(str(f.type), str)
            kwargs |= {"type": kind, "default": f.default}
        if f.name == "device":
            kwargs["choices"] = DEVICES
        if f.name == "model" and model_required:
            kwargs["required"] = True
        parser.add_argument(meta["flag"], **kwargs)
