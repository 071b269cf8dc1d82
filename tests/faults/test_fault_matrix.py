"""Failures inside a step: kind (raise, hang, out-of-memory) x place (before the first step,
inside a block's forward, inside a collective, after a step, in the decode) x ranks (one,
all).

Each failing job ends within `--hang-timeout` + 10 s with the failing rank's own error (not
rank 0's collective timeout); the next plain, LoRA and cached jobs give a fresh backend's
frames byte for byte (the pool's tiny-wan on 2 ranks, which runs each reference job once);
no rank of a replaced group is left running.

The faults come from the test-only `PARADIT_FAULT` switch (backend/runtime/faults.py): one
table for the file's one backend, each job picking its case by a word of its prompt, so one
backend serves every case in a row. Cases where every rank fails the same way keep the group
(no restart: the backend then serves the next test as it started); a rank failing or hanging
alone rebuilds it, each case a generation of the same backend (`gen=`), its rank 1 a new
process. A hang on rank 0 alone turns /health 503 naming
it, its job interrupted by the watchdog; the cells left out here (a hang on every rank among
them) are tests/faults/test_fault_cells.py's.
Jobs are tiny (64x64, one frame, 2 steps); the backend runs with a short `--hang-timeout`
(`fault_jobs.HANG_S`, 2 s), as tests/faults/test_fault_cells.py's does.

Cost: about 30 s (the suite's two-worker run on 2 cores, 2026-11-29): a backend start, about 34
small jobs and five rebuilds of rank 1.
"""

from __future__ import annotations

import time

import pytest
from conftest import Backends, gone, healthy, rank_pids, spawn_gloo, wait_for
from fault_jobs import ERRORS, HANG_S, JOB, PLACES, failed, frames, fresh_frames, next_jobs
from lora_files import WAN_TARGETS, peft_lora

from paradit.backend.client import BackendError, Client
from paradit.backend.models.presets import build_preset

NEXT = next_jobs("fault-matrix.safetensors")
ONE_RANK = [
    ("raise", "block"),
    ("oom", "collective"),
    ("hang", "block"),
    ("hang", "collective"),
    ("raise", "start"),
]
"""Rank 1 alone: each case rebuilds the group (a new rank 1, forked by `serve`'s zygote), so
the one-rank half of the matrix is covered by these five; the step-end and decode-start
places, alone, are tests/faults/test_faults.py's."""
EVERY_RANK = [(kind, place) for kind in ERRORS for place in PLACES]
"""Every rank failing the same way: the group stays."""
TABLE = [
    *(f"rank=all,{PLACES[p][0]},kind={k},prompt=all-{k}-{p}" for k, p in EVERY_RANK),
    *(
        f"rank=1,{PLACES[place][0]},kind={kind},gen={gen},prompt=one-{kind}-{place}"
        for gen, (kind, place) in enumerate(ONE_RANK)
    ),
    f"rank=0,at=block:3,kind=hang,gen={len(ONE_RANK)},prompt=zero-hang",
]
"""The backend's faults: the every-rank cases first (they keep generation 0), then one
generation per one-rank case."""


@pytest.fixture(scope="module")
def fresh(backends) -> dict[str, list[bytes]]:
    """The pool's plain tiny-wan on 2 ranks: each next job's frames on a fresh backend."""
    return fresh_frames(backends, NEXT)


def _start(backends: Backends):
    """The file's backend: the pool's, while it is alive (the every-rank test leaves it as it
    started), else a new one."""
    return backends.start(
        "tiny-wan", 2, "--hang-timeout", str(HANG_S), env=(("PARADIT_FAULT", ";".join(TABLE)),)
    )


def test_the_same_failure_on_every_rank_anywhere_keeps_the_group(backends, fresh):
    """raise and out-of-memory on every rank at each place: the group stays (same ranks),
    its model back as between jobs; the next jobs are a fresh backend's, byte for byte."""
    backend = _start(backends)
    try:
        client = backend.client
        pids = rank_pids(client)
        kinds = list(NEXT)
        for index, (kind, place) in enumerate(EVERY_RANK):
            job, took_s = failed(client, f"all-{kind}-{place}")
            error = job["error"]
            assert ERRORS[kind] in error and PLACES[place][1] in error, (kind, place, error)
            assert took_s < HANG_S + 10, (kind, place, took_s)
            assert healthy(client) and rank_pids(client) == pids, (kind, place)
            after = kinds[index % len(kinds)]
            assert frames(client, NEXT[after]) == fresh[after], (kind, place, after)
        for kind, body in NEXT.items():
            assert frames(client, body) == fresh[kind], kind
        assert "TEST-ONLY FAULT INJECTION IS ON" in backend.log_path.read_text()
    except BaseException:  # the next test then starts its own backend
        backends.stop(backend)
        raise


def test_one_rank_failing_or_hanging_inside_a_step_is_found_within_the_hang_timeout(
    backends, fresh
):
    """Rank 1 alone, wherever it is: the job fails within `--hang-timeout` + 10 s naming rank 1
    and its own error (or where it hung), the group is rebuilt, the old rank 1 is gone, and the
    next jobs are a fresh backend's. Before, rank 0 waited in its collective until the
    collective timeout (120 s here) and the error was rank 0's."""
    backend = _start(backends)
    try:
        client = backend.client
        seen: list[int] = []
        for kind, place in ONE_RANK:
            pids = rank_pids(client)
            seen += pids[1:]
            job, took_s = failed(client, f"one-{kind}-{place}")
            error = job["error"]
            assert "rank 1" in error or "ranks [1]" in error, (kind, place, error)
            if kind == "hang":
                assert "stopped progressing" in error and "faults.py" in error, error
            else:
                assert ERRORS[kind] in error and PLACES[place][1] in error, error
            assert took_s < HANG_S + 10, (kind, place, took_s, error)
            wait_for(lambda: healthy(client), 120, "the group to be rebuilt")
            assert all(gone(pid) for pid in pids[1:]), (kind, place)
            assert frames(client, NEXT["plain"]) == fresh["plain"], (kind, place)
        for kind, body in NEXT.items():
            assert frames(client, body) == fresh[kind], kind
        seen += rank_pids(client)[1:]
        # rank 0 itself hangs: named in /health, its own job interrupted
        client.submit({**JOB, "prompt": "zero-hang"})
        started = time.monotonic()
        reason = wait_for(lambda: _unhealthy_because(client), HANG_S + 30, "/health: 503")
        assert "ranks [0] stopped progressing" in reason and "faults.py" in reason, reason
        assert "rank 0's job was interrupted" in reason, reason
        assert time.monotonic() - started < HANG_S + 10
    finally:
        backend.stop(grace_s=1.0)  # a hung rank 0 does not stop by itself
        backends.stop(backend)
    wait_for(lambda: all(gone(pid) for pid in seen), 10, "every rank 1 to be gone")


def _unhealthy_because(client: Client) -> str:
    """/health's error while it answers 503, "" while it answers 200."""
    try:
        client.health()
    except BackendError as exc:
        return str(exc)
    return ""


def _check_recover(rank: int, world_size: int, folder: str) -> None:
    """One rank of `test_a_forward_that_raised_is_put_back_before_any_weight_is_written`."""
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor

    from paradit.backend.lora import LoraLibrary, LoraPatcher
    from paradit.backend.lora.patch import JobLora
    from paradit.backend.parallel import ModelStateError, Parallelized
    from paradit.backend.parallel.fsdp import shard_weights
    from paradit.backend.parallel.plan import choose_plan

    pipe = build_preset("tiny-wan")
    dit = pipe.transformer
    shard_weights(dit, init_device_mesh("cpu", (world_size,)))
    parallel = Parallelized(choose_plan(world_size, supports_cfg=False, device_type="cpu"), [])
    parallel.sharded = [dit]
    patcher = LoraPatcher(LoraLibrary((folder,)), type(pipe), {"transformer": dit})
    loras = patcher.resolve([{"name": "fault-matrix", "strength": 1.0}])
    assert isinstance(loras[0], JobLora)
    inputs = {
        "hidden_states": torch.randn(1, 16, 1, 8, 8, generator=torch.Generator().manual_seed(1)),
        "timestep": torch.tensor([500]),
        "encoder_hidden_states": torch.randn(1, 8, 32, generator=torch.Generator().manual_seed(2)),
        "return_dict": False,
    }
    with torch.no_grad():
        clean = dit(**inputs)[0]

    def fail(*_args):
        raise RuntimeError("inside block 1")

    hook = dit.blocks[1].register_forward_pre_hook(fail)
    with torch.no_grad(), pytest.raises(RuntimeError, match="inside block 1"):
        dit(**inputs)
    hook.remove()
    # FSDP2 left the failing block and the root unsharded: plain tensors, not shards
    loose = [name for name, p in dit.named_parameters() if not isinstance(p, DTensor)]
    assert "blocks.1.attn1.to_q.weight" in loose and "patch_embedding.weight" in loose, loose
    with pytest.raises(ModelStateError, match="not sharded"):
        parallel.check_at_rest()
    with pytest.raises(ModelStateError, match="LoRAs not applied"), patcher.applied(loras):
        pass  # refused before any row is written
    parallel.recover()
    assert all(isinstance(p, DTensor) for p in dit.parameters())
    with torch.no_grad():
        assert torch.equal(dit(**inputs)[0], clean)
        with patcher.applied(loras):
            assert not torch.equal(dit(**inputs)[0], clean)
        assert torch.equal(dit(**inputs)[0], clean)


def test_a_forward_that_raised_is_put_back_before_any_weight_is_written(tmp_path):
    """FSDP2 on 2 gloo ranks (forked): after an exception inside a block's forward the LoRA
    patcher refuses the unsharded weights (it wrote into temporary copies, then into freed
    storage: a segfault) until `Parallelized.recover` reshards; then a forward gives the clean
    output again and a LoRA applies and comes off exactly."""
    transformer = build_preset("tiny-wan").transformer
    peft_lora(tmp_path / "fault-matrix.safetensors", transformer, WAN_TARGETS, seed=3)
    spawn_gloo(2, _check_recover, str(tmp_path))


@pytest.mark.fast
def test_a_fault_fires_in_the_jobs_its_prompt_picks_at_its_block():
    import torch

    from paradit.backend.runtime.faults import ENV, Fault, Faults, InjectedFault

    table = "rank=1,at=block:2,kind=raise,prompt=boom;rank=all,at=start,kind=oom,prompt=early"
    faults = Faults.from_environ(1, 0, {ENV: table})
    model = torch.nn.Module()
    model.blocks = torch.nn.ModuleList(torch.nn.Identity() for _ in range(3))
    faults.watch([model])
    x = torch.ones(1)
    faults.begin_job("a quiet job")  # picked by neither
    for block in [*model.blocks, *model.blocks]:
        block(x)
    faults.begin_job("a boom job")
    model.blocks[0](x)
    with pytest.raises(InjectedFault, match=r"injected fault \(raise\) inside block 2"):
        model.blocks[1](x)
    faults.end_job()
    model.blocks[1](x)  # between jobs: nothing counts
    with pytest.raises(torch.OutOfMemoryError, match="as the job starts"):
        faults.begin_job("early")
    assert Faults.from_environ(0, 0, {ENV: table}).faults[0].at == "start"
    for bad in ("rank=1,at=block:0,kind=raise", "rank=1,at=collective,kind=hang"):
        with pytest.raises(ValueError, match="must look like"):
            Fault.parse(bad)
