"""The backend behind the ParaDiTBackend node: connect to a URL or keep one local backend.

`BackendPool` owns at most one local backend (`paradit serve` in its own process group). It is
reused while the node's inputs stay the same, stopped and replaced when they change or when it
died, and stopped when the program exits (LocalBackend registers that with atexit and sets the
backend to die with its parent). No ComfyUI import here.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..backend.client import BackendError, Client
from ..backend.client.connect import remote_client
from ..backend.client.local import LocalBackend, serve_command
from ..backend.config import CHECKPOINT_SUFFIXES, ServeConfig, config_overrides
from ..backend.models.loading import index_file
from .params import NO_FILE

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BackendSettings:
    """What the ParaDiTBackend node was given, resolved: a model to start, or a URL."""

    model: str = ""
    world_size: int = 1
    device: str = "auto"
    url: str = ""
    serve: tuple[tuple[str, Any], ...] = ()
    """Further ServeConfig fields (memory, replicas, plan) as (name, value) pairs."""

    def __post_init__(self) -> None:
        if self.url:
            if not self.url.startswith(("http://", "https://")):
                raise ValueError(f"url must start with http:// or https://, got {self.url!r}")
            return
        self.config()  # ServeConfig states the rules for every setting

    def config(self, **fixed: Any) -> ServeConfig:
        return ServeConfig(
            model=self.model,
            world_size=self.world_size,
            device=self.device,
            **dict(self.serve),
            **fixed,
        )

    def describe(self) -> str:
        if self.url:
            return self.url
        flags = " ".join(self.config().to_argv()[2:])  # what differs from the defaults
        return f"{self.model} on {self.world_size} rank(s), device {self.device} {flags}".strip()


def find_diffusers_folders(roots: Iterable[str | Path], max_depth: int = 3) -> dict[str, str]:
    """Diffusers model folders under `roots`: those with an index (`loading.index_file`: a
    pipeline's model_index.json, or a modular pipeline's modular_model_index.json, as MiniMax
    H3's folder has).

    Returns {label: absolute path}; the label is the path relative to its root, with "/".
    The first root wins when two roots hold the same label.
    """
    found: dict[str, str] = {}
    for root in roots:
        base = Path(root)
        if not base.is_dir():
            continue
        for dirpath, dirnames, _files in os.walk(base, followlinks=True):
            rel = Path(dirpath).relative_to(base)
            if rel.parts and index_file(dirpath) is not None:
                found.setdefault(rel.as_posix(), str(Path(dirpath).resolve()))
                dirnames.clear()  # a model's subfolders are its components
            elif len(rel.parts) >= max_depth:
                dirnames.clear()
    return dict(sorted(found.items()))


def resolve_settings(
    model: str,
    model_override: str = "",
    gpus: int = 1,
    device: str = "auto",
    url: str = "",
    local_folders: dict[str, str] | None = None,
    *,
    model_2: str = NO_FILE,
    text_encoder: str = NO_FILE,
    text_encoder_2: str = NO_FILE,
    vae: str = NO_FILE,
    image_encoder: str = NO_FILE,
    file_path: Callable[[str, str], str] | None = None,
    lora_dirs: tuple[str, ...] = (),
    **settings: Any,
) -> BackendSettings:
    """The node's widget values as settings; a local-folder label becomes its path, a model
    file's name (and the picked text encoders and VAE) their paths through `file_path`
    (widget, name) -> path (`pickers.ComfyFolders.full_path`); a local backend reads its
    LoRAs from `lora_dirs` (ComfyUI's `loras` folders).

    `settings` are the serve settings' widgets (`params.setting_params`), by widget name."""
    url = url.strip()
    if url:
        return BackendSettings(url=url.rstrip("/"))
    chosen = model_override.strip() or model.strip()
    chosen = (local_folders or {}).get(chosen, chosen)
    files = {"model_2": model_2, "text_encoder": text_encoder}
    files |= {"text_encoder_2": text_encoder_2, "vae": vae, "image_encoder": image_encoder}
    picked = {widget: name for widget, name in files.items() if name and name != NO_FILE}

    def path(widget: str, name: str) -> str:
        if file_path is None or os.path.isabs(name) or os.path.isfile(name):
            return name
        return file_path(widget, name)

    if picked and not is_file_name(chosen):
        raise ValueError(
            f"{', '.join(picked)} go with a model file (from diffusion_models or checkpoints); "
            f"{chosen} brings its own: set them to {NO_FILE}"
        )
    if is_file_name(chosen):
        chosen = path("model", chosen)
        if "model_2" in picked:
            chosen += "," + path("model_2", picked["model_2"])
    serve = config_overrides(settings)
    encoders = [path(w, picked[w]) for w in ("text_encoder", "text_encoder_2") if w in picked]
    if encoders:
        serve["text_encoders"] = tuple(encoders)
    if "vae" in picked:
        serve["vaes"] = (path("vae", picked["vae"]),)
    if "image_encoder" in picked:
        serve["image_encoders"] = (path("image_encoder", picked["image_encoder"]),)
    if lora_dirs:
        serve["lora_dirs"] = tuple(lora_dirs)
    return BackendSettings(
        model=chosen, world_size=gpus, device=device, serve=tuple(sorted(serve.items()))
    )


def is_file_name(value: str) -> bool:
    """Whether a model value names checkpoint file(s), not a preset, folder or hub id."""
    return value.lower().endswith(CHECKPOINT_SUFFIXES)


@dataclass(frozen=True)
class BackendHandle:
    """What flows along a PARADIT_BACKEND link: the settings and the pool that serves them.

    `client()` checks the backend again, so a backend that died between two prompts is
    restarted instead of failing the job.
    """

    settings: BackendSettings
    pool: BackendPool
    loras: tuple[tuple[tuple[str, Any], ...], ...] = ()
    """The LoRAs the chained LoRA nodes added, in order (each a `loras` item's pairs)."""
    cache: tuple[tuple[str, Any], ...] = ()
    """The step cache a chained step-cache node set (the `cache` field's pairs; none: the
    backend's default)."""

    def client(self) -> Client:
        return self.pool.acquire(self.settings)

    def with_lora(self, item: dict[str, Any]) -> BackendHandle:
        """This backend with one more LoRA for its jobs (the node's input is not changed)."""
        return dataclasses.replace(self, loras=(*self.loras, tuple(item.items())))

    def lora_items(self) -> list[dict[str, Any]]:
        return [dict(pairs) for pairs in self.loras]

    def with_cache(self, cache: dict[str, Any]) -> BackendHandle:
        """This backend with a step cache for its jobs (the last chained node wins)."""
        return dataclasses.replace(self, cache=tuple(cache.items()))

    def __str__(self) -> str:
        names = ", ".join(item["name"] for item in self.lora_items())
        cache = f" + cache {dict(self.cache)['method']}" if self.cache else ""
        return (
            f"paradit backend: {self.settings.describe()}"
            + (f" + {names}" if names else "")
            + cache
        )


class BackendPool:
    """Hands out clients; keeps one local backend alive across prompts."""

    def __init__(
        self,
        output_dir: str | Path,
        *,
        start_timeout_s: float = 3600.0,
        threads_per_rank: int | None = None,
        connect_timeout_s: float = 10.0,
        starter: Callable[..., LocalBackend] = LocalBackend,
    ):
        self.output_dir = Path(output_dir)
        self.start_timeout_s = start_timeout_s
        self.threads_per_rank = threads_per_rank
        self.connect_timeout_s = connect_timeout_s
        self._starter = starter
        self._lock = threading.Lock()
        self._local: LocalBackend | None = None

    @property
    def local(self) -> LocalBackend | None:
        """The local backend this pool keeps, if any."""
        return self._local

    def handle(self, settings: BackendSettings) -> BackendHandle:
        """Start or reach the backend now (errors show on the backend node), then a handle."""
        self.acquire(settings)
        return BackendHandle(settings, self)

    def acquire(self, settings: BackendSettings) -> Client:
        if settings.url:
            return self._remote(settings.url)
        config = self._config(settings)
        with self._lock:
            current = self._local
            if current is not None and current.config == config and self._usable(current):
                return current.client
            if current is not None:
                log.info("stopping the paradit backend (%s)", current.config.model)
                current.stop()
                self._local = None
            self._local = self._start(config)
            return self._local.client

    def stop(self) -> None:
        with self._lock:
            if self._local is not None:
                self._local.stop()
                self._local = None

    # -- helpers -------------------------------------------------------------------------

    def _config(self, settings: BackendSettings) -> ServeConfig:
        return settings.config(
            output_dir=str(self.output_dir / "jobs"), threads_per_rank=self.threads_per_rank
        )

    @staticmethod
    def _usable(backend: LocalBackend) -> bool:
        if not backend.alive():
            log.warning("the paradit backend exited; starting it again")
            return False
        if not backend.client.is_healthy():
            log.warning("the paradit backend is unhealthy; starting it again")
            return False
        return True

    def _start(self, config: ServeConfig) -> LocalBackend:
        if importlib.util.find_spec("paradit") is None:
            raise BackendError(
                "cannot start a local backend: the `paradit` package is not installed in this "
                "Python. Run `pip install -e .` in the paradit folder, or start "
                "`paradit serve` yourself and give its URL"
            )
        self.output_dir.mkdir(parents=True, exist_ok=True)
        log_file = self.output_dir / "backend.log"
        command = " ".join(serve_command(config))
        log.info("starting a paradit backend: %s (log: %s)", command, log_file)
        try:
            return self._starter(config, start_timeout_s=self.start_timeout_s, log_file=log_file)
        except BackendError as exc:
            raise BackendError(
                f"{exc}\n--- {log_file} (last lines) ---\n{_tail(log_file)}"
            ) from None

    def _remote(self, url: str) -> Client:
        return remote_client(url, timeout_s=self.connect_timeout_s, check=True)


def _tail(path: Path, num_lines: int = 20) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(lines[-num_lines:])
