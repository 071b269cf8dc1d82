"""Print the memory plan of Wan2.1-14B and 1.3B for the jobs in docs/memory.md.

Run from the repository root: python docs/memory_figures.py
"""

import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, "tests")
from test_memory_plan import _plan, config_folder  # noqa: E402

from paradit.backend.memory.settings import JobShape  # noqa: E402
from paradit.backend.memory.sizes import meta_pipeline, sizes_of_pipeline  # noqa: E402
from paradit.backend.models.families import family_of  # noqa: E402

GIB = 2**30
CASES = {
    "random:wan2.1-t2v-14b": [
        (1, 24, JobShape(1280, 720, 81), 1),
        (8, 80, JobShape(1280, 720, 81), 4),
    ],
    "random:wan2.1-t2v-1.3b": [(1, 24, JobShape(832, 480, 81), 1)],
}

root = Path(tempfile.mkdtemp())
for preset, cases in CASES.items():
    folder = config_folder(preset, root / preset.split(":")[1])
    pipe = meta_pipeline(str(folder))
    sizes = sizes_of_pipeline(pipe, family_of(pipe), torch.bfloat16)
    for gpus, gib, shape, ulysses in cases:
        planner = _plan(sizes, gpus, gib, shape, ulysses)
        job = planner.plan_job(shape)
        parts = {name: round(value / GIB, 2) for name, value in job.prediction.parts.items()}
        print(f"{preset} {shape} on {gpus} x {gib} GiB: {planner.layout}, decode {job.decode}")
        print(
            f"  GiB: {parts}; rank 0 {job.prediction.leader / GIB:.2f}, others "
            f"{job.prediction.others / GIB:.2f}"
        )
