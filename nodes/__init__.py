"""ComfyUI nodes for paradit.

`params` (what each node asks for), `pool` (the backend behind ParaDiTBackend) and `run` (one
job: progress, cancel, outputs) import nothing from ComfyUI; `comfy_v3` wraps them as V3 nodes
and is imported only inside ComfyUI.
"""
