"""Connect to a backend by URL, or start a local one: the one way every frontend gets a client.

The CLI (`generate`, `verify`, `batch`), the Gradio app and the ComfyUI pool all go through
here. A URL's token comes from `PARADIT_TOKEN` (never from a workflow or a command line).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from ..config import ServeConfig
from .http import BackendError, Client
from .local import LocalBackend

log = logging.getLogger(__name__)

TOKEN_ENV = "PARADIT_TOKEN"
"""Bearer token sent to a backend given by URL."""


def remote_client(url: str, *, timeout_s: float = 30.0, check: bool = False) -> Client:
    """A client for a running backend; `check` asks its /health first (one-line errors)."""
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"the backend URL must start with http:// or https://, got {url!r}")
    client = Client(url.rstrip("/"), token=os.environ.get(TOKEN_ENV), timeout_s=timeout_s)
    if check:
        try:
            client.health()
        except BackendError as exc:
            hint = "" if exc.status else " Is `paradit serve` running there?"
            raise BackendError(
                f"paradit backend at {url} is not usable: {exc}.{hint}", exc.status
            ) from None
    return client


@dataclass
class Connection:
    """A client and whether the backend behind it still runs (a URL's is not ours to watch)."""

    client: Client
    local: LocalBackend | None = None

    def alive(self) -> bool:
        return self.local is None or self.local.alive()


@contextmanager
def connect(
    url: str | None, config: ServeConfig | None, *, env: dict[str, str] | None = None
) -> Iterator[Connection]:
    """A connection to `url`, or to a backend started from `config` for as long as the block
    runs. A started backend writes into a scratch folder that is removed afterwards (callers
    copy what they keep)."""
    if url:
        yield Connection(remote_client(url))
        return
    if config is None:
        raise ValueError("give --server URL of a running backend, or --model M to start one")
    scratch = tempfile.mkdtemp(prefix="paradit-backend-")
    log.info("starting a backend for %s on %d rank(s)", config.model, config.world_size)
    try:
        with LocalBackend(replace(config, output_dir=scratch), env=env) as backend:
            yield Connection(backend.client, backend)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
