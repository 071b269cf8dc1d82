"""A burst of concurrent submissions on a real backend: what is accepted finishes, the rest is
told to come back later, and the server stays healthy. The queue is short and the jobs take
one step: the burst overflows it all the same, and the few jobs it accepts finish soon.

Cost: about 8 s (in the suite's two-worker run on 2 cores).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

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
