"""paradit: multi-GPU generation with diffusion transformers.

The repo root is both this package and a ComfyUI custom-node folder; importing it must stay
cheap (no torch) so that the CLI and ComfyUI start fast.
"""

__version__ = "0.1.0"
