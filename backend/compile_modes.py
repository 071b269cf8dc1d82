"""Regional compile of the DiT's repeated blocks (`--compile off|blocks|auto`): the modes and
the rule that picks one for a device and a memory layout.

Torch-free: the config and the frontends import it. `runtime/compiled.py` compiles the blocks,
warms them at start-up and counts the recompiles each job causes.

`auto` picks `blocks` on CUDA when Triton (inductor's GPU code generator) is installed and
`off` everywhere else: on CPU, inductor's C++ code for a DiT block gains little and its
compile adds minutes to every start; on a GPU a compiled block fuses the norms, modulation and
activations around the matmuls and attention (1.10x measured on one Wan block, docs/speed.md).
Neither mode compiles under the memory plan's group or sequential offload: their hooks move
the weights layer by layer inside a block (`--compile blocks` is refused there; `auto` says
why it is off).
"""

from __future__ import annotations

from dataclasses import dataclass

AUTO, OFF, BLOCKS = "auto", "off", "blocks"
COMPILE_MODES = (OFF, BLOCKS, AUTO)
LAYER_OFFLOADS = ("group", "sequential")
"""Offload modes whose hooks sit on the layers inside a block (`--offload`)."""


@dataclass(frozen=True)
class CompileChoice:
    """The compile mode a backend runs with, and why."""

    asked: str
    """What `--compile` said."""
    mode: str
    """`off` or `blocks`."""
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"asked": self.asked, "mode": self.mode, "reason": self.reason}


def offload_refusal(offload: str) -> str | None:
    """Why `--compile blocks` cannot run with DiT offload `offload` (`Layout.offload`, or the
    `--offload` flag), or None."""
    if offload in LAYER_OFFLOADS:
        return (
            f"--compile blocks cannot run with --offload {offload}: its hooks move the weights "
            "layer by layer inside each block, which a compiled block cannot hold; use "
            "--offload model or none, or --compile off"
        )
    return None


def choose_compile(
    asked: str, *, device_type: str, offload: str = "none", triton: bool = False
) -> CompileChoice:
    """The mode for `asked` on this device under the memory layout's DiT `offload`; ValueError
    with the reason when `blocks` cannot run here. `triton`: Triton imports (CUDA's inductor)."""
    if asked not in COMPILE_MODES:
        raise ValueError(f"--compile must be one of {', '.join(COMPILE_MODES)}, got {asked!r}")
    if asked == OFF:
        return CompileChoice(asked, OFF, "asked for")
    refusal = offload_refusal(offload)
    if asked == BLOCKS:
        if refusal is not None:
            raise ValueError(refusal)
        if device_type == "cuda" and not triton:
            raise ValueError("--compile blocks on CUDA needs Triton (pip install triton)")
        return CompileChoice(asked, BLOCKS, "asked for")
    if refusal is not None:
        return CompileChoice(asked, OFF, f"the DiT is offloaded layer by layer ({offload})")
    if device_type != "cuda":
        return CompileChoice(
            asked, OFF, f"on {device_type} a compiled block gains little for minutes of start-up"
        )
    if not triton:
        return CompileChoice(asked, OFF, "Triton is not installed (inductor's GPU code)")
    return CompileChoice(asked, BLOCKS, "CUDA with Triton: compiled blocks are faster")
