"""Stored dtype != compute dtype: linear layers that hold fp8, int8 or GGUF weights and upcast
them in their forward, one layer at a time (`--weights`, issues 39 and 52).

`QuantLinear` replaces an `nn.Linear` of a DiT's repeated blocks. Its `weight` parameter is
what the memory holds: fp8 (`float8_e4m3fn`/`e5m2`) or int8 with a float32 `weight_scale` per
row (int8 maybe ConvRot-rotated: `models/int8.py`), or a GGUF tensor's blocks as bytes (one row
of blocks per output row). Its forward forms the weight in the compute dtype exactly as
loading the file dequantized would (fp8/int8 -> float32, times the row's scale, int8
un-rotated in float32, rounded once to the compute dtype; GGUF blocks through diffusers' torch
dequantizers, checked equal to gguf-py's), so `--weights file` computes what `--weights bf16`
computes, byte for byte, with the weights held at their stored size.

Both parameters shard on dim 0 under FSDP2 like any other (a shard is a block of rows: fp8
rows or rows of GGUF blocks, and `weight_scale`'s rows are the same rows), so the all-gather
moves the stored bytes and each scale travels with its row. Biases, norms, embeddings and the
layers outside the repeated blocks stay in their dtype (as ComfyUI keeps them): the blocks'
linears are nearly all of a DiT's weight, and the root's first parameters keep the model's
`dtype` (what pipelines cast their latents to) the compute dtype.

Which layers are stored how is `plan_layers`: `file` keeps what the file holds, `fp8`
quantizes float weights at load with one scale per row (the row's largest magnitude maps to
the format's largest value) and keeps fp8 file layers as they are, `int8` alike in int8 (no
rotation; int8 file layers kept as they are, rotated or not), `bf16` (the compute dtype)
quantizes nothing, `auto` is `file` for a quantized file and `bf16` otherwise.

A job's LoRA on a `QuantLinear` never writes its stored rows: `lora_deltas` holds the job's
(layer change, strength) pairs and the forward adds each change to the upcast weight, in the
compute dtype, as the LoRA patcher adds it to a dequantized model's rows (`lora/patch.py`).
The next job finds the stored bytes untouched.

`fp8_compute`: fp8 layers multiply in fp8 with `torch._scaled_mm` (inputs scaled per row,
weights by their per-row scales); CUDA compute capability 8.9 or newer only (`fp8_refusal`).
`int8_compute`: int8 layers multiply in int8 (`int8.int8_linear`, W8A8 as ComfyUI runs it);
CUDA compute capability 8.0 or newer only (`int8_refusal`).

Libraries: GGUF blocks are dequantized by diffusers' torch functions
(`diffusers.quantizers.gguf.utils`). torchao's float8 weight-only tensors could hold the fp8
layers, but torchao is not a dependency, has no GGUF, its tensor subclass under FSDP2 was not
checked, and the `file` mode must equal the dequantization at load byte for byte (its own
dequantization order is not that): the layer is a plain module with ordinary parameters,
which FSDP2 shards like any other.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from . import int8
from .casting import keeps_float32

log = logging.getLogger(__name__)

FP8_DTYPES = {"F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2}
WEIGHTS_MODES = ("auto", "bf16", "fp8", "int8", "file")
FP8_COMPUTE_CAPABILITY = (8, 9)
INT8_COMPUTE_CAPABILITY = (8, 0)
UPCAST_BLOCK = 2**22
"""Values per block of rows a layer upcasts at a time (16 MiB of float32)."""


@dataclass(frozen=True)
class Stored:
    """How one linear layer's weight is held: `fp8` (`dtype`, a float32 scale per row), `int8`
    (a float32 scale per row; `group`: ConvRot's group size, 0 when not rotated) or `gguf`
    (`qtype`'s blocks as bytes); `quantize`: made from float weights at load (`fp8`/`int8`
    mode) rather than read as the file holds them."""

    kind: str
    dtype: torch.dtype = torch.uint8
    qtype: str = ""
    quantize: bool = False
    group: int = 0

    def __post_init__(self) -> None:
        if self.kind not in ("fp8", "int8", "gguf"):
            raise ValueError(f"a stored layer is fp8, int8 or gguf, got {self.kind!r}")
        if self.kind == "gguf" and (self.quantize or not self.qtype):
            raise ValueError("a gguf layer is read as its file holds it and names its type")
        if self.kind == "int8" and self.dtype != torch.int8:
            raise ValueError(f"an int8 layer holds torch.int8, got {self.dtype}")
        if self.group and (self.kind != "int8" or self.quantize):
            raise ValueError("only int8 layers read from a file are ConvRot-rotated")

    @property
    def name(self) -> str:
        """What `GET /v1/info` calls it: float8_e4m3fn, int8, Q8_0..."""
        return self.qtype or str(self.dtype).removeprefix("torch.")

    def row_bytes(self, in_features: int) -> int:
        """Bytes of one stored row of `in_features` values."""
        if self.kind != "gguf":
            return in_features
        block, block_bytes = _gguf_sizes(self.qtype)
        return in_features // block * block_bytes

    def holds(self, in_features: int) -> bool:
        """Whether rows of `in_features` values fit whole blocks (or rotation groups) of this
        storage."""
        if self.kind == "gguf":
            return in_features % _gguf_sizes(self.qtype)[0] == 0
        return not self.group or in_features % self.group == 0


def _gguf_sizes(qtype: str) -> tuple[int, int]:
    import gguf

    return gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[qtype]]


def gguf_upcastable(qtype: str) -> bool:
    """Whether a GGUF type has a torch dequantizer (diffusers'): such layers stay blocks."""
    import gguf
    from diffusers.quantizers.gguf.utils import dequantize_functions

    return gguf.GGMLQuantizationType[qtype] in dequantize_functions and qtype != "BF16"


def quantize_rows(values: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of float `values` as fp8 (or int8: `int8.quantize_rows`) `dtype` with one float32
    scale per row: each row's largest magnitude maps to the format's largest value (an all-zero
    row gets scale 1)."""
    if dtype == torch.int8:
        return int8.quantize_rows(values)
    flat = values.reshape(values.shape[0], -1).to(torch.float32)
    amax = flat.abs().amax(dim=1)
    scale = torch.where(amax > 0, amax / torch.finfo(dtype).max, torch.ones_like(amax))
    quantized = (flat / scale[:, None]).clamp(torch.finfo(dtype).min, torch.finfo(dtype).max)
    return quantized.to(dtype).reshape(values.shape), scale


def int8_refusal(device: torch.device) -> str | None:
    """Why `--int8-compute` cannot run on `device` (None: it can)."""
    if device.type != "cuda":
        return (
            f"--int8-compute needs a CUDA GPU of compute capability 8.0 or newer (int8 tensor "
            f"core matmuls); the device is {device.type}: its int8 weights are upcast in each "
            "layer's forward"
        )
    capability = torch.cuda.get_device_capability(device)
    if capability < INT8_COMPUTE_CAPABILITY:
        return (
            f"--int8-compute needs compute capability 8.0 or newer (Ampere, Ada, Hopper, "
            f"Blackwell); this GPU is {capability[0]}.{capability[1]}: leave it off (the int8 "
            "weights are upcast in each layer's forward)"
        )
    return None


def fp8_refusal(device: torch.device) -> str | None:
    """Why `--fp8-compute` cannot run on `device` (None: it can)."""
    if device.type != "cuda":
        return (
            f"--fp8-compute needs a CUDA GPU of compute capability 8.9 or newer (fp8 matmuls); "
            f"the device is {device.type}: its fp8 weights are upcast in each layer's forward"
        )
    capability = torch.cuda.get_device_capability(device)
    if capability < FP8_COMPUTE_CAPABILITY:
        return (
            f"--fp8-compute needs compute capability 8.9 or newer (fp8 tensor cores: Ada, "
            f"Hopper, Blackwell); this GPU is {capability[0]}.{capability[1]}: leave it off "
            "(the fp8 weights are upcast in each layer's forward)"
        )
    return None


class QuantLinear(torch.nn.Module):
    """A linear layer whose weight is held as `stored` says and upcast to `compute_dtype` in
    its forward (module docstring)."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool,
        stored: Stored,
        compute_dtype: torch.dtype,
        device: torch.device | str | None = None,
    ):
        super().__init__()
        if not stored.holds(in_features):
            raise ValueError(f"{stored.qtype} blocks do not divide rows of {in_features} values")
        self.in_features, self.out_features = in_features, out_features
        self.stored, self.compute_dtype = stored, compute_dtype
        shape = (out_features, stored.row_bytes(in_features))
        dtype = stored.dtype if stored.kind != "gguf" else torch.uint8
        self.weight = torch.nn.Parameter(
            torch.empty(shape, dtype=dtype, device=device), requires_grad=False
        )
        if stored.kind != "gguf":
            self.weight_scale = torch.nn.Parameter(
                torch.empty(out_features, dtype=torch.float32, device=device),
                requires_grad=False,
            )
        else:
            self.register_parameter("weight_scale", None)
        self.bias = (
            torch.nn.Parameter(
                torch.empty(out_features, dtype=compute_dtype, device=device), requires_grad=False
            )
            if bias
            else None
        )
        self.lora_deltas: list[tuple[Any, float]] = []
        """The running job's LoRA changes of this layer: (`lora.parse.LayerDelta`, strength)."""
        self.fp8_compute: str = ""
        """`--fp8-compute`: "rowwise" or "tensorwise" (`scaled_mm_linear`), "" when off."""
        self.int8_compute = False
        """`--int8-compute`: an int8 layer multiplies in int8 (`int8.int8_linear`)."""

    @property
    def weight_shape(self) -> tuple[int, int]:
        """The shape of the weight this layer computes with (out_features, in_features)."""
        return (self.out_features, self.in_features)

    def extra_repr(self) -> str:
        kind = self.stored.name + (f" convrot {self.stored.group}" if self.stored.group else "")
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}, stored={kind}, compute={self.compute_dtype}"
        )

    def upcast(self) -> torch.Tensor:
        """The weight in the compute dtype, as loading the file dequantized gives it, with the
        job's LoRA changes added as the patcher adds them to a dequantized weight. Formed in
        blocks of rows (`UPCAST_BLOCK` values): besides the result, only one block's float32
        product is ever held."""
        weight = torch.empty(self.weight_shape, dtype=self.compute_dtype, device=self.weight.device)
        step = max(1, UPCAST_BLOCK // max(self.in_features, 1))
        for start in range(0, self.out_features, step):
            rows = slice(start, min(start + step, self.out_features))
            if self.stored.kind == "fp8":
                values = self.weight[rows].to(torch.float32) * self.weight_scale[rows, None]
            elif self.stored.kind == "int8":  # the load-time dequantization's arithmetic
                values = int8.dequantize(
                    self.weight[rows], self.weight_scale[rows], self.stored.group
                )
            else:
                values = _gguf_values(self.weight[rows], self.stored.qtype, self.in_features)
            block = weight[rows]
            block.copy_(values)
            for layer, strength in self.lora_deltas:
                if layer.weight_rows(start, len(block), strength, values):  # float32 change
                    block.add_(values.to(block.dtype))
        return weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.int8_compute and not self.lora_deltas:
            return int8.int8_linear(x, self.weight, self.weight_scale, self.bias, self.stored.group)
        if self.fp8_compute and not self.lora_deltas:
            rowwise = self.fp8_compute == "rowwise"
            return scaled_mm_linear(x, self.weight, self.weight_scale, self.bias, rowwise)
        return F.linear(x, self.upcast(), self.bias)


def _gguf_values(blocks: torch.Tensor, qtype: str, in_features: int) -> torch.Tensor:
    """GGUF blocks (rows of bytes) dequantized to float32 rows with diffusers' torch
    functions."""
    import gguf
    from diffusers.quantizers.gguf.utils import dequantize_functions

    kind = gguf.GGMLQuantizationType[qtype]
    block, block_bytes = gguf.GGML_QUANT_SIZES[kind]
    flat = blocks.reshape(-1, block_bytes)
    values = dequantize_functions[kind](flat, block, block_bytes, dtype=torch.float32)
    return values.to(torch.float32).reshape(blocks.shape[0], in_features)


def scaled_mm_linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    weight_scale: torch.Tensor,
    bias: torch.Tensor | None,
    rowwise: bool = True,
) -> torch.Tensor:
    """`x @ (weight * scale).T + bias` as one fp8 matmul (`torch._scaled_mm`), the result in
    `x`'s dtype. `rowwise` (sm >= 9.0): `x`'s rows quantized to fp8 e4m3 with a scale each,
    and the weight's per-row scales as the output columns' scales, inside the matmul. Else
    (sm 8.9, whose fp8 matmul takes one scale per operand): `x` quantized with one scale, the
    product in float32, then each output column times its weight row's scale."""
    shape = x.shape
    rows = x.reshape(-1, shape[-1])
    if rowwise:
        q, x_scale = quantize_rows(rows, torch.float8_e4m3fn)
        out = torch._scaled_mm(  # noqa: SLF001 - torch's fp8 matmul (no public name yet)
            q,
            weight.t(),
            scale_a=x_scale.reshape(-1, 1),
            scale_b=weight_scale.reshape(1, -1).to(torch.float32),
            out_dtype=x.dtype,
        )
    else:
        q, x_scale = quantize_rows(rows.reshape(1, -1), torch.float8_e4m3fn)
        product = torch._scaled_mm(  # noqa: SLF001
            q.reshape(rows.shape),
            weight.t(),
            scale_a=x_scale.reshape(()),
            scale_b=torch.ones((), device=x.device),
            out_dtype=torch.float32,
        )
        out = (product * weight_scale.reshape(1, -1)).to(x.dtype)
    if bias is not None:
        out = out + bias.to(out.dtype)
    return out.reshape(*shape[:-1], weight.shape[0])


def fp8_matmul_fits(layer: QuantLinear) -> bool:
    """`torch._scaled_mm` takes fp8 e4m3 weights whose two sizes divide by 16."""
    return (
        layer.stored.kind == "fp8"
        and layer.stored.dtype == torch.float8_e4m3fn
        and layer.in_features % 16 == 0
        and layer.out_features % 16 == 0
    )


# -- which layers, and swapping them in -------------------------------------------------------


def resolve_mode(mode: str, quantized_source: bool) -> str:
    """`auto` -> `file` for a quantized file, else `bf16`; other modes as given."""
    if mode not in WEIGHTS_MODES:
        raise ValueError(f"--weights must be one of {', '.join(WEIGHTS_MODES)}, got {mode!r}")
    if mode == "auto":
        return "file" if quantized_source else "bf16"
    return mode


def candidate_linears(model: torch.nn.Module) -> Iterator[tuple[str, torch.nn.Linear]]:
    """The linear layers that may be stored quantized: those of the repeated blocks, but none
    under a module the model keeps in float32 or never casts (its `_keep_in_fp32_modules`,
    `_skip_layerwise_casting_patterns`: diffusers' own list of the layers that stay in their
    dtype when the rest is stored in fp8)."""
    keep = set(getattr(model, "_keep_in_fp32_modules", None) or [])
    skip = tuple(getattr(model, "_skip_layerwise_casting_patterns", None) or ())
    for list_name, child in model.named_children():
        if not isinstance(child, torch.nn.ModuleList):  # the blocks (as fsdp.transformer_blocks)
            continue
        for name, module in child.named_modules(prefix=list_name):
            if not isinstance(module, torch.nn.Linear) or "." not in name:
                continue
            if keeps_float32(name, keep) or any(p in name for p in skip):
                continue
            yield name, module


def plan_layers(
    model: torch.nn.Module, mode: str, stored_of: Callable[[str], Stored | None]
) -> dict[str, Stored]:
    """Module name -> how its weight is stored, for resolved `mode` (`file`, `fp8`, `bf16`);
    `stored_of(weight_name)` says what the source holds (None: floats)."""
    if mode == "bf16":
        return {}
    layers: dict[str, Stored] = {}
    for name, module in candidate_linears(model):
        held = stored_of(f"{name}.weight")
        if held is not None and not held.holds(module.in_features):
            held = None
        if mode == "file" and held is not None:
            layers[name] = held
        elif mode == "fp8":
            keep = held is not None and held.kind == "fp8"
            layers[name] = held if keep else Stored("fp8", torch.float8_e4m3fn, quantize=True)
        elif mode == "int8":
            keep = held is not None and held.kind == "int8"
            layers[name] = held if keep else Stored("int8", torch.int8, quantize=True)
    return layers


def swap_in(model: torch.nn.Module, layers: dict[str, Stored]) -> int:
    """Replace the named linears by `QuantLinear`s (on the linears' device: meta before a
    load fills them); returns how many."""
    for name, stored in layers.items():
        linear = model.get_submodule(name)
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        replacement = QuantLinear(
            linear.in_features,
            linear.out_features,
            linear.bias is not None,
            stored,
            linear.weight.dtype,
            device=linear.weight.device,
        )
        setattr(parent, child, replacement)
    if layers:
        kinds = sorted({s.name for s in layers.values()})
        log.info("%d linear layers stored as %s", len(layers), ", ".join(kinds))
    return len(layers)


def store_layers(
    model: torch.nn.Module,
    mode: str,
    quantized_source: bool = False,
    stored_of: Callable[[str], Stored | None] | None = None,
) -> int:
    """Swap in the `QuantLinear`s `--weights mode` asks of a model built on the meta device
    (before sharding and filling); `stored_of`: what its source holds (single files)."""
    resolved = resolve_mode(mode, quantized_source)
    return swap_in(model, plan_layers(model, resolved, stored_of or (lambda _: None)))


def quantize_loaded(model: torch.nn.Module, mode: str = "fp8") -> int:
    """`--weights fp8`/`int8` on a model already loaded in floats (a folder or preset that was
    not loaded shard by shard): each candidate linear's weight quantized per row, in place."""
    layers = plan_layers(model, mode, lambda _: None)
    weights = {name: model.get_submodule(name) for name in layers}
    swap_in(model, layers)
    with torch.no_grad():
        for name, linear in weights.items():
            layer = model.get_submodule(name)
            layer.weight.data, layer.weight_scale.data = quantize_rows(
                linear.weight.data, layer.stored.dtype
            )
            if linear.bias is not None:
                layer.bias.data = linear.bias.data
    return len(layers)


def quant_linears(model: torch.nn.Module) -> dict[str, QuantLinear]:
    return {n: m for n, m in model.named_modules() if isinstance(m, QuantLinear)}


def logical_parameters(model: torch.nn.Module) -> Iterator[tuple[str, tuple[int, ...]]]:
    """Each parameter's name and the shape of the values it stands for: a `QuantLinear`'s
    weight as (out_features, in_features) whatever its storage, its scales left out (they are
    part of its weight, in no checkpoint or LoRA under their own name)."""
    layers = quant_linears(model)
    scales = {f"{name}.weight_scale" for name in layers}
    weights = {f"{name}.weight": layer.weight_shape for name, layer in layers.items()}
    for name, param in model.named_parameters():
        if name not in scales:
            yield name, weights.get(name, tuple(param.shape))


def stored_summary(models: list[torch.nn.Module]) -> dict[str, int]:
    """How many linear layers each storage holds ({"float8_e4m3fn": 240, "int8": 60,
    "Q8_0": 12}; {} when
    every weight is in the compute dtype): `GET /v1/info`'s `weights.stored`."""
    counts: dict[str, int] = {}
    for model in models:
        for layer in quant_linears(model).values():
            kind = layer.stored.name
            counts[kind] = counts.get(kind, 0) + 1
    return counts


def set_fp8_compute(models: list[torch.nn.Module], device: torch.device) -> int:
    """Turn the fp8 matmul on in every fp8 `QuantLinear` it fits (`fp8_matmul_fits`): row-wise
    scales on sm >= 9.0, one input scale on sm 8.9 (and on CPU, for tests); returns how many."""
    rowwise = device.type != "cuda" or torch.cuda.get_device_capability(device) >= (9, 0)
    count = 0
    for model in models:
        for layer in quant_linears(model).values():
            if fp8_matmul_fits(layer):
                layer.fp8_compute = "rowwise" if rowwise else "tensorwise"
                count += 1
    return count


def set_int8_compute(models: list[torch.nn.Module]) -> int:
    """Turn the int8 matmul on in every int8 `QuantLinear` whose sizes `torch._int_mm` takes
    (both divisible by 8); returns how many."""
    count = 0
    for model in models:
        for layer in quant_linears(model).values():
            if layer.stored.kind == "int8" and layer.in_features % 8 == 0 == layer.out_features % 8:
                layer.int8_compute = True
                count += 1
    return count
