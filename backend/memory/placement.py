"""Applying a memory layout to a loaded pipeline: where the DiT and the encoders live.

- text encoder on "cpu": the encoders stay in host memory and encode there; their outputs
  move to the device (`encoder_device`).
- DiT "offload-model": the whole DiT moves to the device for the denoising steps and back
  to host memory for the decode (`steps`).
- "offload-group" / "offload-sequential" on one rank: diffusers' group offloading, block by
  block or leaf by leaf, with a CUDA stream prefetching the next group on GPUs.
- sharded with offload (several ranks): FSDP2's CPU offload policy keeps each rank's shards in
  host memory (`fsdp_offload`).
- experts one at a time (`planner.SWAP`, two-expert models): the first expert on the device,
  the others in host memory (unsharded) until `swap.ExpertSwap` brings each in for its steps.
On a CPU device nothing moves (host memory is the device); the hooks are still applied when
an offload is asked for, so their path is the one that runs.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import torch

from .planner import Layout

log = logging.getLogger(__name__)

ENCODERS = ("text_encoder", "text_encoder_2", "image_encoder")
DITS = ("transformer", "transformer_2")
"""The DiTs, in the order they run (a two-expert model's high-noise expert first)."""


def keeps_on_host(layout: Layout, component: str, sharded: bool) -> bool:
    """Whether `_place` leaves `component` in host memory under `layout`."""
    if component in ENCODERS:
        return layout.text_encoder == "cpu"
    if component in DITS:
        if layout.swaps_experts:  # the first expert starts on the device
            return component != DITS[0] and not sharded
        return layout.dit.startswith("offload-") and not sharded
    return False


def expert_target(layout: Layout, component: str, device: torch.device) -> torch.device:
    """Where a sharded DiT built empty gets its shards (`sharded_load.fill_shards`): host
    memory for FSDP2's CPU offload and for the experts that wait there, else `device`."""
    if fsdp_offload(layout, device) or (layout.swaps_experts and component != DITS[0]):
        return torch.device("cpu")
    return device


def encoder_device(layout: Layout, device: torch.device) -> torch.device:
    return torch.device("cpu") if layout.text_encoder == "cpu" else device


def fsdp_offload(layout: Layout, device: torch.device) -> bool:
    """Sharded DiT kept in host memory between uses (FSDP2's CPUOffloadPolicy: CUDA only)."""
    offloaded = layout.dit.startswith("offload-") and not layout.swaps_experts
    return offloaded and device.type == "cuda"


def apply_offload(dits: list[torch.nn.Module], layout: Layout, device: torch.device) -> None:
    """Group / sequential offload hooks on unsharded DiTs (they start in host memory)."""
    kinds = {"offload-group": "block_level", "offload-sequential": "leaf_level"}
    if layout.dit not in kinds:
        return
    for dit in dits:
        dit.enable_group_offload(
            onload_device=device,
            offload_device=torch.device("cpu"),
            offload_type=kinds[layout.dit],
            num_blocks_per_group=1 if kinds[layout.dit] == "block_level" else None,
            use_stream=device.type == "cuda",
        )
    log.info("DiT %s: %s offload to %s", layout.dit, kinds[layout.dit], device)


@contextlib.contextmanager
def steps(dits: list[torch.nn.Module], layout: Layout, device: torch.device) -> Iterator[None]:
    """Around the denoising steps: model offload brings the DiTs in, then sends them back."""
    if layout.dit != "offload-model":
        yield
        return
    for dit in dits:
        dit.to(device)
    try:
        yield
    finally:
        for dit in dits:
            dit.to("cpu")
        if device.type == "cuda":
            torch.cuda.empty_cache()
