"""paradit: multi-GPU generation with diffusion transformers.

The repo root is both this package and a ComfyUI custom-node folder; importing it must stay
cheap (no torch) so that the CLI and ComfyUI start fast. When ComfyUI loads it (ComfyUI has
imported `comfy_api` by then) it also exports `comfy_entrypoint`, which lists the ParaDiT
nodes. A backend that ComfyUI starts (`python -m paradit serve`) imports only this file.
"""

import sys

__version__ = "0.1.0"

if "comfy_api" in sys.modules:
    from .nodes.comfy_v3 import comfy_entrypoint  # noqa: F401
