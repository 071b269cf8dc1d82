"""A ComfyUI workflow as a paradit job: `paradit workflow import` and `paradit workflow run`.

`graph.py` reads the file (ComfyUI's API format, or the UI format its menu saves, with
`nodes` and `links`) into one graph of nodes and links; `nodes.py` declares the core nodes
paradit maps (their widgets in order, for the UI format), `sockets.py` their inputs and
outputs (the node definitions ComfyUI's frontend reads, for the tests); `files.py` finds the
ComfyUI folders the workflow's file names are relative to; `mapping.py` evaluates the graph from its
output node back, each node's handler turning its inputs into what paradit knows (a model
with its LoRAs and shift, a prompt, a latent size, a sampler), and builds the request and the
serve settings, one line per node saying how it was mapped. Anything it cannot map
faithfully is refused with the node's id and type (`WorkflowError`), never approximated.

Torch-free except `check_files` and `model_samplers` (they read the files' headers).
"""

from .graph import WorkflowError, graph_of, load_graph
from .mapping import WorkflowPlan, check_files, check_sampler, map_workflow, model_samplers

__all__ = [
    "WorkflowError",
    "WorkflowPlan",
    "check_files",
    "check_sampler",
    "graph_of",
    "load_graph",
    "map_workflow",
    "model_samplers",
]
