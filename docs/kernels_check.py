"""The `kernels` stage of docs/gpu_check.py: one Wan 2.1 14B DiT block at 1280x720x81 on one GPU.

- Attention kernels: the block's forward on each of PyTorch's SDPA kernels that diffusers
  dispatches to, timed, with its distance to the default (`native`).
- Regional torch.compile: the block compiled (what `compile_repeated_blocks` does per block),
  timed after its compile, with its distance to eager.
- Projected scaling: one rank's share of an 8-GPU step, measured: its tokens through the
  block's linear layers and its heads through attention over all tokens; plus the all-to-all
  and FSDP gather volumes at an assumed interconnect bandwidth. Against 1 GPU's step (the
  whole block at all tokens, both CFG branches).

A Wan block is (self-attention, cross-attention to 512 text tokens, FFN); the random weights
are drawn once (seed 0) in bfloat16.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import torch

HIDDEN, HEADS, HEAD_DIM, FFN, BLOCKS, TEXT = 5120, 40, 128, 13824, 40, 512
LATENT = (21, 90, 160)  # 81 frames, 720x1280 through the VAE (4x temporal, 8x spatial)
NVLINK_GB_S = 360.0
"""Assumed bus bandwidth of NCCL all-to-all and all-gather on 8 H100 SXM over NVLink 4
(900 GB/s bidirectional per GPU; NCCL's tests report about 360-480 GB/s bus bandwidth)."""


def _tokens() -> int:
    frames, height, width = LATENT
    return frames * (height // 2) * (width // 2)


def _timed(fn: Any, repeats: int = 5, warmup: int = 2) -> float:
    """Median seconds of `fn()` on the GPU (CUDA events), after warm-up calls."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end) / 1e3)
    return statistics.median(samples)


def _rel_l2(reference: torch.Tensor, other: torch.Tensor) -> float:
    reference, other = reference.float(), other.float()
    return float((other - reference).norm() / reference.norm())


class BlockBench:
    def __init__(self) -> None:
        from diffusers.models.transformers.transformer_wan import (
            WanRotaryPosEmbed,
            WanTransformerBlock,
        )

        torch.manual_seed(0)
        self.block = (
            WanTransformerBlock(HIDDEN, FFN, HEADS, "rms_norm_across_heads", True, 1e-6)
            .to("cuda", torch.bfloat16)
            .eval()
        )
        self.rope = WanRotaryPosEmbed(HEAD_DIM, (1, 2, 2), 1024).to("cuda")
        self.text = torch.randn(1, TEXT, HIDDEN, device="cuda", dtype=torch.bfloat16)
        self.temb = torch.randn(1, 6, HIDDEN, device="cuda") * 0.1

    def inputs(self, tokens: int) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        frames, height, width = LATENT
        latent = torch.empty(1, 16, frames, height, width, device="cuda")
        cos, sin = self.rope(latent)
        hidden = torch.randn(1, tokens, HIDDEN, device="cuda", dtype=torch.bfloat16)
        return hidden, (cos[:, :tokens], sin[:, :tokens])

    def forward(self, module: Any, hidden: torch.Tensor, rope: Any) -> torch.Tensor:
        with torch.no_grad():
            return module(hidden, self.text, self.temb, rope)

    def set_kernel(self, name: str) -> None:
        from diffusers.models.attention_dispatch import AttentionBackendName

        backend = AttentionBackendName(name)
        for module in self.block.modules():
            processor = getattr(module, "processor", None)
            if processor is not None and hasattr(processor, "_attention_backend"):
                processor._attention_backend = backend


def _sdpa_seconds(tokens: int, heads: int) -> float:
    """Self-attention alone: `tokens` queries and keys, `heads` heads of 128 (flash)."""
    q = torch.randn(1, heads, tokens, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
    k, v = torch.randn_like(q), torch.randn_like(q)
    with torch.no_grad():
        return _timed(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v))


def projected_scaling(bench: BlockBench, block_1gpu_s: float) -> dict[str, Any]:
    """Per-rank block time on 8 GPUs for two layouts, from measured pieces."""
    tokens = _tokens()
    block_params = sum(p.numel() for p in bench.block.parameters())
    gather_s = 7 / 8 * block_params * 2 / (NVLINK_GB_S * 1e9)
    one_gpu_step = 2 * BLOCKS * block_1gpu_s  # both CFG branches, every block
    layouts = {}
    for name, cfg, ulysses in (("Ulysses 8", 1, 8), ("CFG 2 x Ulysses 4", 2, 4)):
        local = tokens // ulysses
        hidden, rope = bench.inputs(local)
        block_local = _timed(lambda h=hidden, r=rope: bench.forward(bench.block, h, r))
        attention_local = _sdpa_seconds(local, HEADS)
        attention_share = _sdpa_seconds(tokens, HEADS // ulysses)
        linear = block_local - attention_local
        # q, k, v to heads and the output back: 4 all-to-alls of the rank's tokens x hidden
        all_to_all_bytes = 4 * (ulysses - 1) / ulysses * local * HIDDEN * 2
        all_to_all_s = all_to_all_bytes / (NVLINK_GB_S * 1e9)
        per_block = linear + attention_share + all_to_all_s
        branches = 2 // cfg  # CFG branches each rank computes
        overlapped = branches * BLOCKS * per_block
        serial = overlapped + branches * BLOCKS * gather_s
        layouts[name] = {
            "tokens_per_rank": local,
            "heads_per_rank": HEADS // ulysses,
            "block_local_s": block_local,
            "linear_s": linear,
            "attention_share_s": attention_share,
            "all_to_all_mb_per_block": all_to_all_bytes / 1e6,
            "all_to_all_s_per_block": all_to_all_s,
            "fsdp_gather_s_per_block": gather_s,
            "step_s_gathers_overlapped": overlapped,
            "step_s_gathers_serial": serial,
            "speedup_overlapped": one_gpu_step / overlapped,
            "speedup_serial": one_gpu_step / serial,
            "efficiency_overlapped": one_gpu_step / overlapped / 8,
            "efficiency_serial": one_gpu_step / serial / 8,
        }
    return {
        "assumed_bus_bandwidth_gb_s": NVLINK_GB_S,
        "tokens": tokens,
        "block_params": block_params,
        "one_gpu_block_s": block_1gpu_s,
        "one_gpu_step_blocks_s": one_gpu_step,
        "layouts": layouts,
    }


def stage_kernels(out: Path) -> dict[str, Any]:
    from diffusers.models.attention_dispatch import AttentionBackendName, _AttentionBackendRegistry

    # the process-wide default, whatever an earlier stage set (`set_attention_backend` does)
    _AttentionBackendRegistry.set_active_backend(AttentionBackendName.NATIVE)
    bench = BlockBench()
    result = kernels_and_compile(bench)
    torch.cuda.empty_cache()
    result["projected_scaling"] = projected_scaling(
        bench, result["attention_kernels"]["native"]["block_s"]
    )
    return result


def kernels_and_compile(bench: BlockBench) -> dict[str, Any]:
    tokens = _tokens()
    hidden, rope = bench.inputs(tokens)
    reference = bench.forward(bench.block, hidden, rope)
    kernels: dict[str, Any] = {}
    for name in ("native", "_native_flash", "_native_cudnn", "_native_efficient"):
        try:
            bench.set_kernel(name)
            output = bench.forward(bench.block, hidden, rope)
            seconds = _timed(lambda: bench.forward(bench.block, hidden, rope), repeats=3)
            kernels[name] = {"block_s": seconds, "rel_l2_to_native": _rel_l2(reference, output)}
        except Exception as exc:  # a kernel this GPU or shape lacks: recorded
            kernels[name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    bench.set_kernel("native")
    eager_s = kernels["native"]["block_s"]
    try:
        compiled = torch.compile(bench.block, fullgraph=True)
        started = time.perf_counter()
        compiled_out = bench.forward(compiled, hidden, rope)
        torch.cuda.synchronize()
        compile_s = time.perf_counter() - started
        compiled_s = _timed(lambda: bench.forward(compiled, hidden, rope), repeats=3)
        compile = {
            "first_call_s": compile_s,
            "block_s": compiled_s,
            "speedup": eager_s / compiled_s,
            "rel_l2_to_eager": _rel_l2(reference, compiled_out),
        }
    except Exception as exc:  # recorded: a graph break under fullgraph, a missing compiler
        compile = {"error": f"{type(exc).__name__}: {exc}"[:600]}
    return {"tokens": tokens, "attention_kernels": kernels, "compile": compile}
