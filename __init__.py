"""paradit: multi-GPU generation with diffusion transformers.

The repo root is both this package and a ComfyUI custom-node folder; importing it must stay
cheap (no torch) so that the CLI and ComfyUI start fast. When ComfyUI loads it (ComfyUI has
imported `comfy_api` by then) it also exports `comfy_entrypoint`, which lists the ParaDiT
nodes; `WEB_DIRECTORY` is the pack's frontend extension. A backend that ComfyUI starts
(`python -m paradit serve`) imports only this file.
"""

import sys

__version__ = "0.1.0"

WEB_DIRECTORY = "./nodes/js"
"""ComfyUI serves this folder to its page: the "Queue on paradit" command (paradit_queue.js)."""

if "comfy_api" in sys.modules:
    from .nodes.comfy_v3 import comfy_entrypoint  # noqa: F401
