"""The attention kernel a job's DiT runs with, switched through diffusers' attention dispatch.

Every diffusers attention processor paradit runs calls `dispatch_attention_fn` with its own
`_attention_backend`, which is None unless someone set one: the dispatch then runs the
registry's active backend. `active(kernel)` makes the chosen kernel the active backend for the
length of a job (and restores the one before), so the switch reaches every processor that
dispatches, with or without sequence parallelism.

- `sdpa`, `cudnn` and `flash` are diffusers' own backends (`native`, `_native_cudnn`,
  `_native_flash`); they run Ulysses, and cuDNN and flash ring too (they return the
  log-sum-exp).
- `math`, `efficient`, `sage` and `flash4` are registered here, as `paradit_<name>`, from a
  plain attention function (`Attend`): without a parallel config it is called as it is; with
  one, diffusers' templated context-parallel attention runs it between its Ulysses
  all-to-alls. None of them returns the log-sum-exp, so none runs ring attention
  (`kernels.choose_kernel` refuses that at start). diffusers' own `_native_math` and
  `_native_efficient` ignore the parallel config (each rank would attend over its own shard
  alone), and its `sage` backend needs sageattention >= 2.1.1, so ours are used instead.
  diffusers' backend names are a closed enum, so ours are registered under string keys and
  reached through the active backend only, never through `set_attention_backend`.

Processors that call torch's SDPA themselves (CogVideoX's) are swapped by `reach` for their
family's dispatching processor (`FamilySpec.attention_dispatch`); a kernel other than `sdpa` is
refused for a model that still has one that does not dispatch (HunyuanVideo 1.5's token
refiner).

Shapes: B batch, S sequence, H heads, D head dim.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
from collections.abc import Callable, Iterator
from typing import Any

import torch

from ..diffusers_internals import require

log = logging.getLogger(__name__)

Attend = Callable[
    [torch.Tensor, torch.Tensor, torch.Tensor, "torch.Tensor | None", "float | None"],
    torch.Tensor,
]
"""A plain attention: (q_BSHD, k_BSHD, v_BSHD, attn_mask, scale) -> out_BSHD."""

DIFFUSERS_BACKENDS = {"sdpa": "native", "cudnn": "_native_cudnn", "flash": "_native_flash"}
"""Kernels diffusers registers itself, by its backend names."""
OWN_PREFIX = "paradit_"

FEATURE = "the attention kernel switch"


def installed(module: str) -> bool:
    """Whether `module` (dotted) can be imported, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a missing parent package
        return False


def register_kernel(name: str, attend: Attend) -> str:
    """Register `attend` with diffusers' dispatch as backend `paradit_<name>` (again: replaced);
    returns the backend's key. The backend runs Ulysses through diffusers' templated
    context-parallel attention; it refuses ring (no log-sum-exp), causal attention, dropout
    and grouped-query attention."""
    registry, _register, _activate, templated = require(
        FEATURE,
        "attention_dispatch._AttentionBackendRegistry",
        "attention_dispatch._AttentionBackendRegistry.register",
        "attention_dispatch._AttentionBackendRegistry.set_active_backend",
        "attention_dispatch._templated_context_parallel_attention",
    )
    key = OWN_PREFIX + name

    def forward_op(
        ctx: Any,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attn_mask: torch.Tensor | None = None,
        dropout_p: float = 0.0,
        is_causal: bool = False,
        scale: float | None = None,
        enable_gqa: bool = False,
        return_lse: bool = False,
        _save_ctx: bool = True,
        _parallel_config: Any = None,
    ) -> torch.Tensor:
        if return_lse:
            raise ValueError(f"--attention {name} returns no log-sum-exp (ring needs it)")
        return attend(query, key, value, attn_mask, scale)

    def no_backward(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError(f"--attention {name} is for inference: it has no backward")

    def backend(
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attn_mask: torch.Tensor | None = None,
        dropout_p: float = 0.0,
        is_causal: bool = False,
        scale: float | None = None,
        enable_gqa: bool = False,
        return_lse: bool = False,
        _parallel_config: Any = None,
    ) -> torch.Tensor:
        if is_causal or dropout_p or enable_gqa:
            raise ValueError(
                f"--attention {name} takes no causal mask, dropout or grouped-query attention"
            )
        if _parallel_config is None:
            return forward_op(None, query, key, value, attn_mask, scale=scale)
        return templated(
            query,
            key,
            value,
            attn_mask,
            dropout_p,
            is_causal,
            scale,
            enable_gqa,
            return_lse,
            forward_op=forward_op,
            backward_op=no_backward,
            _parallel_config=_parallel_config,
        )

    registry.register(key)(backend)
    return key


def _sdpa_attend(which: torch.nn.attention.SDPBackend) -> Attend:
    """torch's SDPA restricted to one of its backends."""

    def attend(q_BSHD, k_BSHD, v_BSHD, attn_mask, scale):
        q, k, v = (x.transpose(1, 2) for x in (q_BSHD, k_BSHD, v_BSHD))
        with torch.nn.attention.sdpa_kernel(which):
            out_BHSD = torch.nn.functional.scaled_dot_product_attention(
                q, k, v, attn_mask=attn_mask, scale=scale
            )
        return out_BHSD.transpose(1, 2)

    return attend


def _no_mask(name: str, attn_mask: torch.Tensor | None) -> None:
    if attn_mask is not None:
        raise ValueError(
            f"--attention {name} takes no attention mask, and this model attends with one: "
            "use --attention sdpa"
        )


def _sage_attend() -> Attend:
    """SageAttention's `sageattn` (1.x's signature; 2.x keeps it), in NHD layout (= BSHD)."""
    from sageattention import sageattn

    def attend(q_BSHD, k_BSHD, v_BSHD, attn_mask, scale):
        _no_mask("sage", attn_mask)
        sm_scale = scale if scale is not None else q_BSHD.shape[-1] ** -0.5
        return sageattn(
            q_BSHD, k_BSHD, v_BSHD, tensor_layout="NHD", is_causal=False, sm_scale=sm_scale
        )

    return attend


def _flash4_attend() -> Attend:
    """flash-attn-4's `flash_attn_func` (batch, seq, heads, dim), which returns (out, lse)."""
    from flash_attn.cute import flash_attn_func

    def attend(q_BSHD, k_BSHD, v_BSHD, attn_mask, scale):
        _no_mask("flash4", attn_mask)
        result = flash_attn_func(q_BSHD, k_BSHD, v_BSHD, softmax_scale=scale, causal=False)
        return result[0] if isinstance(result, tuple) else result

    return attend


OWN: dict[str, Callable[[], Attend]] = {
    "math": lambda: _sdpa_attend(torch.nn.attention.SDPBackend.MATH),
    "efficient": lambda: _sdpa_attend(torch.nn.attention.SDPBackend.EFFICIENT_ATTENTION),
    "sage": _sage_attend,
    "flash4": _flash4_attend,
}
"""The kernels registered here, each imported when first used."""


def backend_key(kernel: str) -> Any:
    """The diffusers registry key that runs `kernel` (ours registered on first use)."""
    if kernel in DIFFUSERS_BACKENDS:
        (names,) = require(FEATURE, "attention_dispatch.AttentionBackendName")
        return names(DIFFUSERS_BACKENDS[kernel])
    (registry,) = require(FEATURE, "attention_dispatch._AttentionBackendRegistry")
    key = OWN_PREFIX + kernel
    if key not in registry._backends:
        register_kernel(kernel, OWN[kernel]())
    return key


@contextlib.contextmanager
def active(key: Any) -> Iterator[None]:
    """Run the attention of every dispatching processor without a backend of its own through
    backend `key` (`backend_key`, or a test's `register_kernel`) until the block ends."""
    (registry,) = require(FEATURE, "attention_dispatch._AttentionBackendRegistry")
    if key not in registry._backends:
        raise ValueError(f"attention backend {key!r} is not registered")
    before = registry._active_backend
    registry.set_active_backend(key)
    try:
        yield
    finally:
        registry.set_active_backend(before)


def keep_eager(key: Any) -> None:
    """Run backend `key` eagerly when compiled code calls it (`--compile blocks`): the
    compiled pieces of a block end before its attention and resume after it. dynamo cannot
    trace diffusers' Ulysses all-to-alls over a process group, and an attention kernel is
    opaque to inductor anyway. Once per key."""
    (registry,) = require(FEATURE, "attention_dispatch._AttentionBackendRegistry")
    backend = registry._backends[key]
    if not getattr(backend, "paradit_eager", False):
        eager = torch.compiler.disable(backend)
        eager.paradit_eager = True
        registry._backends[key] = eager


def reach(transformer: torch.nn.Module, kernel: str) -> None:
    """Make every attention processor of `transformer` dispatch (its family's dispatching
    processors where it has SDPA-calling ones), for any kernel but `sdpa`, whose processors
    stay as diffusers made them. ValueError naming the processor that cannot be reached."""
    if kernel == "sdpa":
        return
    from ..models.families import attention_dispatch_for  # the families': their specs

    install = attention_dispatch_for(type(transformer).__name__)
    if install is not None:
        install(transformer)
    for name, module in transformer.named_modules():
        processor = getattr(module, "processor", None)
        if processor is not None and not hasattr(processor, "_attention_backend"):
            raise ValueError(
                f"--attention {kernel} cannot reach {type(transformer).__name__}'s "
                f"{type(processor).__name__} ({name}): it calls torch's SDPA itself; use "
                "--attention sdpa"
            )


def device_capability(device: torch.device) -> tuple[int, int] | None:
    """The CUDA compute capability of `device`, None off CUDA."""
    if device.type != "cuda":
        return None
    return tuple(torch.cuda.get_device_capability(device))  # type: ignore[return-value]


SPY_ENV = "PARADIT_ATTENTION_SPY"
"""Test-only: a folder where each rank writes `rank<N>.json`, its last job's `Spy` counts."""


class Spy(torch.overrides.TorchFunctionMode):
    """Counts the calls of attention backend `key` and the SDPA calls made outside it (those
    a processor makes itself, which the kernel switch did not reach). Test-only."""

    def __init__(self, key: Any):
        super().__init__()
        self.key = key
        self.calls = 0
        self.bypassed = 0
        self._inside = 0
        self._original: Callable[..., Any] | None = None

    def __enter__(self) -> Spy:
        (registry,) = require(FEATURE, "attention_dispatch._AttentionBackendRegistry")
        original = self._original = registry._backends[self.key]

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            self._inside += 1
            try:
                return original(*args, **kwargs)
            finally:
                self._inside -= 1

        registry._backends[self.key] = counted
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        (registry,) = require(FEATURE, "attention_dispatch._AttentionBackendRegistry")
        registry._backends[self.key] = self._original
        super().__exit__(*exc)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.nn.functional.scaled_dot_product_attention and not self._inside:
            self.bypassed += 1
        return func(*args, **(kwargs or {}))

    def to_dict(self) -> dict[str, Any]:
        backend = str(getattr(self.key, "value", self.key))
        return {"backend": backend, "calls": self.calls, "bypassed": self.bypassed}
