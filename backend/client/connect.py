"""Connect to a backend by URL, or start a local one: the one way every frontend gets a client.

The CLI (`generate`, `verify`, `batch`), the Gradio app and the ComfyUI pool all go through
here. A URL's token comes from `PARADIT_TOKEN` (never from a workflow or a command line).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

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


class Connection:
    """A client and whether the backend behind it still runs (a URL's is not ours to watch).

    A backend this connection started can be restarted with other settings (`restart`); the
    client then points at the new one."""

    def __init__(
        self,
        client: Client,
        local: LocalBackend | None = None,
        *,
        env: dict[str, str] | None = None,
    ):
        self.client = client
        self.local = local
        self._env = env
        self._lock = threading.Lock()
        self._restarting = False

    @property
    def config(self) -> ServeConfig | None:
        """What the started backend runs with (None for a backend given by URL)."""
        return None if self.local is None else self.local.config

    def alive(self) -> bool:
        return self.local is None or self._restarting or self.local.alive()

    def restart(self, **changes: Any) -> Client:
        """Stop the started backend and start it again with `changes` (ServeConfig fields).

        ValueError (nothing stopped) when the settings break a rule or the backend was given
        by URL; BackendError when the new backend did not start (the old settings are then
        started again)."""
        if self.local is None:
            raise ValueError(
                "this backend was given by URL (--server): only who runs it can change it"
            )
        with self._lock:
            old = self.local.config
            new = replace(old, **changes)  # ServeConfig checks its rules
            log.info("restarting the backend: %s", " ".join(new.to_argv()))
            self._restarting = True
            try:
                self.local.stop()
                try:
                    self.local = LocalBackend(new, env=self._env)
                except BackendError as exc:
                    log.error("the backend did not start with the new settings: %s", exc)
                    self.local = LocalBackend(old, env=self._env)
                    self.client = self.local.client
                    raise
                self.client = self.local.client
            finally:
                self._restarting = False
        log.info("backend restarted at %s", self.client.url)
        return self.client

    def close(self) -> None:
        if self.local is not None:
            self.local.stop()


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
        backend = LocalBackend(replace(config, output_dir=scratch), env=env)
        connection = Connection(backend.client, backend, env=env)
        try:
            yield connection
        finally:
            connection.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
