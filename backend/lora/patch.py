"""A job's LoRAs on this rank's own weights: checked, applied before its first step, removed
after its last.

FSDP2 shards dim 0 of every parameter, so a rank holds a block of rows of each weight (all of
it when the weights are not sharded). For each weight a LoRA changes, the rank saves a copy of
the rows it holds, adds `(B[rows] @ A) * scale * strength` to them, and after the job copies
the saved rows back: the next job starts from the exact bytes it would have started from
(subtracting the change again would leave rounding behind). Each data-parallel replica's ranks
apply their own job's LoRAs; no rank ever gathers a whole weight.

A layer stored quantized (`models.quantized.QuantLinear`: fp8 or GGUF rows, `--weights`) is
never written: its rows are not in the compute dtype, and rounding a changed weight back to
fp8 would lose the change. The job's changes of it are handed to the layer instead
(`lora_deltas`), and its forward adds each, rounded to the compute dtype, to the weight it
upcasts: the same sums, in the same order, as on the dequantized model's rows. After the job
the list is emptied; the stored bytes were never touched.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.distributed.tensor import DTensor

from ..models.quantized import QuantLinear, logical_parameters, quant_linears
from ..models.sharded_load import shard_rows
from ..parallel.fsdp import ModelStateError
from ..request import lora_strengths
from .buffers import RankBuffers
from .library import Lora, LoraLibrary
from .parse import LayerDelta, LoraError

log = logging.getLogger(__name__)

MAX_LISTED = 3


@dataclass(frozen=True)
class JobLora:
    """One LoRA of a job as rank 0 resolved it (what the control message carries)."""

    name: str
    sha256: str
    strengths: dict[str, float]
    """DiT component ("transformer", "transformer_2") -> strength."""

    def record(self, item: Mapping[str, Any]) -> dict[str, Any]:
        """job.json's entry: the name, the strengths as the request gave them, the sha256."""
        return {**item, "sha256": self.sha256}


@dataclass(frozen=True)
class SavedRows:
    """One changed parameter's rows on this rank, as they were before the job's LoRAs."""

    where: tuple[torch.nn.Module, str]
    """The DiT and the parameter's name in it."""
    param: torch.Tensor
    rows: torch.Tensor
    """The copy (a view of the kept buffer)."""
    storage: int
    """The address of the parameter's local rows when they were saved."""

    def restore(self) -> None:
        """Copy the rows back; ModelStateError, writing nothing, when the parameter is no
        longer the one saved from or its rows moved (a forward left it unsharded)."""
        dit, name = self.where
        _, _, local = shard_rows(self.param)
        if dict(dit.named_parameters()).get(name) is not self.param or (
            local.data_ptr() != self.storage
        ):
            raise ModelStateError(
                f"LoRA rows of {name} not restored: the parameter is not the one they were "
                "saved from (the model left its between-jobs state)"
            )
        local.copy_(self.rows)


@dataclass
class Applied:
    """What one job changed on this rank, to be put back."""

    saved: list[SavedRows] = field(default_factory=list)
    """Each changed parameter and the copy of this rank's rows of it, as they were (emptied
    once they are back)."""
    saved_bytes: int = 0
    apply_s: float = 0.0
    remove_s: float = 0.0
    layers: list[QuantLinear] = field(default_factory=list)
    """The stored-quantized layers given the job's changes (emptied after the job)."""
    apply_cpu_s: float = 0.0
    """CPU seconds of this thread while applying: on a shared CPU machine, what the work
    itself took (the wall time also counts the other processes' turns)."""


class LoraPatcher:
    """A rank's LoRA work: resolve and check a job's LoRAs (rank 0, at submit and run time),
    apply them to the rank's rows and restore them (every rank of the job's replica)."""

    def __init__(
        self,
        library: LoraLibrary,
        pipeline: type,
        dits: Mapping[str, torch.nn.Module],
        refuse: str = "",
        tick: Callable[[], None] = lambda: None,
    ):
        self.library = library
        self.refuse = refuse
        self.tick = tick
        """The rank's work counter (`runtime.progress`), ticked per weight patched and put
        back: a large LoRA is work, not a hang."""
        """Why this backend takes no LoRA ("" when it does): the offload hooks of
        `--offload group`/`sequential` keep their own copies of the weights."""
        self.pipeline = pipeline
        self.dits = dict(dits)
        self.buffers = RankBuffers()
        """Host memory for saved rows and scratch, kept from job to job (`buffers.py`)."""
        self._shapes = {
            component: dict(logical_parameters(dit)) for component, dit in self.dits.items()
        }
        self._quantized = {component: quant_linears(dit) for component, dit in self.dits.items()}
        """The stored-quantized layers, by module name: their changes go to the forward."""
        self._sharded = {
            component: {name for name, p in dit.named_parameters() if isinstance(p, DTensor)}
            for component, dit in self.dits.items()
        }
        """The parameters FSDP2 shards: between jobs each must be a DTensor."""

    def to_dict(self) -> dict[str, Any]:
        """`GET /v1/info`'s `loras`: the folders, the cache, and the DiTs a LoRA can reach
        (two: Wan 2.2's experts, which take `high`/`low` strengths)."""
        return {
            **self.library.to_dict(),
            "buffer_bytes": self.buffers.nbytes,
            "experts": list(self.dits),
        }

    def resolve(self, items: list[dict[str, Any]] | None) -> list[JobLora]:
        """A request's `loras`, loaded and checked against the model; LoraError (a
        ValueError: 4xx) naming the LoRA and the reason."""
        out = []
        for item in items or []:
            if self.refuse:
                raise LoraError(
                    f"LoRA {item['name']!r}: {self.refuse} (start the backend with --offload "
                    "none, model or auto on more GPUs)"
                )
            if "high" in item and "transformer_2" not in self.dits:
                raise LoraError(
                    f"LoRA {item['name']!r}: high/low strengths are for Wan 2.2's two experts; "
                    "this model has one transformer: give strength"
                )
            lora = self.library.load(item["name"], self.pipeline)
            self._check(lora)
            strengths = {c: s for c, s in lora_strengths(item).items() if c in self.dits}
            out.append(JobLora(lora.name, lora.sha256, strengths))
        return out

    def _check(self, lora: Lora) -> None:
        """Every layer of the LoRA is a layer of the DiT, with the DiT's shapes."""
        shapes = self._shapes["transformer"]
        missing = [m for m, layer in lora.layers.items() if not _fits_names(m, layer, shapes)]
        if missing:
            raise LoraError(
                f"LoRA {lora.name!r}: {len(missing)} of its {len(lora.layers)} layers are not "
                f"layers of this model (e.g. {', '.join(sorted(missing)[:MAX_LISTED])}): it is "
                "a LoRA for another model"
            )
        for module, layer in sorted(lora.layers.items()):
            want = layer.weight_shape
            have = shapes.get(f"{module}.weight")
            if want is not None and want != have:
                hint = _misfit_hint(self.pipeline)
                raise LoraError(
                    f"LoRA {lora.name!r}: layer {module} changes a {_shape(want)} weight, the "
                    f"model's is {_shape(have)}: it is a LoRA for another model"
                    + (f" ({hint})" if hint else "")
                )
            if layer.bias is not None and (tuple(layer.bias.shape) != shapes.get(f"{module}.bias")):
                raise LoraError(
                    f"LoRA {lora.name!r}: layer {module}'s bias change does not fit the model's"
                )

    @contextlib.contextmanager
    def applied(self, loras: list[JobLora]) -> Iterator[Applied | None]:
        """The job's LoRAs on this rank's rows for the duration of the block (restored even
        when the job fails or is cancelled). Yields the job's `Applied` (its timings and the
        bytes it saved; `remove_s` once the block has ended), None without LoRAs."""
        if not loras:
            yield None
            return
        applied = Applied()
        begin, cpu = time.perf_counter(), time.thread_time()
        try:
            with torch.no_grad():
                steps = self._steps(loras)
                touched = self._touched(steps)
                slots = self.buffers.rows_for([local for _, _, local in touched])
                for (where, param, local), slot in zip(touched, slots, strict=True):
                    slot.copy_(local)
                    applied.saved.append(SavedRows(where, param, slot, local.data_ptr()))
                    applied.saved_bytes += slot.numel() * slot.element_size()
                for lora, component, strength in steps:
                    self._apply(lora, component, strength, applied)
            applied.apply_s = time.perf_counter() - begin
            applied.apply_cpu_s = time.thread_time() - cpu
            self.buffers.release_device_scratch()  # before the steps need the device memory
            yield applied
        finally:
            begin = time.perf_counter()
            try:
                for layer in applied.layers:
                    layer.lora_deltas.clear()
                with torch.no_grad():
                    for saved in applied.saved:
                        saved.restore()
                        self.tick()
            finally:
                applied.saved.clear()  # views of the kept buffer: not held past the job
                applied.layers.clear()
            applied.remove_s = time.perf_counter() - begin
            self.buffers.release_device_scratch()
            log.info(
                "LoRAs %s: applied in %.3fs, removed in %.3fs (%.1f MiB of rows saved)",
                [lora.name for lora in loras],
                applied.apply_s,
                applied.remove_s,
                applied.saved_bytes / 2**20,
            )

    def _steps(self, loras: list[JobLora]) -> list[tuple[Lora, str, float]]:
        """(LoRA, DiT component, strength) in the order they apply; LoraError when a file is
        not the one rank 0 checked."""
        steps = []
        for job_lora in loras:
            lora = self.library.load(job_lora.name, self.pipeline)
            if lora.sha256 != job_lora.sha256:
                raise LoraError(f"LoRA {job_lora.name!r}: the file changed since it was checked")
            steps += [(lora, c, s) for c, s in job_lora.strengths.items() if s]
        return steps

    def _touched(self, steps: list[tuple[Lora, str, float]]) -> list[tuple[Any, Any, torch.Tensor]]:
        """Every parameter the steps change on this rank (once each): (its DiT and name, the
        parameter, its local rows)."""
        touched: dict[int, tuple[Any, Any, torch.Tensor]] = {}
        for lora, component, _ in steps:
            params = self._params(component)
            for module, layer in lora.layers.items():
                for kind, changes in (("weight", layer.weight_shape), ("bias", layer.bias)):
                    if kind == "weight" and module in self._quantized[component]:
                        continue  # changed in its forward, never written
                    name = f"{module}.{kind}"
                    param = params.get(name)
                    if param is None or changes is None or id(param) in touched:
                        continue
                    _, rows, local = shard_rows(param)
                    if local.is_meta:
                        raise LoraError(
                            f"LoRA {lora.name!r}: the weights are not resident on this rank"
                        )
                    if rows:
                        touched[id(param)] = ((self.dits[component], name), param, local)
        return list(touched.values())

    def _params(self, component: str) -> dict[str, Any]:
        """The DiT's parameters by name; ModelStateError when one that FSDP2 shards is not
        sharded (a forward that raised left it unsharded): its rows are a temporary copy."""
        params = dict(self.dits[component].named_parameters())
        loose = [n for n in self._sharded[component] if not isinstance(params.get(n), DTensor)]
        if loose:
            raise ModelStateError(
                f"LoRAs not applied: {len(loose)} parameters of the {component} are not "
                f"sharded as between jobs (e.g. {sorted(loose)[0]})"
            )
        return params

    def _apply(self, lora: Lora, component: str, strength: float, applied: Applied) -> None:
        params = self._params(component)
        quantized = self._quantized[component]
        for module, layer in lora.layers.items():
            target = quantized.get(module)
            if target is not None and layer.weight_shape is not None:
                if self.dits[component].get_submodule(module) is not target:
                    raise ModelStateError(
                        f"LoRAs not applied: {module} is not the layer loaded (the model left "
                        "its between-jobs state)"
                    )
                target.lora_deltas.append((layer, strength))  # every rank: the whole weight
                applied.layers.append(target)
            for kind in ("weight", "bias"):
                if kind == "weight" and target is not None:
                    continue
                param = params.get(f"{module}.{kind}")
                if param is None:
                    continue
                start, rows, local = shard_rows(param)
                if not rows:
                    continue
                if kind == "weight":
                    delta = self.buffers.scratch(local, torch.float32)
                    if not layer.weight_rows(start, rows, strength, delta):
                        continue
                else:
                    delta = layer.bias_rows(start, rows, strength, local.device)
                    if delta is None:
                        continue
                if local.dtype != delta.dtype:  # e.g. bf16 weights: the change rounded once
                    delta = self.buffers.scratch(local, local.dtype).copy_(delta)
                local.add_(delta)
                self.tick()


def _fits_names(module: str, layer: LayerDelta, shapes: Mapping[str, tuple]) -> bool:
    if layer.weight_shape is not None and f"{module}.weight" not in shapes:
        return False
    return layer.bias is None or f"{module}.bias" in shapes


def _misfit_hint(pipeline: type) -> str:
    """The family's word on a LoRA layer of another shape (`FamilySpec.lora_misfit_hint`)."""
    from ..models.families import family_for, spec_of

    try:
        return spec_of(family_for(pipeline.__name__)).lora_misfit_hint
    except ValueError:  # a pipeline no family serves
        return ""


def _shape(shape: tuple | None) -> str:
    return "missing" if shape is None else "x".join(str(s) for s in shape)
