"""A burst of concurrent submissions on a real backend: what is accepted finishes, the rest is
told to come back later, and the server stays healthy. The queue is short and the jobs take
one step: the burst overflows it all the same, and the few jobs it accepts finish soon.

Cost: about 3 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from paradit.backend.client import BackendError

BURST = 50
MAX_QUEUE = 4
JOB = {"num_inference_steps": 1}
"""At the model's default size: the one the memory plan predicted at start."""


def _post(url: str, body: dict) -> tuple[int, dict, str | None]:
    request = urllib.request.Request(
        f"{url}/v1/jobs", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            return reply.status, json.loads(reply.read()), None
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read()), exc.headers.get("Retry-After")


def test_a_burst_of_50_submissions(backends):
    client = backends.get("tiny-wan", 1, "--max-queue", str(MAX_QUEUE))
    bodies = [{**JOB, "prompt": f"burst {i}", "seed": i} for i in range(BURST)]
    with ThreadPoolExecutor(BURST) as pool:
        replies = list(pool.map(lambda body: _post(client.url, body), bodies))
    accepted = [body["id"] for status, body, _ in replies if status == 202]
    refused = [(body, retry) for status, body, retry in replies if status == 429]
    assert len(accepted) + len(refused) == BURST, [r[:2] for r in replies]
    assert MAX_QUEUE <= len(accepted) < BURST
    assert all("queue is full" in body["error"] and int(retry) > 0 for body, retry in refused)
    for job_id in accepted:
        assert client.wait(job_id, timeout_s=300)["status"] == "succeeded"
    assert client.health()["status"] == "ok"
    try:
        client.submit({**JOB, "prompt": "after the burst"})
    except BackendError as exc:  # pragma: no cover - the queue must have room again
        raise AssertionError(f"the queue did not drain: {exc}") from None


@pytest.mark.fast
def test_a_burst_at_new_sizes_plans_each_once_and_alike():
    """Submissions check their size against the memory plan on the HTTP threads, so a burst
    at sizes not planned yet runs their dry runs at once, on the same meta modules: they take
    turns (one 500 in a burst before: the meta VAE's causal cache, shared, got another
    decode's frames) and give the bytes a lone plan gives."""
    import threading
    import time

    import torch

    from paradit.backend.memory.settings import JobShape
    from paradit.backend.memory.sizes import sizes_of_pipeline
    from paradit.backend.models.families import family_of
    from paradit.backend.models.presets import build_preset

    pipe = build_preset("tiny-wan")
    shapes = [JobShape(64, 64, 1), JobShape(80, 64, 5)]

    def plan(sizes, shape: JobShape) -> tuple[int, int]:
        return sizes.activations(shape, 1), sizes.decode(shape, tiled=False)

    alone = sizes_of_pipeline(pipe, family_of(pipe), torch.float32)
    expected = [plan(alone, shape) for shape in shapes]
    shared = sizes_of_pipeline(pipe, family_of(pipe), torch.float32)
    inside, most = [0], [0]
    decode = shared.vae.decode

    def counted(*args, **kwargs):  # how many decode dry runs run at once
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        time.sleep(0.05)  # room for another thread to come in
        try:
            return decode(*args, **kwargs)
        finally:
            inside[0] -= 1

    shared.vae.decode = counted
    start = threading.Barrier(8)
    found: dict[int, tuple[int, int] | Exception] = {}

    def submit(index: int) -> None:
        start.wait()
        try:
            found[index] = plan(shared, shapes[index % 2])
        except Exception as exc:  # noqa: BLE001 - the HTTP thread's 500
            found[index] = exc

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert most == [1] and found == {i: expected[i % 2] for i in range(8)}
