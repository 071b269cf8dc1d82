"""Memory: what each component of a job needs on a device, and the plan that makes it fit.

`sizes.py` measures a model (weights from its configs, activations and decode peaks by
running the modules on the meta device, `dryrun.py`); `planner.py` turns that and a budget
into decisions with their reasons (sharded or resident DiT, offload, text encoder placement,
VAE tiling); `placement.py` applies a plan to a loaded pipeline; `measure.py` reads each
rank's real peak for job.json.
"""
