"""`paradit ui`: connect to a backend (or start one), serve the Gradio app until SIGINT/SIGTERM.

The app itself is built by `paradit.web.ui.build_ui`; this module only wires it to the command
line: the backend, login, the listening address, the reverse-proxy root path.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..backend.client.connect import TOKEN_ENV, connect
from ..backend.config import ServeConfig, is_loopback

if TYPE_CHECKING:
    import gradio as gr

log = logging.getLogger(__name__)


def parse_auth(text: str | None) -> tuple[str, str] | None:
    """`user:pass` to a Gradio login pair; None when no login is asked for."""
    if not text:
        return None
    user, sep, password = text.partition(":")
    if not sep or not user or not password:
        raise ValueError(
            "--auth must be user:pass with both parts non-empty (or set PARADIT_UI_AUTH=user:pass)"
        )
    return user, password


def launch(
    demo: gr.Blocks,
    output_dir: str | Path,
    *,
    host: str = "127.0.0.1",
    port: int | None = None,
    auth: tuple[str, str] | None = None,
    root_path: str = "",
    max_file_size: int | None = None,
) -> str:
    """Serve `demo` in background threads and return its local URL.

    No share link; Gradio's queue runs every event at once (the backend's queue is the only
    queue); files under `output_dir` may be served. `port=None` takes the first free port
    from 7860 up.
    """
    demo.queue(default_concurrency_limit=None)
    _app, url, _share = demo.launch(
        server_name=host,
        server_port=port,
        auth=auth,
        root_path=root_path,
        share=False,
        prevent_thread_lock=True,
        quiet=True,
        show_error=True,
        max_file_size=max_file_size,
        allowed_paths=[str(Path(output_dir).resolve())],
        footer_links=["api", "settings"],
    )
    return url


def check_exposure(
    host: str, auth: tuple[str, str] | None, server: str | None, *, insecure: bool
) -> None:
    """Refuse to serve the app to people who have not logged in, unless told to.

    On a non-loopback address anyone who reaches the port could run jobs; and an app in front
    of a token-protected backend (PARADIT_TOKEN) would lend that token to every visitor."""
    if auth is not None or insecure:
        return
    if not is_loopback(host):
        raise ValueError(
            f"--host {host} is reachable from other machines: give --auth user:pass "
            "(or PARADIT_UI_AUTH), or --insecure if you mean it"
        )
    if server and os.environ.get(TOKEN_ENV):
        raise ValueError(
            "the backend needs a token (PARADIT_TOKEN) and the app would use it for every "
            "visitor: give --auth user:pass, or --insecure if you mean it"
        )


def wait_for_signal(alive: Callable[[], bool], poll_s: float = 1.0) -> int:
    """Block until SIGINT/SIGTERM (0) or until `alive()` turns false (1)."""
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        log.info("%s: stopping", signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        while not stop.wait(poll_s):
            if not alive():
                log.error("the backend stopped; stopping the UI")
                return 1
        return 0
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_ui(args: argparse.Namespace, backend: ServeConfig | None) -> int:
    """The `paradit ui` command: `args.server`, or a backend started from `backend`."""
    auth = parse_auth(args.auth)
    check_exposure(args.host, auth, args.server, insecure=args.insecure)
    from .ui import build_ui  # Gradio: imported once the command line's rules hold

    output_dir = Path(args.output_dir).resolve()
    with connect(args.server, backend) as conn:
        info = conn.client.info()
        demo = build_ui(conn.client, output_dir, connection=conn)
        url = launch(
            demo,
            output_dir,
            host=args.host,
            port=args.port,
            auth=auth,
            root_path=args.root_path or "",
            max_file_size=info["limits"].get("max_image_bytes"),
        )
        log.info(
            "paradit ui ready at %s (backend %s, model %s, outputs in %s%s)",
            url,
            conn.client.url,
            info["model"],
            output_dir,
            ", login required" if auth else "",
        )
        try:
            return wait_for_signal(conn.alive)
        finally:
            demo.close()
