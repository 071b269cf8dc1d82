"""The sharded encoder read per rank (`models/encoder_rows.py`): a rank other than 0 builds
the encoder on meta and reads only its own rows from the files.

On 2 gloo ranks, for a tiny-wan diffusers folder (UMT5, one safetensors file), tiny-wan
single files (its UMT5 file in ComfyUI's fp8 layout with a scale per row, dequantized by
rows) and a tiny-minimax-h3 modular folder (Qwen3-VL), rank 0 loads the pipeline whole as
the engine's rank 0 does and rank 1 as the engine's other ranks do
(`load_encoders_to_shard`, `parallelize`, `fill_encoder`):

- rank 1's encoder holds no materialised parameter before it is sharded, and the torch
  tensors alive during its fill never pass its share (half the encoder plus 6%): the peak of
  what it holds of the encoder, counted tensor by tensor (`live_bytes`), not from RSS. Loading
  the encoder whole, or reading a whole tensor to keep its rows, fails this.
- every rank's prompt embeddings equal world size 1's byte for byte (FSDP2 gathers each layer
  whole, so every kernel runs world size 1's shapes).

The served path (`paradit serve <folder> --encoder-placement sharded` on 2 ranks): with the
flag given before loading, rank 0 too builds the encoder empty (the memory plan sizes it on
meta); both ranks report it built empty and half its bytes (/v1/info), and the job's frames
equal world size 1's.

Cost: about 7 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from conftest import run_job, spawn_gloo
from image_jobs import CPU, encoded, save_h3_folder
from safetensors.torch import save_file
from torch.distributed.tensor import DTensor
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from paradit.backend.models.encoder_rows import fill_encoder, load_encoders_to_shard
from paradit.backend.models.families import family_for
from paradit.backend.models.families.minimax_h3.tiny_job import TINY_JOBS as H3_JOBS
from paradit.backend.models.families.wan.tiny_job import TINY_JOB
from paradit.backend.models.loading import ModelSource, load_pipeline, pipeline_index
from paradit.backend.models.presets import build_preset
from paradit.backend.parallel import local_param_bytes, parallelize
from paradit.backend.parallel.plan import ParallelPlan
from paradit.backend.request import JobRequest
from paradit.backend.runtime.job import RankModel, dits_of, encode_together

SEQUENCE = ParallelPlan(ulysses_degree=2, shard_weights=True)
SLACK = 0.06
"""What a rank may hold beyond half the encoder: rows that do not divide by 2 and FSDP2's
padding."""


class LiveBytes:
    """The peak of the bytes held by the storages of the tensors torch makes while `live_bytes`
    is on, each counted once until the storage is freed (FSDP2 keeps a shard as a view of a
    padded storage: the storage counts, not the tensor). It sees the tensors of torch's Python
    functions (safetensors' `asarray` over a file's bytes too) and of the ops they dispatch."""

    def __init__(self) -> None:
        self.live = 0
        self.peak = 0
        self._seen: set[int] = set()

    def see(self, out: Any) -> None:
        for tensor in out if isinstance(out, (tuple, list)) else (out,):
            if not isinstance(tensor, torch.Tensor):
                continue
            local = tensor.to_local() if isinstance(tensor, DTensor) else tensor
            if local.device.type != "meta":
                self._count(local.untyped_storage())

    def _count(self, storage: torch.UntypedStorage) -> None:
        key = id(storage)
        if key in self._seen:
            return
        self._seen.add(key)
        nbytes = storage.nbytes()
        self.live += nbytes
        self.peak = max(self.peak, self.live)
        weakref.finalize(storage, self._free, key, nbytes)

    def _free(self, key: int, nbytes: int) -> None:
        self._seen.discard(key)
        self.live -= nbytes


class _Functions(TorchFunctionMode):
    def __init__(self, counter: LiveBytes) -> None:
        super().__init__()
        self.counter = counter

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.counter.see(out)
        return out


class _Ops(TorchDispatchMode):
    def __init__(self, counter: LiveBytes) -> None:
        super().__init__()
        self.counter = counter

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not func.is_view and all(r.alias_info is None for r in func._schema.returns):
            self.counter.see(out)
        return out


@contextlib.contextmanager
def live_bytes() -> Iterator[LiveBytes]:
    """Count the bytes of the tensors torch makes inside (`LiveBytes`)."""
    counter = LiveBytes()
    with _Functions(counter), _Ops(counter):
        yield counter


def _local_bytes(param: torch.Tensor) -> int:
    """Bytes of `param` this rank holds in memory (its local shard; none on meta)."""
    local = param.to_local() if isinstance(param, DTensor) else param
    return 0 if local.device.type == "meta" else local.numel() * local.element_size()


def _materialised_bytes(module: torch.nn.Module) -> int:
    """Bytes of `module`'s parameters that this rank holds in memory."""
    return sum(_local_bytes(param) for param in module.parameters())


def _whole_bytes(module: torch.nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in module.parameters())


def _embeddings_on_rank(rank: int, source: ModelSource, body: dict) -> tuple[dict, dict]:
    """`source`'s prompt embeddings with the encoder sharded over the 2 ranks, loaded as the
    engine loads it on this rank; and what this rank held of it."""
    if source.kind == "file":
        names = family_for(source.resolved_files().pipeline_class).encoder_components
    else:
        names = family_for(pipeline_index(source.name)["_class_name"]).encoder_components
    if rank == 0:
        pipe = load_pipeline(source)
        empty = {}
    else:
        pipe = load_pipeline(source, skip=names)
        empty = load_encoders_to_shard(pipe, source, names, torch.float32, "bf16")
        assert sorted(empty) == ["text_encoder"], (source, sorted(empty))
    encoder = pipe.text_encoder
    held = {"at_load": _materialised_bytes(encoder), "whole": _whole_bytes(encoder)}
    parallel = parallelize(dits_of(pipe), SEQUENCE, CPU, encoders=[encoder])
    with live_bytes() as live:
        for part in empty.values():
            held["read"] = fill_encoder(part, CPU)
    held["fill_peak"] = live.peak
    held["after"] = local_param_bytes(encoder)
    held["largest"] = max(_local_bytes(param) for param in encoder.parameters())
    pipe.set_progress_bar_config(disable=True)
    model_here = RankModel.here(pipe, parallel)
    request = JobRequest.from_body(body, model_here.limits)
    return encode_together(model_here, request, "test"), held


def _check_ranks(rank: int, world_size: int, cases: list, reference: dict) -> None:
    for (model, text_encoders, vaes), body in cases:
        source = ModelSource.parse(model, text_encoders, vaes)
        tensors, held = _embeddings_on_rank(rank, source, body)
        expected = reference[model]["embeddings"]
        assert sorted(tensors) == sorted(expected), model
        assert held["whole"] == reference[model]["whole"], (rank, model, held)  # ties kept
        for name, tensor in tensors.items():
            assert torch.equal(tensor, expected[name]), (rank, model, name)
        if rank == 1:
            share = held["whole"] // 2 + int(SLACK * held["whole"])
            assert held["at_load"] == 0, (model, held)  # nothing of it before sharding
            # FSDP2 copies each shard it is given into padded memory: one shard twice at once
            assert held["at_load"] + held["fill_peak"] <= share + held["largest"], (model, held)
            assert 0 < held["read"] <= share, (model, held)
            assert held["after"] <= share, (model, held)


def _write_files(root) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """tiny-wan as ComfyUI's single files, its UMT5 in fp8 with a scale per row."""
    from comfy_files import WAN_PREFIX, wan_original, write_safetensors

    tiny = build_preset("tiny-wan")
    model = root / "wan2.1_t2v_tiny_fp32.safetensors"
    encoder = root / "umt5_tiny_fp8_scaled.safetensors"
    vae = root / "wan_2.1_vae_tiny.safetensors"
    write_safetensors(model, wan_original(tiny.transformer.state_dict()), "fp32", WAN_PREFIX)
    state = tiny.text_encoder.state_dict()
    plain = {k: v for k, v in state.items() if "embed_tokens" not in k}
    write_safetensors(encoder, plain, "fp8_comfy_quant", per_row=True)
    save_file(tiny.vae.state_dict(), str(vae))
    return str(model), (str(encoder),), (str(vae),)


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> list[tuple[tuple[str, tuple, tuple], dict]]:
    root = tmp_path_factory.mktemp("encoder-rows")
    build_preset(TINY_JOB.preset).save_pretrained(root / "tiny-wan")
    save_h3_folder(root / "tiny-minimax-h3")
    files = _write_files(root)
    return [
        ((str(root / "tiny-wan"), (), ()), dict(TINY_JOB.body)),
        (files, dict(TINY_JOB.body)),
        ((str(root / "tiny-minimax-h3"), (), ()), dict(H3_JOBS[0].body)),
    ]


@pytest.fixture(scope="module")
def world_size_1(cases) -> dict[Any, dict]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        embeddings = {}
        for args, body in cases:
            pipe = load_pipeline(ModelSource.parse(*args))
            pipe.set_progress_bar_config(disable=True)
            embeddings[args[0]] = {
                "embeddings": encoded(pipe, body),
                "whole": _whole_bytes(pipe.text_encoder),
            }
    finally:
        torch.set_num_threads(threads)
    return embeddings


def test_a_rank_reads_only_its_rows_of_the_encoder(cases, world_size_1):
    spawn_gloo(2, _check_ranks, cases, world_size_1)


SERVED = {"prompt": "rows of an encoder", "seed": 5, "width": 64, "height": 48}
SERVED |= {"num_frames": 5, "num_inference_steps": 2, "guidance_scale": 3.0}
"""Explicit sizes: a folder model gets the real model's defaults."""


def test_served_from_a_folder_each_rank_holds_its_rows_only(tmp_path, backends, references):
    folder = tmp_path / "tiny-wan"
    build_preset(TINY_JOB.preset).save_pretrained(folder)
    client = backends.get(str(folder), 2, "--encoder-placement", "sharded")
    ranks = {rank["rank"]: rank for rank in client.info()["ranks"]}
    whole = _whole_bytes(build_preset(TINY_JOB.preset).text_encoder)
    for rank in ranks.values():  # the flag given: rank 0 too, before the memory plan
        assert rank["encoders_built_empty"] == ["text_encoder"], rank
        assert rank["encoder_param_bytes"] <= whole // 2 + int(SLACK * whole), rank
    _, frames = run_job(client, SERVED)
    backends.stop(client)
    assert frames == references.frames(TINY_JOB.preset, SERVED)


@pytest.mark.fast
def test_an_encoder_its_files_do_not_cover_is_loaded_whole(tmp_path, caplog):
    """A folder whose encoder file lacks a parameter under every name mapped, or that holds
    .bin weights only: that encoder is left to the whole load (which reads them its way or
    says what is wrong), with the reason logged."""
    import logging

    from safetensors.torch import load_file

    from paradit.backend.models.encoder_rows import empty_encoders

    folder = tmp_path / "tiny-wan"
    build_preset(TINY_JOB.preset).save_pretrained(folder)
    source = ModelSource.parse(str(folder))
    names = frozenset({"text_encoder", "tokenizer"})
    assert sorted(empty_encoders(source, names, torch.float32)) == ["text_encoder"]
    path = folder / "text_encoder" / "model.safetensors"
    state = load_file(path)
    dropped = "encoder.final_layer_norm.weight"
    del state[dropped]
    save_file(state, str(path))
    with caplog.at_level(logging.WARNING):
        assert empty_encoders(source, names, torch.float32) == {}
    assert "text_encoder is loaded whole" in caplog.text and dropped in caplog.text
    # a folder of .bin weights (no safetensors): from_pretrained reads those
    torch.save(state, path.with_name("pytorch_model.bin"))
    path.unlink()
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert empty_encoders(source, names, torch.float32) == {}
    assert "no safetensors weights" in caplog.text
