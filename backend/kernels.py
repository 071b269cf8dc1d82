"""The attention kernels a backend may run its DiT with (`--attention`), and the rule that
picks one for a device and a plan.

Torch-free: the config and the frontends import it. `parallel/attention.py` registers the
kernels with diffusers' attention dispatch and switches a job to the one chosen here.

`auto` picks, in order (never a lossy kernel: only `sage` is lossy, and only when asked):
- a plan with ring attention: `cudnn` (ring merges partial results by their log-sum-exp,
  which only cuDNN and flash return here);
- CUDA with compute capability >= 9.0 and flash-attn-4 installed: `flash4`;
- otherwise `sdpa` (torch's `scaled_dot_product_attention`, which picks its own backend).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

AUTO = "auto"


@dataclass(frozen=True)
class Kernel:
    """One attention kernel as `--attention` names it."""

    name: str
    summary: str
    cuda: bool = False
    """Runs on CUDA devices only."""
    min_capability: tuple[int, int] | None = None
    """The lowest CUDA compute capability it runs on (None: any)."""
    module: str | None = None
    """The module it imports (an optional extra), None for torch's own kernels."""
    extra: str | None = None
    """`pip install 'paradit[EXTRA]'` installs `module`."""
    lossy: bool = False
    """Quantizes inside the kernel: its output differs from exact attention beyond rounding
    (`paradit verify --against-kernel sdpa` measures by how much)."""
    returns_lse: bool = False
    """Returns the log-sum-exp with its output, which ring attention needs to merge blocks."""


KERNELS: dict[str, Kernel] = {
    kernel.name: kernel
    for kernel in (
        Kernel("sdpa", "torch's scaled_dot_product_attention; torch picks its backend"),
        Kernel("math", "torch's math SDPA backend: the reference, slow"),
        Kernel(
            "cudnn",
            "torch's cuDNN attention (bf16/fp16)",
            cuda=True,
            min_capability=(8, 0),
            returns_lse=True,
        ),
        Kernel(
            "flash",
            "torch's FlashAttention-2 SDPA backend (bf16/fp16)",
            cuda=True,
            min_capability=(8, 0),
            returns_lse=True,
        ),
        Kernel("efficient", "torch's memory-efficient SDPA backend", cuda=True),
        Kernel(
            "sage",
            "SageAttention (sageattention 1.x, Triton): int8 Q/K, lossy",
            cuda=True,
            min_capability=(8, 0),
            module="sageattention",
            extra="sage",
            lossy=True,
        ),
        Kernel(
            "flash4",
            "FlashAttention 4 (flash-attn-4, CuTe DSL)",
            cuda=True,
            min_capability=(9, 0),
            module="flash_attn.cute",
            extra="flash4",
        ),
    )
}
ATTENTION_CHOICES: tuple[str, ...] = (AUTO, *KERNELS)


@dataclass(frozen=True)
class Choice:
    """The kernel a backend runs with, and why."""

    asked: str
    """What `--attention` said (`auto` or a kernel)."""
    kernel: str
    reason: str

    def to_dict(self) -> dict[str, object]:
        spec = KERNELS[self.kernel]
        return {
            "asked": self.asked,
            "kernel": self.kernel,
            "lossy": spec.lossy,
            "reason": self.reason,
        }


def device_refusal(name: str, device_type: str) -> str | None:
    """Why kernel `name` cannot run on a `device_type` device at all, or None."""
    spec = KERNELS[name]
    if spec.cuda and device_type != "cuda":
        return (
            f"--attention {name} needs a CUDA device ({spec.summary}); this backend runs on "
            f"{device_type}: use --attention sdpa or auto"
        )
    return None


def choose_kernel(
    asked: str,
    *,
    device_type: str,
    capability: tuple[int, int] | None = None,
    installed: Callable[[str], bool],
    ring: bool = False,
) -> Choice:
    """The kernel for `asked` on this device and plan; ValueError with the reason when it
    cannot run here. `installed(module)` says whether an optional kernel's module imports;
    `ring`: the plan splits the sequence with ring attention."""
    if asked not in ATTENTION_CHOICES:
        choices = ", ".join(ATTENTION_CHOICES)
        raise ValueError(f"--attention must be one of {choices}, got {asked!r}")
    if asked == AUTO:
        return _auto(device_type, capability, installed, ring)
    spec = KERNELS[asked]
    refusal = device_refusal(asked, device_type)
    if refusal is not None:
        raise ValueError(refusal)
    low = spec.min_capability
    if low is not None and capability is not None and capability < low:
        need, have = ".".join(map(str, low)), ".".join(map(str, capability))
        raise ValueError(
            f"--attention {asked} needs a GPU of compute capability >= {need}; this one is {have}"
        )
    if spec.module is not None and not installed(spec.module):
        raise ValueError(
            f"--attention {asked} needs the {spec.module} module: pip install "
            f"'paradit[{spec.extra}]'"
        )
    if ring and not spec.returns_lse:
        raise ValueError(
            f"--attention {asked} returns no log-sum-exp, which ring attention needs: use "
            "Ulysses (--ulysses-degree) or --attention cudnn or flash"
        )
    return Choice(asked, asked, "asked for")


def _auto(
    device_type: str,
    capability: tuple[int, int] | None,
    installed: Callable[[str], bool],
    ring: bool,
) -> Choice:
    if ring:
        return Choice(AUTO, "cudnn", "ring attention needs a kernel that returns the log-sum-exp")
    flash4 = KERNELS["flash4"]
    if (
        device_type == "cuda"
        and capability is not None
        and capability >= (flash4.min_capability or (0, 0))
        and installed(flash4.module or "")
    ):
        return Choice(AUTO, "flash4", "flash-attn-4 is installed and the GPU is sm90 or newer")
    return Choice(AUTO, "sdpa", "torch's SDPA: no faster lossless kernel for this device")
