"""Where a parallel denoising step spends its time: `python -m paradit.backend.tools.bench.profile`.

Runs the benchmark DiT under paradit's own parallel plan (`parallelize`) on N gloo ranks in
one command, without the server, and times one CFG step the way the diffusers pipeline runs it
(a conditional and an unconditional transformer call). For each rank it reports the median
step time over a few steps and, from `torch.profiler` over one more step, the time inside:

- `fsdp_all_gather`   FSDP2's per-block parameter all-gathers, waits included
- `ulysses_attention` diffusers' Ulysses attention minus its SDPA kernel: the q/k/v/out
                      all-to-alls, their reshuffling copies and the sequence-size all-gathers
- `output_gather`     gathering the sequence shards after `proj_out`
- `cfg_all_gather`    swapping the two CFG branches' outputs
- `sdpa` / `linear`   attention kernels / matrix multiplies (compute)

and, from forward hooks, the time in modules that every rank computes in full under sequence
parallelism (the patch and text/time embeddings, the cross-attention keys/values of the text).
With more than one rank it first times one of each collective a step uses, at this model's
sizes (`collectives_ms`). The report is JSON on stdout.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# Profiler event name prefixes per category; an event counts in the first category it matches.
CATEGORIES = {
    "fsdp_all_gather": ("FSDP::all_gather",),
    "ulysses_attention": ("TemplatedUlyssesAnythingAttention", "TemplatedUlyssesAttention"),
    "output_gather": ("AllGatherAnythingFunction",),
    "cfg_all_gather": ("c10d::allgather_",),  # outside the two above: the CFG swap
    "sdpa": (
        "aten::_scaled_dot_product_flash_attention_for_cpu",
        "aten::_scaled_dot_product_efficient_attention",
        "aten::_scaled_dot_product_flash_attention",
    ),
    "linear": ("aten::addmm", "aten::mm", "aten::bmm"),
}
REPLICATED = ("patch_embedding", "condition_embedder", "rope")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _inputs(width: int, height: int, text_len: int = 512) -> dict[str, Any]:
    import torch

    generator = torch.Generator().manual_seed(0)
    latents = torch.randn(1, 16, 1, height // 8, width // 8, generator=generator)
    return {
        "latents": latents,
        "timestep": torch.tensor([500.0]),
        "cond": torch.randn(1, text_len, 32, generator=generator),
        "uncond": torch.randn(1, text_len, 32, generator=generator),
    }


class ModuleClock:
    """Wall time spent in given submodules (forward pre/post hooks)."""

    def __init__(self, model: Any, names: tuple[str, ...], text_kv: bool):
        self.seconds: dict[str, float] = defaultdict(float)
        self._open: dict[str, float] = {}
        for name, module in model.named_modules():
            key = name if name in names else None
            if text_kv and (name.endswith("attn2.to_k") or name.endswith("attn2.to_v")):
                key = "cross_attention_text_kv"
            if key is not None:
                module.register_forward_pre_hook(self._pre(name))
                module.register_forward_hook(self._post(name, key))

    def _pre(self, name: str):
        def hook(_module: Any, _args: Any) -> None:
            self._open[name] = time.perf_counter()

        return hook

    def _post(self, name: str, key: str):
        def hook(_module: Any, _args: Any, _out: Any) -> None:
            self.seconds[key] += time.perf_counter() - self._open.pop(name)

        return hook


def _category(name: str) -> str | None:
    for category, prefixes in CATEGORIES.items():
        if name.startswith(prefixes):
            return category
    return None


def _categorize(events: Any) -> dict[str, float]:
    """Seconds per category from the profiler's event tree.

    An event counts where its outermost categorized ancestor counts (the size all-gathers
    inside Ulysses attention count as Ulysses), except compute kernels, which are moved out of
    the communication category they are nested in.
    """
    totals: dict[str, float] = defaultdict(float)
    for event in events:
        category = _category(event.name)
        if category is None:
            continue
        outer, parent = None, event.cpu_parent
        while parent is not None:
            outer = _category(parent.name) or outer
            parent = parent.cpu_parent
        seconds = event.cpu_time_total / 1e6
        if outer is None:
            totals[category] += seconds
        elif category in ("sdpa", "linear") and outer not in ("sdpa", "linear"):
            totals[category] += seconds
            totals[outer] -= seconds
    return {k: round(v, 4) for k, v in totals.items()}


def _collective_ms(fn: Any, repeats: int = 20) -> float:
    """Median wall time of `fn()` in milliseconds, every rank starting together."""
    import torch.distributed as dist

    samples = []
    for _ in range(repeats):
        dist.barrier()
        began = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - began)
    return round(statistics.median(samples) * 1e3, 3)


def collective_costs(num_tokens: int, hidden: int, block_numel: int) -> dict[str, float]:
    """What one of each collective of a step costs here (ms), at this model's sizes.

    all_to_all: one Ulysses q/k/v/out exchange; size_all_gather: the 8-byte sequence-length
    exchange before each of them (ulysses_anything); block_all_gather: FSDP gathering one
    transformer block; cancel_broadcast: the per-step cancel flag.
    """
    import torch
    import torch.distributed as dist

    world = dist.get_world_size()
    size = torch.zeros(1, dtype=torch.int64)
    sizes = [torch.empty_like(size) for _ in range(world)]
    local = torch.randn(num_tokens // world * hidden)
    exchanged = torch.empty_like(local)
    shard = torch.randn(block_numel // world)
    block = torch.empty(shard.numel() * world)
    flag = torch.zeros(1, dtype=torch.int32)
    return {
        "all_to_all_ms": _collective_ms(lambda: dist.all_to_all_single(exchanged, local)),
        "size_all_gather_ms": _collective_ms(lambda: dist.all_gather(sizes, size)),
        "block_all_gather_ms": _collective_ms(
            lambda: dist.all_gather_into_tensor(block, shard), repeats=10
        ),
        "cancel_broadcast_ms": _collective_ms(lambda: dist.broadcast(flag, src=0)),
    }


def _rank_main(rank: int, args: argparse.Namespace, port: int, queue: Any) -> None:
    import torch
    import torch.distributed as dist
    from diffusers import DiffusionPipeline

    from ...parallel import parallelize
    from ...parallel.plan import ParallelPlan

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", rank=rank, world_size=args.world_size)
    model = DiffusionPipeline.from_pretrained(args.model).transformer.eval()
    collectives = {}
    if args.world_size > 1:
        hidden = model.config.num_attention_heads * model.config.attention_head_dim
        block_numel = sum(p.numel() for p in model.blocks[0].parameters())
        tokens = (args.width // 16) * (args.height // 16)
        collectives = collective_costs(tokens, hidden, block_numel)
    plan = ParallelPlan(args.cfg_degree, args.world_size // args.cfg_degree, 1, args.shard)
    parallel = parallelize([model], plan, torch.device("cpu"))
    parallel.begin_job(True)
    clock = ModuleClock(model, REPLICATED, text_kv=True)
    data = _inputs(args.width, args.height)

    def step() -> None:
        for text in (data["cond"], data["uncond"]):
            model(
                hidden_states=data["latents"],
                timestep=data["timestep"],
                encoder_hidden_states=text,
                return_dict=False,
            )

    steps = []
    with torch.no_grad():
        for _ in range(args.steps):
            dist.barrier()
            clock.seconds.clear()
            began = time.perf_counter()
            step()
            steps.append(time.perf_counter() - began)
        modules = dict(clock.seconds)
        dist.barrier()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            step()
    measured = steps[1:] if len(steps) > 1 else steps
    queue.put(
        {
            "rank": rank,
            "step_s": statistics.median(measured),
            "steps": steps,
            "categories_s": _categorize(prof.events()),
            "modules_s": modules,
            "collectives_ms": collectives,
        }
    )
    dist.destroy_process_group()


def profile(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Run the ranks, return one report per rank."""
    import torch.multiprocessing as mp

    context = mp.get_context("spawn")
    queue = context.Queue()
    port = _free_port()
    procs = [
        context.Process(target=_rank_main, args=(rank, args, port, queue))
        for rank in range(args.world_size)
    ]
    for proc in procs:
        proc.start()
    reports = [queue.get(timeout=1800) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
    return sorted(reports, key=lambda r: r["rank"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m paradit.backend.tools.bench.profile")
    parser.add_argument("--model", help="bench model folder (default: build one in a temp dir)")
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--cfg-degree", type=int, default=1)
    parser.add_argument("--no-shard", dest="shard", action="store_false")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--height", type=int, default=512)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    if args.world_size % args.cfg_degree:
        parser.error("--cfg-degree must divide --world-size")
    with tempfile.TemporaryDirectory(prefix="paradit-profile-") as work:
        if args.model is None:
            from .model import BenchModel, build_model_folder

            args.model = str(build_model_folder(BenchModel(), Path(work) / "model"))
        reports = profile(args)
    report = json.dumps({"config": vars(args), "ranks": reports}, indent=2)
    os.write(1, (report + "\n").encode())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
