"""One host copy at load: a ~1 GB DiT from a folder on 2 ranks costs the machine one copy of
the DiT plus the second rank's runtime, because each rank reads only its shards.

Cost: about 9 s (the suite's two-worker run on 2 cores, 2026-11-29).
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

BODY = {"prompt": "memory", "width": 16, "height": 16, "num_frames": 1, "num_inference_steps": 1}
"""One token a branch: the job's peak is the weights' (its activations are 1% of the plan's
prediction at 64x64x5), and the 1 GB DiT's forward costs little."""


def _big_wan_folder(folder: Path) -> int:
    """tiny-wan with a ~1 GB (float32) DiT: 16 blocks of width 1024, so that one block is a
    small part of the model, as in the real ones (Wan 1.3B: 30 blocks, 14B: 40).

    The DiT's weights are written, not built: its shapes from a module on the meta device,
    its values small and nonzero (every page of the file written, no two pages alike: a
    random block of a prime number of floats, repeated), saved with safetensors as
    `save_pretrained` saves them. Filling them costs about 1 CPU-second, where building the
    module with its default initialisation cost 2.5."""
    import torch
    from diffusers import WanTransformer3DModel
    from safetensors.torch import save_file

    tiny = build_preset("tiny-wan")
    tiny.save_pretrained(folder)  # its tokenizer, text encoder, VAE and scheduler
    config = dict(tiny.transformer.config)
    config.update(num_layers=16, num_attention_heads=8, attention_head_dim=128, ffn_dim=4096)
    config = {k: v for k, v in config.items() if not k.startswith("_")}
    with torch.device("meta"):
        transformer = WanTransformer3DModel(**config)
    transformer.save_config(folder / "transformer")
    block = torch.empty(1_000_003).uniform_(-1e-3, 1e-3, generator=torch.Generator().manual_seed(0))
    weights, offset = {}, 0
    for name, param in transformer.state_dict().items():
        value = torch.empty(param.numel(), dtype=param.dtype)
        done = 0
        while done < value.numel():  # the block from `offset` on, wrapping around
            start = (offset + done) % block.numel()
            take = min(block.numel() - start, value.numel() - done)
            value[done : done + take] = block[start : start + take]
            done += take
        weights[name] = value.view(param.shape)
        offset += value.numel()
    save_file(
        weights,
        folder / "transformer" / "diffusion_pytorch_model.safetensors",
        metadata={"format": "pt"},
    )
    return sum(value.numel() * value.element_size() for value in weights.values())


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


def _peak_rss(
    backend_class: type[LocalBackend], folder: Path, world_size: int, out: Path, job: bool
) -> tuple[int, int, list[dict], dict | None, int]:
    """The peak summed resident memory of `serve` and its ranks while they load the model
    (until ready) and over start-up and the job (with `job`: one), its ranks' /v1/info, the
    job's memory record (its plan and each rank's measured peak; None without a job), and
    the zygote's resident memory."""
    peak, done, started = [0], threading.Event(), queue.Queue()

    class Sampled(backend_class):
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
    record = None
    try:
        with Sampled(config, start_timeout_s=600, log_file=out.parent / f"{out.name}.log") as b:
            load_peak = peak[0]
            ranks = b.client.info()["ranks"]
            zygote = _zygote_rss(b.proc.pid, {rank["pid"] for rank in ranks})
            if job:
                done_job = b.client.wait(b.client.submit(BODY), timeout_s=300)
                assert done_job["status"] == "succeeded"
                record = json.loads((out / done_job["id"] / "job.json").read_text())["memory"]
    finally:
        started.put(0)  # a sampler still waiting (the start failed) ends
        done.set()
        sampler.join()
    return load_peak, peak[0], ranks, record, zygote


@pytest.mark.timeout(900)
def test_two_ranks_load_a_1gb_dit_with_one_host_copy(tmp_path, warm_local_backends):
    """`serve` forked from the test worker's zygote (tests/zygote.py): the real command,
    without its imports; what each process held before loading the model is subtracted
    as each rank measured it. The 2-rank group runs no job: the bound is on its load, and
    FSDP2's gathers of a 1 GB DiT over gloo cost some 13 CPU-seconds (every rank's reading
    in a sharded job's record: tests/models/test_folder.py)."""
    folder = tmp_path / "wan-1gb"
    dit_bytes = _big_wan_folder(folder)
    assert dit_bytes > 0.9e9
    load_one, one, ranks_one, memory_one, _ = _peak_rss(
        warm_local_backends, folder, 1, tmp_path / "one-rank", job=True
    )
    load_two, _, ranks_two, _, zygote = _peak_rss(
        warm_local_backends, folder, 2, tmp_path / "two-ranks", job=False
    )
    assert zygote > 0  # a 2-rank CPU serve keeps one (docs/serving.md)
    # the rank's reading, with what it held before loading the model: /v1/info's figure
    assert sorted(memory_one["measured"]) == ["0"], memory_one
    reading = memory_one["measured"]["0"]
    assert (
        reading["peak_bytes"] - reading["above_start_bytes"]
        == (ranks_one[0]["rss_before_model_bytes"])
    ), (reading, ranks_one)
    # What the two ranks held before loading the model (interpreter, torch, diffusers), as
    # each measured it in this run (/v1/info), and the zygote's runtime (which loads no model).
    assert [rank["rank"] for rank in ranks_two] == [0, 1], ranks_two
    assert all(rank["rss_before_model_bytes"] > 0 for rank in ranks_two), ranks_two
    runtimes = zygote + sum(rank["rss_before_model_bytes"] for rank in ranks_two)
    print(
        f"DiT {dit_bytes / 2**30:.2f} GiB; peak RSS at load: 1 rank {load_one / 2**30:.2f} GiB, "
        f"2 ranks {load_two / 2**30:.2f} GiB ({runtimes / 2**30:.2f} GiB of it before the "
        f"model); with the job: 1 rank {one / 2**30:.2f} GiB"
    )
    assert load_one > dit_bytes  # the sampler saw the model
    # One host copy at load: the two ranks together hold their runtimes plus one copy of the
    # DiT (each its shards), measured 0.15 GiB above that; had each rank read the whole DiT
    # they would hold two copies. The bound sits half a copy from each. (The peak over a
    # job is no measure of it: FSDP2's gathers on gloo hold blocks on both ranks, and the
    # 2-rank total over the job measured 0.84x-1.38x the 1-rank one; nor is the 1-rank load,
    # which holds a second copy for a moment while from_pretrained reads the file.)
    assert runtimes + 0.9 * dit_bytes <= load_two <= runtimes + 1.5 * dit_bytes, (
        runtimes,
        load_two,
    )
    # The memory plan's prediction against the rank's measured peak during the job (its
    # resident high-water mark above what the process held before loading the model), at
    # world size 1. (The sharded ranks measured 1.13x-1.69x their prediction: FSDP2's gathers
    # on gloo hold more than the plan's four blocks, not explained yet; see docs/memory.md.)
    expected = memory_one["predicted_bytes"]["rank0"]
    measured = reading["above_start_bytes"]
    print(
        f"rank 0: predicted {expected / 2**30:.3f} GiB, measured "
        f"{measured / 2**30:.3f} GiB ({measured / expected:.2f}x)"
    )
    assert 0.75 * measured <= expected <= 1.25 * measured, (expected, measured)
