"""One host copy at load: a ~1 GB DiT from a folder on 2 ranks costs the machine one copy of
the DiT plus the second rank's runtime, because each rank reads only its shards.

Cost: about 39 s (in the suite's two-worker run on 2 cores).
"""

from __future__ import annotations

import json
import queue
import threading
import time
from pathlib import Path

import pytest

from paradit.backend.client.local import LocalBackend
from paradit.backend.config import ServeConfig
from paradit.backend.models.presets import build_preset

BODY = {"prompt": "memory", "width": 64, "height": 64, "num_frames": 5, "num_inference_steps": 1}


def _big_wan_folder(folder: Path) -> int:
    """tiny-wan with a ~1 GB (float32) DiT: 16 blocks of width 1024, so that one block is a
    small part of the model, as in the real ones (Wan 1.3B: 30 blocks, 14B: 40)."""
    import torch
    from diffusers import WanPipeline, WanTransformer3DModel

    tiny = build_preset("tiny-wan")
    config = dict(tiny.transformer.config)
    config.update(num_layers=16, num_attention_heads=8, attention_head_dim=128, ffn_dim=4096)
    config = {k: v for k, v in config.items() if not k.startswith("_")}
    torch.manual_seed(0)
    transformer = WanTransformer3DModel(**config)
    with torch.no_grad():
        for param in transformer.parameters():
            param.mul_(0.02)
    WanPipeline(
        tokenizer=tiny.tokenizer,
        text_encoder=tiny.text_encoder,
        vae=tiny.vae,
        scheduler=tiny.scheduler,
        transformer=transformer,
    ).save_pretrained(folder)
    return sum(p.numel() * p.element_size() for p in transformer.parameters())


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def _zygote_rss(serve_pid: int, ranks: set[int]) -> int:
    """The resident memory of the zygote `serve` keeps for rebuilds (its child that is no
    rank; 0 without one): a runtime that never loads a model, its pages shared with rank 0's
    but counted again in a sum of RSS."""
    children: set[int] = set()
    for task in Path(f"/proc/{serve_pid}/task").iterdir():
        children |= {int(pid) for pid in (task / "children").read_text().split()}
    return sum(_rss(pid) for pid in children - ranks)


def _tree_rss(root: int) -> int:
    """The summed resident memory of `root` and its descendants (`serve`, the ranks it forked
    and the zygote it keeps): a few /proc files a sample, where scanning every process's
    command line for the output folder took ~7 ms of CPU 50 times a second from the ranks
    it measures."""
    total, pending = 0, [root]
    while pending:
        pid = pending.pop()
        try:
            total += _rss(pid)
            for task in Path(f"/proc/{pid}/task").iterdir():
                pending += [int(child) for child in (task / "children").read_text().split()]
        except OSError:  # ended between two reads
            continue
    return total


def _peak_rss(folder: Path, world_size: int, out: Path) -> tuple[int, int, dict, int]:
    """The peak summed resident memory of `serve` and its ranks while they load the model
    (until ready) and over start-up and one job, the job's memory record (its plan and
    each rank's measured peak), and the zygote's resident memory."""
    peak, done, started = [0], threading.Event(), queue.Queue()

    class Sampled(LocalBackend):
        def _start(self, *args, **kwargs):
            proc, stdout = super()._start(*args, **kwargs)
            started.put(proc.pid)  # sampled from here on, before it loads anything
            return proc, stdout

    def sample() -> None:
        root = started.get()
        while not done.is_set():
            peak[0] = max(peak[0], _tree_rss(root))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    config = ServeConfig(
        model=str(folder),
        world_size=world_size,
        device="cpu",
        threads_per_rank=1,
        output_dir=str(out),
    )
    try:
        with Sampled(config, start_timeout_s=600, log_file=out.parent / f"{out.name}.log") as b:
            load_peak = peak[0]
            ranks = {rank["pid"] for rank in b.client.info()["ranks"]}
            zygote = _zygote_rss(b.proc.pid, ranks)
            job = b.client.wait(b.client.submit(BODY), timeout_s=300)
            assert job["status"] == "succeeded"
    finally:
        started.put(0)  # a sampler still waiting (the start failed) ends
        done.set()
        sampler.join()
    record = json.loads((out / job["id"] / "job.json").read_text())
    return load_peak, peak[0], record["memory"], zygote


@pytest.mark.timeout(900)
def test_two_ranks_load_a_1gb_dit_with_one_host_copy(tmp_path):
    folder = tmp_path / "wan-1gb"
    dit_bytes = _big_wan_folder(folder)
    assert dit_bytes > 0.9e9
    load_one, one, memory_one, _ = _peak_rss(folder, 1, tmp_path / "one-rank")
    load_two, two, memory_two, zygote = _peak_rss(folder, 2, tmp_path / "two-ranks")
    assert zygote > 0  # a 2-rank CPU serve keeps one (docs/serving.md)
    for memory, world_size in ((memory_one, 1), (memory_two, 2)):
        # every rank reports its reading, with what it held before loading the model
        assert sorted(memory["measured"]) == [str(r) for r in range(world_size)], memory
        assert all("above_start_bytes" in r for r in memory["measured"].values()), memory
    # What the two ranks held before loading the model (interpreter, torch, diffusers), as
    # each measured it in this run, and the zygote's runtime (which loads no model).
    runtimes = zygote + sum(
        r["peak_bytes"] - r["above_start_bytes"] for r in memory_two["measured"].values()
    )
    print(
        f"DiT {dit_bytes / 2**30:.2f} GiB; peak RSS at load: 1 rank {load_one / 2**30:.2f} GiB, "
        f"2 ranks {load_two / 2**30:.2f} GiB ({runtimes / 2**30:.2f} GiB of it before the "
        f"model); with the job: 1 rank {one / 2**30:.2f} GiB, 2 ranks {two / 2**30:.2f} GiB"
    )
    assert load_one > dit_bytes  # the sampler saw the model
    # One host copy at load: the two ranks together hold their runtimes plus one copy of the
    # DiT (each its shards), measured 0.15 GiB above that; had each rank read the whole DiT
    # they would hold two copies. The bound sits half a copy from each. (The peak over the
    # job is no measure of it: FSDP2's gathers on gloo hold blocks on both ranks, and the
    # 2-rank total over the job measured 0.84x-1.38x the 1-rank one; nor is the 1-rank load,
    # which holds a second copy for a moment while from_pretrained reads the file.)
    assert runtimes + 0.9 * dit_bytes <= load_two <= runtimes + 1.5 * dit_bytes, (
        runtimes,
        load_two,
    )
    # The memory plan's prediction against each rank's measured peak during the job (its
    # resident high-water mark above what the process held before loading the model).
    # At world size 1 the prediction is asserted; the sharded ranks' figures are printed (they
    # measured 1.13x-1.69x their prediction: FSDP2's gathers on gloo hold more than the plan's
    # four blocks, not explained yet; see docs/memory.md).
    for memory in (memory_one, memory_two):
        predicted = memory["predicted_bytes"]
        for rank, reading in memory["measured"].items():
            expected = predicted["rank0" if rank == "0" else "other_ranks"]
            measured = reading["above_start_bytes"]
            print(
                f"rank {rank}: predicted {expected / 2**30:.3f} GiB, measured "
                f"{measured / 2**30:.3f} GiB ({measured / expected:.2f}x)"
            )
            if memory is memory_one:
                assert 0.75 * measured <= expected <= 1.25 * measured, (expected, measured)
