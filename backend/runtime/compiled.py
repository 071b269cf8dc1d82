"""Regional compile on one rank (`--compile blocks`): the DiT's repeated blocks compiled, warmed
at start-up, and the compilations each job causes counted.

Each repeated block's own `forward` is replaced by `torch.compile` of it, on every rank, before
the plan's hooks go on. What is compiled is the block's arithmetic only: the hooks around a
block stay eager and outside it, because they are installed on the module afterwards (FSDP2's
all-gathers and the work counter are module hooks; the step cache's and the context-parallel
split's diffusers hooks wrap the compiled `forward`). diffusers' `compile_repeated_blocks` is
not used for that reason: it compiles each block's whole call (`nn.Module.compile`), hooks
included, and the step cache's decisions (a collective and a branch per step) would be traced.

The blocks of one class share one code object, so dynamo compiles a block class once for all
blocks (and for both Wan 2.2 experts); the weights are inputs of the compiled graph, so a LoRA
switch (it rewrites weight rows in place) compiles nothing. A new shape (another size or frame
count) recompiles once with dynamic shapes (torch's automatic dynamic shapes), which then
serve later sizes; torch's `recompile_limit` (8 per code object) bounds the rest, after which
the block runs eagerly.

`CompileCounter` counts dynamo's compilations in this process through its compile-start
callback (a process-wide registration, as dynamo's cache is); `job.run_on_rank` records a
job's count in job.json's `compile`.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from ..parallel.fsdp import transformer_blocks

log = logging.getLogger(__name__)


class CompileCounter:
    """dynamo's compilations in this process (each new frame or recompile), counted from its
    compile-start callback."""

    def __init__(self) -> None:
        self.count = 0
        self.compiling = False
        """dynamo is compiling now (between its outermost start and end callbacks)."""

    def started(self, args: Any) -> None:
        from torch._dynamo.callback import CallbackTrigger

        self.compiling = True
        if args.callback_trigger == CallbackTrigger.DYNAMO:
            self.count += 1

    def ended(self, _args: Any) -> None:
        self.compiling = False

    def busy(self) -> bool:
        """Compiling now: the rank works without its blocks ticking (`Progress.working`)."""
        return self.compiling


_counter: CompileCounter | None = None


def compile_counter() -> CompileCounter:
    """This process's counter, registered with dynamo on first use (its callbacks are
    process-wide)."""
    global _counter
    if _counter is None:
        from torch._dynamo.callback import callback_handler

        _counter = CompileCounter()
        callback_handler.register_start_callback(_counter.started)
        callback_handler.register_end_callback(_counter.ended)
    return _counter


def repeated_blocks(transformer: torch.nn.Module) -> list[torch.nn.Module]:
    """The blocks a DiT repeats: the modules of the classes its `_repeated_blocks` names
    (diffusers' declaration), else every item of its top-level ModuleLists."""
    names = set(getattr(transformer, "_repeated_blocks", None) or ())
    if names:
        return [m for m in transformer.modules() if type(m).__name__ in names]
    return transformer_blocks(transformer)


def cpu_compile_threads() -> None:
    """On a CPU backend, inductor compiles with the rank's own threads (its ranks share the
    machine's cores; by default each would start a pool of workers for every core)."""
    import torch._inductor.config

    torch._inductor.config.compile_threads = torch.get_num_threads()


def compile_blocks(transformer: torch.nn.Module) -> list[torch.nn.Module]:
    """Replace each repeated block's `forward` by its compiled self (before any hook goes on:
    the hooks then wrap the compiled forward); returns the blocks. No hook may go on a
    module inside them (dynamo would trace it: `Progress.watch`'s `opaque`)."""
    blocks = repeated_blocks(transformer)
    if not blocks:
        raise ValueError(
            f"--compile blocks: {type(transformer).__name__} has no repeated blocks to compile"
        )
    for block in blocks:
        block.forward = torch.compile(block.forward)
    return blocks
