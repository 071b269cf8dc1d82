"""What the fault matrix's two files share: the backend's hang timeout, the failing and the
following jobs, the places a fault fires and the errors it raises, and running them."""

from __future__ import annotations

import pytest
from lora_files import WAN_TARGETS, peft_lora

from paradit.backend.client import Client, JobFailed
from paradit.backend.models.presets import build_preset

HANG_S = 2.0
"""The backends' `--hang-timeout`: short, yet not the lowest the config allows (1 s): on a
loaded 2-core machine an idle rank's heartbeats once went unseen for a second, the group was
rebuilt as if the rank were lost, and a case's fault, tied to its generation (`gen=`), then
never fired (a CI run: `one-hang-block` re-run on generation 3 and succeeding)."""
JOB = {"seed": 11, "width": 64, "height": 64, "num_frames": 1, "num_inference_steps": 2}
PLACES = {
    "start": ("at=start", "as the job starts"),
    "block": ("at=block:3", "inside block 3"),
    "collective": ("at=collective:5", "inside collective 5"),
    "step": ("at=step:1", "after step 1"),
    "decode": ("at=decode", "at the decode"),
}
"""Where a fault fires, and how its error says so (the 5th FSDP2 all-gather is inside the
first step's forward)."""
ERRORS = {"raise": "InjectedFault", "oom": "OutOfMemoryError"}


def next_jobs(lora: str) -> dict[str, dict]:
    """The jobs that follow a failure (plain, with the LoRA file `lora`, cached), each
    compared with a fresh backend's."""
    return {
        "plain": {**JOB, "prompt": "a plain job"},
        "lora": {**JOB, "prompt": "a LoRA job", "loras": [{"name": lora}]},
        "cached": {
            **JOB,
            "prompt": "a cached job",
            "num_inference_steps": 3,
            "cache": {"method": "first-block", "threshold": 0.9},
        },
    }


def fresh_frames(backends, jobs: dict[str, dict]) -> dict[str, list[bytes]]:
    """The pool's plain tiny-wan on 2 ranks: each of `jobs`' frames on a fresh backend (the
    LoRA file the jobs name written first)."""
    transformer = build_preset("tiny-wan").transformer
    peft_lora(
        backends.lora_dir / jobs["lora"]["loras"][0]["name"], transformer, WAN_TARGETS, seed=3
    )
    client = backends.get("tiny-wan", 2)
    return {kind: frames(client, body) for kind, body in jobs.items()}


def frames(client: Client, body: dict) -> list[bytes]:
    job = client.wait(client.submit(body), timeout_s=120)
    return [client.frame(job["id"], index) for index in range(job["num_frames"])]


def failed(client: Client, prompt: str) -> tuple[dict, float]:
    """Run a job that must fail; its document and how long it took (server clock)."""
    job_id = client.submit({**JOB, "prompt": prompt})
    with pytest.raises(JobFailed) as failure:
        client.wait(job_id, timeout_s=HANG_S + 60)
    job = failure.value.job
    return job, job["finished"] - job["created"]
